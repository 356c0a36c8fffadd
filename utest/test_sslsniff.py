"""Unit tests of the sslsniff bpftrace script, its output parser and tracer choice (the seed's
sslsniff program and bpftime: ``test_sslsniff_libbpf.py``, ``test_bpftime.py``).

The parser fixtures in ``fixtures/sslsniff/`` are real bpftrace 0.17 outputs captured on this
machine while wrk (``-t1 -c10 -d2s``) loaded nginx HTTPS (1 KiB file) on 127.0.0.1; the wrk
output of each run sits beside it (``*.wrk.txt``), the rendered script as ``*.bt`` and the
capture details (nginx PIDs, load, environment) in ``captures.json``.
"""

from __future__ import annotations

import gzip
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from libraries.cases import tracers as cases_tracers
from libraries.cases.context import PlainLog
from libraries.testbed.errors import ParseError, RenderError, ToolMissing
from libraries.testbed.node import CommandResult
from libraries.tools.sslsniff.kernel import (
    KernelTracer,
    RunningTracer,
    TracerFootprint,
    bcc_command,
    detect_kernel_tracer,
    uprobe_leftovers,
    wait_attached,
)
from libraries.tools.sslsniff.tracer import (
    DEFAULT_LIBSSL,
    MAX_PIDS,
    SslsniffParams,
    TracerError,
    check_attachment,
    exit_reason,
    parse_sslsniff_output,
)
from libraries.tools.wrk.output import parse_wrk_output
from utest.localnode import LocalNode

FIXTURES = Path(__file__).parent / "fixtures" / "sslsniff"
CAPTURES = json.loads((FIXTURES / "captures.json").read_text())


def fixture(name: str) -> str:
    plain = FIXTURES / f"{name}.txt"
    if plain.exists():
        return plain.read_text()
    with gzip.open(FIXTURES / f"{name}.txt.gz", "rt") as handle:
        return handle.read()


def wrk_requests(name: str) -> int:
    return parse_wrk_output((FIXTURES / f"{name}.wrk.txt").read_text()).total_requests


def nginx_pids(name: str) -> list[int]:
    return CAPTURES[name]["nginx_pids"]


# ---------------------------------------------------------------------------- rendering
def probe_headers(script: str) -> list[str]:
    return re.findall(r"^(u(?:ret)?probe:[^\s,]+)", script, re.MULTILINE)


def test_default_script_probes_both_functions_entry_and_return_on_debian_libssl():
    script = SslsniffParams(pids=(4321, 1234)).render()
    lib = "/usr/lib/x86_64-linux-gnu/libssl.so.3"
    assert probe_headers(script) == [
        f"uprobe:{lib}:SSL_read", f"uprobe:{lib}:SSL_write",
        f"uretprobe:{lib}:SSL_read", f"uretprobe:{lib}:SSL_write",
    ]
    # every probe is filtered to the traced PIDs (sorted, deduplicated)
    assert script.count("/(pid == 1234 || pid == 4321)") == 3
    assert "FUNC" in script and "=== sslsniff summary ===" in script
    assert script.count('printf("%-12s %d.%09d') == 2  # one event line per return probe
    assert "buf(" not in script  # data is off by default


def test_count_only_script_counts_without_event_lines():
    script = SslsniffParams(comm="nginx", per_event=False).render()
    assert len(probe_headers(script)) == 4
    assert script.count('@events[pid, comm, "READ/RECV"] = count();') == 1
    assert script.count('@events[pid, comm, "WRITE/SEND"] = count();') == 1
    assert "%d.%09d" not in script
    assert script.count('/comm == "nginx"') == 3


def test_pid_and_comm_filters_are_combined_with_and():
    params = SslsniffParams(pids=[7], comm="nginx")
    assert params.predicate == '(pid == 7) && comm == "nginx"'
    assert params.pids == (7,)
    assert '/(pid == 7) && comm == "nginx" && @ssl_buf[tid] != 0/' in params.render()


def test_custom_library_path_is_used_in_every_probe():
    script = SslsniffParams(library="/opt/openssl/lib64/libssl.so.3", pids=(1,)).render()
    assert all(h.startswith(("uprobe:/opt/openssl/lib64/libssl.so.3:",
                             "uretprobe:/opt/openssl/lib64/libssl.so.3:"))
               for h in probe_headers(script))
    assert DEFAULT_LIBSSL not in script


def test_data_mode_clamps_length_and_raises_strlen_beyond_64_bytes():
    params = SslsniffParams(pids=(1,), show_data=True, data_bytes=120)
    script = params.render()
    assert script.count("buf(uptr(@ssl_buf[tid]), $n)") == 2
    assert script.count("if ($n > 120)") == 2
    assert params.env == {"BPFTRACE_STRLEN": "120"}
    assert SslsniffParams(pids=(1,), show_data=True).env == {}


def test_all_processes_renders_no_predicate():
    script = SslsniffParams(all_processes=True).render()
    assert "pid ==" not in script and "comm ==" not in script
    assert "/@ssl_buf[tid] != 0/" in script


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "expected pids and/or comm"),
        ({"pids": (0,)}, "pids: expected process IDs >= 1"),
        ({"pids": (True,)}, "pids: expected process IDs >= 1"),
        ({"pids": ("12",)}, "pids: expected process IDs >= 1"),
        ({"pids": 12}, "pids: expected a list"),
        ({"pids": tuple(range(1, MAX_PIDS + 2))}, f"at most {MAX_PIDS}"),
        ({"comm": "a-very-long-command-name"}, "comm: expected a command name"),
        ({"comm": 'ngi"nx'}, "comm: expected a command name"),
        ({"comm": "nginx", "library": "libssl.so.3"}, "library: expected an absolute path"),
        ({"comm": "nginx", "library": "/lib/a b.so"}, "library: expected an absolute path"),
        ({"comm": "nginx", "library": "/lib/ssl.so:SSL_read"}, "library"),
        ({"comm": "nginx", "per_event": False, "show_data": True}, "count-only"),
        ({"comm": "nginx", "show_data": True, "data_bytes": 0}, "data_bytes"),
        ({"comm": "nginx", "show_data": True, "data_bytes": 201}, "data_bytes"),
        ({"comm": "nginx", "per_event": "yes"}, "per_event: expected True or False"),
        ({"comm": "nginx", "all_processes": True}, "all_processes: expected False"),
    ],
)
def test_invalid_parameters_are_refused_naming_the_field(kwargs, message):
    with pytest.raises(RenderError, match=re.escape(message)):
        SslsniffParams(**kwargs)


def test_captured_scripts_match_what_the_template_renders_today():
    """The fixtures were produced by this template; a template change must re-capture them."""
    params = {
        "count_only_wrk": SslsniffParams(pids=nginx_pids("count_only_wrk"), per_event=False),
        "per_event_wrk": SslsniffParams(pids=nginx_pids("per_event_wrk")),
        "data_curl": SslsniffParams(pids=nginx_pids("data_curl"), show_data=True,
                                    data_bytes=120),
        "unfiltered_count_only_wrk": SslsniffParams(all_processes=True, per_event=False),
    }
    for name, value in params.items():
        assert (FIXTURES / f"{name}.bt").read_text() == value.render(), name


# ---------------------------------------------------------------------------- parsing
def test_count_only_run_has_two_events_per_https_request_all_from_nginx():
    result = parse_sslsniff_output(fixture("count_only_wrk"))
    requests = wrk_requests("count_only_wrk")
    assert set(result.events_per_comm) == {"nginx"}
    assert set(result.events_per_pid) <= set(nginx_pids("count_only_wrk"))
    # one SSL_read and one SSL_write per request; up to 10 requests in flight at the end
    assert 2 * requests <= result.total_events <= 2 * (requests + 10)
    assert abs(result.events_per_function["READ/RECV"]
               - result.events_per_function["WRITE/SEND"]) <= 10
    assert result.printed_events == 0 and result.lost_events == 0
    assert any("RLIMIT_MEMLOCK" in line for line in result.diagnostics)
    check_attachment(result, nginx_pids("count_only_wrk"))


def test_per_event_run_prints_one_line_per_counted_event():
    text = fixture("per_event_wrk")
    result = parse_sslsniff_output(text)
    event_lines = [line for line in text.splitlines() if line.startswith(("READ", "WRITE"))]
    assert result.printed_events == len(event_lines) == result.total_events
    assert result.lost_events == 0
    requests = wrk_requests("per_event_wrk")
    assert 2 * requests <= result.total_events <= 2 * (requests + 10)
    check_attachment(result, nginx_pids("per_event_wrk"))


def test_lost_events_are_summed_and_the_summary_still_counts_them():
    text = fixture("per_event_lost_wrk")  # captured with BPFTRACE_PERF_RB_PAGES=1
    result = parse_sslsniff_output(text)
    lost_lines = [int(n) for n in re.findall(r"^Lost (\d+) events$", text, re.MULTILINE)]
    assert len(lost_lines) > 1
    assert result.lost_events == sum(lost_lines)
    assert result.printed_events < result.total_events
    # every counted event was printed or reported lost, except the few still in the perf
    # buffer when bpftrace stopped reading it at exit
    accounted = result.printed_events + result.lost_events
    assert 0.99 * result.total_events <= accounted <= result.total_events


def test_event_lines_alone_give_the_same_counts_as_the_summary():
    """bcc's sslsniff has no summary: its counts come from the (shared) event lines."""
    text = fixture("per_event_wrk")
    from_summary = parse_sslsniff_output(text)
    from_lines = parse_sslsniff_output(text, tracer="bcc")
    assert from_lines.tracer == "bcc"
    assert from_lines.events_per_pid == from_summary.events_per_pid
    assert from_lines.events_per_function == from_summary.events_per_function


def test_data_lines_parse_and_carry_the_http_exchange():
    text = fixture("data_curl")
    result = parse_sslsniff_output(text)
    assert result.events_per_function == {"READ/RECV": 3, "WRITE/SEND": 3}  # 3 curl requests
    assert "GET /1kb HTTP/1.1" in text and "HTTP/1.1 200 OK" in text


def test_unfiltered_tracer_counts_wrk_and_fails_the_attachment_proof():
    result = parse_sslsniff_output(fixture("unfiltered_count_only_wrk"))
    assert result.events_per_comm["wrk"] > 0
    wrk_pids = [pid for pid, comm in result.comms.items() if comm == "wrk"]
    with pytest.raises(TracerError, match=r"events came from other processes: .*wrk \(pid "
                       + str(wrk_pids[0])):
        check_attachment(result, nginx_pids("unfiltered_count_only_wrk"))


def test_idle_tracer_parses_to_zero_and_fails_the_attachment_proof():
    result = parse_sslsniff_output(fixture("idle_no_load"))
    assert result.total_events == 0 and result.events_per_pid == {}
    with pytest.raises(TracerError, match="attached nothing: 0 SSL_read/SSL_write events"):
        check_attachment(result, nginx_pids("idle_no_load"))


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("", "never started"),
        ("Segmentation fault (core dumped)\n", "never started"),
        ("Requests/sec: 1234.5\nTransfer/sec: 1MB\n", "never started"),
    ],
)
def test_garbage_raises_parse_error_quoting_the_text(text, problem):
    with pytest.raises(ParseError, match=problem) as error:
        parse_sslsniff_output(text, source="dut: sslsniff")
    assert repr(text)[:20] in str(error.value)


def test_failed_attach_output_raises_parse_error():
    text = fixture("attach_failure_missing_library")
    with pytest.raises(ParseError, match="never started") as error:
        parse_sslsniff_output(text)
    assert "does not exist" in str(error.value)


def test_output_cut_before_the_summary_raises():
    text = fixture("per_event_wrk")
    cut = text[: text.index("=== sslsniff summary ===")]
    with pytest.raises(ParseError, match="killed or cut off before printing its maps"):
        parse_sslsniff_output(cut)


def test_output_cut_inside_the_summary_raises():
    text = fixture("count_only_wrk")
    cut = text[: text.index("=== sslsniff end ===")]
    with pytest.raises(ParseError, match="not terminated"):
        parse_sslsniff_output(cut)


def test_malformed_summary_and_event_lines_raise():
    summary = fixture("count_only_wrk").replace("READ/RECV]: ", "READ/RECV]: many ")
    with pytest.raises(ParseError, match="malformed summary line"):
        parse_sslsniff_output(summary)
    other_func = fixture("count_only_wrk").replace("READ/RECV]", "OPEN/CLOSE]")
    with pytest.raises(ParseError, match="malformed summary line"):
        parse_sslsniff_output(other_func)
    events = fixture("data_curl").replace("nginx            ", "", 1)
    with pytest.raises(ParseError, match="malformed event line"):
        parse_sslsniff_output(events)


def test_lost_lines_of_bpftime_and_bcc_are_counted():
    text = fixture("per_event_wrk").replace(
        "=== sslsniff summary ===",
        "lost 194 events on CPU #2\nPossibly lost 6 samples\n=== sslsniff summary ===",
    )
    assert parse_sslsniff_output(text).lost_events == 200


# ---------------------------------------------------------------------------- tracer choice
@dataclass
class FakeNode:
    """Answers commands from ``replies`` (first matching substring); records them."""

    replies: dict[str, str]
    name: str = "dut"
    workdir: str = "/tmp/run"
    commands: list[str] = field(default_factory=list)

    def run(self, command: str, timeout: float = 60.0, sudo: bool = False,
            check: bool = True) -> CommandResult:
        self.commands.append(command)
        for key, out in self.replies.items():
            if key in command:
                return CommandResult(command, 0, out, "", 0.01)
        return CommandResult(command, 0, "", "", 0.01)


def facts(*lines: str) -> FakeNode:
    return FakeNode({"uname -r": "\n".join([*lines, "kernel=6.18.44", "uid=0"])})


def test_bpftrace_is_chosen_when_bcc_is_absent_and_the_reason_is_kept():
    tracer = detect_kernel_tracer(facts("bpftrace=/usr/bin/bpftrace",
                                        "bpftrace_version=bpftrace v0.17.0",
                                        "bpftool=/usr/sbin/bpftool"))
    assert (tracer.kind, tracer.binary, tracer.version) == (
        "bpftrace", "/usr/bin/bpftrace", "bpftrace v0.17.0")
    assert tracer.notes == ("bcc sslsniff not installed (sslsniff-bpfcc / sslsniff not in PATH)",)


def test_bcc_without_kernel_headers_falls_back_to_bpftrace_saying_why():
    tracer = detect_kernel_tracer(facts("bcc=/usr/sbin/sslsniff-bpfcc",
                                        "bpftrace=/usr/bin/bpftrace"))
    assert tracer.kind == "bpftrace"
    assert "kernel 6.18.44 has no headers" in tracer.notes[0]
    assert tracer.bpftool is None


def test_bcc_with_headers_is_preferred():
    tracer = detect_kernel_tracer(facts("bcc=/usr/sbin/sslsniff-bpfcc", "headers=build",
                                        "bpftrace=/usr/bin/bpftrace"))
    assert (tracer.kind, tracer.binary) == ("bcc", "/usr/sbin/sslsniff-bpfcc")


def test_no_tracer_raises_tool_missing_naming_both():
    with pytest.raises(ToolMissing, match=r"dut: no kernel sslsniff tracer can run: bcc "
                       r"sslsniff not installed .*; bpftrace not installed"):
        detect_kernel_tracer(facts())


def test_detection_on_this_machine_matches_lab_notes():
    tracer = detect_kernel_tracer(LocalNode(workdir="/tmp"))
    if tracer.kind == "bpftrace":
        assert tracer.version.startswith("bpftrace v")
        assert tracer.notes and "bcc" in tracer.notes[0]


def test_bcc_command_filters_on_openssl_comm_and_single_pid():
    params = SslsniffParams(pids=(42,), comm="nginx")
    assert bcc_command("/usr/sbin/sslsniff-bpfcc", params) == (
        "/usr/sbin/sslsniff-bpfcc --no-gnutls --no-nss -p 42 -c nginx")
    assert "-p" not in bcc_command("sslsniff", SslsniffParams(pids=(1, 2), comm="nginx"))


def test_leftovers_report_attached_uprobes_from_a_real_bpftool_listing():
    listing = (FIXTURES / "bpftool_perf_attached.json").read_text()
    pid = CAPTURES["bpftool_perf_attached"]["tracer_pid"]
    node = FakeNode({"perf show": listing, "link show": "[]", "prog show": "[]",
                     "uprobe_events": ""})
    leftovers = uprobe_leftovers(node, settle=0)
    assert len(leftovers) == 4
    assert all(f"bpftool perf: pid {pid} " in line and DEFAULT_LIBSSL in line
               for line in leftovers)
    assert any("mount -t tracefs" in command for command in node.commands)
    clean = FakeNode({"perf show": "[]", "link show": "[]", "prog show": "[]"})
    assert uprobe_leftovers(clean, settle=0) == []


def test_leftovers_include_loaded_sslsniff_programs_and_tracefs_events():
    progs = json.dumps([{"id": 7, "type": "kprobe", "name": "SSL_write"},
                        {"id": 8, "type": "sk_skb", "name": "stream_verdict"}])
    node = FakeNode({"perf show": "[]", "link show": "[]", "prog show": progs,
                     "uprobe_events": f"p:uprobes/p_ssl_0 {DEFAULT_LIBSSL}:0x35a40\n"})
    assert uprobe_leftovers(node, settle=0) == [
        "bpftool prog 7: kprobe SSL_write still loaded",
        f"tracefs uprobe_events: p:uprobes/p_ssl_0 {DEFAULT_LIBSSL}:0x35a40",
    ]


def test_with_a_footprint_only_the_tracers_own_probes_are_leftovers():
    """The machine is shared: another run's sslsniff (bcc/libbpf-tools names its programs
    probe_SSL_*) and its tracefs events are not this tracer's leftovers."""
    listing = json.loads((FIXTURES / "bpftool_perf_attached.json").read_text())
    ours = frozenset({listing[0]["prog_id"]})
    progs = json.dumps([{"id": listing[0]["prog_id"], "type": "kprobe", "name": "SSL_write"},
                        {"id": 1084, "type": "kprobe", "name": "probe_SSL_write_exit"}])
    other_event = f"p:uprobes/p_other {DEFAULT_LIBSSL}:0x35a40"
    node = FakeNode({"perf show": json.dumps(listing), "link show": "[]", "prog show": progs,
                     "uprobe_events": other_event + "\n"})
    footprint = TracerFootprint(programs=ours, events_before=frozenset({other_event}))
    first = listing[0]
    assert uprobe_leftovers(node, settle=0, footprint=footprint) == [
        f"bpftool perf: pid {first['pid']} fd {first['fd']} prog {first['prog_id']} "
        f"{first['fd_type']} {DEFAULT_LIBSSL}+{first['offset']}",
        f"bpftool prog {first['prog_id']}: kprobe SSL_write still loaded",
    ]
    everything = uprobe_leftovers(node, settle=0)  # without a footprint: everything counts
    assert "bpftool prog 1084: kprobe probe_SSL_write_exit still loaded" in everything
    assert f"tracefs uprobe_events: {other_event}" in everything


def _raise(error: Exception):
    def stop(node: object, running: object) -> None:
        raise error
    return stop


def test_a_tracer_that_hung_on_sigterm_lets_its_trial_run_again_once(monkeypatch):
    """bpftrace (count-only) was seen, rarely and on a busy machine, not to stop on SIGTERM
    within its 15 s grace: killed before printing its maps. Such a trial runs again once; a
    second hang, or any other unreadable output, fails the test."""
    hung = ParseError("dut: output of 'bpftrace'", "no '=== sslsniff summary ===' block: the "
                      "tracer was killed or cut off before printing its maps", "Attaching...")
    monkeypatch.setattr(cases_tracers, "stop_sslsniff", _raise(hung))
    dut = type("Dut", (), {"where": "dut (root@198.18.0.2)"})()
    log = PlainLog()
    assert cases_tracers.stopped(log, dut, None, again=True) is None
    with pytest.raises(ParseError, match="killed or cut off"):
        cases_tracers.stopped(log, dut, None, again=False)
    other = ParseError("dut: output of 'bpftrace'", "a line that is no event", "xyz")
    monkeypatch.setattr(cases_tracers, "stop_sslsniff", _raise(other))
    with pytest.raises(ParseError, match="no event"):
        cases_tracers.stopped(log, dut, None, again=True)


class _ExitingTracerNode:
    """A node on which the tracer writes its reason as it exits: the first read of its log
    sees only bpftrace's start-up notice, the process is gone at the next look."""

    name = "dut"

    def __init__(self, final_log: str) -> None:
        self.logs = [final_log.splitlines()[0] + "\n", final_log]

    def run(self, command: str, timeout: float, check: bool = True, sudo: bool = False):
        if command.startswith("cat "):
            text = self.logs.pop(0) if len(self.logs) > 1 else self.logs[0]
            return CommandResult(command, 0, text, "", 0.0)
        if command.startswith("ps -o stat="):
            return CommandResult(command, 1, "", "", 0.0)  # gone
        raise AssertionError(f"unexpected command {command!r}")


def test_a_tracer_that_exits_is_quoted_from_its_whole_output_without_start_up_notices():
    node = _ExitingTracerNode(fixture("attach_failure_missing_library"))
    process = type("P", (), {"pid": 4242, "log_path": "/tmp/t.log", "sudo": True})()
    tracer = KernelTracer("bpftrace", "/usr/bin/bpftrace", "bpftrace v0.17.0", None, ())
    running = RunningTracer(process, tracer, "bpftrace ...", "/usr/lib/libssl-none.so.3",
                            SslsniffParams(pids=(4243,)))
    with pytest.raises(TracerError) as caught:
        wait_attached(node, running, timeout=5)
    message = str(caught.value)
    assert "exited before attaching" in message
    assert "does not exist or is not executable" in message
    assert "RLIMIT_MEMLOCK" not in message
    assert "1 start-up notice line(s) left out" in message


def test_an_output_of_start_up_notices_only_says_so():
    notice = fixture("attach_failure_missing_library").splitlines()[0]
    assert exit_reason(notice).startswith("(nothing but its start-up notice:")
    assert exit_reason("") == "(empty)"
    assert exit_reason("one\ntwo") == "one\n    two"
