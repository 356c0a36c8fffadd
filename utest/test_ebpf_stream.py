"""Unit tests of libraries.tools.ebpf_stream on outputs captured from real runs on this machine.

Fixtures (utest/fixtures/ebpf_stream/): ``nginx -V`` of an nginx 1.24.0 built with
mrpre/nginx-stream-ebpf-module; ``nginx -t`` of the detection config (``stream { ebpf_enable
on; }``) by that build, by Debian's nginx (with and without its stream module loaded) and for
a missing binary; the eBPF nginx's error logs (engaged; an
``ebpf_enable on`` server after an ``off`` one; workers without ``user root``); and
``bpftool -j prog show name stream_verdict`` with one and with two programs loaded.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import pytest

from libraries.testbed.errors import HostStackError, ParseError, RenderError
from libraries.testbed.node import CommandResult
from libraries.tools.ebpf_stream.bpf_stats import (
    HOLDER_SCRIPT,
    StatsHold,
    bpf_stats_enabled,
)
from libraries.tools.ebpf_stream.evidence import (
    VerdictProgram,
    VerdictStats,
    parse_bpftool_prog_json,
    parse_error_log,
)
from libraries.tools.ebpf_stream.module import (
    EBPF_MAP_SIZE,
    EngagementEvidence,
    check_ebpf_config,
    collect_engagement,
    ebpf_module_in_test_output,
    has_ebpf_module,
    mark_engagement,
    read_verdict_stats,
)
from libraries.tools.nginx.config import NginxInstance
from libraries.tools.nginx.stream import StreamProxyParams, StreamServer

FIXTURES = Path(__file__).parent / "fixtures" / "ebpf_stream"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


@dataclass
class FakeNode:
    """Answers commands from (regex, handler) pairs; records every command and sudo flag."""

    handlers: list[tuple[str, Callable[[str], tuple[int, str]]]]
    name: str = "dut"
    workdir: str = "/tmp/fake"
    history: list[tuple[str, bool]] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)
    python3: str | None = None
    holder_output: str = "bpf stats enabled, fd 5\n"
    holder_runs: bool = True
    started: list[tuple[str, str, bool]] = field(default_factory=list)
    stopped: list[str] = field(default_factory=list)

    def which(self, binary: str) -> str | None:
        return self.python3 if binary == "python3" else None

    def start(self, command: str, name: str, sudo: bool = False) -> SimpleNamespace:
        self.started.append((command, name, sudo))
        return SimpleNamespace(name=name, pid=4242)

    def read_log(self, process: SimpleNamespace) -> str:
        return self.holder_output

    def is_running(self, process: SimpleNamespace) -> bool:
        return self.holder_runs and process.name not in self.stopped

    def stop(self, process: SimpleNamespace) -> str:
        self.stopped.append(process.name)
        return self.holder_output

    def put(self, text: str, path: str, mode: int = 0o644, sudo: bool = False) -> None:
        self.files[path] = text

    def run(self, command: str, timeout: float = 60.0, sudo: bool = False,
            check: bool = True) -> CommandResult:
        self.history.append((command, sudo))
        for pattern, handler in self.handlers:
            if re.search(pattern, command):
                code, out = handler(command)
                if check and code != 0:
                    raise HostStackError(f"{command!r} exited {code}")
                return CommandResult(command, code, out, "", 0.01)
        raise AssertionError(f"unexpected command {command!r}")


def answer(code: int, out: str) -> Callable[[str], tuple[int, str]]:
    return lambda _command: (code, out)


# ---------------------------------------------------------------------------- detection
def probe_node(code: int, out: str, version_output: str = "") -> FakeNode:
    return FakeNode([(r"^mkdir", answer(0, "")), (r" -t -c ", answer(code, out)),
                     (r" -V", answer(0, version_output))])


def test_ebpf_build_is_detected_by_nginx_t_of_ebpf_enable():
    node = probe_node(0, fixture("nginx_t_probe_ebpf.txt"))
    found, reason = has_ebpf_module(node, "/opt/nginx-ebpf/sbin/nginx")
    assert found, reason
    assert reason == ("nginx at /opt/nginx-ebpf/sbin/nginx has the stream eBPF module "
                      "(`nginx -t` accepts `stream { ebpf_enable on; }`)")
    test = node.history[-1]
    assert test == ("/opt/nginx-ebpf/sbin/nginx -t -c /tmp/fake/nginx-ebpf-probe/nginx.conf "
                    "-p /tmp/fake/nginx-ebpf-probe/ 2>&1", True)  # as root, as the proxy runs
    assert node.files["/tmp/fake/nginx-ebpf-probe/nginx.conf"] == (
        "error_log /tmp/fake/nginx-ebpf-probe/error.log notice;\n"
        "pid /tmp/fake/nginx-ebpf-probe/nginx.pid;\nevents {}\nstream { ebpf_enable on; }\n")


def test_module_built_with_a_relative_path_is_detected():
    """The issue's build: --add-module=../module (the module's own config wants a relative
    path), so nginx -V does not name the module; nginx -t still accepts ebpf_enable."""
    version = fixture("nginx_V_ebpf.txt").replace("../nginx-stream-ebpf-module", "../module")
    node = probe_node(0, fixture("nginx_t_probe_ebpf.txt"), version)
    assert has_ebpf_module(node, "/usr/local/nginx/sbin/nginx")[0]


def test_debian_nginx_has_no_module_and_the_reason_quotes_nginx():
    node = probe_node(1, fixture("nginx_t_probe_debian.txt"))
    found, reason = has_ebpf_module(node, "/usr/sbin/nginx")
    assert not found
    assert reason.startswith("nginx at /usr/sbin/nginx has no stream eBPF module (no built-in "
                             "stream module, which the module needs): `nginx -t` says "
                             "'unknown directive \"stream\" in ")


def test_nginx_with_stream_but_without_the_module_is_told_apart():
    found, reason = ebpf_module_in_test_output(
        1, fixture("nginx_t_probe_debian_stream_loaded.txt"), "/usr/sbin/nginx", "dut")
    assert not found
    assert reason.startswith("nginx at /usr/sbin/nginx has no stream eBPF module: `nginx -t` "
                             "says 'unknown directive \"ebpf_enable\" in ")


def test_missing_binary_says_so():
    node = probe_node(127, fixture("nginx_t_probe_missing.txt"))
    found, reason = has_ebpf_module(node, "/opt/nginx-ebpf/sbin/nginx-missing")
    assert not found
    assert reason.startswith("nginx binary missing on dut: /opt/nginx-ebpf/sbin/nginx-missing")
    assert "not found" in reason


def test_other_nginx_t_failures_are_errors_not_skips():
    text = ('nginx: [alert] could not open error log file: open() "/x/error.log" failed '
            "(13: Permission denied)\n")
    with pytest.raises(HostStackError, match=r"exited 1 without telling.*Permission denied"):
        ebpf_module_in_test_output(1, text, "/opt/nginx-ebpf/sbin/nginx", "dut")
    with pytest.raises(HostStackError, match="Segmentation fault"):
        ebpf_module_in_test_output(139, "Segmentation fault", "/x/nginx", "dut")


# ---------------------------------------------------------------------------- error log
def test_engaged_error_log_counts_sockmap_updates():
    log = parse_error_log(fixture("error_log_engaged.log"))
    # four iperf3 -R runs through the eBPF server, two connections each (control + data)
    assert len(log.updates) == 16
    assert log.spliced_connections == 8
    assert log.client_fds[:2] == (3, 17)
    assert log.upstream_fds[:2] == (16, 18)
    assert log.updates[0].index == 3 and log.updates[0].pid == 30282
    assert (log.fallbacks, log.init_failures, log.programs_opened) == (0, 0, 1)


def test_ebpf_server_after_native_one_shows_as_fallback():
    log = parse_error_log(fixture("error_log_fallback_after_off_server.log"))
    assert log.updates == ()
    assert log.fallbacks == 2
    evidence = EngagementEvidence.from_parts(log, VerdictStats(()), VerdictStats(
        (), "no BPF program named stream_verdict is loaded on dut"))
    assert not evidence.engaged
    with pytest.raises(HostStackError) as error:
        evidence.require_engaged()
    message = str(error.value)
    assert message.startswith("eBPF path not engaged (fell back to native proxying): ")
    assert "2 handled 'without ebpf object'" in message
    assert "no BPF program named stream_verdict is loaded on dut" in message


def test_worker_without_root_counts_as_init_failure():
    log = parse_error_log(fixture("error_log_worker_not_root.log"))
    assert (log.init_failures, log.programs_opened, len(log.updates)) == (1, 1, 0)


def test_error_log_garbage_and_bad_update_lines_raise():
    with pytest.raises(ParseError, match="no nginx error-log line"):
        parse_error_log("cat: /tmp/x/error.log: No such file or directory\n")
    line = ("2026/11/22 03:03:00 [error] 30282#0: *1 [stream_ebpf]  update sock map index "
            "three to client fd 3 while connecting to upstream\n")
    with pytest.raises(ParseError, match="unexpected 'update sock map' line"):
        parse_error_log(line)


def test_empty_log_window_is_no_evidence():
    log = parse_error_log("")
    assert log.updates == () and log.fallbacks == 0


# ---------------------------------------------------------------------------- bpftool
def test_bpftool_one_program_with_stats():
    stats = parse_bpftool_prog_json(fixture("bpftool_prog_one.json"))
    assert stats.programs == (VerdictProgram(154, 409418, 94409968),)
    assert (stats.run_cnt, stats.run_time_ns, stats.reason) == (409418, 94409968, None)


def test_bpftool_two_programs_one_never_run():
    stats = parse_bpftool_prog_json(fixture("bpftool_prog_two.json"))
    assert stats.ids == {169, 175}
    assert stats.programs[1] == VerdictProgram(175, 0, None)
    assert stats.run_cnt == 11717


def test_bpftool_no_program_is_empty_stats_with_reason():
    stats = parse_bpftool_prog_json("\n")
    assert (stats.programs, stats.run_cnt, stats.run_time_ns) == ((), 0, None)
    assert stats.reason == "no BPF program named stream_verdict is loaded"


@pytest.mark.parametrize(("text", "problem"), [
    ('{"error":"can\'t get prog by id (9): No such file or directory"}', "bpftool reported"),
    ("Error: unrecognized option", "not valid JSON"),
    ('{"id":3,"name":"other_prog","run_cnt":5}', "expected program objects named"),
    ('{"id":3,"name":"stream_verdict","run_cnt":-1}', "run_cnt is -1"),
])
def test_bpftool_bad_output_raises(text, problem):
    with pytest.raises(ParseError, match=re.escape(problem)):
        parse_bpftool_prog_json(text)


def test_growth_counts_new_programs_from_zero():
    before = parse_bpftool_prog_json(fixture("bpftool_prog_one.json"))
    after = VerdictStats((VerdictProgram(154, 509418, 114409968), VerdictProgram(160, 7, 900)))
    assert after.growth_since(before) == (100000 + 7, 20000000 + 900)


def test_read_verdict_stats_absent_and_failing():
    absent = FakeNode([(r"bpftool", answer(255, ""))])
    stats = read_verdict_stats(absent)
    assert stats.reason == "no BPF program named stream_verdict is loaded on dut"
    assert absent.history == [("bpftool -j prog show name stream_verdict", True)]
    broken = FakeNode([(r"bpftool", answer(127, "sh: 1: bpftool: not found"))])
    with pytest.raises(HostStackError, match="exited 127"):
        read_verdict_stats(broken)


# ---------------------------------------------------------------------------- bpf stats
def sysctl_node(value: str) -> tuple[FakeNode, list[str]]:
    state = [value]

    def write(command: str) -> tuple[int, str]:
        state[0] = re.search(r"echo (\d)", command).group(1)
        return 0, ""

    node = FakeNode([(r"^cat /proc/sys/kernel/bpf_stats_enabled$", lambda _c: (0, state[0] + "\n")),
                     (r"^echo \d > /proc/sys/kernel/bpf_stats_enabled$", write)])
    return node, state


def test_without_python3_the_sysctl_is_set_and_put_back_after_a_failure():
    node, state = sysctl_node("0")
    with pytest.raises(RuntimeError), bpf_stats_enabled(node) as hold:
        assert hold.previous == 0 and state[0] == "1" and hold.counting() == (True, None)
        assert "kernel.bpf_stats_enabled was 0; set to 1" in hold.describe()
        raise RuntimeError("trial failed")
    assert state[0] == "0"
    assert [c for c, sudo in node.history if c.startswith("echo") and sudo] == [
        "echo 1 > /proc/sys/kernel/bpf_stats_enabled",
        "echo 0 > /proc/sys/kernel/bpf_stats_enabled",
    ]


def test_without_python3_a_sysctl_already_on_is_left_on():
    node, state = sysctl_node("1")
    with bpf_stats_enabled(node) as hold:
        assert hold.previous == 1
    assert state[0] == "1"
    assert not [c for c, _ in node.history if c.startswith("echo")]


def test_without_python3_a_sysctl_put_back_by_another_run_is_seen():
    node, state = sysctl_node("0")
    with bpf_stats_enabled(node) as hold:
        state[0] = "0"  # a run sharing the machine restored what it found
        counted, why = hold.counting()
    assert not counted and "kernel.bpf_stats_enabled is 0 on dut (another run" in why


def test_bpf_stats_garbage_raises():
    node, _ = sysctl_node("enabled")
    with pytest.raises(ParseError, match="expected 0 or 1"), bpf_stats_enabled(node):
        pass


def test_with_python3_a_holder_keeps_the_statistics_on_and_the_sysctl_is_not_touched():
    node, state = sysctl_node("0")
    node.python3 = "/usr/bin/python3"
    with bpf_stats_enabled(node) as hold:
        assert hold.holder is not None and hold.counting() == (True, None)
        assert "while bpf-stats (pid 4242) holds a BPF_ENABLE_STATS descriptor" in \
            hold.describe()
    (command, name, sudo), = node.started
    assert command.startswith("python3 -c ") and "ctypes.c_long(32)" in command
    assert name == "bpf-stats" and sudo and node.stopped == ["bpf-stats"]
    assert node.history == [] and state[0] == "0"


def test_a_holder_that_ends_says_why_and_counting_stops_with_its_output():
    node, _ = sysctl_node("0")
    node.python3, node.holder_runs = "/usr/bin/python3", False
    node.holder_output = "BPF_ENABLE_STATS failed: Invalid argument\n"
    with pytest.raises(HostStackError, match=r"dut: could not keep BPF run statistics on "
                       r"\(BPF_ENABLE_STATS, Linux 5.8\+\): the holder ended; its output: "
                       r"'BPF_ENABLE_STATS failed: Invalid argument'"), bpf_stats_enabled(node):
        pass
    assert node.stopped == ["bpf-stats"]
    ended = StatsHold(node, holder=SimpleNamespace(name="bpf-stats", pid=1))
    assert ended.counting() == (False, "the BPF statistics holder on dut ended: "
                                       "'BPF_ENABLE_STATS failed: Invalid argument'")


def test_the_holder_script_is_valid_python():
    compile(HOLDER_SCRIPT, "holder", "exec")


# ---------------------------------------------------------------------------- evidence
def trial_node(log_before: str, log_after: str, bpftool_before: str, bpftool_after: str,
               stats_on: str = "1") -> FakeNode:
    """A DUT whose error log and bpftool output change between mark and collect."""
    reads = []

    def bpftool(command: str) -> tuple[int, str]:
        text = bpftool_after if reads else bpftool_before  # first read: mark, then collect
        reads.append(command)
        return (0 if text else 255), text

    def tail(command: str) -> tuple[int, str]:
        start = int(re.search(r"tail -c \+(\d+)", command).group(1))
        return 0, (log_before + log_after)[start - 1:]

    return FakeNode([
        (r"^stat -c %s ", answer(0, f"{len(log_before)}\n")),
        (r"bpftool -j prog show", bpftool),
        (r"^tail -c ", tail),
        (r"^cat /proc/sys/kernel/bpf_stats_enabled$", answer(0, stats_on + "\n")),
    ])


def engaged_log_parts() -> tuple[str, str]:
    lines = fixture("error_log_engaged.log").splitlines(keepends=True)
    first_trial = next(i for i, line in enumerate(lines) if "fail to read first packet" in line)
    return "".join(lines[:first_trial + 1]), "".join(lines[first_trial + 1:])


def test_collect_engagement_counts_only_the_trial_window():
    before_log, trial_log = engaged_log_parts()
    before_json = '{"id":154,"name":"stream_verdict","run_time_ns":100,"run_cnt":10}'
    node = trial_node(before_log, trial_log, before_json, fixture("bpftool_prog_one.json"))
    mark = mark_engagement(node, "/tmp/fake/nginx-ebpf/error.log")
    evidence = collect_engagement(node, mark, StatsHold(node, previous=0))
    # the window after the first trial holds the three later trials: 6 connections
    assert evidence.spliced_connections == 6 and evidence.sock_map_updates == 12
    assert evidence.verdict_runs == 409418 - 10
    assert evidence.verdict_run_time_ns == 94409968 - 100
    assert evidence.engaged
    evidence.require_engaged()
    record = evidence.as_record()
    assert record["verdict_runs"] == 409408 and record["engaged"] is True


def test_sockmap_updates_without_program_runs_are_not_engagement():
    before_log, trial_log = engaged_log_parts()
    same = fixture("bpftool_prog_one.json")
    node = trial_node(before_log, trial_log, same, same)
    evidence = collect_engagement(node, mark_engagement(node, "/tmp/e.log"),
                                  StatsHold(node, previous=0))
    assert evidence.verdict_runs == 0 and not evidence.engaged
    with pytest.raises(HostStackError, match="run count growth 0"):
        evidence.require_engaged()


def test_stats_off_falls_back_to_log_evidence_and_says_so():
    before_log, trial_log = engaged_log_parts()
    same = fixture("bpftool_prog_one.json")
    node = trial_node(before_log, trial_log, same, same, stats_on="0")
    evidence = collect_engagement(node, mark_engagement(node, "/tmp/e.log"),
                                  StatsHold(node, previous=0))
    assert evidence.verdict_runs is None
    assert "kernel.bpf_stats_enabled is 0 on dut" in evidence.stats_reason
    assert evidence.engaged  # sockmap updates alone, counters unmeasured


def test_a_holder_that_ended_during_the_trial_leaves_the_counts_unmeasured():
    before_log, trial_log = engaged_log_parts()
    node = trial_node(before_log, trial_log, fixture("bpftool_prog_one.json"),
                      fixture("bpftool_prog_one.json"))
    node.holder_runs, node.holder_output = False, "Killed\n"
    hold = StatsHold(node, holder=SimpleNamespace(name="bpf-stats", pid=7))
    evidence = collect_engagement(node, mark_engagement(node, "/tmp/e.log"), hold)
    assert evidence.verdict_runs is None
    assert evidence.stats_reason == "the BPF statistics holder on dut ended: 'Killed'"


# ---------------------------------------------------------------------------- config rules
def ebpf_params(**instance: object) -> StreamProxyParams:
    settings = {"prefix": "/tmp/x", "user": "root", "error_log_level": "notice", **instance}
    return StreamProxyParams(
        instance=NginxInstance(**settings),
        servers=[StreamServer(listen_port=18202, upstreams=["127.0.0.1:18201"], ebpf=True),
                 StreamServer(listen_port=18203, upstreams=["127.0.0.1:18201"], ebpf=False)],
        load_module=None,
    )


def test_valid_ebpf_config_passes():
    check_ebpf_config(ebpf_params())


@pytest.mark.parametrize(("change", "message"), [
    ({"user": None}, "NginxInstance.user: expected 'root'"),
    ({"worker_connections": EBPF_MAP_SIZE + 1}, "expected at most 100000"),
])
def test_ebpf_config_rules(change, message):
    with pytest.raises(RenderError, match=re.escape(message)):
        check_ebpf_config(ebpf_params(**change))


def test_ebpf_config_needs_builtin_stream_and_an_ebpf_server():
    params = ebpf_params()
    with_module = StreamProxyParams(instance=params.instance, servers=params.servers)
    with pytest.raises(RenderError, match="load_module: expected None"):
        check_ebpf_config(with_module)
    native = StreamProxyParams(instance=params.instance, servers=params.servers[1:],
                               load_module=None)
    with pytest.raises(RenderError, match="at least one server with eBPF"):
        check_ebpf_config(native)
