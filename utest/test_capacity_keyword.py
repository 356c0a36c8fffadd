"""The capacity search's judgement of its own instrument (:mod:`libraries.capacity.limits`): a
path is the load generator's when every trial that failed the goal had a saturated generator;
no ratio stands on a generator's capacity; a capacity that fails its sanity check or comes from
an unfinished search is never a figure, and the test fails saying why."""

from __future__ import annotations

import logging
from dataclasses import replace

import pytest

from libraries.capacity import generators, limits
from libraries.capacity.confirm import (
    REPEATS,
    TRIES,
    confirm_capacity,
    short_of_schedule,
)
from libraries.capacity.generators import Generator
from libraries.capacity.limits import (
    _limited_by,
    _problem,
    _ratio,
    _sanity,
    saturated,
    search_paths_capacity,
)
from libraries.capacity.trials import CapacityTrial, GoalCapacity, PathCapacity
from libraries.results.measurement import Measurement
from libraries.results.settings import LatencyGoal, parse_capacity_settings

GOAL = LatencyGoal(0.99, 10.0)


def _trial(rate: float, lost: int, cpu: float | None) -> CapacityTrial:
    return CapacityTrial(rate=rate, duration=1.0, ran_s=1.0, intended=round(rate),
                         sent=round(rate), failed=0, over={10.0: lost}, achieved=rate,
                         latency={"p50": 0.4, "p90": 0.9, "p99": 3.0, "p99_9": 8.0},
                         generator_cpu=cpu, tool="vegeta", processes=1, seconds=1.4)


def _path(name: str, capacity: float | None, failing_cpu: list[float | None],
          stopped: str = "done") -> PathCapacity:
    trials = [_trial(1000.0, 0, 0.4)]
    trials += [_trial(1100.0 + i, 500, cpu) for i, cpu in enumerate(failing_cpu)]
    return PathCapacity(name, [GoalCapacity(GOAL, capacity, capacity, 1100.0)], trials,
                        {10.0: stopped}, 12.0)


def test_a_saturated_generator_in_every_failing_trial_marks_the_capacity_as_its_own():
    limited = _limited_by({"direct": _path("direct", 1000.0, [0.95, 0.97]),
                           "proxy": _path("proxy", 1000.0, [0.95, 0.5])}, 10.0, 0.01)
    assert limited == {"direct": "load generator", "proxy": "path"}


def test_an_unmeasured_generator_or_no_failing_trial_leaves_it_to_the_path():
    limited = _limited_by({"direct": _path("direct", 1000.0, [None, 0.99]),
                           "proxy": _path("proxy", 1000.0, [])}, 10.0, 0.01)
    assert limited == {"direct": "path", "proxy": "path"}


def _with_capacities(**values: float) -> Measurement:
    measurement = Measurement("ssl_proxy", "kernel", {"file_size": "1kb"})
    for name, value in values.items():
        measurement.add(name, [value], "requests/s")
    return measurement


def test_the_ratio_stands_only_on_two_capacities_of_the_paths_themselves():
    paths = _with_capacities(capacity=6000.0, direct_capacity=12000.0)
    _ratio(paths, {"proxy": "path", "direct": "path"})
    assert paths.value("capacity_ratio") == 0.5 and paths.unavailable == {}
    bound = _with_capacities(capacity=6000.0, direct_capacity=12000.0)
    _ratio(bound, {"proxy": "path", "direct": "load generator"})
    assert "capacity_ratio" not in bound.metrics
    assert bound.unavailable["capacity_ratio"].startswith("the direct path's capacity is the "
                                                          "load generator's")
    missing = _with_capacities(capacity=6000.0)
    _ratio(missing, {"proxy": "path", "direct": "path"})
    assert missing.unavailable == {"capacity_ratio": "no figure for direct_capacity"}


def _measured(rps: float, direct: float, latency: dict | None) -> Measurement:
    measurement = Measurement("ssl_proxy", "kernel", {"file_size": "1kb"})
    measurement.add("rps", [rps], "requests/s")
    measurement.add("direct_rps", [direct], "requests/s")
    measurement.evidence["latency"] = latency
    return measurement


def test_a_capacity_above_the_closed_loop_maximum_is_refused():
    checks = _sanity(_measured(10_000, 20_000, None),
                     {"proxy": _path("proxy", 11_000.0, []),
                      "direct": _path("direct", 19_000.0, [])},
                     {"proxy": 10_000, "direct": 20_000}, GOAL)
    assert not checks["proxy"]["holds"] and checks["direct"]["holds"]
    assert _problem("proxy", _path("proxy", 11_000.0, []), checks["proxy"], "100..1e6") == \
        "proxy path: capacity 11000 requests/s is above the closed-loop maximum 10000"


def test_the_real_vpp_defect_a_capacity_below_a_latency_pass_that_met_the_goal_is_refused():
    """Wave 3 on real VPP: 392 requests/s passed while the 50 % pass at 8.86k met p99."""
    latency = {"rate": 8859.0, "sent": 26577, "failed": 0, "over_slo": 3, "slo_ms": 10.0,
               "tool": "vegeta"}
    path = _path("proxy", 392.0, [])
    checks = _sanity(_measured(17_700, 17_000, latency), {"proxy": path},
                     {"proxy": 17_700}, GOAL)
    assert checks["proxy"]["half_rate_met_goal"] is True and not checks["proxy"]["holds"]
    assert _problem("proxy", path, checks["proxy"], "100..1e6").startswith(
        "proxy path: capacity 392 requests/s is below the latency pass at 8859 requests/s, "
        "which met the goal (0.01% over the limit)")


def test_a_latency_pass_that_missed_the_goal_does_not_overrule_a_whole_search():
    """One 3 s pass at 14.2k that met a stall (74 % over 10 ms) refused a 22.6k capacity
    the search had found over 25 trials."""
    latency = {"rate": 5000.0, "sent": 15000, "failed": 0, "over_slo": 600, "slo_ms": 10.0}
    checks = _sanity(_measured(10_000, 20_000, latency),
                     {"proxy": _path("proxy", 7_000.0, [])}, {"proxy": 10_000}, GOAL)
    assert checks["proxy"]["half_rate_met_goal"] is False and checks["proxy"]["holds"]


def test_a_search_its_budget_ended_stands_only_with_a_lower_bound():
    spent = _path("proxy", 5_000.0, [], stopped="budget spent (61 s of trials, budget 60)")
    assert _problem("proxy", spent, {"holds": True}, "100..1e6") is None
    spent.goals[0] = GoalCapacity(GOAL, None, None, 5_100.0)
    assert _problem("proxy", spent, {"holds": True}, "100..1e6") == (
        "proxy path: the capacity search did not finish (10 ms: budget spent (61 s of trials, "
        "budget 60))")
    broken = _path("proxy", 5_000.0, [], stopped="error: PAPI gone")
    assert _problem("proxy", broken, {"holds": True}, "100..1e6").endswith("(10 ms: error: "
                                                                          "PAPI gone)")


def test_no_lower_bound_gives_no_figure():
    assert "no rate within 100..1e6 requests/s meets p99<=10ms" in _problem(
        "proxy", _path("proxy", None, []), {"holds": True}, "100..1e6")


def test_a_generator_behind_its_schedule_at_a_high_share_is_saturated_too():
    behind = _trial(32_114.0, 8_000, 0.85)
    behind = CapacityTrial(**{**behind.__dict__, "sent": 30_619, "intended": 32_114})
    on_time = CapacityTrial(**{**behind.__dict__, "sent": 32_100})
    idle_behind = CapacityTrial(**{**behind.__dict__, "generator_cpu": 0.5})
    assert saturated(behind) and not saturated(on_time) and not saturated(idle_behind)
    assert saturated(_trial(30_000.0, 100, 0.93)) and not saturated(_trial(30_000.0, 100, None))


def test_a_bad_trial_below_the_capacity_does_not_clear_the_generator():
    path = _path("direct", 1_000.0, [0.99, 0.99])
    path.trials.append(_trial(900.0, 200, 0.85))  # a hiccup below the capacity, tolerated
    assert _limited_by({"direct": path}, 10.0, 0.01) == {"direct": "load generator"}


def _searched(monkeypatch: pytest.MonkeyPatch, found: dict[str, PathCapacity],
              holds: dict[str, float] | None = None):
    """``search_paths`` answering ``found``, and confirmations run by the real
    :func:`confirm_capacity` against paths that keep the goal over a whole trial up to
    ``holds[path]`` requests/s (default: at their knee); returns what they were asked."""
    asked: dict[str, object] = {"confirmed": []}

    def search_paths(generator, urls, max_loads, settings):
        asked.update(generator=generator, urls=urls, max_loads=max_loads, settings=settings)
        return found

    def confirm_paths(generator, urls, knees, goal, settings):
        def measure(path: str, seconds: float, rate: float) -> CapacityTrial:
            asked["confirmed"].append((path, seconds, round(rate)))
            limit = (holds or {}).get(path, knees[path])
            trial = _trial(rate, 0 if rate <= limit * 1.0001 else round(rate * 0.3), 0.4)
            return replace(trial, duration=seconds, ran_s=seconds,
                           intended=round(rate * seconds), sent=round(rate * seconds))
        return {path: confirm_capacity(measure, path, knee, goal, settings.confirm_seconds,
                                       settings.low) for path, knee in knees.items()}

    def path_trials(generator, urls, limits_ms):
        def measure(path: str, seconds: float, rate: float) -> CapacityTrial:
            asked.setdefault("floor", []).append((path, seconds, round(rate)))
            lost = 0 if rate <= (holds or {}).get(path, rate) * 1.0001 else round(rate * 0.3)
            return replace(_trial(rate, lost, 0.4), duration=seconds, ran_s=seconds,
                           intended=round(rate * seconds), sent=round(rate * seconds))
        return measure

    monkeypatch.setattr(limits, "search_paths", search_paths)
    monkeypatch.setattr(limits, "confirm_paths", confirm_paths)
    monkeypatch.setattr(limits, "path_trials", path_trials)
    return asked


GENERATOR = Generator(None, "vegeta", "vegeta", "12.12.0", [2, 3], None, None)  # type: ignore[arg-type]
PATHS = {"proxy": "https://proxy/1kb", "direct": "https://server/1kb"}


def test_the_plain_function_records_both_capacities_their_ratio_and_the_evidence(monkeypatch):
    asked = _searched(monkeypatch, {"proxy": _path("proxy", 9_000.0, []),
                                    "direct": _path("direct", 18_000.0, [])})
    folded: list[tuple[str, str]] = []
    settings = parse_capacity_settings("p99<=10ms", "100..15000")
    measurement = _measured(10_000, 20_000, None)
    assert search_paths_capacity(measurement, GENERATOR, PATHS, settings, "100..15000",
                                 lambda title, text: folded.append((title, text))) is measurement
    assert asked["max_loads"] == {"proxy": pytest.approx(11_000.0), "direct": 15_000.0}
    assert asked["urls"] == PATHS and asked["generator"] is GENERATOR
    assert measurement.value("capacity") == 9_000.0
    assert measurement.value("direct_capacity") == 18_000.0
    assert measurement.value("capacity_ratio") == 0.5 and measurement.invalid == []
    assert measurement.parameters["latency_slo_ms"] == 10.0
    assert measurement.parameters["latency_goals"] == ["p99<=10ms"]
    search = measurement.evidence["capacity_search"]
    assert (search["tool"], search["version"], search["cpus"], search["connections"]) == \
        ("vegeta", "12.12.0", [2, 3], 10)
    assert set(measurement.evidence["capacity"]) == {"proxy", "direct"}
    assert measurement.evidence["capacity_limited_by"] == {"proxy": "path", "direct": "path"}
    assert [title for title, _ in folded] == [
        "capacity search of the proxy path: 10 ms done",
        "capacity search of the direct path: 10 ms done",
        "confirmation of the proxy path: p99<=10ms over a 30 s confirmation at 9000 requests/s "
        "(at most 0.5% lost)",
        "confirmation of the direct path: p99<=10ms over a 30 s confirmation at 18000 "
        "requests/s (at most 0.5% lost)"]
    assert "req/s x 1 s: achieved" in folded[0][1]
    assert asked["confirmed"] == [("proxy", 30.0, 9_000), ("direct", 30.0, 18_000)]
    assert measurement.parameters["capacity_confirm_s"] == 30.0
    assert measurement.evidence["capacity_confirmation"]["proxy"]["knee"] == 9_000.0


def test_the_plain_function_warns_through_logging_and_refuses_what_fails(monkeypatch, caplog):
    _searched(monkeypatch, {"proxy": _path("proxy", 11_000.0, []),
                            "direct": _path("direct", 1_000.0, [0.95, 0.97])})
    measurement = _measured(10_000, 20_000, None)
    with caplog.at_level(logging.WARNING, logger="libraries.capacity.limits"):
        search_paths_capacity(measurement, GENERATOR, PATHS, parse_capacity_settings(),
                              "100..1e6", lambda title, text: None)
    refused = "proxy path: capacity 11000 requests/s is above the closed-loop maximum 10000"
    assert measurement.unavailable["capacity"] == refused and measurement.invalid == [refused]
    assert measurement.value("direct_capacity") == 1_000.0
    bound = ("direct capacity 1000 requests/s is the load generator's (vegeta was saturated in "
             "every failing trial: 90% of its cores, or behind its schedule at 75%): a lower "
             "bound of the path's")
    assert measurement.notes == ["direct capacity: p99<=10ms over a 30 s confirmation at 1000 "
                                 "requests/s (at most 0.5% lost) (MLRsearch's knee 1000)", bound]
    assert measurement.unavailable["capacity_ratio"] == "no figure for capacity"
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == ["proxy capacity 11000 requests/s is above the closed-loop maximum 10000",
                        bound]


def test_a_capacity_far_below_the_maximum_with_no_evidence_is_refused():
    """Issue 35: real VPP passed with a direct capacity of 2,836 requests/s where the
    closed-loop maximum was 26,700, the sanity check holding with no latency pass at all."""
    measurement = _measured(24_000, 26_700, None)
    found = {"proxy": _path("proxy", 20_000.0, [0.4]), "direct": _path("direct", 2_836.0, [0.4])}
    checks = limits._sanity(measurement, found, {"proxy": 24_000, "direct": 26_700}, GOAL,
                            {"proxy": "path", "direct": "path"})
    assert checks["proxy"]["holds"]
    assert not checks["direct"]["holds"]
    assert checks["direct"]["why"].startswith("is below 25% of the closed-loop maximum 26700 "
                                              "with no latency pass to explain it")
    # the same figure from a generator known to have bounded it stands, as its lower bound
    bound = limits._sanity(measurement, found, {"proxy": 24_000, "direct": 26_700}, GOAL,
                           {"proxy": "path", "direct": "load generator"})
    assert bound["direct"]["holds"]


def test_a_proxied_capacity_above_the_direct_one_is_flagged():
    """Issue 35: real VPP recorded a proxy/direct capacity ratio of 3.74 without a word."""
    measurement = _measured(10_000, 20_000, None)
    measurement.add("capacity", [9_000.0], "requests/s")
    measurement.add("direct_capacity", [3_000.0], "requests/s")
    limits._ratio(measurement, {"proxy": "path", "direct": "path"})
    assert measurement.value("capacity_ratio") == 3.0
    assert measurement.evidence["capacity_ratio_above_one"] is True
    assert measurement.notes[-1].startswith("capacity_ratio 3.00 > 1: the proxied path kept")


def test_the_reported_capacity_is_the_rate_a_whole_confirmation_held_stepping_down(
        monkeypatch):
    """Issue 35: a knee where half the trial time met the goal is not a rate that keeps it:
    the figure is the first rate, from the knee down, at which a whole 10 s trial did."""
    asked = _searched(monkeypatch, {"proxy": _path("proxy", 9_000.0, []),
                                    "direct": _path("direct", 18_000.0, [])},
                      holds={"proxy": 9_000.0 * 0.92})
    measurement = _measured(10_000, 20_000, None)
    search_paths_capacity(measurement, GENERATOR, PATHS, parse_capacity_settings(),
                          "100..1e6", lambda title, text: None)
    # 9000 misses, 8100 (0.9) holds, then between: 8550 and 8325 miss (over 8280), and
    # 8100..8325 is within 5 %: the highest rate that held
    rates = [9_000, 8_100, 8_550, 8_325]
    assert [a for a in asked["confirmed"] if a[0] == "proxy"] == \
        [("proxy", 30.0, r) for r in rates]
    assert measurement.value("capacity") == pytest.approx(8_100)
    assert measurement.value("direct_capacity") == 18_000.0
    assert measurement.value("capacity_ratio") == pytest.approx(8_100 / 18_000)
    proxy = measurement.evidence["capacity_confirmation"]["proxy"]
    assert (proxy["knee"], proxy["held"], [t["held"] for t in proxy["trials"]]) == \
        (9_000.0, True, [False, True, False, False])
    assert proxy["semantics"] == ("p99<=10ms over a 30 s confirmation at 8100 requests/s (at "
                                  "most 0.5% lost)")


def test_a_knee_no_whole_confirmation_holds_is_no_figure_and_says_so(monkeypatch):
    asked = _searched(monkeypatch, {"proxy": _path("proxy", 9_000.0, []),
                                    "direct": _path("direct", 18_000.0, [])},
                      holds={"proxy": 10.0})
    measurement = _measured(10_000, 20_000, None)
    search_paths_capacity(measurement, GENERATOR, PATHS, parse_capacity_settings(),
                          "100..1e6", lambda title, text: None)
    # the knee, 0.9, then a quarter down each time, TRIES trials at most
    assert [a[2] for a in asked["confirmed"] if a[0] == "proxy"] == \
        [9_000, 8_100, 6_075, 4_556, 3_417, 2_563, 1_922, 1_442]
    refused = ("proxy path: no rate from 9000 down to 1442 requests/s kept p99<=10ms "
               "over a 30 s confirmation (at most 0.5% lost) (MLRsearch's knee: 9000)")
    assert measurement.unavailable["capacity"] == refused
    # the direct path kept the goal at the proxied path's lowest rate: the proxy's miss
    assert asked["floor"] == [("direct", 30.0, 1_442)]
    assert measurement.invalid == [
        f"{refused}, where the direct path kept it: at 1442 requests/s over 30 s the direct "
        "path (no proxy) lost 0.00% (p99 3 ms), the proxied path 1.00% (p99 3 ms)"]
    assert measurement.untestable == []
    assert measurement.evidence["capacity_floor"]["verdict"] == "the proxy's miss"
    assert "capacity" not in measurement.metrics and "capacity_ratio" not in measurement.metrics


def test_a_goal_neither_path_keeps_at_any_rate_is_under_the_testbeds_floor(monkeypatch, caplog):
    """CI, 2026-11-27: on a VM whose vCPUs stalled for 10-30 ms, about 1 % of the requests
    were over 10 ms at any rate, with the proxy or without it. The goal is under what the
    testbed resolves: no figure, no failure of the proxy, the test skipped saying so."""
    asked = _searched(monkeypatch, {"proxy": _path("proxy", 9_000.0, []),
                                    "direct": _path("direct", 18_000.0, [])},
                      holds={"proxy": 10.0, "direct": 10.0})
    measurement = _measured(10_000, 20_000, None)
    with caplog.at_level(logging.WARNING, logger="libraries.capacity.limits"):
        search_paths_capacity(measurement, GENERATOR, PATHS, parse_capacity_settings(),
                              "100..1e6", lambda title, text: None)
    assert asked["floor"] == [("direct", 30.0, 1_442)]
    assert measurement.invalid == []
    floor = ("p99<=10ms is under this testbed's latency floor: at 1442 requests/s over 30 s "
             "the direct path (no proxy) lost 1.00% (p99 3 ms), the proxied path 1.00% (p99 "
             "3 ms); the goal allows 0.5%: no capacity under it can be measured here (a larger "
             "-v LATENCY_SLO can)")
    assert measurement.untestable == [floor] and measurement.unavailable["capacity"] == floor
    assert measurement.unavailable["direct_capacity"].startswith(
        "direct path: no rate from 18000 down to 2883 requests/s kept p99<=10ms")
    assert measurement.unavailable["direct_capacity"].endswith(
        "; the direct path is the ratio's reference: no figure and no ratio")
    record = measurement.evidence["capacity_floor"]
    assert (record["rate"], record["verdict"], record["direct"]["held"]) == \
        (pytest.approx(1_442, abs=1), "under the testbed's latency floor", False)
    assert floor in [r.getMessage() for r in caplog.records]
    assert not {"capacity", "direct_capacity", "capacity_ratio"} & set(measurement.metrics)


def test_a_direct_path_no_rate_held_on_is_no_reference_and_the_proxied_figure_stands(
        monkeypatch):
    """CI, 2026-11-27: the direct path missed from its knee 15,560 down to 2,492 requests/s
    while the proxied path held at 2,090; the test failed as an invalid result. The direct
    path is only the ratio's reference: no ratio, and nothing to run again."""
    asked = _searched(monkeypatch, {"proxy": _path("proxy", 9_000.0, []),
                                    "direct": _path("direct", 18_000.0, [])},
                      holds={"direct": 10.0})
    measurement = _measured(10_000, 20_000, None)
    search_paths_capacity(measurement, GENERATOR, PATHS, parse_capacity_settings(),
                          "100..1e6", lambda title, text: None)
    assert "floor" not in asked and "capacity_floor" not in measurement.evidence
    assert measurement.value("capacity") == 9_000.0
    assert (measurement.invalid, measurement.untestable) == ([], [])
    assert measurement.unavailable["direct_capacity"].endswith(
        "the ratio's reference: no figure and no ratio, the proxied path's 9000 requests/s "
        "stands")
    assert measurement.unavailable["capacity_ratio"] == "no figure for direct_capacity"


def test_a_proxied_path_with_no_direct_path_to_compare_is_invalid(monkeypatch):
    asked = _searched(monkeypatch, {"proxy": _path("proxy", 9_000.0, [])},
                      holds={"proxy": 10.0})
    measurement = _measured(10_000, 20_000, None)
    search_paths_capacity(measurement, GENERATOR, {"proxy": PATHS["proxy"]},
                          parse_capacity_settings(), "100..1e6", lambda title, text: None)
    assert "floor" not in asked and measurement.untestable == []
    assert measurement.invalid == [measurement.unavailable["capacity"]]


def test_without_confirmation_the_knee_is_reported_and_named_so(monkeypatch):
    asked = _searched(monkeypatch, {"proxy": _path("proxy", 9_000.0, []),
                                    "direct": _path("direct", 18_000.0, [])})
    measurement = _measured(10_000, 20_000, None)
    settings = parse_capacity_settings(confirm_seconds="0")
    search_paths_capacity(measurement, GENERATOR, PATHS, settings, "100..1e6",
                          lambda title, text: None)
    assert asked["confirmed"] == [] and measurement.value("capacity") == 9_000.0
    assert measurement.evidence["capacity_confirmation"] is None
    assert "not confirmed over a whole run (-v CAPACITY_CONFIRM:0)" in measurement.notes[0]


@pytest.mark.parametrize("value", ["-1", "ten", "nan"])
def test_a_bad_confirmation_length_is_refused_naming_the_variable(value):
    with pytest.raises(ValueError, match=rf"-v CAPACITY_CONFIRM:{value}: "):
        parse_capacity_settings(confirm_seconds=value)


def test_a_verification_run_is_evidence_and_never_moves_the_figure(monkeypatch, caplog):
    """CAPACITY_VERIFY: one more trial at each figure (the benchmark's 30 s check); one that
    missed is a note, the figure stays."""
    asked = _searched(monkeypatch, {"proxy": _path("proxy", 9_000.0, []),
                                    "direct": _path("direct", 18_000.0, [])})
    verified: list[tuple[str, float, float]] = []

    def path_trials(generator, urls, limits_ms):
        def measure(path: str, seconds: float, rate: float) -> CapacityTrial:
            verified.append((path, seconds, rate))
            lost = round(rate * seconds * (0.008 if path == "proxy" else 0.05))
            return replace(_trial(rate, lost, 0.5), duration=seconds, ran_s=seconds,
                           intended=round(rate * seconds), sent=round(rate * seconds))
        return measure

    monkeypatch.setattr(limits, "path_trials", path_trials)
    measurement = _measured(10_000, 20_000, None)
    with caplog.at_level(logging.WARNING, logger="libraries.capacity.limits"):
        search_paths_capacity(measurement, GENERATOR, PATHS,
                              parse_capacity_settings(verify_seconds="30"), "100..1e6",
                              lambda title, text: None)
    assert verified == [("proxy", 30.0, 9_000.0), ("direct", 30.0, 18_000.0)]
    assert len(asked["confirmed"]) == 2  # the confirmations ran before, apart
    checks = measurement.evidence["capacity_verification"]
    # judged against the goal itself (1 %), not the confirmation's margin (0.5 %)
    assert checks["proxy"]["held"] and not checks["direct"]["held"]
    assert checks["proxy"]["loss_ratio"] == pytest.approx(0.008)
    assert checks["direct"]["loss_ratio"] == pytest.approx(0.05)
    assert measurement.value("direct_capacity") == 18_000.0
    assert measurement.notes[-1] == ("direct capacity 18000 requests/s: a 30 s verification "
                                     "run lost 5.00% of its requests for p99<=10ms (allowed "
                                     "1.00%)")


def test_a_verification_short_by_the_generators_late_start_is_run_again(monkeypatch):
    """Capacity bench, 2026-11-26: the 30 s verification at 2462 requests/s sent 71,399 of
    73,805 (2406 never sent: wrk2's 1 s late start) with 193 late (0.26 %) and read as a 3.5 %
    miss. Run again, as a confirmation is; the short run stays in the record."""
    _searched(monkeypatch, {"proxy": _path("proxy", 3_000.0, []),
                            "direct": _path("direct", 18_000.0, [])})
    short = iter([True])

    def path_trials(generator, urls, limits_ms):
        def measure(path: str, seconds: float, rate: float) -> CapacityTrial:
            late = 0.0026 if path == "proxy" else 0.0
            unsent = 0.98 if path == "proxy" and next(short, False) else 0.0
            return _long_trial(rate, seconds, unsent_s=unsent, late_share=late)
        return measure

    monkeypatch.setattr(limits, "path_trials", path_trials)
    measurement = _measured(10_000, 20_000, None)
    search_paths_capacity(measurement, GENERATOR, PATHS,
                          parse_capacity_settings(verify_seconds="30"), "100..1e6",
                          lambda title, text: None)
    checks = measurement.evidence["capacity_verification"]
    assert checks["proxy"]["held"] and checks["proxy"]["loss_ratio"] < 0.003
    assert [r["sent"] for r in checks["proxy"]["retried"]] == [90_000 - 2_940]
    assert not checks["proxy"]["retried"][0]["held"]
    assert checks["direct"]["retried"] == []


def test_a_latency_pass_of_another_generator_is_no_estimate_of_the_search():
    """Issue 35: the sanity check compared a wrk2 search with a vegeta latency pass."""
    latency = {"rate": 8859.0, "sent": 26577, "failed": 0, "over_slo": 3, "slo_ms": 10.0,
               "tool": "vegeta"}
    path = _path("proxy", 6_000.0, [])
    path.trials[:] = [replace(t, tool="wrk2") for t in path.trials]
    checks = _sanity(_measured(17_700, 17_000, latency), {"proxy": path},
                     {"proxy": 17_700}, GOAL)
    assert checks["proxy"]["holds"] and checks["proxy"]["half_rate_met_goal"] is None
    assert checks["proxy"]["half_rate_pass_left_out"] == (
        "the latency pass ran vegeta, the search wrk2: not the same instrument")
    # with no pass to compare, a figure far below the maximum needs other evidence
    far = _path("proxy", 2_000.0, [])
    far.trials[:] = [replace(t, tool="wrk2") for t in far.trials]
    checks = _sanity(_measured(17_700, 17_000, latency), {"proxy": far}, {"proxy": 17_700},
                     GOAL, {"proxy": "path"})
    assert not checks["proxy"]["holds"]
    assert checks["proxy"]["why"].startswith("is below 25% of the closed-loop maximum")


@pytest.mark.parametrize(("late", "stands"), [(0.05, True), (0.002, False)])
def test_a_figure_far_below_the_maximum_is_judged_by_the_search_generators_own_pass(
        monkeypatch, late, stands):
    """Capacity bench, 2026-11-26 (a VM whose vCPUs stall for tens of ms): the direct path's
    knee 2,959 against a closed-loop 19,248, refused with no evidence (wrk2 searched, the
    latency pass is vegeta's and the proxy's only). A wrk2 pass at half the maximum that
    missed the goal explains the figure; from one that met it the confirmation starts."""
    asked = _searched(monkeypatch, {"proxy": _path("proxy", 9_000.0, []),
                                    "direct": _path("direct", 3_000.0, [])},
                      {"proxy": 9_000.0, "direct": 10_000.0})
    passes: list[tuple[str, float, float]] = []

    def path_trials(generator, urls, limits_ms):
        def measure(path: str, seconds: float, rate: float) -> CapacityTrial:
            passes.append((path, seconds, rate))
            return _long_trial(rate, seconds, late_share=late)
        return measure

    monkeypatch.setattr(limits, "path_trials", path_trials)
    measurement = _measured(10_000, 20_000, None)
    search_paths_capacity(measurement, GENERATOR, PATHS, parse_capacity_settings(),
                          "100..1e6", lambda title, text: None)
    assert passes == [("direct", limits.PASS_SECONDS, 10_000.0)]  # the proxy's knee is near
    check = measurement.evidence["capacity_sanity"]["direct"]
    assert (check["half_rate_pass"], check["half_rate_pass_tool"]) == (10_000.0, "wrk2")
    assert measurement.evidence["capacity_pass"]["direct"]["loss_ratio"] == \
        pytest.approx(late, rel=0.01)
    assert check["holds"] and check["half_rate_met_goal"] is not stands
    confirmed = [rate for path, _, rate in asked["confirmed"] if path == "direct"]
    if stands:
        assert measurement.value("direct_capacity") == 3_000.0
        assert confirmed[0] == 3_000 and "confirm_from" not in check
    else:  # tox e2e: knee 3,257, a 3 s pass at 10,126 lost 0.07 %: 30 s trials decide from it
        assert check["confirm_from"] == 10_000.0 and confirmed[0] == 10_000
        assert measurement.value("direct_capacity") == 10_000.0


def test_the_ceiling_is_the_best_closed_loop_trial_not_a_median_an_outlier_pulled_down(
        monkeypatch):
    """Real VPP, 1node: direct closed-loop trials 10952, 24115, 21145, 23759, 22628 (median
    22628); the search held 24644 at its top, refused as 'above the closed-loop maximum'."""
    measurement = Measurement("ssl_proxy", "vpp", {"file_size": "1kb"})
    measurement.add("rps", [11012.0, 11258.0, 10918.0, 11393.0, 10477.0], "requests/s")
    measurement.add("direct_rps", [10952.0, 24115.0, 21145.0, 23759.0, 22628.0], "requests/s")
    found = {"proxy": _path("proxy", 10_869.0, []), "direct": _path("direct", 24_644.0, [])}
    maxima = {"proxy": 11_012.0, "direct": 22_628.0}
    best = {"proxy": 11_393.0, "direct": 24_115.0}
    checks = limits._sanity(measurement, found, maxima, GOAL, None, best)
    assert checks["direct"]["holds"] and checks["direct"]["closed_loop_best"] == 24_115.0
    above = {"proxy": _path("proxy", 10_869.0, []), "direct": _path("direct", 25_400.0, [])}
    checks = limits._sanity(measurement, above, maxima, GOAL, None, best)
    assert checks["direct"]["why"] == "is above the closed-loop maximum 24115"
    asked = _searched(monkeypatch, found)
    search_paths_capacity(measurement, GENERATOR, PATHS, parse_capacity_settings(), "100..1e6",
                          lambda title, text: None)
    assert asked["max_loads"] == {"proxy": pytest.approx(1.1 * 11_393.0),
                                  "direct": pytest.approx(1.1 * 24_115.0)}
    assert measurement.value("direct_capacity") == 24_644.0


def test_a_confirmation_within_the_goal_but_not_its_margin_steps_down():
    """Kernel 3node: a 10 s confirmation held at 0.94 % late and the next 30 s run at that rate
    lost 3.75 %: a confirmation holds only within half the goal's loss ratio."""
    losses = iter([0.009, 0.004, 0.009, 0.009])

    def measure(path: str, seconds: float, rate: float) -> CapacityTrial:
        sent = round(rate * seconds)
        return replace(_trial(rate, round(sent * next(losses)), 0.3), duration=seconds,
                       ran_s=seconds, intended=sent, sent=sent)

    confirmation = confirm_capacity(measure, "proxy", 19_195.0, GOAL, 30.0, 100.0)
    # 0.9 % late at the knee is within the goal (1 %) but not its margin: 0.9 of it held,
    # the rates between missed until the two were within 5 %
    assert [round(t.rate) for t in confirmation.trials] == [19_195, 17_276, 18_235, 17_755]
    assert confirmation.rate == pytest.approx(19_195 * 0.9)


def test_a_knee_far_above_what_holds_is_confirmed_down_in_few_trials():
    """Kernel 3node beside two burners: the direct path's knee was 20,980 and 30 s runs lost
    5-9 % as low as half of it (10 trials stepping down to half the knee: no figure). Going
    down by halves finds a rate that holds, then narrows it, within TRIES."""
    def measure(path: str, seconds: float, rate: float) -> CapacityTrial:
        sent = round(rate * seconds)
        late = 0 if rate <= 8_000 else round(sent * 0.06)
        return replace(_trial(rate, late, 0.3), duration=seconds, ran_s=seconds,
                       intended=sent, sent=sent)

    confirmation = confirm_capacity(measure, "direct", 20_980.0, GOAL, 30.0, 100.0)
    rates = [round(t.rate) for t in confirmation.trials]
    assert rates[:4] == [20_980, 18_882, 14_162, 10_621]  # 0.9, then a quarter down
    assert len(rates) <= TRIES and confirmation.rate is not None
    assert confirmation.rate <= 8_000
    missed = min(t.rate for t in confirmation.trials if t.rate > 8_000)
    assert missed - confirmation.rate <= 0.05 * missed or len(rates) == TRIES
    assert confirmation.rate == max(t.rate for t in confirmation.trials if t.rate <= 8_000)


def _long_trial(rate: float, seconds: float, *, unsent_s: float = 0.0,
                late_share: float = 0.0) -> CapacityTrial:
    intended = round(rate * seconds)
    sent = intended - round(rate * unsent_s)
    return replace(_trial(rate, round(sent * late_share), 0.2), duration=seconds,
                   ran_s=seconds, intended=intended, sent=sent, tool="wrk2")


def test_a_confirmation_short_by_the_generators_late_start_is_run_again():
    """Kernel 3node, quiet (CI's run): a 30 s wrk2 trial at 8,919 requests/s sent 258,643 of
    267,369, none late, p99 3.15 ms: wrk2 started 1 s late, a 3.3 % miss that halved the
    proxy's figure. Run again, the rate holds; the short run stays in the record."""
    short = iter([True])

    def measure(path: str, seconds: float, rate: float) -> CapacityTrial:
        if rate > 14_000:
            return _long_trial(rate, seconds, late_share=0.6)
        return _long_trial(rate, seconds, unsent_s=0.98 if next(short, False) else 0.0)

    confirmation = confirm_capacity(measure, "proxy", 19_819.0, GOAL, 30.0, 100.0)
    assert [round(t.rate) for t in confirmation.trials][:3] == [19_819, 17_837, 13_378]
    assert confirmation.rate is not None and confirmation.rate >= 13_378
    assert [round(t.rate) for t in confirmation.retried] == [13_378]
    record = confirmation.as_record()["retried"][0]
    assert record["held"] is False and record["intended"] - record["sent"] > 8_000


def test_a_path_that_stays_short_of_its_schedule_misses_after_the_repeats():
    """A system that stalls connections leaves requests unsent with none late, as wrk2's late
    start does: after REPEATS runs again the rate counts as missed (the lower figure)."""
    calls: list[float] = []

    def measure(path: str, seconds: float, rate: float) -> CapacityTrial:
        calls.append(rate)
        return _long_trial(rate, seconds, unsent_s=2.0 if rate > 5_000 else 0.0)

    confirmation = confirm_capacity(measure, "proxy", 10_000.0, GOAL, 30.0, 100.0)
    assert calls[:1 + REPEATS] == [10_000.0] * (1 + REPEATS)
    assert confirmation.rate is not None and confirmation.rate <= 5_000
    assert len(confirmation.retried) == REPEATS * sum(1 for t in confirmation.trials
                                                      if t.rate > 5_000)


def test_late_answers_are_the_systems_miss_even_with_requests_unsent():
    trial = _long_trial(17_837.0, 30.0, unsent_s=1.0, late_share=0.6)
    assert not short_of_schedule(trial, GOAL)
    assert not short_of_schedule(_long_trial(8_919.0, 30.0, unsent_s=0.1), GOAL)  # < 0.5 s
    assert not short_of_schedule(_long_trial(8_919.0, 30.0), GOAL)  # held
    why = short_of_schedule(_long_trial(8_919.0, 30.0, unsent_s=1.0), GOAL)
    assert "sent 258651 of 267570 scheduled requests (1.0 s of the schedule never sent)" in why


def test_a_low_rate_trial_runs_long_enough_that_connection_set_ups_do_not_decide_it(
        monkeypatch):
    """VPP 3node beside burners: at 100 requests/s, 10-15 of ~100 requests per 1 s trial were
    over 10 ms (the 20 connections' TLS set-ups, p50 2.7 ms) and MLRsearch found no lower
    bound. A trial sends at least SETUP_REQUESTS per connection, keeping the asked duration."""
    ran: list[tuple[float, float]] = []

    def trial(generator, url, rate, seconds, limits_ms):
        ran.append((rate, seconds))
        return replace(_trial(rate, 0, 0.2), duration=seconds, ran_s=seconds)

    monkeypatch.setattr(generators, "constant_rate_trial", trial)
    measure = generators.path_trials(replace(GENERATOR, connections=20), PATHS, (10.0,))
    at_bottom, fast, slowest = measure("proxy", 0.5, 1_000), measure("proxy", 0.5, 20_000), \
        measure("proxy", 1.0, 100)
    assert ran == [(1_000, 4.0), (20_000, 0.5), (100, generators.MAX_STRETCH_S)]
    assert (at_bottom.duration, at_bottom.ran_s, at_bottom.extra["stretched_s"]) == (0.5, 4.0, 4.0)
    assert "stretched_s" not in fast.extra and fast.duration == 0.5
    assert slowest.ran_s == 10.0 and slowest.duration == 1.0
