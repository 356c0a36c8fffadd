"""Duet A/B (libraries.ab.duet, libraries.ab.duet_run): two runs, one per side, joined by a
socket pair, measure every round's trials at the same time; side a judges. Here the two runs
are two threads of one test, each with its own end of a real socket pair."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from libraries.ab import duet_link, duet_run
from libraries.ab.ab_settings import declared_ab_settings
from libraries.ab.comparison import load_comparison
from libraries.ab.duet import DUET_ORDER, combine, measure_duet, serve_duet
from libraries.ab.duet_link import DuetError, DuetLink, DuetRole, OtherSideEnded
from libraries.ab.session import AbSession, MeasuredBeside, NothingToCompare
from libraries.cases.ab_setup import tell_unmeasured
from libraries.results.measurement import Measurement, Trial
from libraries.results.plan import AbSettings, TrialPlan
from libraries.testbed.errors import HostStackError
from libraries.testbed.topology_file import load_topology

THREE = load_topology("3node")
PLAN = TrialPlan(duration=1, trials=3, warmup=1)


def _in_thread(work: Callable[[], Any]) -> tuple[threading.Thread, dict[str, Any]]:
    """Run ``work`` beside the test (side b's run): its return value or exception."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = work()
        except BaseException as error:
            outcome["error"] = error

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, outcome


def _build(results: dict[str, list[Any]], seconds: float) -> Measurement:
    measurement = Measurement(case="ssl_proxy", stack="kernel", parameters={})
    measurement.add("rps", list(results["proxy"]), "req/s")
    return measurement


def _build_here(results: dict[str, list[Any]], seconds: float) -> Measurement:
    """Side b's run's own build: its measurement carries what only its run knows."""
    measurement = _build(results, seconds)
    measurement.evidence["built_by"] = "side b's run"
    return measurement


def test_a_role_is_a_side_and_a_descriptor():
    assert DuetRole.parse("b:7") == DuetRole("b", 7)
    for bad in ("c:7", "a", "a:x", ""):
        with pytest.raises(ValueError, match="AB_DUET"):
            DuetRole.parse(bad)


def test_messages_cross_whole_and_a_silent_or_gone_side_is_named(links):
    a, b = links
    a.send("trial", "T", "proxy", 2, 1, 5.0)
    assert b.receive(1, "a trial") == ("trial", "T", "proxy", 2, 1, 5.0)
    with pytest.raises(DuetError, match=r"side b sent nothing in 0.05 s while this side waited "
                                        r"for the result"):
        a.receive(0.05, "the result")
    b.close()
    with pytest.raises(DuetError, match="side b's run ended while this side waited for x"):
        a.receive(1, "x")


def test_the_handshake_passes_over_earlier_tests_and_stops_at_an_end_of_this_one(links):
    a, b = links
    b.send("result", "Old test", 1.0, 1.0)  # a stale reply of a test side a gave up
    b.send("ended", "Older test", "FAIL: set-up")
    b.send("measure", "T1")
    a.start_test("T1")
    assert b.receive(1, "handshake") == ("measure", "T1")
    b.test_ended("T2", "SKIP: no nginx_ebpf on dut")
    with pytest.raises(OtherSideEnded, match=r"side b ended test 'T2' without measuring it: "
                                             r"SKIP: no nginx_ebpf on dut"):
        a.start_test("T2")


class _Run:
    """One run's testbed in a test: the side it holds (switched as the engine says) and a
    trial whose figure is ``1000 * speed[side] * bias`` with a wobble per round; the calls."""

    def __init__(self, side: str, speed: dict[str, float], bias: float = 1.0):
        self.side, self.speed, self.bias = side, speed, bias
        self.calls: list[tuple[str, Trial]] = []
        self.switched: list[str] = []

    def switch(self, side: str) -> float:
        self.switched.append(side)
        self.side = side
        return 0.25

    def trial(self, trial: Trial) -> float:
        self.calls.append((self.side, trial))
        return 1000.0 * self.speed[self.side] * self.bias * (1 + 0.01 * (trial.round % 3))


def _duet(links, here: _Run, there: _Run, settings: AbSettings, seed: int = 3,
          build_there=_build_here):
    a, b = links
    thread, served = _in_thread(lambda: (b.start_test("T"), serve_duet(
        {"proxy": there.trial}, build_there, b, there.switch)))
    a.start_test("T")
    try:
        outcome = measure_duet({"proxy": here.trial}, PLAN, _build, {"rps": "higher_is_better"},
                               settings, a, here.switch, seed=seed)
    finally:
        thread.join(5)
    return outcome, served


def test_both_runs_run_each_trial_together_crossing_sides_by_a_coin(links):
    slower_b = {"a": 1.0, "b": 0.9}
    here, there = _Run("a", slower_b), _Run("b", slower_b)
    outcome, served = _duet(links, here, there, declared_ab_settings(look=10, max_rounds=20))
    assert "error" not in served
    assert served["value"][1] == "conclusive at the look after 10 rounds"
    assert outcome.rounds == 10 and outcome.looks == [10] and outcome.seed == 3
    comparison = outcome.comparisons["rps"]
    assert comparison.verdict == "regression"
    assert comparison.interval.change == pytest.approx(0.9)
    # every round: each run held one side, the other run the other, as the record says
    rounds = outcome.order.removeprefix(DUET_ORDER + ": ").split(" | ")
    assert len(rounds) == 10 and set(rounds) == {"a here, b there", "b here, a there"}
    held = [side for side, trial in here.calls if trial.measured]
    assert [f"{s} here, {'b' if s == 'a' else 'a'} there" for s in held] == rounds
    assert [side for side, trial in there.calls if trial.measured] == \
        ["b" if s == "a" else "a" for s in held]
    # both runs switched together, each warm-up on the run's own side and not kept
    assert len(outcome.switches) == len(here.switched) == len(there.switched) > 0
    assert here.calls[0] == ("a", Trial("proxy", 1, 0)) and there.calls[0][0] == "b"
    assert len(outcome.results["a"]["proxy"]) == len(outcome.results["b"]["proxy"]) == 10
    assert outcome.results["a"]["proxy"][0] in (1000.0, 1010.0, 1020.0)
    assert outcome.sides["b"].evidence["other_testbed"] is not None  # both runs' evidence


def test_what_differs_between_the_runs_cancels_where_a_side_only_run_would_show_it(links):
    """The second run's testbed is 2 % faster whatever it runs (measured on this VM: side b's
    run read +1.1 to +1.7 % in A/A tests without crossing): crossed, the A/A reads no change."""
    same = {"a": 1.0, "b": 1.0}
    outcome, _ = _duet(links, _Run("a", same), _Run("b", same, bias=1.02),
                       declared_ab_settings(look=10, max_rounds=60, margin=0.03))
    comparison = outcome.comparisons["rps"]
    assert comparison.verdict == "no change"
    assert comparison.interval.low < 1.0 < comparison.interval.high


def test_each_run_builds_its_own_figures_and_each_side_takes_them_round_by_round(links):
    """A figure only side b's run can make (its own server's request count: ssl_proxy's
    build reads it by the result's identity, which a result sent over loses) is built there."""
    speed = {"a": 1.0, "b": 1.0}

    def build_there(results: dict[str, list[Any]], seconds: float) -> Measurement:
        measurement = _build(results, seconds)
        measurement.evidence["built_by"] = "side b's run"
        measurement.invalid.append("server counted 0 requests")
        return measurement

    outcome, _ = _duet(links, _Run("a", speed), _Run("b", speed),
                       declared_ab_settings(look=10, max_rounds=10), build_there=build_there)
    for side in ("a", "b"):
        evidence = outcome.sides[side].evidence
        assert "built_by" in evidence or "built_by" in evidence["other_testbed"]
        assert "on the other testbed: server counted 0 requests" in outcome.sides[side].invalid \
            or "server counted 0 requests" in outcome.sides[side].invalid


def _fails_at(number: int, message: str) -> Callable[[Trial], float]:
    """A trial that fails in round ``number`` with ``message``."""
    def trial(given: Trial) -> float:
        if given.round == number:
            raise HostStackError(message)
        return 1.0
    return trial


def _failed_duet(links, here: Callable[[Trial], float], there: Callable[[Trial], float],
                 there_switch: Callable[[str], float] | None = None
                 ) -> tuple[BaseException, dict[str, Any]]:
    """What side a's run raised, and how side b's run ended, when something fails."""
    a, b = links
    thread, served = _in_thread(lambda: (b.start_test("T"), serve_duet(
        {"proxy": there}, _build, b, there_switch or _Run("b", {}).switch)))
    a.start_test("T")
    with pytest.raises(HostStackError) as raised:
        measure_duet({"proxy": here}, PLAN, _build, {"rps": "higher_is_better"},
                     declared_ab_settings(look=10, max_rounds=20), a, _Run("a", {}).switch, seed=3)
    thread.join(5)
    return raised.value, served


def test_a_trial_that_fails_in_side_b_s_run_fails_the_test_naming_it(links):
    error, served = _failed_duet(links, lambda trial: 1.0,
                                 _fails_at(2, "wrk on tg: 812 socket errors"))
    assert isinstance(error, DuetError)
    assert "A/B side b's run: wrk on tg: 812 socket errors" in str(error)
    assert isinstance(served["error"], HostStackError)


def test_side_a_s_run_failing_tells_side_b_s_to_stop(links):
    error, served = _failed_duet(links, _fails_at(3, "nginx on dut died"), lambda trial: 1.0)
    assert "nginx on dut died" in str(error)
    assert isinstance(served["error"], DuetError)
    assert "stopped test 'T': side a's run stopped measuring it" in str(served["error"])


def test_a_switch_that_fails_in_side_b_s_run_fails_the_test_naming_it(links):
    def broken_switch(side: str) -> float:
        raise HostStackError("nginx on dut: bind() to 10.0.0.1:443 failed")

    error, served = _failed_duet(links, lambda trial: 1.0, lambda trial: 1.0, broken_switch)
    assert isinstance(error, DuetError)
    assert "side b's run: nginx on dut: bind" in str(error)
    assert isinstance(served["error"], HostStackError)


def test_side_b_refuses_a_variant_its_test_does_not_measure(links):
    a, b = links
    thread, served = _in_thread(lambda: (b.start_test("T"), serve_duet(
        {"direct": len}, _build, b, _Run("b", {}).switch)))
    a.start_test("T")
    with pytest.raises(DuetError, match="side b's run has no variant 'proxy'"):
        measure_duet({"proxy": lambda trial: 1.0}, PLAN, _build, {"rps": "higher_is_better"},
                     declared_ab_settings(look=10, max_rounds=20), a, _Run("a", {}).switch)
    thread.join(5)
    assert "which side b's test does not measure (direct)" in str(served["error"])


# -- the session of each run -------------------------------------------------------------------

class _Node:
    def __init__(self, values: dict[str, str]):
        self.values = values

    def run(self, command: str, timeout: float, **_: object) -> SimpleNamespace:
        return SimpleNamespace(exit_code=0, stdout="", stderr="")


def _duet_session(tmp_path: Path, link: DuetLink, text: str) -> AbSession:
    path = tmp_path / "ab.yaml"
    path.write_text(text)
    testbed = SimpleNamespace(topology=THREE, nodes={})
    return AbSession(load_comparison(path, THREE), testbed,  # type: ignore[arg-type]
                     declared_ab_settings(), {}, {"a": {}, "b": {}}, link)


def test_side_b_runs_its_own_side_from_the_start_and_after_every_test(tmp_path, links):
    _, b = links
    session = _duet_session(tmp_path, b, "a: {name: debian}\nb: {name: candidate, tools: "
                                         "{dut: {nginx: /opt/n/sbin/nginx}}}\n")
    assert session.side == "b"
    assert session.testbed.topology.nodes["dut"].tools["nginx"] == "/opt/n/sbin/nginx"
    assert session.restore() == []
    assert session.testbed.topology.nodes["dut"].tools["nginx"] == "/opt/n/sbin/nginx"
    assert session.close() == []
    assert session.testbed.topology.nodes["dut"].tools["nginx"] == "nginx"


def test_side_b_measures_beside_side_a_and_leaves_the_record_to_it(tmp_path, links,
                                                                   monkeypatch):
    a, b = links
    session = _duet_session(tmp_path, b, "name: aa\naa: true\na: {name: x}\nb: {name: y}\n")
    session.test = "Suite.T"
    monkeypatch.setattr(session, "_check_own_sysctls", lambda: None)
    a.send("measure", "Suite.T")
    a.send("done", "Suite.T", "conclusive at the look after 10 rounds")
    with pytest.raises(MeasuredBeside, match=r"side b's run \(y\) measured beside side a's, "
                                             r"whose run records and judges this test"):
        session.measure("ssl_proxy", "kernel", {}, {"proxy": lambda trial: 1.0}, PLAN, _build,
                        {"rps": "higher_is_better"})


def test_a_duet_refuses_tests_that_run_vpp(tmp_path, links):
    _, b = links
    session = _duet_session(tmp_path, b, "name: aa\naa: true\na: {name: x}\nb: {name: y}\n")
    session.register("vpp-dut", {("vpp", "dut")}, lambda: None, lambda: None)
    with pytest.raises(NothingToCompare, match="two VPPs polling the same cores"):
        session.measure("ssl_proxy", "vpp", {}, {"proxy": lambda trial: 1.0}, PLAN, _build,
                        {"rps": "higher_is_better"})


def test_a_sysctl_the_other_testbed_changed_is_an_error_naming_the_key(tmp_path, links,
                                                                       monkeypatch):
    _, b = links
    session = _duet_session(tmp_path, b, "a: {name: x}\nb: {name: y, sysctl: {dut: "
                                         "{net.core.rmem_max: '8388608'}}}\n")
    session.originals = {"dut": {"net.core.rmem_max": "212992"}}
    session.testbed.nodes = {"dut": _Node({})}
    monkeypatch.setattr("libraries.ab.session.read_sysctls",
                        lambda node, keys: {"net.core.rmem_max": "212992"})
    with pytest.raises(HostStackError, match=r"duet A/B side b: on dut net.core.rmem_max "
                                             r"reads '212992', not this side's '8388608'"):
        session._check_own_sysctls()


# -- the launcher ------------------------------------------------------------------------------

def test_each_side_runs_the_same_robot_arguments_with_its_own_socket_and_folder():
    a, b = duet_run.commands("/x/ab.yaml", Path("out"), ["-v", "TOPOLOGY:3node", "tests/tcp"],
                             (5, 6), python="py")
    assert a.command == ("py", "-m", "robot", "--variable", "AB:/x/ab.yaml", "--variable",
                         "AB_DUET:a:5", "--outputdir", "out/a", "-v", "TOPOLOGY:3node",
                         "tests/tcp")
    assert (b.side, b.fd, b.output_dir) == ("b", 6, Path("out/b"))
    assert "AB_DUET:b:6" in b.command


def test_the_launcher_refuses_what_it_sets_per_side(tmp_path, capsys):
    comparison = tmp_path / "ab.yaml"
    comparison.write_text("a: {name: x}\nb: {name: y}\n")
    for args, said in ((["-d", "out", "tests"], "give the output folder to the launcher"),
                       (["-v", "AB:other.yaml", "tests"], "the launcher sets AB per side"),
                       ([], "give robot's arguments after --")):
        with pytest.raises(SystemExit):
            duet_run.main([str(comparison), "--", *args] if args else [str(comparison)])
        assert said in capsys.readouterr().err
    with pytest.raises(SystemExit):
        duet_run.main([str(tmp_path / "missing.yaml"), "--", "tests"])
    assert "no such comparison file" in capsys.readouterr().err


def test_a_descriptor_that_is_not_a_socket_is_named(tmp_path):
    with (tmp_path / "f").open("w") as file, pytest.raises(DuetError, match="not the "
                                                                              "launcher's socket"):
        DuetLink.from_role(DuetRole("a", file.fileno()))


def test_module_constants_leave_room_for_a_slow_set_up():
    assert duet_link.HANDSHAKE_TIMEOUT >= 600


def test_side_b_starts_a_trial_at_the_instant_side_a_names_not_on_arrival(links):
    a, b = links
    began: list[float] = []
    start_at = time.monotonic() + 0.3
    a.send("measure", "T")
    a.send("trial", "T", "proxy", 1, 1, start_at)
    a.send("done", "T", "round limit")
    b.start_test("T")
    assert serve_duet({"proxy": lambda trial: began.append(time.monotonic()) or 1.0},
                      _build, b, _Run("b", {}).switch) == "round limit"
    assert began[0] >= start_at
    assert a.receive(1, "the handshake") == ("measure", "T")
    assert a.receive(1, "the result")[:3] == ("result", "T", 1.0)


def test_a_test_that_ended_before_the_comparison_opened_is_told_to_the_other_run():
    """Side b's suite set-up failed (no testbed, so no A/B session): each of its tests still
    tells side a's run (``AbKeywords.end_test``), which would otherwise wait HANDSHAKE_TIMEOUT
    for each."""
    mine, theirs = socket.socketpair()
    tell_unmeasured(None, f"b:{mine.fileno()}", "Kernel.T", "FAIL: Parent suite setup failed")
    other = DuetLink(theirs, "a")
    assert other.receive(1, "the end") == ("ended", "Kernel.T",
                                           "FAIL: Parent suite setup failed")
    mine.send(b"")  # the run's own descriptor is still open (the library used a copy)
    mine.close()
    other.close()


def test_a_side_whose_runs_gave_fewer_figures_than_rounds_is_an_error_naming_it():
    one = _build({"proxy": [1.0, 2.0]}, 1.0)
    with pytest.raises(DuetError, match=r"side b's rps has fewer figures than the rounds that "
                                        r"measured it \(3\)"):
        combine("b", {"here": one, "there": None}, ["here", "here", "here"],
                {"rps": "higher_is_better"})
    with pytest.raises(DuetError, match="side a's rps has fewer figures"):
        combine("a", {"here": one, "there": Measurement(case="ssl_proxy", stack="kernel",
                                                          parameters={})},
                ["here", "there"], {"rps": "higher_is_better"})
