"""The suite's state and what moved below the keyword layer, without Robot: the suite's
settings check and judge (:mod:`libraries.cases.suite_state`), its testbed set-up and checks
(:mod:`libraries.cases.testbed_setup`), the run's records (:mod:`libraries.results.run_records`)
and an A/B verdict as a status (:mod:`libraries.cases.ab_setup`)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from libraries.cases import testbed_setup
from libraries.cases.ab_setup import AbRegression, check_ab_verdict, open_comparison
from libraries.cases.context import Skip
from libraries.cases.run_settings import resolve_settings
from libraries.cases.suite_state import SuiteState, tear_down_suite
from libraries.cases.testbed_setup import SuiteTestbed
from libraries.results.adaptive import Judge
from libraries.results.criteria import load_criteria
from libraries.results.measurement import Measurement
from libraries.results.plan import Budget, Settings, TrialPlan
from libraries.results.run_records import RunRecords, TestInfo
from libraries.testbed.errors import HostStackError, ToolMissing
from libraries.testbed.topology_file import load_topology
from utest.kept_log import KeptLog

THREE = load_topology("3node")


def _state(**given: str) -> SuiteState:
    """A suite given ``given`` on the command line."""
    return SuiteState(resolve_settings(given.get, given))


# -- the suite's settings -----------------------------------------------------------------------


def test_the_set_up_check_logs_the_plan_and_the_criteria_it_read():
    state, log = _state(TRIALS="3", DURATION="1"), KeptLog()
    state.check(log)
    assert "3 trials of 1 s after 1 s warm-up; up to 6 while a criterion is inconclusive; " \
        "confidence 95%" in log.lines
    assert state.criteria is not None and log.lines[-1].endswith(
        f"{len(state.criteria.criteria)} criteria, all on metrics and parameters their cases have")


def test_a_budget_below_the_plan_fails_the_check_naming_the_variable():
    with pytest.raises(HostStackError, match=r"-v MAX_SECONDS \(3\) is below the planned "
                       r"trials' time \(5 x 2 s = 10 s per variant\)"):
        _state(MAX_SECONDS="3").check(KeptLog())
    with pytest.raises(HostStackError, match="-v AB_BUDGET:10 with -v DURATION:2"):
        _state(AB="x.yaml", AB_BUDGET="10").check(KeptLog())


def test_the_judge_takes_the_suites_settings_on_the_testbeds_topology():
    judge = _state(TRIALS="6", JUDGE="correctness").judge(THREE)
    assert judge.topology == "3node" and judge.settings.plan.trials == 6
    assert judge.correctness_only is True and judge.source == "criteria.yaml"


def test_an_extended_row_is_skipped_unless_the_run_asks_for_it():
    with pytest.raises(Skip, match="extended row: runs with -v EXTENDED:yes"):
        _state().skip_unless_extended(["KERNEL", "EXTENDED"])
    _state().skip_unless_extended(["KERNEL"])
    _state(EXTENDED="yes").skip_unless_extended(["EXTENDED"])


def test_the_testbed_comes_from_the_pool_only_when_one_is_given():
    calls: list[tuple] = []
    for given, topology in (({}, None), ({"LAB_POOL": "labs"}, None),
                            ({"LAB_POOL": "labs"}, "1node"), ({"TOPOLOGY": "2node"}, None)):
        state = _state(**given)
        state.testbed = SimpleNamespace(  # type: ignore[assignment]
            up=lambda name, metadata: calls.append(("up", name)),
            up_from_pool=lambda pool, tag, metadata, log: calls.append(("pool", pool, tag)))
        state.set_up_testbed(topology, lambda tag: f"client of {tag}", print, KeptLog())
    assert calls == [("up", "3node"), ("pool", "client of labs", "labs"), ("up", "1node"),
                     ("up", "2node")]


def test_a_suite_whose_settings_were_never_resolved_has_nothing_to_tear_down():
    tear_down_suite(None, KeptLog())
    state = _state()
    tear_down_suite(state, KeptLog())  # no testbed was set up: nothing to do
    with pytest.raises(HostStackError, match="no testbed: the suite setup must call"):
        state.testbed.current  # noqa: B018


# -- the testbed's checks -----------------------------------------------------------------------


class _Node:
    def __init__(self, answers: dict[str, int]) -> None:
        self.answers = answers

    def run(self, command: str, timeout: float, check: bool = True) -> SimpleNamespace:
        return SimpleNamespace(exit_code=self.answers.get(command, 0), stdout="Linux 6.1")

    def which(self, binary: str) -> str:
        return f"/usr/bin/{binary}"


def _suite_testbed(topology=THREE, answers: dict[str, int] | None = None) -> SuiteTestbed:
    bed = SuiteTestbed()
    node = _Node(answers or {})
    bed._testbed = SimpleNamespace(  # type: ignore[assignment]
        topology=topology, nodes={name: node for name in topology.nodes},
        node=lambda name: SimpleNamespace(run=node.run, where=name), removed=False)
    return bed


def test_a_stack_the_node_cannot_run_skips_with_the_reason():
    bed = _suite_testbed()
    bed.require_stack("dut", "kernel")
    with pytest.raises(HostStackError, match="unknown stack 'dpdk'"):
        bed.require_stack("dut", "dpdk")
    vpp = THREE.nodes["dut"].vpp
    assert vpp is not None
    with pytest.raises(Skip, match=f"VPP not installed on dut: {vpp.bin} missing"):
        _suite_testbed(answers={f"test -x {vpp.bin}": 1}).require_stack("dut", "vpp")
    _suite_testbed().require_stack("dut", "vpp")


def test_a_tool_is_declared_answers_or_skips(monkeypatch: pytest.MonkeyPatch):
    def version(node, tool, binary):
        if tool == "bpftrace":
            raise ToolMissing(f"{binary}: not found")
        return "1.0"

    monkeypatch.setattr(testbed_setup, "tool_version", version)
    bed, log = _suite_testbed(), KeptLog()
    assert "wrk" in bed.declared_tools("tg")
    assert bed.tool_answer("tg", "wrk", log) == "1.0"
    with pytest.raises(HostStackError, match="node tg declares no tool 'nope'"):
        bed.tool_answer("tg", "nope", log)
    assert bed.require_tool("tg", "wrk") == f"/usr/bin/{THREE.nodes['tg'].tools['wrk']}"
    with pytest.raises(Skip, match="nope not declared on tg in topology 3node"):
        bed.require_tool("tg", "nope")
    if "bpftrace" in THREE.nodes["dut"].tools:
        with pytest.raises(Skip, match="not found"):
            bed.require_tool("dut", "bpftrace")


# -- the run's records --------------------------------------------------------------------------


def _measurement() -> Measurement:
    m = Measurement(case="ssl_proxy", stack="kernel", parameters={"file_size": "1kb",
                                                                  "connections": 10})
    m.add("rps", [11900.0, 12100.0, 12000.0, 11950.0, 12050.0], "requests/s")
    m.add("errors", [0.0] * 5, "count", "lower_is_better")
    m.notes.append("latency unavailable: no vegeta")
    return m


def test_a_run_names_itself_or_takes_the_given_id(tmp_path: Path):
    own = RunRecords("tests.jsonl")
    path = own.open(tmp_path, None)
    assert path.parent.parent == tmp_path and path.name == "records.jsonl"
    assert own.run_id and path.parent.name == own.run_id and not own.given
    given = RunRecords("tests.jsonl")
    assert given.open(tmp_path, "night-1") == tmp_path / "records.jsonl" and given.given
    assert given.open(tmp_path / "other", "x") == tmp_path / "records.jsonl"  # named once


def test_a_record_is_appended_with_its_run_and_logged(tmp_path: Path):
    records, info, debug = RunRecords("tests.jsonl"), [], []
    judge = Judge(load_criteria(), "criteria.yaml", "3node",
                  Settings(TrialPlan(5, 2, 1), Budget(10)))
    records.test_started_now()
    path = records.record(_measurement(), judge, TestInfo("1kb-10c", Path("tests/ssl_proxy/k"),
                                                          "Kernel", ("KERNEL",)),
                          "3node", {"tg": {"wrk": "4.2"}}, (tmp_path, "r1"), info.append,
                          debug.append)
    [record] = [json.loads(line) for line in path.read_text().splitlines()]
    assert record["test_id"] == "3node/ssl_proxy/1kb-10c" and record["run_id"] == "r1"
    assert json.loads((tmp_path / "run.json").read_text())["topology"] == "3node"
    assert info[0].startswith("rps: median 12000 requests/s, [") and "over 5 trials" in info[0]
    assert info[1].startswith("errors: median 0 count") and \
        info[2] == "latency unavailable: no vegeta"
    assert info[-1] == f"record appended to {path}" and json.loads(debug[0]) == record
    assert records.headline and records.message("") == records.headline
    assert records.message("criteria not met") == f"criteria not met | measured: " \
        f"{records.headline}"


def test_each_test_gets_its_line_with_the_log_beside_the_run(tmp_path: Path):
    records, warnings = RunRecords("tests.jsonl"), []
    records.test_line({"name": "t"}, None, warnings.append)  # not open: nothing written
    records.open(tmp_path, "r")
    entry = {"test_id": "3node/x/t", "name": "t", "robot_id": "s1-t1", "suite": "X",
             "status": "PASS", "message": "m", "tags": []}
    records.test_line(entry, str(tmp_path / "log.html"), warnings.append)
    line = json.loads((tmp_path / "tests.jsonl").read_text())
    assert line["log"] == "log.html" and line["headline"] is None and warnings == []
    assert list(line) == ["test_id", "name", "robot_id", "suite", "status", "message",
                          "headline", "log", "tags"]


# -- an A/B verdict -----------------------------------------------------------------------------


def _ab(verdict: str, policy: str = "skip") -> Measurement:
    m = Measurement(case="ssl_proxy", stack="kernel", parameters={})
    m.ab = {"verdict": verdict, "rounds": {"on_inconclusive": policy}}
    m.notes.append("A/B b 4.1 % slower")
    return m


def test_an_ab_verdict_is_the_tests_status_and_tag():
    tags, log = [], KeptLog()
    with pytest.raises(AbRegression, match="A/B b 4.1 % slower"):
        check_ab_verdict(_ab("regression"), tags.append, log)
    with pytest.raises(Skip, match=r"no look decided \(-v AB_INCONCLUSIVE:skip"):
        check_ab_verdict(_ab("inconclusive"), tags.append, log)
    with pytest.raises(AbRegression, match="A/B inconclusive"):
        check_ab_verdict(_ab("inconclusive", "fail"), tags.append, log)
    check_ab_verdict(_ab("inconclusive", "pass"), tags.append, log)
    check_ab_verdict(_ab("no change"), tags.append, log)
    assert tags == ["AB_REGRESSION", "AB_INCONCLUSIVE", "AB_INCONCLUSIVE", "AB_INCONCLUSIVE",
                    "AB_NO_CHANGE"]
    assert log.lines == ["WARN A/B inconclusive: A/B b 4.1 % slower: no look decided "
                         "(-v AB_INCONCLUSIVE:pass; skip by default: not a pass, not a failure)"]


def test_a_plain_run_opens_no_comparison_and_asks_for_no_testbed():
    def no_testbed():
        raise AssertionError("a plain run needs no testbed here")

    assert open_comparison(_state().settings, "", no_testbed, KeptLog()) is None
