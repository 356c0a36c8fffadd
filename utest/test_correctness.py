"""Correctness in every measured trial of both sides (issue 55): a correctness check
(``errors max: 0``) fails on one broken trial, naming the round, the count and, in an A/B
test, the side and, in a duet, the run; a trial's proof failing names its round. Plain runs,
sequential A/B runs and duet A/B runs alike, without Robot."""

from __future__ import annotations

import datetime
import threading
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from libraries.ab.ab_settings import declared_ab_settings
from libraries.ab.comparison import load_comparison
from libraries.ab.duet import combine, measure_duet, serve_duet
from libraries.ab.duet_link import DuetError, DuetLink
from libraries.ab.session import AbSession
from libraries.report.run_report import _criteria_text
from libraries.results.adaptive import Judge, measure
from libraries.results.criteria import CriteriaFile, evaluate, load_criteria, side_outcomes
from libraries.results.measurement import Measurement, Trial
from libraries.results.plan import Budget, Settings, TrialPlan
from libraries.results.records import build_record, validate_record
from libraries.testbed.errors import HostStackError
from libraries.testbed.topology_file import load_topology

THREE = load_topology("3node")
CRITERIA = CriteriaFile.model_validate({"version": 1, "criteria": [
    {"case": "ssl_proxy", "metric": "errors", "max": 0},
    {"case": "ssl_proxy", "metric": "rps", "min": 1010.0,
     "basis": {"low": 2000.0, "source": "a test"}}]})
SETTINGS = Settings(TrialPlan(trials=5, duration=1, warmup=0), Budget(20))
PARAMETERS = {"file_size": "4kb", "connections": 10, "mtls": False}
"""A size no floor or ratio of the shipped criteria names: only ``errors max: 0`` applies."""


def _build(results: dict[str, list[dict[str, float]]], seconds: float) -> Measurement:
    """An SSL proxy measurement of trials that return their rate and error count."""
    measurement = Measurement("ssl_proxy", "kernel", dict(PARAMETERS), trial_seconds=seconds)
    trials = results["proxy"]
    measurement.add("rps", [t["rps"] for t in trials], "requests/s")
    measurement.add("errors", [t["errors"] for t in trials], "count", "lower_is_better")
    return measurement


def _errors(number: int, errors: float) -> dict[str, float]:
    return {"rps": 1000.0 + 10 * (number % 3), "errors": errors}


# -- plain runs ------------------------------------------------------------------------------

def test_a_plain_run_with_one_erroring_trial_fails_naming_the_round_and_adds_no_round():
    """rps straddles its floor (more rounds would be asked for), but errors in round 3 fail
    the test already: no further round is run, and the failure names round 3 and its count."""
    def trial(given: Trial) -> dict[str, float]:
        return _errors(given.round, 7.0 if given.round == 3 else 0.0)

    judge = Judge(CRITERIA, "criteria.yaml", "3node", SETTINGS)
    measurement, results = measure({"proxy": trial}, SETTINGS.plan, _build, judge)
    assert len(results["proxy"]) == 5
    assert measurement.rounds["stopped"] == "a correctness check failed (errors)"
    outcomes = {r.metric: r for r in judge.evaluate(measurement)}
    assert outcomes["rps"].outcome == "inconclusive"  # performance: still an interval
    errors = outcomes["errors"]
    assert errors.outcome == "fail" and errors.per_trial
    assert errors.describe() == ("errors > required 0 in 1 of 5 trials (round 3: 7) count "
                                 "(criteria.yaml: criteria.0)")


def test_a_plain_run_whose_errors_stay_at_zero_passes_the_check_in_every_trial():
    judge = Judge(load_criteria(), "criteria.yaml", "lab", SETTINGS)  # no floors on "lab"
    measurement, _ = measure({"proxy": lambda given: _errors(given.round, 0.0)},
                             SETTINGS.plan, _build, judge)
    [errors] = [r for r in judge.evaluate(measurement) if r.metric == "errors"]
    assert errors.outcome == "pass"
    assert errors.describe().startswith("errors <= required 0 in every one of 5 trials")
    assert measurement.rounds["stopped"] == "conclusive"


def test_a_proof_failing_in_a_plain_trial_names_its_round():
    def trial(given: Trial) -> dict[str, float]:
        if given.round == 2:
            raise HostStackError("proxy: 3 of 900 responses were not 2xx/3xx")
        return _errors(given.round, 0.0)

    with pytest.raises(HostStackError, match=r"^round 2 of proxy: proxy: 3 of 900 responses"):
        measure({"proxy": trial}, SETTINGS.plan, _build, None)


# -- sequential A/B --------------------------------------------------------------------------

class _Node:
    name = "node"
    where = "node"

    def run(self, command: str, timeout: float, sudo: bool = False, **_: object):
        return SimpleNamespace(exit_code=0, stdout="", stderr="")


def _session(tmp_path: Path) -> AbSession:
    path = tmp_path / "ab.yaml"
    path.write_text("a: {name: reference}\nb: {name: candidate, nginx: {proxy: {server: "
                    "['access_log off;']}}}\n")
    testbed = SimpleNamespace(topology=THREE, nodes={name: _Node() for name in THREE.nodes})
    session = AbSession(load_comparison(path, THREE), testbed,  # type: ignore[arg-type]
                        declared_ab_settings(look=10, max_rounds=10), {}, {})
    session.register("nginx-proxy", {("tool", "dut", "nginx"), ("nginx", "proxy")},
                     lambda: None, lambda: None)
    return session


def test_a_sequential_ab_candidate_erroring_in_some_rounds_fails_naming_the_side(tmp_path):
    session = _session(tmp_path)

    def trial(given: Trial) -> dict[str, float]:
        broken = session.side == "b" and given.round in (3, 7)
        return _errors(given.round, 5.0 if broken else 0.0)

    measurement = session.measure("ssl_proxy", "kernel", dict(PARAMETERS), {"proxy": trial},
                                  TrialPlan(trials=1, duration=1, warmup=1), _build,
                                  {"rps": "higher_is_better"})
    assert measurement.ab["verdict"] == "no change"  # the comparison alone would pass
    lines = Judge(load_criteria(), "criteria.yaml", "lab", SETTINGS).judge_sides(measurement)
    assert any(line.startswith("side a (reference): PASS errors <= required 0 in every one "
                               "of 10 trials") for line in lines)
    [failed] = measurement.invalid
    assert failed.startswith("side b (candidate): errors > required 0 in 2 of 10 trials "
                             "(round 3: 5; round 7: 5) count (criteria.yaml: criteria.")
    [entry] = measurement.ab["sides"]["b"]["criteria"]
    assert entry["violations"] == [{"round": 3, "value": 5.0}, {"round": 7, "value": 5.0}]
    record = build_record(measurement, [], test_id="3node/ssl_proxy/t", suite="s", name="t",
                          tags=[], topology="3node", versions={},
                          started=datetime.datetime.now(datetime.UTC), seconds=1.0, host="h")
    record["run_id"] = "r"
    validate_record(record)
    assert record["verdict"] == "fail"  # the record says what the test says


def test_a_proof_failing_on_one_side_names_the_side_and_the_round(tmp_path):
    session = _session(tmp_path)

    def trial(given: Trial) -> dict[str, float]:
        if session.side == "b" and given.round == 4:
            raise HostStackError("proxy: 12 of 900 responses were not 2xx/3xx")
        return _errors(given.round, 0.0)

    with pytest.raises(HostStackError, match=r"^A/B side b \(candidate\), round 4 of proxy: "
                                             r"proxy: 12 of 900"):
        session.measure("ssl_proxy", "kernel", dict(PARAMETERS), {"proxy": trial},
                        TrialPlan(trials=1, duration=1, warmup=1), _build,
                        {"rps": "higher_is_better"})


# -- duet A/B --------------------------------------------------------------------------------

def test_a_duet_whose_side_b_run_alone_saw_errors_fails_naming_that_run():
    """The two runs' measurements of side b as the merge gets them: side a's run held side b
    in rounds 1 and 4 (no errors), side b's run in rounds 2, 3 and 5 (250 errors in its
    second: round 3). Before, every metric but the compared one came from side a's run, and
    the merged errors were all zero."""
    held_by = ["here", "there", "there", "here", "there"]
    here = _build({"proxy": [_errors(1, 0.0), _errors(4, 0.0)]}, 2.0)
    there = _build({"proxy": [_errors(2, 0.0), _errors(3, 250.0), _errors(5, 0.0)]}, 3.0)
    merged = combine("b", {"here": here, "there": there}, held_by, {"rps": "higher_is_better"})
    assert list(merged.metrics["errors"].summary.values) == [0.0, 0.0, 250.0, 0.0, 0.0]
    [errors] = [r for r in evaluate(load_criteria(), merged, "lab") if r.metric == "errors"]
    assert errors.outcome == "fail"
    assert "in 1 of 5 trials (round 3 on side b's run: 250)" in errors.describe()
    _, failed = side_outcomes({"a": [], "b": [errors]}, {"a": "reference", "b": "candidate"})
    assert failed == [f"side b (candidate): {errors.describe()}"]


def test_a_duet_side_whose_errors_the_other_run_lacks_without_a_reason_is_an_error():
    here = _build({"proxy": [_errors(1, 0.0)]}, 1.0)
    there = Measurement("ssl_proxy", "kernel", dict(PARAMETERS))
    there.add("rps", [1000.0], "requests/s")
    with pytest.raises(DuetError, match="side b's errors .a correctness count. is missing from "
                                        "side b's run's measurement"):
        combine("b", {"here": here, "there": there}, ["here", "there"],
                {"rps": "higher_is_better"})


def _serve(link: DuetLink, trial: Callable[[Trial], Any]) -> dict[str, Any]:
    """Side b's run beside the test, in a thread: how it ended."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            link.start_test("T")
            outcome["value"] = serve_duet({"proxy": trial}, _build, link, lambda side: 0.1)
        except BaseException as error:
            outcome["error"] = error

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    outcome["thread"] = thread
    return outcome


def test_a_duet_run_through_both_runs_judges_side_b_run_s_errors(links):
    """Both runs measure; only side b's run's testbed drops connections, in round 4: the side
    it held then fails its check, naming side b's run and round 4."""
    a, b = links
    served = _serve(b, lambda given: _errors(given.round, 250.0 if given.round == 4 else 0.0))
    a.start_test("T")
    outcome = measure_duet({"proxy": lambda given: _errors(given.round, 0.0)},
                           TrialPlan(trials=1, duration=1, warmup=0), _build,
                           {"rps": "higher_is_better"},
                           declared_ab_settings(look=10, max_rounds=10), a,
                           lambda side: 0.1, seed=3)
    served["thread"].join(5)
    assert "error" not in served
    held = outcome.order.split(": ", 1)[1].split(" | ")[3]  # round 4: where each side ran
    side = "b" if held == "a here, b there" else "a"  # the side side b's run held
    judge = Judge(load_criteria(), "criteria.yaml", "lab", SETTINGS)
    found = {s: judge.evaluate(m, measured_only=True) for s, m in outcome.sides.items()}
    _, failed = side_outcomes(found, {"a": "reference", "b": "candidate"})
    names = {"a": "reference", "b": "candidate"}
    [message] = failed
    assert message.startswith(f"side {side} ({names[side]}): errors > required 0 in 1 of 10 "
                              "trials (round 4 on side b's run: 250) count (criteria.yaml: ")


def test_a_proof_failing_in_side_b_s_run_is_named_once(links):
    """A trial of side b's run that fails already names the side, the run and the round
    (the session's wrapper); side a's run does not name the run a second time."""
    a, b = links
    told = "A/B side a (reference) on side b's run, round 2 of proxy: 3 of 900 not 2xx/3xx"

    def trial(given: Trial) -> dict[str, float]:
        if given.round == 2:
            raise HostStackError(told)
        return _errors(given.round, 0.0)

    served = _serve(b, trial)
    a.start_test("T")
    with pytest.raises(DuetError) as raised:
        measure_duet({"proxy": lambda given: _errors(given.round, 0.0)},
                     TrialPlan(trials=1, duration=1, warmup=0), _build,
                     {"rps": "higher_is_better"}, declared_ab_settings(look=10, max_rounds=10), a,
                     lambda side: 0.1, seed=3)
    served["thread"].join(5)
    assert str(raised.value) == told


def test_the_run_report_says_which_rounds_broke_a_correctness_check():
    m = _build({"proxy": [_errors(1, 0.0), _errors(2, 4.0), _errors(3, 0.0)]}, 1.0)
    [errors] = evaluate(CRITERIA, m, "3node")[:1]
    text = _criteria_text({"criteria": [errors.as_record()]})
    assert text == "FAIL errors &lt;= 0: broken in 1 of 3 trials (rounds 2; worst 4)"
