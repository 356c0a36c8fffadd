"""Cost per unit of work (libraries.results.cost): the CPU time the system under test spends
per request, per GB or VPP's clocks per packet, from each trial's own telemetry; and judged
like throughput in sequential and duet A/B tests (libraries.ab), where a candidate that
costs more CPU per request fails on its cost, naming it, while its throughput stays
undecided."""

from __future__ import annotations

import re
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from libraries.ab.ab_settings import declared_ab_settings
from libraries.ab.duet import measure_duet, serve_duet
from libraries.ab.rounds import metric_alpha
from libraries.cases.trial_observer import TrialTelemetry
from libraries.history.load import load_records
from libraries.results.adaptive import run_interleaved
from libraries.results.cost import (
    CostSpec,
    add_costs,
    cost_phrase,
    foreign_message,
    foreign_share,
    tree_cpu_s,
    vpp_clocks_per_packet,
)
from libraries.results.headline import headline
from libraries.results.measurement import Measurement, Trial
from libraries.results.plan import TrialPlan
from libraries.results.records import append_record, build_record, validate_record
from libraries.testbed.topology import VppInstall
from utest.test_ab_session import _session
from utest.test_nightly_reference import classifications
from utest.test_telemetry_results import real_reading
from utest.test_trial_telemetry import RUNTIME, Tracked, TrackedNode, _bed, pause

PROXY = CostSpec("proxy", "dut", ("nginx-proxy",), "request", "the reverse proxy", (0,))


def _row(**given: float) -> dict[str, float]:
    row = dict.fromkeys(("usr", "nice", "sys", "iowait", "irq", "soft", "steal", "idle"), 0.0)
    row.update(given)
    row["idle"] = 100.0 - sum(v for k, v in row.items() if k != "idle")
    return row


def _reading(cpu_s: float, elapsed: float = 2.0, nice: float = 0.0) -> dict[str, Any]:
    """A DUT reading whose nginx-proxy worker used ``cpu_s`` seconds; core 0 also had 10 %
    sys and 5 % softirq, and ``nice`` % taken by niced processes."""
    share = 100.0 * cpu_s / elapsed
    return {"elapsed_s": elapsed, "boot_id": "b1", "sampler_cpu_s": 0.01,
            "cores": {"all": _row(usr=share / 2), "0": _row(usr=share, sys=10.0, soft=5.0,
                                                            nice=nice), "1": _row()},
            "processes": {"nginx-proxy master": {"cpu": 0.0, "usr": 0.0, "sys": 0.0,
                                                 "count": 1, "cpu_s": 0.0},
                          "nginx-proxy worker": {"cpu": share, "usr": share, "sys": 0.0,
                                                 "count": 1, "cpu_s": cpu_s}}}


def test_a_trials_cost_is_its_process_trees_cpu_per_unit_of_work():
    """From a real capture of /proc (utest/fixtures/telemetry): the stream proxy's master and
    worker used 0 + 26 ticks in the 2.18 s window; core 0 was 33.03 % sys, 6.88 % softirq and
    39.45 % nice (a niced build beside it)."""
    reading = real_reading()
    assert tree_cpu_s(reading, ("nginx-stream",)) == pytest.approx(0.26)
    stream = CostSpec("native", "dut", ("nginx-stream",), "GB", "the native stream proxy",
                      (0,), prefix="native_")
    measurement = Measurement(case="ebpf_stream", stack="kernel", parameters={})
    add_costs(measurement, [stream], {"native": [0.5, 0.25]},
              {"native": [{"dut": reading}, {"dut": reading}]})
    assert measurement.metrics["native_cost"].summary.values == pytest.approx((0.52, 1.04))
    assert measurement.metrics["native_cost"].summary.unit == "CPU s/GB"
    assert measurement.metrics["native_cost"].direction == "lower_is_better"
    kernel = (33.03 + 6.88) / 100 * 2.18
    assert measurement.metrics["native_kernel_cost"].summary.values == \
        pytest.approx((kernel / 0.5, kernel / 0.25))
    assert measurement.metrics["native_foreign_share"].summary.values == (39.45, 39.45)
    block = measurement.cost
    assert block["metric"] == "native_cost" and block["unit"] == "CPU s/GB"
    assert "nginx-stream" in block["counts"] and "softirq" in block["not_counted"]
    assert "native_kernel_cost" in block["not_counted"]
    assert block["foreign_load"] == {"node": "dut", "cores": [0], "share_pct": 39.45,
                                     "max_pct": 39.45, "counts": block["foreign_load"]["counts"]}
    assert set(block["metrics"]) == {"native_cost", "native_kernel_cost",
                                     "native_foreign_share"}


def test_a_reading_from_before_cpu_s_uses_the_cpu_share_of_its_window():
    reading = real_reading()
    for row in reading["processes"].values():
        del row["cpu_s"]
    assert tree_cpu_s(reading, ("nginx-stream",)) == pytest.approx(0.1193 * 2.18)
    assert tree_cpu_s(reading, ("nginx-proxy",)) is None


@pytest.mark.parametrize(("readings", "work", "why"), [
    ({"proxy": [{"dut": _reading(0.1)}, {"dut": {"unavailable": "/proc not readable: x"}}]},
     [1000, 1000], "trial 2 of proxy: dut: /proc not readable: x"),
    ({"proxy": [{"dut": _reading(0.1)}, None]}, [1000, 1000],
     "trial 2 of proxy has no telemetry paired with it"),
    ({"proxy": None}, [1000], "proxy's trials have no telemetry paired with them"),
    ({"proxy": [{"dut": _reading(0.1)}]}, [0], "a trial of proxy counted no work"),
])
def test_a_cost_whose_input_is_missing_is_not_given_and_says_why(readings, work, why):
    measurement = Measurement(case="ssl_proxy", stack="kernel", parameters={})
    measurement.add("rps", [1000.0] * len(work), "requests/s")
    add_costs(measurement, [PROXY], {"proxy": work}, readings)
    assert "cost" not in measurement.metrics  # never a zero
    assert any(why in note for note in measurement.notes), measurement.notes
    assert why in measurement.cost["unavailable"]
    record = build_record(measurement, [], test_id="t", suite="s", name="n", tags=[],
                          topology="3node", versions={}, started=_now(), seconds=1.0,
                          host="h")
    record["run_id"] = "r1"
    validate_record(record)


def _now() -> datetime:
    return datetime(2026, 1, 2, tzinfo=UTC)


def test_a_process_absent_from_the_trials_gives_no_cost_but_the_kernels_is_kept():
    reading = _reading(0.1)
    del reading["processes"]["nginx-proxy worker"], reading["processes"]["nginx-proxy master"]
    measurement = Measurement(case="ssl_proxy", stack="kernel", parameters={})
    add_costs(measurement, [PROXY], {"proxy": [1000]}, {"proxy": [{"dut": reading}]})
    assert "cost" not in measurement.metrics
    assert measurement.metrics["kernel_cost"].summary.values == \
        pytest.approx((0.15 * 2.0 / 1000 * 1e6,))
    assert "no process of nginx-proxy on dut" in measurement.cost["unavailable"]


def test_vpp_cost_is_its_workers_clocks_of_work_per_packet_from_show_runtime(tmp_path: Path):
    """Real /proc reads around two trials and a stand-in vppctl answering the worker's
    runtime of utest/fixtures/vpp_runtime (Time 3.1, vector rate in 6.1153e5): the nodes that
    processed vectors, clocks per vector times vectors, over the packets in."""
    fake = tmp_path / "vppctl"
    fake.write_text("#!/bin/sh\ncase \"$*\" in\n"
                    f'  *"show runtime") cat {RUNTIME}/show_runtime_two_threads.txt ;;\n'
                    f'  *"show session") cat {RUNTIME}/show_session.txt ;;\n'
                    "esac\n")
    fake.chmod(0o755)
    dut = TrackedNode(workdir=str(tmp_path / "dut"), name="dut")
    install = VppInstall(vppctl=str(fake), cli_socket=str(tmp_path / "cli.sock"))
    telemetry = TrialTelemetry(_bed(dut=dut), vpp={"dut": SimpleNamespace(install=install)})
    results, _ = run_interleaved({"iperf3": lambda trial: (pause(1), object())[1]},
                                 TrialPlan(trials=2, duration=1, warmup=0), telemetry)
    big = 1895772 * (412.0 + 38.5 + 30.2 + 41.0 + 351.0 + 58.9)  # 12.40 vectors per call
    small = 190021 * (25.0 + 960.0 + 29.4 + 2790.0 + 101.0)  # output, tx, rewrite, queue
    expected = (big + small + 2085793 * 33.1) / (6.1153e5 * 3.1)
    reading = telemetry.trials["iperf3"][0]["dut"]
    assert vpp_clocks_per_packet(reading) == pytest.approx(expected)
    measurement = Measurement(case="tcp_term", stack="vpp", parameters={})
    spec = CostSpec("iperf3", "dut", ("iperf3-server",), "GB", "the iperf3 server", vpp=True)
    add_costs(measurement, [spec], {"iperf3": [1.0, 1.0]}, telemetry.paired(results))
    assert measurement.metrics["vpp_cost"].summary.values == pytest.approx((expected,) * 2)
    assert measurement.metrics["vpp_cost"].summary.unit == "clocks/packet"
    assert "vpp_cost" in measurement.cost["not_counted"]
    assert "cost" not in measurement.metrics  # no iperf3-server ran here: said, not zero


def test_each_result_finds_the_telemetry_of_its_own_trial():
    telemetry = _Told(lambda label, result: {"dut": _reading(result.cpu_s)})
    a1, b1, a2, b2 = (_Done(1000 + i, 100.0, 0.05 + i / 100) for i in range(4))
    for label, result in (("a proxy", a1), ("b proxy", b1), ("a proxy", a2), ("b proxy", b2)):
        telemetry.trial_finished(label, 1, 2, result)
    cpu = lambda readings: [r["dut"]["processes"]["nginx-proxy worker"]["cpu_s"]  # noqa: E731
                            for r in readings]
    assert cpu(telemetry.paired({"proxy": [b1, b2]})["proxy"]) == pytest.approx([0.06, 0.08])
    assert cpu(telemetry.paired({"proxy": [a2, b1]})["proxy"]) == pytest.approx([0.07, 0.06])
    assert telemetry.paired({"proxy": [a1, _Done(1, 1.0, 1.0)]}) == {"proxy": None}


# -- judged like throughput -------------------------------------------------------------------


@dataclass(frozen=True)
class _Done:
    """A trial's result as the build reads it (wrk's counts) and the CPU its trial used."""

    total_requests: int
    requests_per_second: float
    cpu_s: float


class _Told(TrialTelemetry):
    """Telemetry told each measured trial's DUT reading by ``reading(label, result)``."""

    def __init__(self, reading: Callable[[str, _Done], dict[str, Any]]):
        super().__init__(SimpleNamespace(nodes={}, topology=SimpleNamespace(nodes={})))
        self.reading = reading

    def trial_started(self, variant: str, round_number: int, total: int) -> None:
        pass

    def trial_finished(self, variant: str, round_number: int, total: int, result: Any) -> None:
        self.keep(variant, result, self.reading(variant, result))


def _build(telemetry: TrialTelemetry):
    def build(results: dict[str, list[_Done]], seconds: float) -> Measurement:
        measurement = Measurement(case="ssl_proxy", stack="kernel", parameters={})
        measurement.add("rps", [r.requests_per_second for r in results["proxy"]], "req/s")
        telemetry.attach(measurement, results)
        add_costs(measurement, [PROXY], {"proxy": [r.total_requests for r in results["proxy"]]},
                  measurement.trial_telemetry or {})
        return measurement
    return build


class _Candidate:
    """A trial on the side ``side()`` holds: rates scattered by 6 % per trial (a shared
    machine), CPU per request 50 µs on side a and ``extra`` more on side b (+-0.3 %)."""

    def __init__(self, side: Callable[[], str], extra: float, seed: int):
        self.side, self.extra = side, extra
        self.rng = np.random.default_rng(seed)

    def trial(self, trial: Trial) -> _Done:
        rps = 10000.0 * float(np.exp(self.rng.normal(0, 0.06)))
        requests = int(rps * trial.seconds)
        per = 50e-6 * (1 + self.extra if self.side() == "b" else 1.0)
        return _Done(requests, rps, requests * per * float(np.exp(self.rng.normal(0, 0.003))))


def _reading_of(nice: float = 0.0):
    return lambda label, result: {"dut": _reading(result.cpu_s, nice=nice)}


def test_a_candidate_costing_8_percent_more_per_request_fails_on_cost_naming_it(tmp_path,
                                                                              monkeypatch):
    monkeypatch.setattr("libraries.ab.rounds.secrets.randbits", lambda bits: 61)  # the coin
    session, _, _ = _session(tmp_path, "a: {name: x}\nb: {name: y, nginx: {proxy: {http: "
                             "['split_clients $x $y {50% a; * b;}']}}}\n")
    session.settings = declared_ab_settings(look=10, max_rounds=30)
    candidate = _Candidate(lambda: session.side, 0.08, seed=4)
    telemetry = _Told(_reading_of(nice=57.0))
    judged, message_of = [], session.message
    session.message = lambda outcome, costs: judged.append((outcome, costs)) or message_of(
        outcome, costs)
    measurement = session.measure("ssl_proxy", "kernel", {}, {"proxy": candidate.trial},
                                  TrialPlan(duration=2, trials=3, warmup=0),
                                  _build(telemetry), {"rps": "higher_is_better"}, telemetry,
                                  costs={"cost": "lower_is_better"})
    block = measurement.ab
    assert block["metrics"]["cost"]["verdict"] == "regression"
    assert block["metrics"]["cost"]["change_pct"] == pytest.approx(8.0, abs=0.3)
    assert block["metrics"]["rps"]["verdict"] == "inconclusive"
    assert block["verdict"] == "regression" and block["rounds"]["run"] == 30
    # each judged at half the looks' level: throughput and cost together at ALPHA
    assert block["metrics"]["cost"]["alpha"] == block["metrics"]["rps"]["alpha"] == 0.025
    assert block["metrics"]["cost"]["level"] == 1 - metric_alpha(session.settings, 2)
    message = measurement.notes[-1]
    assert message.startswith("A/B rps: inconclusive (")
    assert re.search(r"; y costs [78]\.\d % more CPU per request than x \(cost \[\+[78]\.\d, "
                     r"\+[89]\.\d\]\); ", message), message
    # one side after the other, the sides met different load: what to run instead
    assert message.endswith("; other processes took 57 % of dut's cores during the trials (a "
                            "duet, hoststack-perf duet, runs both sides at once: they share "
                            "such load) after 30 rounds (x: nginx 1.22.1; y: nginx 1.26.3)")
    session.duet = SimpleNamespace(side="a")  # the same rounds as one side of a duet
    assert message_of(*judged[-1]).endswith(
        "; other processes took 57 % of dut's cores during the trials after 30 rounds "
        "(x: nginx 1.22.1; y: nginx 1.26.3)")
    session.duet = None
    assert block["sides"]["b"]["foreign_load"]["share_pct"] == 57.0
    assert measurement.metrics["ab_cost_ratio"].summary.unit == "ratio"
    assert measurement.cost["metric"] == "cost" and "foreign_load" not in measurement.cost
    # each side's cost per trial is its own trial's: 50 µs, 54 µs, whatever its rate was
    costs = {side: measurement.sides[side].metrics["cost"].summary.values for side in "ab"}
    assert costs["a"] == pytest.approx((50.0,) * 30, rel=0.02)
    assert costs["b"] == pytest.approx((54.0,) * 30, rel=0.02)
    record = build_record(measurement, [], test_id="t", suite="s", name="n", tags=[],
                          topology="3node", versions={}, started=_now(), seconds=1.0, host="h")
    record["run_id"] = "r1"
    validate_record(record)
    assert record["verdict"] == "fail"


def test_a_cost_a_side_could_not_give_is_not_judged_and_the_rates_decide(tmp_path,
                                                                         monkeypatch):
    monkeypatch.setattr("libraries.ab.rounds.secrets.randbits", lambda bits: 62)
    session, _, _ = _session(tmp_path, "a: {name: x}\nb: {name: y, nginx: {proxy: {http: "
                             "['access_log off;']}}}\n")
    session.settings = declared_ab_settings(look=10, max_rounds=10)
    candidate = _Candidate(lambda: session.side, 0.0, seed=5)
    unread = _Told(lambda label, result: {"dut": {"unavailable": "/proc not readable: gone"}}
                   if label.startswith("b") else {"dut": _reading(result.cpu_s)})
    measurement = session.measure("ssl_proxy", "kernel", {}, {"proxy": candidate.trial},
                                  TrialPlan(duration=2, trials=3, warmup=0), _build(unread),
                                  {"rps": "higher_is_better"}, unread,
                                  costs={"cost": "lower_is_better"})
    block = measurement.ab
    assert set(block["metrics"]) == {"rps"}
    assert block["unjudged"]["cost"].startswith("side b: cost unavailable: trial 1 of proxy: "
                                                "dut: /proc not readable: gone")
    assert "cost: not judged (side b: cost unavailable" in measurement.notes[-1]
    assert block["metrics"]["rps"]["alpha"] == 0.025  # planned for two, whatever was judged


def test_foreign_load_is_told_only_from_a_large_share():
    assert foreign_message({"a": {"node": "dut", "share_pct": 12.0},
                            "b": {"node": "dut", "share_pct": 19.9}}) is None
    assert foreign_message({"a": {"node": "dut", "share_pct": 12.0},
                            "b": {"node": "dut", "share_pct": 40.4}}) == \
        "other processes took 40 % of dut's cores during the trials"
    assert foreign_message({}) is None


@pytest.mark.parametrize(("unit", "phrase"), [
    ("CPU µs/request", "CPU per request"), ("CPU s/GB", "CPU per GB"),
    ("clocks/packet", "VPP clocks per packet")])
def test_a_cost_is_named_by_its_unit(unit, phrase):
    assert cost_phrase(unit) == phrase


# -- a duet pairs each trial's telemetry with that trial's own work ------------------------------


def test_a_duet_side_keeps_every_rounds_telemetry_from_the_run_that_held_it(links):
    """Each run holds each side in about half the rounds: side a's telemetry in the record
    was side a's run's alone (24 trials of one side and 36 of the other after 60 rounds).
    Now each side's trials come from whichever run held it, round by round, each reading with
    its own trial's work."""
    a, b = links
    held = {"here": "a", "there": "b"}
    here = _Candidate(lambda: held["here"], 0.08, seed=1)
    there = _Candidate(lambda: held["there"], 0.08, seed=2)
    told = {run: _Told(_reading_of()) for run in held}

    def switch(run: str) -> Callable[[str], float]:
        def to(side: str) -> float:
            held[run] = side
            return 0.0
        return to

    outcome: dict[str, Any] = {}

    def serve() -> None:
        b.start_test("T")
        outcome["served"] = serve_duet({"proxy": there.trial}, _build(told["there"]), b,
                                       switch("there"), told["there"])

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    a.start_test("T")
    judged = measure_duet({"proxy": here.trial}, TrialPlan(duration=2, trials=3, warmup=0),
                          _build(told["here"]), {"rps": "higher_is_better",
                                                 "cost": "lower_is_better"},
                          declared_ab_settings(look=10, max_rounds=20), a, switch("here"),
                          told["here"],
                          seed=3, optional=frozenset({"cost"}))
    thread.join(5)
    assert "served" in outcome
    assert judged.rounds == 20 and judged.comparisons["cost"].verdict == "regression"
    assert judged.comparisons["rps"].verdict == "inconclusive"
    for side, per in (("a", 50.0), ("b", 54.0)):
        built = judged.sides[side]
        readings = built.trial_telemetry["proxy"]
        assert len(readings) == 20  # every round's, from both runs
        assert built.metrics["cost"].summary.values == pytest.approx((per,) * 20, rel=0.02)
        assert built.metrics["foreign_share"].summary.count == 20
        seconds = [r["dut"]["processes"]["nginx-proxy worker"]["cpu_s"] for r in readings]
        requests = [round(rps * 2) for rps in built.metrics["rps"].summary.values]
        assert [s / n * 1e6 for s, n in zip(seconds, requests, strict=True)] == \
            pytest.approx([per] * 20, rel=0.02)
    measurement = Measurement(case="ssl_proxy", stack="kernel", parameters={})
    measurement.sides = judged.sides
    block = told["here"].attach_sides(measurement)
    assert {v: n["nodes"]["dut"]["trials"] for v, n in block["variants"].items()} == \
        {"a proxy": 20, "b proxy": 20}
    here_held = sum(1 for order in judged.order.split(": ", 1)[1].split(" | ")
                    if order.startswith("a here"))
    assert 0 < here_held < 20  # both runs held side a: the record's block took both


def test_a_plain_headline_gives_the_cost_and_who_else_took_the_cores():
    measurement = Measurement(case="ssl_proxy", stack="kernel", parameters={})
    measurement.add("rps", [9000.0, 9100.0, 8900.0], "requests/s")
    readings = [{"dut": _reading(0.45 + i / 100, nice=nice)}
                for i, nice in enumerate((50.0, 57.0, 61.0))]
    add_costs(measurement, [PROXY], {"proxy": [9000, 9000, 9000]}, {"proxy": readings})
    text = headline(measurement)
    assert text.endswith("; cost 51.1 CPU µs/request [50, 52.2]; other processes took 57 % "
                         "of dut's cores during the trials"), text


# -- the nightly trends the cost ratio beside the rate -------------------------------------------


def test_the_nightly_trends_the_cost_ratio_beside_the_rate_and_flags_its_step(tmp_path,
                                                                             monkeypatch):
    """Ten nights of A/B records as the session writes them: tonight's build costs 5 % more
    CPU per request from night 7 on, its rate as scattered as ever. The history keeps
    ``ab_cost_ratio`` as a ratio series beside ``ab_rps_ratio`` (and each side's cost), and
    the gate flags the cost's step, not the rate (its ratio series is direction
    lower_is_better: :func:`libraries.history.ab_series.is_ratio_metric` takes it)."""
    session, _, _ = _session(tmp_path, "a: {name: x}\nb: {name: y, nginx: {proxy: {http: "
                             "['map $uri $z {default 1;}']}}}\n")
    session.settings = declared_ab_settings(look=10, max_rounds=20)
    results = tmp_path / "results"
    seeds = iter(range(100, 110))  # each night's coin, fixed: the same nights every run
    monkeypatch.setattr("libraries.ab.rounds.secrets.randbits", lambda bits: next(seeds))
    for night in range(10):
        candidate = _Candidate(lambda: session.side, 0.05 if night >= 6 else 0.0, seed=night)
        telemetry = _Told(_reading_of())
        measurement = session.measure("ssl_proxy", "kernel", {}, {"proxy": candidate.trial},
                                      TrialPlan(duration=2, trials=3, warmup=0),
                                      _build(telemetry), {"rps": "higher_is_better"},
                                      telemetry, costs={"cost": "lower_is_better"})
        started = datetime(2026, 1, 1 + night, 2, tzinfo=UTC)
        record = build_record(measurement, [], test_id="3node/ssl_proxy/1kb", suite="s",
                              name="1kb", tags=[], topology="3node", versions={},
                              started=started, seconds=60.0, host="h")
        record["run_id"] = f"{started:%Y%m%d-%H%M%S}-{night:04x}"
        append_record(results / record["run_id"] / "records.jsonl", record)
    frame = load_records([results])
    assert {"ab_rps_ratio", "ab_cost_ratio", "cost [a: x]", "cost [b: y]"} <= \
        set(frame["metric"])
    cost = frame[frame["metric"] == "ab_cost_ratio"]
    assert set(cost["direction"]) == {"lower_is_better"} and len(cost) == 10
    found = classifications(results)  # after each night
    # the step's first night is pending, its second flags it (then it is the new level)
    assert found["ab_cost_ratio"][:8] == ["normal"] * 6 + ["pending", "regression"]
    assert "regression" not in found["ab_rps_ratio"]


def test_the_testbeds_own_niced_processes_are_not_foreign_load():
    """A suite started with ``nice`` runs its nginx niced: the core's nice column holds it.
    Its own niced seconds on the core (``niced_s``, by the core each task last ran on) are
    taken out; what is left was someone else's."""
    trial = {"dut": _reading(0.4, nice=60.0)}  # 1.2 s of the core's 2 s were niced
    trial["dut"]["processes"]["nginx-proxy worker"]["niced_s"] = {"0": 0.4, "1": 0.3}
    trial["tg"] = {"boot_id": "b1", "processes": {"wrk": {"niced_s": {"0": 0.2}}}}
    trial["lab"] = {"boot_id": "another kernel", "processes": {"x": {"niced_s": {"0": 0.5}}}}
    assert foreign_share(trial, "dut", (0,)) == pytest.approx(30.0)  # (1.2 - 0.6) / 2 s
    assert foreign_share({"dut": _reading(0.4, nice=10.0) | {"processes": {
        "p": {"niced_s": {"0": 0.9}}}}}, "dut", (0,)) == 0.0  # never below nothing


def test_a_niced_process_of_the_testbed_is_read_as_niced_on_its_core(tmp_path: Path):
    """Real reads: a spinner started with nice 5 on core 0 (taskset), tracked as the test's:
    its time is niced time on core 0, and the core's nice column, less it, is what others
    took."""
    spinner = subprocess.Popen(["taskset", "-c", "0", "nice", "-n", "5", "sh", "-c",
                                "while :; do :; done"], start_new_session=True)
    try:
        dut = TrackedNode(workdir=str(tmp_path / "dut"), name="dut",
                          processes=(Tracked(spinner.pid, "spinner"),))
        telemetry = TrialTelemetry(_bed(dut=dut))
        run_interleaved({"spin": lambda trial: (time.sleep(0.3), object())[1]},
                        TrialPlan(trials=1, duration=1, warmup=0), telemetry)
    finally:
        spinner.kill()
        spinner.wait()
    trial = telemetry.trials["spin"][0]
    row = trial["dut"]["processes"]["spinner"]
    usr = row["usr"] / 100 * trial["dut"]["elapsed_s"]  # niced user time: the nice column
    assert set(row["niced_s"]) == {"0"} and row["niced_s"]["0"] == pytest.approx(usr, abs=0.01)
    assert row["cpu_s"] > 0.02  # it ran (beside other work on a shared machine)
    nice = trial["dut"]["cores"]["0"]["nice"] / 100 * trial["dut"]["elapsed_s"]
    share = foreign_share(trial, "dut", (0,))
    assert share == pytest.approx(max(0.0, nice - row["niced_s"]["0"]) /
                                  trial["dut"]["elapsed_s"] * 100, abs=0.02)


def test_the_cost_block_says_whether_nanoseconds_or_ticks_counted():
    """Readings of the live /proc say per process how its seconds were counted
    (``cpu_s_source``); a reading from before that (or of a kernel without schedstat)
    counted ticks; a mix is counted trial by trial."""
    precise = {**_reading(0.4), "cpu_s_source": {"nginx-proxy master": "schedstat",
                                                 "nginx-proxy worker": "schedstat"}}
    half = {**precise, "cpu_s_source": {"nginx-proxy master": "schedstat",
                                        "nginx-proxy worker": "ticks"}}
    told = {}
    for name, trials in (("ns", [precise, precise]), ("ticks", [_reading(0.4)] * 2),
                         ("mixed", [precise, half, precise])):
        measurement = Measurement(case="ssl_proxy", stack="kernel", parameters={})
        add_costs(measurement, [PROXY], {"proxy": [1e4] * len(trials)},
                  {"proxy": [{"dut": t} for t in trials]})
        told[name] = measurement.cost["cpu_source"]
        assert "schedstat" in measurement.cost["counts"]
    assert told == {"ns": "schedstat", "ticks": "ticks",
                    "mixed": "schedstat in 2 of 3 trials, ticks in 1"}
