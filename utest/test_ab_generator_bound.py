"""An A/B "no change" through a load generator saturated on both sides is no finding
(:func:`libraries.cases.case_runner._generator_bound`): on real VPP (1node tcp_term) the iperf3
client sat at 96 % of its core on both sides and a VPP knob read "no change"."""

from __future__ import annotations

import pytest

from libraries.cases.case_runner import _generator_bound
from libraries.results.measurement import Measurement


def _ab(verdict: str, saturated: tuple[bool, bool]) -> Measurement:
    measurement = Measurement("tcp_term", "vpp", {})
    measurement.ab = {"verdict": verdict, "sides": {
        side: {"name": side, "load_generator": {"cpu_pct": 96.0 if hot else 40.0,
                                                "saturated": hot}}
        for side, hot in zip("ab", saturated, strict=True)}}
    measurement.notes.append(f"A/B throughput: {verdict} (+0.2 % [-0.4, +0.6]) after 10 rounds")
    return measurement


def test_no_change_through_a_generator_saturated_on_both_sides_is_inconclusive():
    measurement = _ab("no change", (True, True))
    _generator_bound(measurement, "iperf3-client on dut")
    assert measurement.ab["verdict"] == "inconclusive"
    assert measurement.ab["verdict_before_generator_check"] == "no change"
    assert measurement.notes[-1].endswith(
        "after 10 rounds; the load generator (iperf3-client on dut) was saturated on both "
        "sides: a 'no change' is the generator's, not the system's")


@pytest.mark.parametrize(("verdict", "saturated"), [
    ("no change", (True, False)), ("no change", (False, False)),
    ("regression", (True, True)), ("progression", (True, True)),
    ("inconclusive", (True, True))])
def test_other_verdicts_and_one_saturated_side_stand(verdict, saturated):
    measurement = _ab(verdict, saturated)
    before = list(measurement.notes)
    _generator_bound(measurement, "wrk on tg")
    assert measurement.ab["verdict"] == verdict and measurement.notes == before
    assert "generator_bound" not in measurement.ab
