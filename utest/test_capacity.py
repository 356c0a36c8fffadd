"""Capacity under latency goals: goals and settings as asked (bad values named by their -v
variable), a trial's loss as MLRsearch sees it, and MLRsearch (the real library) driving
simulated paths: a knee found within the width, interleaved paths, trials shared between the
searches of two limits, a budget, a failing trial, a path with no lower bound."""

from __future__ import annotations

import random
from dataclasses import replace
from pathlib import Path

import pytest
from MLRsearch import MultipleLossRatioSearch

from libraries.capacity.generators import _summary
from libraries.capacity.search import (
    RETRIES,
    RETRY_SECONDS,
    GeneratorFailed,
    search_capacity,
    search_goals,
    undelivered,
)
from libraries.capacity.search_settings import (
    LatencyGoal,
    SearchSettings,
    parse_capacity_settings,
    parse_goals,
    parse_range,
    parse_slo,
)
from libraries.capacity.trials import CapacityTrial
from libraries.testbed.errors import HostStackError


class SimulatedPath:
    """A path with a knee at ``capacity`` requests/s: below it 0.2 % of requests are over
    10 ms and 40 % over 1 ms; above it the queue grows and most requests are late. Each trial
    sees the knee moved by up to +-``noise`` (seeded); ``seconds`` of overhead per trial."""

    def __init__(self, capacity: float, noise: float = 0.0, seed: int = 0,
                 overhead: float = 0.3):
        self.capacity, self.noise, self.overhead = capacity, noise, overhead
        self.random = random.Random(seed)
        self.asked: list[tuple[float, float]] = []

    def __call__(self, seconds: float, rate: float) -> CapacityTrial:
        self.asked.append((seconds, rate))
        knee = self.capacity * (1 + self.random.uniform(-self.noise, self.noise))
        sent = round(rate * seconds)
        late = 0.002 if rate <= knee else min(1.0, 0.5 + 5 * (rate / knee - 1))
        return CapacityTrial(
            rate=rate, duration=seconds, ran_s=seconds, intended=sent, sent=sent, failed=0,
            over={10.0: round(sent * late), 1.0: round(sent * max(late, 0.4))},
            achieved=min(rate, knee), latency={"p50": 0.5, "p90": 1.0, "p99": 2.0,
                                               "p99_9": 4.0},
            generator_cpu=0.3, tool="simulated", processes=1,
            seconds=seconds + self.overhead)


def _settings(**changes) -> SearchSettings:
    """The settings' defaults over 100..1000000 requests/s, with ``changes``."""
    return replace(parse_capacity_settings(search_range="100..1000000"), **changes)


def test_a_knee_is_found_within_the_width_by_mlrsearch():
    path = SimulatedPath(10_000)
    found = search_capacity(lambda p, s, r: path(s, r), {"proxy": 11_000.0}, _settings())
    result = found["proxy"]
    assert result.finished and result.stopped == {10.0: "done"}
    (goal,) = result.goals
    assert goal.lower <= 10_000 < goal.upper <= goal.lower * 1.03
    assert result.capacity == pytest.approx(goal.lower * 0.998, rel=1e-4)  # 0.2 % lost there
    assert path.asked[0] == (0.5, 11_000.0)  # MLRsearch's first trial: the highest load
    assert len(result.trials) == len(path.asked)


@pytest.mark.parametrize("seed", range(4))
def test_noisy_trials_land_near_the_knee(seed):
    path = SimulatedPath(10_000, noise=0.03, seed=seed)
    found = search_capacity(lambda p, s, r: path(s, r), {"proxy": 11_000.0}, _settings())
    assert 0.9 * 10_000 <= found["proxy"].capacity <= 1.03 * 10_000


def test_two_paths_take_turns_trial_by_trial():
    paths = {"proxy": SimulatedPath(6_000), "direct": SimulatedPath(20_000)}
    order: list[str] = []

    def measure(path: str, seconds: float, rate: float) -> CapacityTrial:
        order.append(path)
        return paths[path](seconds, rate)

    found = search_capacity(measure, {"proxy": 6_600.0, "direct": 22_000.0}, _settings())
    assert found["proxy"].capacity < 6_000 < found["proxy"].goals[0].upper
    assert found["direct"].capacity < 20_000 < found["direct"].goals[0].upper
    shorter = min(order.count("proxy"), order.count("direct"))
    assert order[:2 * shorter] == ["proxy", "direct"] * shorter


def test_goals_with_two_limits_are_two_searches_that_share_their_trials():
    path = SimulatedPath(10_000)
    settings = _settings(goals=parse_goals("p99<=10ms,p50<=1ms,p99.9<=10ms"))
    found = search_capacity(lambda p, s, r: path(s, r), {"proxy": 11_000.0}, settings)
    result = found["proxy"]
    assert set(result.stopped) == {10.0, 1.0}
    assert [g.goal.name for g in result.goals] == ["p99<=10ms", "p50<=1ms", "p99.9<=10ms"]
    p50 = result.goals[1]
    assert p50.lower <= 10_000 < p50.upper  # 40 % over 1 ms below the knee: within p50
    # the first trial (the top load) is asked by both searches and measured once
    assert path.asked.count(path.asked[0]) == 1 and path.asked[0][1] == 11_000.0
    assert len(result.trials) == len(path.asked) and result.shared >= 1


def test_a_spent_budget_stops_the_search_and_keeps_the_bounds_so_far():
    path = SimulatedPath(10_000, overhead=5.0)
    found = search_capacity(lambda p, s, r: path(s, r), {"proxy": 11_000.0},
                            _settings(max_seconds=30))
    result = found["proxy"]
    assert not result.finished and result.stopped[10.0].startswith("budget spent (")
    assert sum(t.seconds for t in result.trials) < 30 + 7


def test_the_bounds_a_budget_stop_keeps_are_mlrsearchs_own_goal_result():
    """A search its budget ended reports what MLRsearch's GoalResult says of the bounds found
    so far (its conditional throughput, not one re-derived here)."""
    path = SimulatedPath(10_000, overhead=2.5)
    result = search_capacity(lambda p, s, r: path(s, r), {"proxy": 11_000.0},
                             _settings(max_seconds=60))["proxy"]
    (goal,) = result.goals
    assert result.stopped[10.0].startswith("budget spent (") and goal.lower is not None
    assert goal.conditional_throughput == pytest.approx(goal.lower * 0.998, rel=1e-4)


def test_a_result_mlrsearch_no_longer_shapes_as_a_goal_result_is_an_error_naming_it(
        monkeypatch):
    """An API change of MLRsearch reads as an error naming its version, never as 'no rate'."""
    monkeypatch.setattr(MultipleLossRatioSearch, "search",
                        lambda self, measurer, debug=None: dict.fromkeys(self.config.goals,
                                                                         object()))
    with pytest.raises(RuntimeError, match=r"MLRsearch \S+ returned object for the goal "
                                           r"p99<=10ms: expected a GoalResult"):
        search_capacity(lambda p, s, r: SimulatedPath(1_000)(s, r), {"proxy": 1_100.0},
                        _settings())


def test_a_failing_trial_stops_every_search_and_is_raised():
    calls = []

    def measure(path: str, seconds: float, rate: float) -> CapacityTrial:
        calls.append(path)
        if len(calls) == 3:
            raise HostStackError("nginx-proxy died")
        return SimulatedPath(5_000)(seconds, rate)

    with pytest.raises(HostStackError, match="nginx-proxy died"):
        search_capacity(measure, {"proxy": 5_500.0, "direct": 5_500.0}, _settings())
    assert len(calls) == 3


def _silent(seconds: float, rate: float) -> CapacityTrial:
    """What wrk2 under VPP's LD_PRELOAD gave on real VPP: a handful of the ~800 scheduled
    requests sent, none late, none failed (its load never started)."""
    intended = round(rate * seconds)
    return CapacityTrial(rate=rate, duration=seconds, ran_s=seconds, intended=intended, sent=7,
                         failed=0, over={10.0: 0}, achieved=7 / seconds, latency={},
                         generator_cpu=None, tool="wrk2", processes=1, seconds=seconds + 0.3,
                         extra={"errors": "connect: 0, read: 0"})


def test_a_generator_that_does_not_deliver_stops_the_search_and_is_never_loss():
    calls = []

    def measure(path: str, seconds: float, rate: float) -> CapacityTrial:
        calls.append(rate)
        return _silent(seconds, rate)

    with pytest.raises(GeneratorFailed, match=r"proxy path at \d+ requests/s: wrk2 sent 7 of "
                                              r"\d+ scheduled requests with no late or failed "
                                              r"answer \(it said: 'connect: 0, read: 0'\), in "
                                              rf"{1 + RETRIES} tries: the load generator did "
                                              r"not deliver"):
        search_capacity(measure, {"proxy": 11_000.0}, _settings())
    assert len(calls) == 1 + RETRIES


def test_a_trial_the_generator_failed_once_is_run_again_and_not_kept():
    path, failed = SimulatedPath(10_000), []

    def measure(p: str, seconds: float, rate: float) -> CapacityTrial:
        if not failed:
            failed.append(rate)
            return _silent(seconds, rate)
        return path(seconds, rate)

    found = search_capacity(measure, {"proxy": 11_000.0}, _settings())["proxy"]
    assert found.finished and 9_500 < found.capacity <= 10_000
    assert all(t.sent > 7 for t in found.trials)  # the undelivered trial is not among them
    # the trial run again ran 2 s (RETRY_SECONDS) and keeps the 0.5 s MLRsearch asked
    assert path.asked[0] == (RETRY_SECONDS, failed[0])
    assert (found.trials[0].duration, found.trials[0].ran_s) == (0.5, RETRY_SECONDS)


def test_a_system_that_cannot_keep_up_is_loss_not_a_generator_failure():
    late = CapacityTrial(rate=20_000, duration=1.0, ran_s=1.0, intended=20_000, sent=6_000,
                         failed=0, over={10.0: 5_900}, achieved=5_900, latency={},
                         generator_cpu=0.4, tool="vegeta", processes=2, seconds=1.3)
    refused = CapacityTrial(rate=20_000, duration=1.0, ran_s=1.0, intended=20_000, sent=10,
                            failed=10, over={10.0: 0}, achieved=0, latency={},
                            generator_cpu=0.1, tool="vegeta", processes=2, seconds=1.3)
    assert undelivered(late) == "" and undelivered(refused) == ""
    assert undelivered(_silent(1.0, 800)).startswith("wrk2 sent 7 of 800 scheduled requests")


def test_connections_that_started_a_second_late_are_the_generators_not_loss():
    # 3node kernel beside two burners: wrk2's 2 s trial at 1494 requests/s sent 1491 of 2954
    # with 20 late (the answers to what it sent came in time); quiet loopback: 3 of 20 2 s
    # runs sent exactly half their schedule
    half = replace(_silent(2.0, 1477), sent=1491, over={10.0: 20})
    assert undelivered(half) == ("wrk2 sent 1491 of 2954 scheduled requests with 20 late or "
                                 "failed answers (it said: 'connect: 0, read: 0')")
    # a system that lags makes most of what is sent late; a short fall within 10 % is a trial
    assert undelivered(replace(half, over={10.0: 150})) == ""
    assert undelivered(replace(half, sent=2700, over={10.0: 0})) == ""
    assert undelivered(replace(half, over={10.0: 100}, failed=60)) == ""


def test_a_path_failing_at_the_bottom_of_the_range_has_no_capacity():
    path = SimulatedPath(50)
    found = search_capacity(lambda p, s, r: path(s, r), {"proxy": 1_000.0}, _settings())
    assert found["proxy"].finished and found["proxy"].capacity is None


def test_a_trial_is_lost_for_errors_for_the_unsent_and_for_lateness():
    trial = CapacityTrial(rate=1000, duration=1.0, ran_s=2.0, intended=2000, sent=1990,
                          failed=4, over={10.0: 6}, achieved=993.0, latency={},
                          generator_cpu=None, tool="wrk2", processes=1, seconds=2.5)
    assert trial.lost(10.0) == 4 + 6 + 10
    assert trial.loss_ratio(10.0) == pytest.approx(20 / 2000)
    result = trial.result(10.0)  # MLRsearch's view: asked 1 s, sent for 2 s (wrk2)
    assert (result.intended_duration, result.intended_load) == (1.0, 1000)
    assert (result.offered_count, result.loss_count, result.intended_count) == (1990, 10, 2000)
    assert result.loss_ratio == pytest.approx(20 / 2000)
    # the goal's duration sum grows by the 2 s of sending, not by the 2.5 s with overheads
    assert (result.offered_duration, result.duration_with_overheads) == (2.0, 2.0)
    assert trial.as_record()["over"] == {"10": 6}
    assert trial.as_record()["overhead_s"] == pytest.approx(0.5)


def test_the_same_goal_costs_the_same_sending_seconds_on_every_generator():
    """Two generators, one with 0.3 s of overhead per trial and one with 2 s: MLRsearch asks
    the same trials of both (the duration sum counts sending time only)."""
    asked = []
    for overhead in (0.3, 2.0):
        path = SimulatedPath(10_000, overhead=overhead)
        search_capacity(lambda p, s, r, path=path: path(s, r), {"proxy": 11_000.0},
                        _settings())
        asked.append(path.asked)
    assert asked[0] == asked[1]


@pytest.mark.parametrize(("text", "goals"), [
    ("10ms", [(0.99, 10.0)]), ("p99<=10ms", [(0.99, 10.0)]),
    ("p99 <= 10 ms, p50<=800us", [(0.99, 10.0), (0.5, 0.8)]),
    ("p99.9<=0.5s", [(0.999, 500.0)]),
])
def test_goals_are_read_as_written(text, goals):
    assert [(g.quantile, g.limit_ms) for g in parse_goals(text)] == goals
    assert LatencyGoal(0.999, 500.0).loss_ratio == pytest.approx(0.001)
    assert LatencyGoal(0.99, 10.0).name == "p99<=10ms"


@pytest.mark.parametrize(("text", "message"), [
    ("p100<=1ms", "percentile p100: expected above 0 and below 100"),
    ("p99<=fast", "expected a positive duration"), ("", "expected a positive duration"),
    ("p99<=10ms,p99<=10ms", "a goal is given twice"),
])
def test_bad_goals_are_refused_naming_the_variable(text, message):
    with pytest.raises(ValueError, match=f"-v LATENCY_SLO:{text}: .*{message}"):
        parse_goals(text)


@pytest.mark.parametrize(("changes", "message"), [
    ({"width": "1.5"}, "-v CAPACITY_WIDTH:1.5: .*width: expected a fraction in"),
    ({"width": "0"}, "-v CAPACITY_WIDTH:0: "),
    ({"exceed_ratio": "1"}, "-v CAPACITY_EXCEED_RATIO:1: .*expected a fraction in"),
    ({"exceed_ratio": "half"}, "-v CAPACITY_EXCEED_RATIO:half: expected a number"),
    ({"durations": "2..1"}, "-v CAPACITY_TRIAL_DURATION:2..1: .*the final"),
    ({"durations": "1..2..3"}, "-v CAPACITY_TRIAL_DURATION:1..2..3: expected initial..final"),
    ({"duration_sum": "0.5"}, "-v CAPACITY_DURATION_SUM:0.5: .*at least the final"),
    ({"max_seconds": "-1"}, "-v CAPACITY_BUDGET:-1: .*max_seconds: expected a positive"),
    ({"search_range": "5..1"}, "-v CAPACITY_RANGE:5..1: the top"),
])
def test_bad_settings_are_refused_naming_the_variable(changes, message):
    with pytest.raises(ValueError, match=message):
        parse_capacity_settings(**changes)


def test_the_default_settings_and_their_record():
    settings = parse_capacity_settings()
    assert (settings.exceed_ratio, settings.initial_duration, settings.final_duration,
            settings.duration_sum, settings.width, settings.max_seconds) == \
        (0.5, 0.5, 1.0, 8.0, 0.02, 60.0)
    record = settings.as_record()
    assert record["goals"] == ["p99<=10ms"] and record["controller"].startswith("MLRsearch")
    ((goal, search_goal),) = search_goals(settings, 10.0)
    assert goal.name == "p99<=10ms"
    assert (search_goal.loss_ratio, search_goal.exceed_ratio, search_goal.relative_width,
            search_goal.duration_sum) == (0.01, 0.5, 0.02, 8.0)


def test_an_slo_and_a_range_parse_strictly():
    assert parse_slo("2.5 ms") == 2.5 and parse_slo("800us") == pytest.approx(0.8)
    assert parse_range("100..500000") == (100.0, 500000.0)
    with pytest.raises(ValueError, match="must be above the bottom"):
        parse_range("10..10")


def test_a_wrk2_trial_that_sent_too_little_quotes_wrk2s_summary():
    """Real VPP 3node: wrk2 sent 1-5 of 3449 requests and the error quoted only the trial's
    window ("{'window_s': 0.9525, ...}"): the summary lines wrk2 printed are kept instead."""
    raw = (Path(__file__).parent / "fixtures/wrk/wrk2_real_latency.txt").read_text()
    summary = _summary(raw)
    assert "requests in" in summary and "Requests/sec:" in summary
    assert "Latency Distribution" not in summary
    assert _summary("garbage only") == "garbage only"
