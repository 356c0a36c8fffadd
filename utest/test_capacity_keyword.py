"""The capacity a test records and its judgement of its own instrument
(:mod:`libraries.capacity.limits`, :mod:`libraries.capacity.sanity`): the figure is the miss
curve's rate with its interval; every check runs on that recorded figure; evidence that
disagrees earns more windows where it disagrees, then the result is invalid quoting both; a
path is the load generator's when every window and trial above its figure that missed had a
saturated generator; no ratio stands on a generator's capacity; a curve that cannot be fitted
gives no figure, saying why."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from libraries.capacity import generators, limits
from libraries.capacity.confirm import (
    EXTRA,
    REPEATS,
    confirm_capacity,
    goal_trial,
    short_of_schedule,
)
from libraries.capacity.floor import judge_unconfirmed
from libraries.capacity.generators import Generator
from libraries.capacity.limits import _problem, _ratio, search_paths_capacity
from libraries.capacity.sanity import (
    CHALLENGE,
    Evidence,
    challenge,
    check_figure,
    generator_bound,
    saturated,
)
from libraries.capacity.search_settings import LatencyGoal, parse_capacity_settings
from libraries.capacity.trials import CapacityTrial, GoalCapacity, PathCapacity
from libraries.results.headline import figure, headline
from libraries.results.measurement import Measurement
from libraries.results.records import build_record, validate_record

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


def _window(rate: float, seconds: float, lost: float, *, unsent_s: float = 0.0,
            cpu: float = 0.3) -> CapacityTrial:
    intended = round(rate * seconds)
    sent = intended - round(rate * unsent_s)
    return replace(_trial(rate, round(sent * lost), cpu), duration=seconds, ran_s=seconds,
                   intended=intended, sent=sent)


def test_a_saturated_generator_in_every_missing_trial_above_the_figure_bounds_it():
    bound = _path("direct", 1000.0, [0.95, 0.97])
    assert generator_bound(bound.trials, 1000.0, GOAL)
    assert not generator_bound(_path("proxy", 1000.0, [0.95, 0.5]).trials, 1000.0, GOAL)
    assert not generator_bound(_path("d", 1000.0, [None, 0.99]).trials, 1000.0, GOAL)
    assert not generator_bound(_path("p", 1000.0, []).trials, 1000.0, GOAL)
    # judged on the figure recorded: the same trials above a figure of 1,200 say nothing
    assert not generator_bound(bound.trials, 1200.0, GOAL)
    bound.trials.append(_trial(900.0, 200, 0.85))  # a hiccup below the figure, tolerated
    assert generator_bound(bound.trials, 1000.0, GOAL)


def test_a_generator_behind_its_schedule_at_a_high_share_is_saturated_too():
    behind = _trial(32_114.0, 8_000, 0.85)
    behind = CapacityTrial(**{**behind.__dict__, "sent": 30_619, "intended": 32_114})
    on_time = CapacityTrial(**{**behind.__dict__, "sent": 32_100})
    idle_behind = CapacityTrial(**{**behind.__dict__, "generator_cpu": 0.5})
    assert saturated(behind) and not saturated(on_time) and not saturated(idle_behind)
    assert saturated(_trial(30_000.0, 100, 0.93)) and not saturated(_trial(30_000.0, 100, None))


def test_the_ratio_stands_only_on_two_recorded_figures_of_the_paths_themselves():
    paths = {"proxy": "p", "direct": "d"}
    plain = Measurement("ssl_proxy", "kernel", {})
    plain.evidence["capacity_limited_by"] = {"proxy": "path", "direct": "path"}
    _ratio(plain, {"proxy": (6000.0, None), "direct": (12000.0, None)}, paths)
    assert plain.value("capacity_ratio") == 0.5 and plain.unavailable == {}
    bound = Measurement("ssl_proxy", "kernel", {})
    bound.evidence["capacity_limited_by"] = {"proxy": "path", "direct": "load generator"}
    _ratio(bound, {"proxy": (6000.0, None), "direct": (12000.0, None)}, paths)
    assert bound.unavailable["capacity_ratio"].startswith("the direct path's capacity is the "
                                                          "load generator's")
    missing = Measurement("ssl_proxy", "kernel", {})
    _ratio(missing, {"proxy": (6000.0, None)}, paths)
    assert missing.unavailable == {"capacity_ratio": "no figure for direct_capacity"}
    mtls = Measurement("ssl_proxy", "kernel", {})
    _ratio(mtls, {"proxy": (6000.0, None)}, {"proxy": "p"})
    assert mtls.unavailable == {"capacity_ratio": "direct path not measured (mTLS row)"}


def _evidence(variant: str = "proxy", maximum: float = 10_000.0, latency: dict | None = None,
              tools: frozenset[str] = frozenset({"vegeta"})) -> Evidence:
    return Evidence(variant, maximum, maximum, latency, tools, GOAL)


def test_a_figure_above_the_closed_loop_maximum_disagrees():
    record, found = check_figure(11_000.0, _evidence(), bound=False)
    assert not record["holds"] and record["why"] == "is above the closed-loop maximum 10000"
    assert [(d.check, d.rate, d.refutable) for d in found] == \
        [("closed-loop maximum", 11_000.0, False)]


def test_the_real_vpp_defect_a_figure_below_a_latency_pass_that_met_the_goal_disagrees():
    """Wave 3 on real VPP: 392 requests/s passed while the 50 % pass at 8.86k met p99."""
    latency = {"rate": 8859.0, "sent": 26577, "failed": 0, "over_slo": 3, "slo_ms": 10.0,
               "tool": "vegeta"}
    record, found = check_figure(392.0, _evidence(maximum=17_700.0, latency=latency), False)
    assert record["half_rate_met_goal"] is True and not record["holds"]
    assert record["why"].startswith("is below the latency pass at 8859 requests/s, which met "
                                    "the goal (0.01% over the limit)")
    assert found[0].rate == 8859.0 and found[0].refutable


def test_a_latency_pass_that_missed_explains_a_figure_far_below_and_never_refuses_one():
    latency = {"rate": 5000.0, "sent": 15000, "failed": 0, "over_slo": 600, "slo_ms": 10.0,
               "tool": "vegeta"}
    record, found = check_figure(2_000.0, _evidence(latency=latency), False)
    assert record["half_rate_met_goal"] is False and record["holds"] and found == []


def test_a_figure_far_below_the_maximum_with_no_evidence_disagrees_unless_generator_bound():
    """Issue 35: real VPP passed with a direct capacity of 2,836 requests/s where the
    closed-loop maximum was 26,700."""
    record, found = check_figure(2_836.0, _evidence("direct", 26_700.0), bound=False)
    assert record["why"].startswith("is below 25% of the closed-loop maximum 26700 with no "
                                    "evidence")
    assert found[0].rate == 13_350.0  # windows at half the maximum decide
    assert check_figure(2_836.0, _evidence("direct", 26_700.0), bound=True)[0]["holds"]


def test_a_latency_pass_of_another_generator_is_no_estimate_of_the_search():
    latency = {"rate": 8859.0, "sent": 26577, "failed": 0, "over_slo": 3, "slo_ms": 10.0,
               "tool": "vegeta"}
    record, found = check_figure(6_000.0, _evidence(maximum=17_700.0, latency=latency,
                                                    tools=frozenset({"wrk2"})), False)
    assert record["holds"] and record["half_rate_met_goal"] is None and found == []
    assert record["half_rate_pass_left_out"] == (
        "the latency pass ran vegeta, the search wrk2: not the same instrument")


def test_a_search_its_budget_ended_stands_only_with_a_lower_bound():
    spent = _path("proxy", 5_000.0, [], stopped="budget spent (61 s of trials, budget 60)")
    assert _problem("proxy", spent, "100..1e6") is None
    spent.goals[0] = GoalCapacity(GOAL, None, None, 5_100.0)
    assert _problem("proxy", spent, "100..1e6") == (
        "proxy path: the capacity search did not finish (10 ms: budget spent (61 s of trials, "
        "budget 60))")
    assert "no rate within 100..1e6 requests/s meets p99<=10ms" in _problem(
        "proxy", _path("proxy", None, []), "100..1e6")


Curve = Callable[[str, float, str], float]
"""``lost(path, rate, phase)``: the share a window loses; ``phase`` is ``plan`` until the
first window the test asks after its planned ones, then ``later``."""


def _searched(monkeypatch: pytest.MonkeyPatch, found: dict[str, PathCapacity],
              lost: Callable[[str, float], float], later: Callable[[str, float], float] |
              None = None) -> list[tuple[str, float, float]]:
    """``search_paths`` answering ``found``; every window a trial of ``lost(path, rate)``
    (``later``, when given, from the first window after a path's 12 planned ones: a machine
    that got quieter or busier); returns what was asked, in order."""
    asked: list[tuple[str, float, float]] = []
    counts: dict[str, int] = {}

    def search_paths(generator, urls, max_loads, settings):
        return found

    def path_trials(generator, urls, limits_ms):
        def measure(path: str, seconds: float, rate: float) -> CapacityTrial:
            asked.append((path, seconds, rate))
            counts[path] = counts.get(path, 0) + 1
            share = (later if later and counts[path] > 12 else lost)(path, rate)
            return _window(rate, seconds, share)
        return measure

    monkeypatch.setattr(limits, "search_paths", search_paths)
    monkeypatch.setattr(limits, "path_trials", path_trials)
    return asked


def _steps(**turns: float) -> Callable[[str, float], float]:
    """Windows that hold (0.1 % lost) up to ``turns[path]`` and miss (5 %) above."""
    return lambda path, rate: 0.001 if rate <= turns[path] else 0.05


def _measured(rps: float = 10_000, direct: float = 20_000, latency: dict | None = None):
    measurement = Measurement("ssl_proxy", "kernel", {"file_size": "1kb"})
    measurement.add("rps", [rps], "requests/s")
    measurement.add("direct_rps", [direct], "requests/s")
    measurement.evidence["latency"] = latency
    return measurement


GENERATOR = Generator(None, "vegeta", "vegeta", "12.12.0", [2, 3], None, None)  # type: ignore[arg-type]
PATHS = {"proxy": "https://proxy/1kb", "direct": "https://server/1kb"}
FOUND = {"proxy": _path("proxy", 9_000.0, []), "direct": _path("direct", 18_000.0, [])}


def _run(measurement: Measurement, settings=None, paths=PATHS) -> list[tuple[str, str]]:
    folded: list[tuple[str, str]] = []
    search_paths_capacity(measurement, GENERATOR, paths, settings or parse_capacity_settings(),
                          "100..1e6", lambda title, text: folded.append((title, text)))
    return folded


def test_the_figure_is_the_safe_end_of_the_miss_curves_crossing_and_the_message_says_so(
        monkeypatch):
    """Issue 60: the figure is the lowest crossing the windows leave plausible (a 95 % lower
    bound), not the fitted crossing, at which a window misses more than the share about as
    often as less; the claim names both."""
    asked = _searched(monkeypatch, dict(FOUND), _steps(proxy=7_000.0, direct=15_000.0))
    measurement = _measured()
    folded = _run(measurement)
    capacity, direct = measurement.metrics["capacity"], measurement.metrics["direct_capacity"]
    record = measurement.evidence["capacity_confirmation"]["proxy"]
    assert 5_000 < record["crossing"] <= 7_000 and capacity.value < record["crossing"]
    assert capacity.value < 7_000 and direct.value < 15_000
    interval = capacity.as_record()["interval"]
    assert interval["low"] == capacity.value < interval["high"] and interval["level"] == 0.9
    assert interval["method"] == "profile likelihood of the miss curve"
    assert measurement.value("capacity_ratio") == pytest.approx(capacity.value / direct.value)
    assert measurement.invalid == [] and measurement.unavailable == {}
    assert record["rate"] == capacity.value and record["knee"] == 9_000.0
    assert record["confidence"] == pytest.approx(0.95) and not record["drift"]["detected"]
    assert record["model"]["windows"] == len([a for a in asked if a[0] == "proxy"])
    claim = record["semantics"]
    assert claim.startswith("p99<=10ms missed in <= 10% of 30 s windows at "
                            f"{figure(capacity.value)} req/s (95% confidence; the 10% crossing "
                            f"{figure(record['crossing'])} [{figure(capacity.value)}, ")
    assert measurement.notes[0].startswith(f"proxy capacity: {claim} (the figure the 90% "
                                           "interval's safe end; ")
    assert f"capacity: {claim}" in headline(measurement)
    # the paths take turns window by window
    assert [a[0] for a in asked[:4]] == ["proxy", "direct", "proxy", "direct"]
    assert {a[1] for a in asked} == {30.0}
    assert [t for t, _ in folded][2] == f"windows of the proxy path: {claim}"
    sanity = measurement.evidence["capacity_sanity"]["proxy"]
    assert sanity["capacity"] == record["crossing"] and sanity["holds"]  # the curve's estimate
    assert measurement.evidence["capacity_limited_by"] == {"proxy": "path", "direct": "path"}
    assert measurement.parameters["capacity_miss_share"] == 0.1


def test_the_checks_see_the_miss_curves_crossing_not_the_knee(monkeypatch):
    """Issue 52: a knee at 70 % of the closed-loop maximum passed every check, then the
    step-down recorded 22 %. Now the far-below check sees the crossing the windows put (the
    estimate whose safe end is recorded), runs windows at half the maximum, and those that
    missed there explain the figure: it stands, a note quoting both."""
    asked = _searched(monkeypatch, {"proxy": _path("proxy", 7_000.0, [])},
                      _steps(proxy=2_300.0))
    measurement = _measured()
    _run(measurement, paths={"proxy": PATHS["proxy"]})
    crossing = measurement.evidence["capacity_confirmation"]["proxy"]["crossing"]
    assert measurement.value("capacity") < crossing < 2_500  # under 25 % of the maximum
    sanity = measurement.evidence["capacity_sanity"]["proxy"]
    assert sanity["capacity"] == crossing and sanity["knee"] == 7_000.0 and sanity["holds"]
    [challenged] = sanity["challenged"]
    assert (challenged["check"], challenged["rate"], challenged["missed"]) == \
        ("far below", 5_000.0, CHALLENGE)
    assert asked[-CHALLENGE:] == [("proxy", 30.0, 5_000.0)] * CHALLENGE
    note = next(n for n in measurement.notes if "the figure stands" in n)
    assert "is below 25% of the closed-loop maximum 10000" in note
    assert f"{CHALLENGE} of {CHALLENGE} 30 s windows at 5000 requests/s missed it" in note
    kinds = [t["kind"] for t in measurement.evidence["capacity_confirmation"]["proxy"]["trials"]]
    assert kinds[-CHALLENGE:] == ["challenge: far below"] * CHALLENGE


def test_a_latency_pass_refuted_by_windows_at_its_own_rate_leaves_the_figure_standing(
        monkeypatch):
    """CI on a busy machine: "capacity 2550 requests/s is below the latency pass at 5215
    requests/s, which met the goal" failed the test. The pass is one window: three 30 s
    windows at 5215 that miss say it was not representative."""
    latency = {"rate": 5215.0, "sent": 15645, "failed": 0, "over_slo": 10, "slo_ms": 10.0,
               "tool": "vegeta"}
    asked = _searched(monkeypatch, {"proxy": _path("proxy", 4_000.0, [])},
                      _steps(proxy=2_600.0))
    measurement = _measured(latency=latency)
    _run(measurement, paths={"proxy": PATHS["proxy"]})
    assert measurement.invalid == [] and measurement.value("capacity") < 2_600
    assert ("proxy", 30.0, 5_215.0) in asked
    note = next(n for n in measurement.notes if "the figure stands" in n)
    assert "is below the latency pass at 5215 requests/s, which met the goal" in note


def test_evidence_the_extra_windows_confirm_makes_the_result_invalid_quoting_both(monkeypatch):
    """The machine quietened after the planned windows: the latency pass met the goal at 5215
    and the three windows there hold too, yet the curve over every window stays far below:
    the evidence disagrees with the figure, and the result is invalid, quoting both figures
    and the one before the extra windows."""
    latency = {"rate": 5215.0, "sent": 15645, "failed": 0, "over_slo": 10, "slo_ms": 10.0,
               "tool": "vegeta"}
    _searched(monkeypatch, {"proxy": _path("proxy", 4_000.0, [])}, _steps(proxy=2_600.0),
              later=_steps(proxy=6_000.0))
    measurement = _measured(latency=latency)
    _run(measurement, paths={"proxy": PATHS["proxy"]})
    assert "capacity" not in measurement.metrics
    [why] = measurement.invalid
    assert measurement.unavailable["capacity"] == why
    assert why.startswith("proxy path: ")
    # the evidence, the figure it disagreed with, and what the windows it earned did
    assert "is below the latency pass at 5215 requests/s, which met the goal" in why
    assert "after 3 more 30 s windows at 5215 requests/s (0 missed; before them: " \
           "p99<=10ms missed in <= 10% of 30 s windows at " in why
    # here the refit no longer makes a rising curve: no figure, that reason first
    assert why.startswith("proxy path: no figure for p99<=10ms from 15 30 s windows")
    assert measurement.evidence["capacity_sanity"]["proxy"]["challenged"][0]["missed"] == 0


def test_a_figure_above_the_closed_loop_maximum_earns_windows_there_then_is_invalid():
    """The windows put the crossing at ~6k where the closed-loop maximum read 5k: three more
    windows there hold, the refit stays above: the check still disagrees, and why quotes the
    claim, the maximum and the claim before the extra windows."""
    asked: list[float] = []

    def measure(path: str, seconds: float, rate: float) -> CapacityTrial:
        asked.append(rate)
        return _window(rate, seconds, 0.001 if rate <= 7_000 else 0.05)

    confirmation = confirm_capacity(measure, "proxy", 8_000.0, GOAL, 30.0, 100.0,
                                    top=11_000.0)
    planned = len(asked)
    figure = confirmation.crossing  # what the checks judge (the recorded figure is below it)
    assert figure is not None and figure > 5_250 and confirmation.rate < figure
    after, record, notes = challenge(confirmation, _evidence(maximum=5_000.0), [], measure)
    assert asked[planned:] == [figure] * CHALLENGE and notes == []
    assert not record["holds"] and record["capacity"] == after.crossing
    assert record["why"].startswith("is above the closed-loop maximum 5000; after 3 more 30 s "
                                    f"windows at {figure:.0f} requests/s (0 missed; before "
                                    f"them: {confirmation.semantics})")
    assert [c["check"] for c in record["challenged"]] == ["closed-loop maximum"]


def test_a_path_that_holds_everywhere_gives_no_figure_and_the_test_fails_saying_why(
        monkeypatch):
    asked = _searched(monkeypatch, {"proxy": _path("proxy", 9_000.0, []),
                                    "direct": _path("direct", 18_000.0, [])},
                      lambda path, rate: 0.001)
    measurement = _measured()
    _run(measurement)
    assert "capacity" not in measurement.metrics and "direct_capacity" not in measurement.metrics
    why = measurement.unavailable["capacity"]
    assert "held (up to 11000 requests/s): the crossing is above the rates measured" in why
    assert measurement.invalid == [why]  # the proxied path's: no figure is no pass
    assert measurement.unavailable["direct_capacity"].endswith("no figure and no ratio")
    assert "capacity_floor" not in measurement.evidence
    assert len([a for a in asked if a[0] == "proxy"]) <= 12 + EXTRA


def test_every_window_missing_on_the_proxy_alone_is_the_proxys_miss(monkeypatch):
    asked = _searched(monkeypatch, dict(FOUND),
                      lambda path, rate: 0.05 if path == "proxy" else 0.001)
    measurement = _measured()
    _run(measurement)
    proxy = [rate for path, _, rate in asked if path == "proxy"]
    assert min(proxy) == 1000.0  # down to the search's lowest rate, then no further
    # the direct path at the proxy's lowest rate: two that held leave no floor to prove
    assert asked[-2:] == [("direct", 30.0, 1000.0)] * 2
    [why] = measurement.invalid
    assert "all " in why and "windows of 30 s missed (down to 1000 requests/s)" in why
    assert why.endswith("where the direct path kept it: at or below 1000 requests/s over 30 s "
                        "the direct path (no proxy) missed 0 of 2 windows (lost 0.10% (p99 3 "
                        "ms), 0.10% (p99 3 ms)), the proxied path 1 of 1 windows (lost 5.00% "
                        "(p99 3 ms)); no floor over 10% shown (exact binomial p = 1)")
    floor = measurement.evidence["capacity_floor"]
    assert (floor["verdict"], floor["ran"], len(floor["direct"])) == ("the proxy's miss", 2, 2)


def _direct_at_the_floor(*losses: float) -> Callable[[str, float], float]:
    """Every proxied window misses (5 %); the direct path's windows hold (0.1 %) except at the
    proxied path's lowest rate (1,000), where they lose ``losses`` in turn."""
    turn = iter(losses)
    return lambda path, rate: 0.05 if path == "proxy" else (
        next(turn) if rate <= 1000.0 else 0.001)


@pytest.mark.parametrize(("losses", "verdict", "ran"), [
    # one direct window that missed decided before issue 60: the proxy's defect was skipped
    ((0.05, 0.001, 0.001), "the proxy's miss", 3),
    ((0.05, 0.001, 0.05), "under the testbed's latency floor", 3),
    ((0.05, 0.05), "under the testbed's latency floor", 2),
    ((0.001, 0.001), "the proxy's miss", 2),
])
def test_one_direct_window_never_turns_the_proxys_miss_into_a_skip(monkeypatch, losses,
                                                                    verdict, ran):
    """The floor is proven only by direct windows missing where a 10 % share makes that
    unlikely (2 of 2 or 3): with one window, a proxy's defect was skipped as often as that
    window missed."""
    asked = _searched(monkeypatch, dict(FOUND), _direct_at_the_floor(*losses))
    measurement = _measured()
    _run(measurement)
    floor = measurement.evidence["capacity_floor"]
    assert (floor["verdict"], floor["ran"]) == (verdict, ran)
    assert [a for a in asked if a[0] == "direct" and a[2] <= 1000.0] == \
        [("direct", 30.0, 1000.0)] * ran
    if verdict == "the proxy's miss":
        [why] = measurement.invalid
        assert measurement.untestable == [] and "where the direct path kept it" in why
    else:
        [why] = measurement.untestable
        assert measurement.invalid == [] and why.startswith(
            f"p99<=10ms is under this testbed's latency floor: at or below 1000 requests/s "
            f"over 30 s the direct path (no proxy) missed 2 of {ran} windows")


def test_the_direct_paths_own_windows_at_the_lowest_rate_count_toward_the_floor():
    """Two windows of the direct path's own plan at or below the proxied path's lowest rate
    missed: the floor is proven without another window."""
    proxy = confirm_capacity(lambda path, seconds, rate: _window(rate, seconds, 0.05), "proxy",
                             9_000.0, GOAL, 30.0, 2_000.0)
    direct = confirm_capacity(lambda path, seconds, rate: _window(
        rate, seconds, 0.05 if rate <= 2_000.0 else 0.001), "direct", 2_500.0, GOAL, 30.0,
        1_000.0)

    def measure(path: str, seconds: float, rate: float) -> CapacityTrial:
        raise AssertionError("no window needed")

    judged = judge_unconfirmed({"proxy": proxy, "direct": direct}, measure)
    assert judged.evidence is not None and judged.evidence["ran"] == 0
    assert len(judged.untestable) == 1 and judged.invalid == []


def test_a_goal_neither_path_keeps_at_any_rate_is_under_the_testbeds_floor(monkeypatch):
    """CI, 2026-11-27: on a VM whose vCPUs stalled for 10-30 ms, about 1 % of the requests
    were over 10 ms at any rate, with the proxy or without it: skipped, saying so."""
    _searched(monkeypatch, dict(FOUND), lambda path, rate: 0.012)
    measurement = _measured()
    _run(measurement)
    assert measurement.invalid == []
    [floor] = measurement.untestable
    assert floor.startswith("p99<=10ms is under this testbed's latency floor: at or below 1000 "
                            "requests/s over 30 s the direct path (no proxy) missed 2 of 2 "
                            "windows (lost 1.20% (p99 3 ms), 1.20% (p99 3 ms)), the proxied "
                            "path 1 of 1 windows (lost 1.20% (p99 3 ms)): a direct window "
                            "misses there in more than 10% (exact binomial p = 0.01)")
    assert floor.endswith("the goal allows 1.0%: no capacity under it can be measured here (a "
                          "larger -v LATENCY_SLO can)")
    assert measurement.unavailable["capacity"] == floor
    assert not {"capacity", "direct_capacity", "capacity_ratio"} & set(measurement.metrics)


def test_a_direct_path_with_no_figure_is_no_reference_and_the_proxied_figure_stands(
        monkeypatch):
    _searched(monkeypatch, dict(FOUND),
              lambda path, rate: 0.05 if path == "direct" else _steps(proxy=7_000)(path, rate))
    measurement = _measured()
    _run(measurement)
    assert "capacity" in measurement.metrics and measurement.invalid == []
    assert measurement.unavailable["direct_capacity"].endswith(
        "the ratio's reference: no figure and no ratio, the proxied path's "
        f"{measurement.value('capacity'):.0f} requests/s stands")
    assert measurement.unavailable["capacity_ratio"] == "no figure for direct_capacity"


def test_without_windows_the_knee_is_reported_named_so_and_still_checked(monkeypatch):
    asked = _searched(monkeypatch, {"proxy": _path("proxy", 9_000.0, []),
                                    "direct": _path("direct", 21_500.0, [])},
                      lambda path, rate: 0.0)
    measurement = _measured()
    _run(measurement, parse_capacity_settings(confirm_seconds="0"))
    assert asked == [] and measurement.value("capacity") == 9_000.0
    assert measurement.evidence["capacity_confirmation"] is None
    assert measurement.invalid == ["direct path: capacity 21500 requests/s is above the "
                                   "closed-loop maximum 20000"]
    assert "not confirmed over a whole run (-v CAPACITY_CONFIRM:0)" in measurement.notes[0]
    assert "(MLRsearch knee, unconfirmed)" in headline(measurement)


@pytest.mark.parametrize(("variable", "value"), [
    ("CAPACITY_CONFIRM", "-1"), ("CAPACITY_CONFIRM", "ten"), ("CAPACITY_MISS_SHARE", "0.6"),
    ("CAPACITY_MISS_SHARE", "0"), ("CAPACITY_WINDOWS", "5"), ("CAPACITY_HOLDOUT", "-2")])
def test_a_bad_setting_is_refused_naming_the_variable(variable, value):
    key = {"CAPACITY_CONFIRM": "confirm_seconds", "CAPACITY_MISS_SHARE": "miss_share",
           "CAPACITY_WINDOWS": "windows", "CAPACITY_HOLDOUT": "holdout"}[variable]
    with pytest.raises(ValueError, match=rf"-v {variable}:{value}: "):
        parse_capacity_settings(**{key: value})


def test_a_verification_window_is_counted_in_the_curve_and_kept_as_evidence(monkeypatch,
                                                                           caplog):
    asked = _searched(monkeypatch, dict(FOUND), _steps(proxy=7_000.0, direct=15_000.0))
    measurement = _measured()
    with caplog.at_level(logging.WARNING, logger="libraries.capacity.limits"):
        _run(measurement, parse_capacity_settings(verify_seconds="30"))
    verified = measurement.evidence["capacity_verification"]
    assert verified["proxy"]["held"] and verified["proxy"]["counted"]
    confirmation = measurement.evidence["capacity_confirmation"]["proxy"]
    assert [t["kind"] for t in confirmation["trials"]].count("verification") == 1
    assert confirmation["model"]["windows"] == len([a for a in asked if a[0] == "proxy"])
    # a verification of another length is evidence only
    asked.clear()
    other = _measured()
    _run(other, parse_capacity_settings(verify_seconds="10"))
    assert not other.evidence["capacity_verification"]["proxy"]["counted"]
    trials = other.evidence["capacity_confirmation"]["proxy"]["trials"]
    assert "verification" not in [t["kind"] for t in trials]


def test_held_out_windows_check_the_figure_and_are_never_counted(monkeypatch):
    asked = _searched(monkeypatch, dict(FOUND), _steps(proxy=7_000.0, direct=15_000.0))
    measurement = _measured()
    _run(measurement, parse_capacity_settings(holdout="10"))
    holdout = measurement.evidence["capacity_holdout"]["proxy"]
    figure, (low, high) = measurement.value("capacity"), holdout["interval"]
    kinds = [w["kind"] for w in holdout["windows"]]
    assert kinds.count("figure") == 10 and kinds.count("low") + kinds.count("high") == 5
    assert kinds[:4] == ["figure", "figure", "low", "figure"]
    assert [a[2] for a in asked[-15:]] == [
        {"figure": figure, "low": low, "high": high}[k] for k in kinds]
    assert holdout["missed_at_figure"] == 0 and holdout["counted"] is False
    assert measurement.evidence["capacity_confirmation"]["proxy"]["model"]["windows"] == \
        len([a for a in asked if a[0] == "proxy"]) - 15
    assert "direct" not in measurement.evidence["capacity_holdout"]


def test_a_window_short_by_the_generators_late_start_is_run_again():
    """Kernel 3node, quiet: a 30 s wrk2 trial at 8,919 requests/s sent 258,643 of 267,369,
    none late, p99 3.15 ms: wrk2 started 1 s late. Run again; the short run is kept aside."""
    runs = iter([_window(8_919.0, 30.0, 0.0, unsent_s=0.98), _window(8_919.0, 30.0, 0.0)])
    retried: list[CapacityTrial] = []
    trial = goal_trial(lambda path, seconds, rate: next(runs), "proxy", 30.0, 8_919.0, GOAL,
                       retried)
    assert trial.sent == trial.intended and len(retried) == 1


def test_a_path_that_stays_short_of_its_schedule_misses_after_the_repeats():
    calls: list[float] = []

    def measure(path: str, seconds: float, rate: float) -> CapacityTrial:
        calls.append(rate)
        return _window(rate, seconds, 0.0, unsent_s=2.0)

    retried: list[CapacityTrial] = []
    trial = goal_trial(measure, "proxy", 30.0, 10_000.0, GOAL, retried)
    assert calls == [10_000.0] * (1 + REPEATS) and len(retried) == REPEATS
    assert trial.loss_ratio(10.0) > GOAL.loss_ratio


def test_late_answers_are_the_systems_miss_even_with_requests_unsent():
    assert not short_of_schedule(_window(17_837.0, 30.0, 0.6, unsent_s=1.0), GOAL)
    assert not short_of_schedule(_window(8_919.0, 30.0, 0.0, unsent_s=0.1), GOAL)  # < 0.5 s
    assert not short_of_schedule(_window(8_919.0, 30.0, 0.0), GOAL)  # held
    why = short_of_schedule(_window(8_919.0, 30.0, 0.0, unsent_s=1.0), GOAL)
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


def test_the_record_with_the_curves_figure_validates_and_an_older_one_still_does(monkeypatch):
    """Backward compatible: the new fields are optional (evidence, parameters, the metric's
    interval already had its place); a record of the step-down confirmation still loads."""
    _searched(monkeypatch, dict(FOUND), _steps(proxy=7_000.0, direct=15_000.0))
    measurement = _measured()
    _run(measurement, parse_capacity_settings(holdout="6"))
    record = build_record(measurement, [], test_id="3node/ssl_proxy/x", suite="s", name="x",
                          tags=[], topology="3node", versions={}, host="h",
                          started=datetime(2026, 11, 28, tzinfo=UTC), seconds=1.0)
    record = json.loads(json.dumps({**record, "run_id": "r1", "project_revision": "abc"}))
    validate_record(record)
    assert record["metrics"]["capacity"]["interval"]["method"] == \
        "profile likelihood of the miss curve"
    old = json.loads(json.dumps(record))
    old["evidence"]["capacity_confirmation"]["proxy"] = {
        "goal": "p99<=10ms", "duration_s": 30.0, "knee": 9000.0, "rate": 8100.0, "held": True,
        "semantics": "p99<=10ms over a 30 s confirmation at 8100 requests/s (at most 0.5% "
                     "lost)", "rule": {}, "trials": [], "retried": []}
    del old["evidence"]["capacity_holdout"]
    old["metrics"]["capacity"]["interval"] = {"low": 8100.0, "high": 8100.0, "level": None,
                                              "method": "single value"}
    validate_record(old)


def test_the_console_gets_a_line_as_each_search_ends_and_each_window_ends(monkeypatch):
    """Issue 63: the capacity search ran its 30 s windows for over ten minutes with no line
    on the console. Each search's end and each window (rate, p99, held or missed) say one."""
    asked = _searched(monkeypatch, dict(FOUND), _steps(proxy=7_000.0, direct=15_000.0))
    said: list[str] = []
    search_paths_capacity(_measured(), GENERATOR, PATHS, parse_capacity_settings(), "100..1e6",
                          lambda title, text: None, said.append)
    assert said[:2] == ["proxy capacity search: knee 9k req/s after 1 trials",
                        "direct capacity search: knee 18k req/s after 1 trials"]
    windows = said[2:]
    assert len(windows) == len(asked)  # one line per window, whichever step ran it
    assert windows[0] == "proxy capacity window 1: 9k req/s for 30 s, p99 3 ms, 5.0% over " \
                         "10 ms: missed p99<=10ms"
    turns = {"proxy": 7_000.0, "direct": 15_000.0}
    for line, (path, _, rate) in zip(windows, asked, strict=True):  # each its own window
        held = rate <= turns[path]
        assert re.fullmatch(rf"{path} capacity window \d+: [\d.]+k req/s for 30 s, p99 3 ms, "
                            rf"{'0.1' if held else '5.0'}% over 10 ms: "
                            rf"{'held' if held else 'missed'} p99<=10ms", line), line
    last = max(int(line.split()[3].rstrip(":")) for line in windows if line.startswith("proxy"))
    assert last == len([a for a in asked if a[0] == "proxy"])
