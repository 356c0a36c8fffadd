"""Adaptive trials: more rounds while a criterion is inconclusive, within the budget; the
settings that drive them are checked where they enter."""

from __future__ import annotations

import itertools

import pytest

from libraries.results.adaptive import Judge, measure
from libraries.results.criteria import CriteriaFile
from libraries.results.measurement import Measurement
from libraries.results.plan import Budget, Settings, TrialPlan
from libraries.results.trial_settings import parse_judge, parse_settings

FLOOR = CriteriaFile.model_validate({"version": 1, "criteria": [
    {"case": "tcp_term", "metric": "throughput", "min": 10.0}]})


def _run(values: list[float], plan: TrialPlan, budget: Budget, criteria=FLOOR):
    supply = itertools.chain(values, itertools.repeat(values[-1]))
    seen = []

    def trial(run):
        seen.append((run.variant, run.round))
        return next(supply) if run.measured else -1.0

    def build(results, seconds):
        m = Measurement("tcp_term", "kernel", {})
        m.add("throughput", results["iperf3"], "Gbit/s")
        return m

    judge = Judge(criteria, "criteria.yaml", "3node", Settings(plan, budget))
    measurement, results = measure({"iperf3": trial}, plan, build, judge)
    return measurement, results, seen


def test_rounds_are_added_until_the_interval_clears_the_bound():
    # 5 planned trials straddle 10; two more above it move the lower bound (x(1) of 7 is
    # still 9.5: n=7 keeps k=1)... until x(2) may serve at n=8
    values = [9.5, 12, 12, 12, 12, 12, 12, 12]
    measurement, results, seen = _run(values, TrialPlan(5, 1, 1), Budget(10))
    assert seen[0] == ("iperf3", 0)  # the warm-up
    assert measurement.rounds == {"planned": 5, "run": 8, "max_trials": 10,
                                  "max_seconds": None, "alpha": 0.05, "stopped": "conclusive"}
    assert len(results["iperf3"]) == 8
    assert measurement.metrics["throughput"].interval.low == 12.0


def test_a_conclusive_result_runs_only_the_planned_rounds():
    measurement, _, seen = _run([12.0] * 5, TrialPlan(5, 1, 0), Budget(10))
    assert measurement.rounds["run"] == 5 and measurement.rounds["stopped"] == "conclusive"
    assert len(seen) == 5


def test_the_trial_budget_ends_a_still_inconclusive_test():
    values = [9.0, 11.0] * 10
    measurement, _, _ = _run(values, TrialPlan(5, 1, 0), Budget(7))
    assert measurement.rounds["run"] == 7
    assert measurement.rounds["stopped"] == "trial budget spent (7 of MAX_TRIALS 7)"


def test_the_time_budget_is_checked_before_each_round():
    budget = Budget(20, max_seconds=10.0)
    assert budget.allows(5, elapsed=8.0, per_round=1.6, planned=8.0) is None
    assert budget.allows(6, elapsed=9.6, per_round=1.6, planned=8.0).startswith(
        "time budget spent (10 s measured, another round takes ~2 s, MAX_SECONDS 10)")
    # without MAX_SECONDS: twice the planned rounds' time...
    assert Budget(5).allows(4, elapsed=15.0, per_round=1.6, planned=8.0) is not None
    assert Budget(5).allows(4, elapsed=12.0, per_round=1.6, planned=8.0) is None
    # ...and never less than MAX_TRIALS rounds at their pace: -v TRIALS:2 (two 2 s rounds
    # planned) reaches the 5 an interval needs (twice the planned time stopped it at 3)
    assert Budget(5).allows(3, elapsed=7.0, per_round=2.0, planned=4.0) is None
    assert Budget(5).allows(4, elapsed=11.0, per_round=2.0, planned=4.0) is not None


def test_without_criteria_no_round_is_added():
    empty = CriteriaFile.model_validate({"version": 1, "criteria": []})
    measurement, _, _ = _run([9.0, 11.0] * 5, TrialPlan(5, 1, 0), Budget(10), empty)
    assert measurement.rounds["run"] == 5
    assert measurement.rounds["stopped"] == "no criterion applies"


def test_settings_defaults_and_the_topology_budget():
    settings = parse_settings("5", "2", "1")
    assert settings.budget == Budget(10, None) and settings.alpha == 0.05
    # a quick look (TRIALS:1) may still reach a verdict: the default budget allows 5 trials
    assert parse_settings("1", "2", "0").budget == Budget(5, None)
    lab = parse_settings("5", "30", "5", topology_budget={"max_trials": 12,
                                                         "max_seconds": 900.0})
    assert lab.budget == Budget(12, 900.0)
    given = parse_settings("5", "30", "5", max_trials="8", max_seconds="400", alpha="0.1",
                           topology_budget={"max_trials": 12})
    assert given.budget == Budget(8, 400.0) and given.alpha == 0.1


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"alpha": "1.5"}, "-v ALPHA:1.5: expected a number between 0 and 1 (exclusive)"),
    ({"alpha": "0"}, "-v ALPHA:0: expected a number between 0 and 1"),
    ({"alpha": "five"}, "-v ALPHA:five: expected a number"),
    ({"max_trials": "3"}, "-v MAX_TRIALS (3) is below -v TRIALS:5: the budget must allow"),
    ({"max_trials": "4", "trials": "3"},
     "-v MAX_TRIALS (4) can never reach a verdict at ALPHA 0.05: an interval that decides "
     "needs 5 trials"),
    ({"max_seconds": "5"}, "-v MAX_SECONDS (5) is below the planned trials' time (5 x 2 s"),
    ({"topology_budget": {"max_trials": 4}},
     "the topology's budget.max_trials (4) is below -v TRIALS:5"),
])
def test_bad_settings_name_their_variable(kwargs, message):
    arguments = {"trials": "5", "duration": "2", "warmup": "1", **kwargs}
    with pytest.raises(ValueError) as error:
        parse_settings(arguments.pop("trials"), arguments.pop("duration"),
                       arguments.pop("warmup"), **arguments)
    assert str(error.value).startswith(message), str(error.value)


def test_judging_correctness_only_leaves_performance_bounds_unjudged_and_adds_no_round():
    both = CriteriaFile.model_validate({"version": 1, "criteria": [
        {"case": "ssl_proxy", "metric": "rps", "min": 1000.0},
        {"case": "ssl_proxy", "metric": "errors", "max": 0}]})
    m = Measurement("ssl_proxy", "kernel", {})
    m.add("rps", [900.0, 1100.0, 950.0], "requests/s")   # straddles 1000: inconclusive
    m.add("errors", [0.0, 2.0, 0.0], "errors")
    settings = Settings(TrialPlan(3, 1, 0), Budget(6))
    everything = Judge(both, "criteria.yaml", "3node", settings).evaluate(m)
    assert sorted(r.metric for r in everything) == ["errors", "rps"]
    only = Judge(both, "criteria.yaml", "3node", settings, correctness_only=True).evaluate(m)
    assert [r.metric for r in only] == ["errors"] and only[0].per_trial


@pytest.mark.parametrize(("value", "expected"), [("all", False), ("correctness", True),
                                                 ("Correctness", True)])
def test_the_judge_setting_names_the_two_modes(value, expected):
    assert parse_judge(value) is expected


def test_a_bad_judge_setting_names_the_variable():
    with pytest.raises(ValueError, match=r"-v JUDGE:speed: expected one of all, correctness"):
        parse_judge("speed")
