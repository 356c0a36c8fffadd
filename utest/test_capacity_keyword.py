"""The capacity keyword's judgement of its own instrument: a search is marked as the load
generator's when every failing probe above the capacity had a saturated generator."""

from __future__ import annotations

from libraries.keywords.capacity import _note_generator_bound
from libraries.results.capacity import Probe, SearchResult
from libraries.results.measurement import Measurement


def _result(shares: list[float | None]) -> SearchResult:
    probes = [Probe(1000.0, 1000.0, 0.2, 1.0, 0, 3.0, passed=True,
                    extra={"generator_cpu": 0.4})]
    probes += [Probe(1100.0 + i, 900.0, 50.0, 90.0, 0, 3.0, passed=False, why="p99",
                     extra={"generator_cpu": share}) for i, share in enumerate(shares)]
    return SearchResult(1000.0, 1100.0, 0.1, probes, "precision reached and confirmed")


def test_a_saturated_generator_in_every_failing_probe_marks_the_capacity_as_its_own():
    measurement = Measurement("ssl_proxy", "kernel", {})
    _note_generator_bound(measurement, {"direct": _result([0.95, 0.97]),
                                        "proxy": _result([0.95, 0.5])})
    assert measurement.evidence["capacity_limited_by"] == {"direct": "load generator",
                                                           "proxy": "path"}
    assert measurement.notes == ["direct capacity 1000 requests/s is the load generator's "
                                 "(it used 95% or more of its cores in every failing probe): "
                                 "a lower bound of the path's"]


def test_an_unmeasured_generator_or_no_failing_probe_leaves_it_to_the_path():
    measurement = Measurement("ssl_proxy", "kernel", {})
    _note_generator_bound(measurement, {"direct": _result([None, 0.99]),
                                        "proxy": _result([])})
    assert measurement.evidence["capacity_limited_by"] == {"direct": "path", "proxy": "path"}
    assert measurement.notes == []
