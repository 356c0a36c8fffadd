"""The capacity search against simulated paths: a sharp knee, noisy probes, a path that
passes everything or nothing, a time budget; and bad settings refused."""

from __future__ import annotations

import random

import pytest

from libraries.results.capacity import (
    Probe,
    SearchSettings,
    judge_probe,
    parse_range,
    parse_slo,
    search_capacity,
)


class Path_:
    """A path whose p99 is 1 ms below ``capacity`` and explodes above it; each probe sees the
    capacity moved by up to +-``noise`` (seeded)."""

    def __init__(self, capacity: float, noise: float = 0.0, seed: int = 0):
        self.capacity = capacity
        self.noise = noise
        self.random = random.Random(seed)
        self.rates: list[float] = []

    def __call__(self, rate: float) -> Probe:
        self.rates.append(rate)
        today = self.capacity * (1 + self.random.uniform(-self.noise, self.noise))
        if rate <= today:
            return Probe(rate, rate, 0.5, 1.0, 0, 5.0)
        return Probe(rate, today, 5.0, 50.0, 0, 5.0)


class Clock:
    def __init__(self, path: Path_, per_probe: float):
        self.path, self.per_probe = path, per_probe

    def __call__(self) -> float:
        return len(self.path.rates) * self.per_probe


def test_a_sharp_knee_is_found_within_the_precision_and_confirmed():
    path = Path_(10_000)
    result = search_capacity(path, SearchSettings(slo_p99_ms=10, start=1_000),
                             clock=Clock(path, 5))
    assert result.stopped == "precision reached and confirmed"
    assert 10_000 / 1.05 <= result.capacity <= 10_000 < result.failing
    assert result.precision <= 0.05
    assert result.probes[-2:] == [p for p in result.probes if p.rate == result.capacity][-2:]
    assert all(p.passed for p in result.probes if p.rate == result.capacity)
    assert len(result.probes) < 20


@pytest.mark.parametrize("seed", range(20))
def test_noisy_probes_still_land_near_the_capacity(seed):
    path = Path_(10_000, noise=0.05, seed=seed)
    result = search_capacity(path, SearchSettings(slo_p99_ms=10, start=3_000),
                             clock=Clock(path, 5))
    assert result.capacity is not None
    assert 10_000 * 0.85 <= result.capacity <= 10_000 * 1.05
    assert all(p.passed for p in result.probes if p.rate == result.capacity)


def test_a_path_passing_at_the_top_of_the_range_is_a_lower_bound():
    path = Path_(1e9)
    result = search_capacity(path, SearchSettings(slo_p99_ms=10, start=1_000, high=50_000),
                             clock=Clock(path, 1))
    assert result.stopped == "passes at the top of the search range"
    assert result.capacity == 50_000 and result.failing is None


def test_a_path_failing_at_the_bottom_has_no_capacity():
    path = Path_(0.5)
    result = search_capacity(path, SearchSettings(slo_p99_ms=10, start=1_000, low=10),
                             clock=Clock(path, 1))
    assert result.stopped == "fails at the bottom of the search range"
    assert result.capacity is None and result.failing == 10


def test_the_time_budget_stops_the_search_with_the_precision_reached():
    path = Path_(10_000)
    result = search_capacity(path, SearchSettings(slo_p99_ms=10, start=1_000,
                                                  max_seconds=30), clock=Clock(path, 5))
    assert result.stopped == "time budget spent"
    assert len(result.probes) == 6  # 30 s of 5 s probes
    assert result.precision is not None and result.precision > 0.05


def test_a_probe_fails_for_each_reason_and_says_which():
    probe = judge_probe(Probe(1000, 950, 1.0, 20.0, 3, 5.0), slo_p99_ms=10)
    assert not probe.passed
    assert probe.why == ("3 errors; achieved 950 < 99% of 1000 requests/s; p99 20 ms > SLO "
                         "10 ms")
    assert judge_probe(Probe(1000, 995, 1.0, 9.0, 0, 5.0), 10).passed


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"slo_p99_ms": 0}, "slo_p99_ms: expected a positive number"),
    ({"slo_p99_ms": -5}, "slo_p99_ms: expected a positive number"),
    ({"low": 5000, "high": 1000}, "the top (1000 requests/s) must be above the bottom (5000)"),
    ({"precision": 0}, "precision: expected a fraction in (0, 1)"),
])
def test_bad_search_settings_are_refused(kwargs, message):
    with pytest.raises(ValueError) as error:
        SearchSettings(**{"slo_p99_ms": 10, "start": 100, **kwargs})
    assert message in str(error.value)


@pytest.mark.parametrize(("text", "ms"), [("10ms", 10.0), ("2.5 ms", 2.5), ("0.5s", 500.0),
                                          ("800us", 0.8)])
def test_an_slo_is_a_positive_duration(text, ms):
    assert parse_slo(text) == pytest.approx(ms)


@pytest.mark.parametrize("bad", ["10", "fast", "0ms", "-5ms", "", "10 parsecs"])
def test_an_slo_that_is_not_a_positive_duration_is_refused(bad):
    with pytest.raises(ValueError, match=r"-v LATENCY_SLO:.*expected a positive duration"):
        parse_slo(bad)


def test_a_search_range_needs_its_top_above_its_bottom():
    assert parse_range("100..500000") == (100.0, 500000.0)
    with pytest.raises(ValueError, match=r"the top \(100 requests/s\) must be above the bottom"):
        parse_range("5000..100")
    with pytest.raises(ValueError, match="expected bottom..top in requests/s"):
        parse_range("lots")
