"""CPU profiles: folded stacks and their comparison (pure), the ``PROFILE`` settings, the perf
command line, the report's section; and, with the real perf and inferno, a profile of real
busy processes through the same code a suite uses, down to the differential flame graph."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from libraries.cases.context import PlainLog
from libraries.cases.profile_settings import ProfileSettings, profile_settings_from_variables
from libraries.cases.profiling import (
    PERIOD_NS,
    Target,
    _differential,
    cpu_per_work,
    profile_targets,
)
from libraries.report.profile_section import profile_section
from libraries.results.measurement import Measurement
from libraries.results.profile import (
    Folded,
    ProfileError,
    function_changes,
    grown,
    parse_folded,
    unresolved_objects,
)
from libraries.testbed.errors import HostStackError, ToolMissing
from libraries.tools.perf import finish_recording, inferno, record_command, start_recording
from utest.localnode import LocalNode

FOLDED_A = """\
nginx;ngx_worker;SSL_write;aesni_gcm_encrypt 600
nginx;ngx_worker;SSL_write;tls13_record 100
nginx;ngx_worker;[nginx] 200
nginx;ngx_worker;__x64_sys_sendto_[k] 100
"""
FOLDED_B = """\
nginx;ngx_worker;SSL_write;aesni_gcm_encrypt 500
nginx;ngx_worker;SSL_write;tls13_record 300
nginx;ngx_worker;[nginx] 200
nginx;ngx_worker;__x64_sys_sendto_[k] 200
"""


def test_folded_stacks_are_summed_per_stack_and_per_function_on_cpu() -> None:
    folded = parse_folded(FOLDED_A + "nginx;ngx_worker;SSL_write;tls13_record 50\n", "a")
    assert folded.total == 1050
    assert folded.stacks["nginx;ngx_worker;SSL_write;tls13_record"] == 150
    assert folded.self_weights()["aesni_gcm_encrypt"] == 600
    assert parse_folded("nginx;a 3\nvpp_main;b 2\nnginx;c 1\n", "p").process_weights() == \
        {"nginx": 4, "vpp_main": 2}
    assert parse_folded(folded.text(), "again") == folded


@pytest.mark.parametrize("text, expected", [
    ("nginx;main 10\nthis is not a profile\n", "line 2 is not '<stack> <weight>': 'this is"),
    ("nginx;main -3\n", "line 1"),
    ("nginx;main 0\n", "line 1"),
    ("\n\n", "no stacks"),
])
def test_text_that_is_not_folded_stacks_is_refused_quoting_it(text: str, expected: str) -> None:
    with pytest.raises(ProfileError, match="^perf on dut: ") as error:
        parse_folded(text, "perf on dut")
    assert expected in str(error.value)


def test_objects_without_symbols_are_named_with_their_share() -> None:
    folded = parse_folded(FOLDED_A + "nginx;[libtiny.so] 5\n", "a")
    # nginx's own frames had no symbols for 200 of 1005: named; 0.5 % is below the bar
    assert unresolved_objects(folded) == {"nginx": 0.199}


def test_changes_are_shares_of_each_side_largest_first() -> None:
    a, b = parse_folded(FOLDED_A, "a"), parse_folded(FOLDED_B, "b")
    changes = function_changes(a, b, top=3)
    # a: 600/1000 = 60 % -> b: 500/1200 = 41.7 %; 10 % -> 25 %; 10 % -> 16.7 %
    assert [c.function for c in changes] == ["aesni_gcm_encrypt", "tls13_record",
                                             "__x64_sys_sendto_[k]"]
    assert changes[0].points == pytest.approx(500 / 12 - 60)
    top = changes[1]
    assert (top.a_pct, top.b_pct, top.points) == (10.0, 25.0, 15.0)
    assert grown(changes) is top
    assert top.as_record()["points"] == 15.0
    assert top.text() == "tls13_record 10.0 % -> 25.0 % (+15.0 points)"
    assert grown(function_changes(b, b)) is None  # nothing grew


def test_inclusive_changes_count_a_function_with_what_it_called() -> None:
    a, b = parse_folded(FOLDED_A, "a"), parse_folded(FOLDED_B, "b")
    # SSL_write and below: a 700 of 1000, b 800 of 1200; nginx and ngx_worker: all of both
    assert a.total_weights()["SSL_write"] == 700
    assert parse_folded("x;f;f;g 5\n", "r").total_weights()["f"] == 5  # once per stack
    changes = {c.function: c for c in function_changes(a, b, top=20, inclusive=True)}
    assert changes["SSL_write"].a_pct == 70.0
    assert changes["SSL_write"].b_pct == pytest.approx(200 / 3)
    assert changes["nginx"].points == 0.0 and changes["ngx_worker"].points == 0.0
    assert grown(list(changes.values())).function == "tls13_record"


@pytest.mark.parametrize("given, mode, ab_on, plain_on", [
    ("auto", "auto", True, False), ("on", "on", True, True), ("yes", "on", True, True),
    ("off", "off", False, False), ("OFF", "off", False, False),
])
def test_profile_setting_decides_which_runs_profile(given: str, mode: str, ab_on: bool,
                                                    plain_on: bool) -> None:
    settings = profile_settings_from_variables({"PROFILE": given}.get)
    assert settings == ProfileSettings(mode, 5)
    assert (settings.wanted(ab=True), settings.wanted(ab=False)) == (ab_on, plain_on)


@pytest.mark.parametrize("values, expected", [
    ({"PROFILE": "sometimes"}, "-v PROFILE:sometimes: expected auto"),
    ({"PROFILE_SECONDS": "0"}, "-v PROFILE_SECONDS:0: expected seconds >= 1"),
    ({"PROFILE_SECONDS": "2.5"}, "-v PROFILE_SECONDS:2.5"),
])
def test_bad_profile_settings_name_the_variable(values: dict[str, str], expected: str) -> None:
    with pytest.raises(ValueError, match=expected.replace(".", r"\.")):
        profile_settings_from_variables(values.get)


def test_perf_samples_the_software_clock_of_the_given_processes_after_the_delay() -> None:
    command = record_command("/usr/bin/perf", [42, 7, 42], 5, "/tmp/w d/p.data", 1.0)
    assert command.script == ("sleep 1; exec /usr/bin/perf record -q -e cpu-clock -F 499 "
                              "--call-graph dwarf,16384 -p 7,42 -o '/tmp/w d/p.data' -- sleep 5")
    assert command.timeout == 1 + 5 + 15


def test_the_report_shows_each_graph_the_differential_and_the_changes() -> None:
    a, b = parse_folded(FOLDED_A, "a"), parse_folded(FOLDED_B, "b")
    record = {"name": "1kb-10c-kernel-ssl-proxy", "evidence": {"profile": {
        "note": "software clock", "profiles": {
            side: {"variant": "proxy", "node": "dut", "seconds": 5, "cpu_ms": 900.0,
                   "processes_ms": {"nginx": 900.0}, "unresolved": {"nginx": 0.2},
                   "svg": f"profiles/t/{side}.svg"} for side in "ab"},
        "diff": {"from": "a", "to": "b", "svg": "profiles/t/diff-a-b.svg",
                 "changes": [c.as_record() for c in function_changes(a, b)],
                 "inclusive": [c.as_record() for c in function_changes(a, b, inclusive=True)]}
    }}}
    page = profile_section(record)
    for svg in ("profiles/t/a.svg", "profiles/t/b.svg", "profiles/t/diff-a-b.svg"):
        assert f'<object class="flame" data="{svg}"' in page
    assert "<td>tls13_record</td><td>0.0 ms, 10.0 %</td><td>0.0 ms, 25.0 %</td><td>+15.00" \
        in page
    with_callees = page.index("<th>function (with what it called)</th>")
    assert with_callees < page.index("<td>SSL_write</td><td>0.0 ms, 70.0 %</td>") < \
        page.index("<th>function (on CPU itself)</th>")
    assert "20% of the samples were in nginx without a symbol (a stripped binary" in page
    assert profile_section({"name": "t", "evidence": {}}) == ""
    record["evidence"]["profile"] = {"note": "", "unavailable": {"a": "perf not found on dut"}}
    assert "No profile of a: perf not found on dut" in profile_section(record)


def _ab_measurement(verdict: str = "regression") -> Measurement:
    measurement = Measurement(case="t", stack="kernel", parameters={})
    measurement.ab = {"verdict": verdict}
    measurement.notes.append("A/B b 9.0 % slower than a on rps [-11.0, -7.1]")
    return measurement


def _scaled(text: str, samples: int) -> Folded:
    """The folded text's weights as shares of ``samples`` samples of perf's period."""
    folded = parse_folded(text, "t")
    return Folded({stack: int(weight * samples / folded.total * PERIOD_NS)
                   for stack, weight in folded.stacks.items()})


def test_the_regressions_message_ends_with_the_hint_and_the_record_keeps_it(tmp_path):
    a, b = _scaled(FOLDED_A, 5000), _scaled(FOLDED_B, 5000)
    profiler = SimpleNamespace(node=SimpleNamespace(name="dut"), folder=tmp_path / "p",
                               log=PlainLog())
    block: dict = {}
    measurement = _ab_measurement()
    _differential(block, measurement, profiler, tmp_path, {"a": a, "b": b},
                  {"a": tmp_path / "none-a", "b": tmp_path / "none-b"}, None)
    hint = block["diff"]["hint"]
    assert (hint["function"], hint["own"], hint["chain"]) == (
        "tls13_record", True, ["SSL_write", "ngx_worker", "nginx"])
    assert measurement.notes[-1] == (
        "A/B b 9.0 % slower than a on rps [-11.0, -7.1]; profile: " + hint["text"])
    assert "in tls13_record (on CPU itself) 10.0 % -> 25.0 % (+15.0 points [" in hint["text"]
    same = _ab_measurement()  # an A/A pair: nothing beyond noise, and it says so
    _differential(block, same, profiler, tmp_path, {"a": a, "b": _scaled(FOLDED_A, 5000)},
                  {"a": tmp_path / "none-a", "b": tmp_path / "none-b"}, None)
    assert same.notes[-1].endswith("; profile: no function changed beyond noise (5,000 and "
                                   "5,000 samples, 7 frames)")
    assert block["diff"]["hint"]["kind"] == "noise" and "svg" not in block["diff"]
    page = profile_section({"name": "t", "evidence": {"profile": block | {"note": ""}}})
    assert '<p class="hint"><b>a -> b:</b> no function changed beyond noise' in page


def _trials(busy: dict[str, list[float]]) -> dict[str, list[dict]]:
    """Telemetry readings per A/B variant: the DUT's cores busy as given (one core)."""
    return {f"{side} proxy": [{"dut": {"cores": {"all": {}, "0": {
        "usr": 100 * cores, "sys": 0.0, "irq": 0.0, "soft": 0.0}}}} for cores in values]
            for side, values in busy.items()}


def test_cpu_per_request_comes_from_the_rounds_telemetry_and_the_rate_ratios():
    ratios = [0.90, 0.91, 0.89, 0.90, 0.92, 0.88, 0.90, 0.91, 0.89, 0.90]
    measurement = _ab_measurement()
    measurement.ab["metrics"] = {"rps": {"direction": "higher_is_better", "ratios": ratios}}
    # fewer requests at the same work each: b's busy cores fell with its rate
    jitter = [1.01, 0.99, 1.0, 1.02, 0.98, 1.0, 1.01, 0.99, 1.0, 1.0]
    same_work = _trials({"a": [0.8] * 10, "b": [0.8 * r * j for r, j in zip(ratios, jitter,
                                                                          strict=True)]})
    cost = cpu_per_work(measurement, same_work, "proxy", "dut")
    assert cost is not None and cost.what == "busy cores per request"
    assert cost.unchanged and cost.change_pct == pytest.approx(0.0, abs=0.6)
    # the same busy cores for 10 % fewer requests: each request costs about 11 % more CPU
    dearer = cpu_per_work(measurement, _trials({"a": [0.8] * 10, "b": [0.8] * 10}), "proxy",
                          "dut")
    assert dearer is not None and not dearer.unchanged
    assert dearer.change_pct == pytest.approx(11.1, abs=0.3) and dearer.low_pct > 0
    unread = same_work | {"b proxy": [{"dut": {"unavailable": "not sampled"}}] * 10}
    assert cpu_per_work(measurement, unread, "proxy", "dut") is None
    assert cpu_per_work(measurement, _trials({"a": [0.8] * 9, "b": [0.8] * 9}), "proxy",
                        "dut") is None  # a round without its reading
    a, b = _scaled(FOLDED_A, 5000), _scaled(FOLDED_B, 5000)
    profiler = SimpleNamespace(node=SimpleNamespace(name="dut"), folder=Path("/nonexistent"),
                               log=PlainLog())
    block: dict = {}
    _differential(block, measurement, profiler, Path("/nonexistent"), {"a": a, "b": b},
                  {"a": Path("/none-a"), "b": Path("/none-b")}, cost)
    assert block["diff"]["hint"]["kind"] == "not_cpu"
    assert measurement.notes[-1].endswith(
        f"; profile: the DUT's busy cores per request did not change ({cost.text()}): "
        "the CPU profile does not explain this change (the same CPU per unit of work: look "
        "at waiting, latency, the network or the load generator)")


def _have_profiler() -> str | None:
    if shutil.which("perf") is None:
        return "perf is not installed (setup.sh installs linux-perf)"
    if os.geteuid() != 0:
        return "perf record of other processes needs root here"
    try:
        inferno("inferno-flamegraph")
    except ToolMissing as error:
        return str(error)
    return None


@pytest.mark.integration
@pytest.mark.skipif(_have_profiler() is not None, reason=str(_have_profiler()))
def test_a_real_profile_of_each_side_and_their_differential(tmp_path: Path) -> None:
    """Two "sides" that copy the same bytes from /dev/zero, b in 512-byte reads instead of
    64 KiB ones (as TLS records cut small): b's profile spends a larger share in the system
    call path, the differential and the table say so, and nothing is left running."""
    node = LocalNode(workdir=str(tmp_path))
    testbed = SimpleNamespace(
        topology=SimpleNamespace(node_with_role=lambda role: "dut",
                                 nodes={"dut": SimpleNamespace(tools={})}),
        nodes={"dut": node})
    running: list[object] = []

    def side(block: str) -> None:
        for process in running:
            node.stop(process)
        running[:] = [node.start(f"dd if=/dev/zero of=/dev/null bs={block}", "dd")]

    targets = [Target(label, "copy", lambda trial: time.sleep(trial.seconds),
                      prepare=lambda block=block: side(block))
               for label, block in (("a", "64k"), ("b", "512"))]
    measurement = Measurement(case="copy", stack="kernel", parameters={})
    measurement.ab = {"verdict": "regression"}
    measurement.notes.append("A/B bs: regression -9.0 %")
    try:
        profile_targets(measurement, testbed, targets, ProfileSettings("on", 2), tmp_path,
                        "copy test")
    finally:
        for process in running:
            node.stop(process)
    block = measurement.evidence["profile"]
    assert "unavailable" not in block, block
    assert set(block["profiles"]) == {"a", "b"}
    for label, entry in block["profiles"].items():
        assert entry["processes_ms"]["dd"] > 300, entry  # dd was on CPU for 2 s
        assert (tmp_path / entry["svg"]).read_text().lstrip().startswith("<?xml")
        assert (tmp_path / entry["folded"]).is_file()
        assert entry["folded"] == f"profiles/copy-test/{label}.folded"
    diff = block["diff"]
    assert (tmp_path / diff["svg"]).read_text().count("<g") > 10
    changes = diff["changes"]
    # the kernel's copy of the zeros falls (measured: 69 % -> 8 % of dd's CPU), the system
    # call path grows (do_syscall_64 9 % -> 28 %)
    assert changes[0]["function"] == "read_zero_[k]" and changes[0]["points"] < -20, changes
    grown_in_b = [c["function"] for c in changes if c["points"] > 2]
    assert "do_syscall_64_[k]" in grown_in_b, changes
    assert json.loads(json.dumps(changes)) == changes
    hint = diff["hint"]
    assert hint["kind"] == "frame" and hint["low"] > 0, hint  # far beyond noise in 2 s
    message = measurement.notes[-1]
    assert message.startswith(
        "A/B bs: regression -9.0 %; profile: side b spends a larger share of the DUT's CPU in "
        f"{hint['function']} "), message
    assert " called from " in message, message
    assert not list(tmp_path.glob("perf-*.data*"))
    assert not node.processes


def _fake_testbed(node: LocalNode, perf: str) -> SimpleNamespace:
    return SimpleNamespace(
        topology=SimpleNamespace(node_with_role=lambda role: "dut",
                                 nodes={"dut": SimpleNamespace(tools={"perf": perf})}),
        nodes={"dut": node})


def _profile_with(tmp_path: Path, perf: str) -> dict[str, object]:
    node = LocalNode(workdir=str(tmp_path))
    server = node.start("sleep 30", "server")
    measurement = Measurement(case="t", stack="kernel", parameters={})
    try:
        profile_targets(measurement, _fake_testbed(node, perf),
                        [Target("proxy", "proxy", lambda trial: time.sleep(0.1))],
                        ProfileSettings("on", 1), tmp_path, "t")
    finally:
        node.stop(server)
    assert not [p for p in node.processes if p.name == "perf-record"]
    return measurement.evidence["profile"]


def test_a_missing_perf_is_no_profile_with_the_reason(tmp_path: Path) -> None:
    block = _profile_with(tmp_path, str(tmp_path / "no-such-perf"))
    assert block["profiles"] == {}
    assert block["unavailable"]["proxy"] == (
        f"perf not found on local (localhost) ('{tmp_path}/no-such-perf': Debian's linux-perf,"
        " which setup.sh installs)")


def test_a_perf_that_records_nothing_is_no_profile_quoting_perf(tmp_path: Path) -> None:
    perf = tmp_path / "perf"
    perf.write_text("#!/bin/sh\n[ \"$1\" = record ] && { echo 'perf_event_paranoid setting "
                    "is 4: access to performance monitoring is restricted' >&2; exit 255; }\n"
                    "echo 'failed to open perf.data: No such file' >&2; exit 254\n")
    perf.chmod(0o755)
    block = _profile_with(tmp_path, str(perf))
    why = block["unavailable"]["proxy"]
    assert "perf script -i" in why and "exited 254" in why, why
    assert "perf record said: perf_event_paranoid setting is 4" in why, why


def test_a_perf_that_does_not_stop_is_killed_and_named(tmp_path: Path) -> None:
    node = LocalNode(workdir=str(tmp_path))
    perf = tmp_path / "perf"
    perf.write_text("#!/bin/sh\nexec sleep 60\n")
    perf.chmod(0o755)
    recording = start_recording(node, str(perf), [os.getpid()], 0.2, delay=0.1, grace=0.5)
    with pytest.raises(HostStackError, match=r"perf record of pids \d+ still ran "
                                             r"0\.5 s after its 0\.2 s: killed, no profile"):
        finish_recording(recording)
    assert recording.running.proc.poll() is not None
