"""The cases (``libraries.cases``) without Robot: each takes a context built here, on a testbed
of fake nodes that answer wrk's and iperf3's commands with recorded outputs, and nothing is
patched in Robot Framework."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import pytest

from libraries.ab.session import NothingToCompare
from libraries.cases import tracers as tracers_case
from libraries.cases.case_runner import Case, run_case
from libraries.cases.context import CaseContext, Skip
from libraries.cases.ebpf_stream import EbpfStreamCase, StreamRequest, StreamSetup
from libraries.cases.ssl_proxy import (
    HttpsServer,
    LoadRequest,
    ProxySetup,
    SslProxyCase,
    search_capacity,
)
from libraries.cases.stack import app_address, app_environment, require_app_on_vpp
from libraries.cases.tcp_term import (
    TcpRequest,
    TcpTermCase,
    TcpTermSetup,
    restore_link_mtus,
    set_link_mtu,
)
from libraries.cases.tracers import KernelTracerTrials, TracerSetup
from libraries.cases.trial_observer import TrialTelemetry
from libraries.results.measurement import Measurement, Trial
from libraries.results.plan import TrialPlan
from libraries.testbed.command import NodeCommand, node_command
from libraries.testbed.errors import CommandError, HostStackError, ParseError
from libraries.testbed.node import CommandResult, Process
from libraries.testbed.provision import Testbed
from libraries.testbed.run_paths import node_workdir
from libraries.testbed.topology_file import load_topology
from libraries.tools.nginx.service import NginxHandle
from libraries.vpp.placement import VppPlacement

FIXTURES = Path(__file__).resolve().parent / "fixtures"
WRK_HELP = (FIXTURES / "wrk" / "wrk41_help.txt").read_text()
WRK_OUTPUT = (FIXTURES / "wrk" / "wrk41_https_latency.txt").read_text()  # 1 KiB responses
IPERF_OUTPUT = (FIXTURES / "iperf3" / "iperf312_forward.json").read_text()


class Log:
    """A case's log, kept."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.warnings: list[str] = []

    def info(self, text: str) -> None:
        self.lines.append(text)

    def warn(self, text: str) -> None:
        self.warnings.append(text)

    def folded(self, title: str, text: str) -> None:
        self.lines.append(title)


@dataclass
class FakeNode:
    """A node that answers ``wrk --help``, a wrk run and an iperf3 client run with recorded
    outputs; any other program is missing (so telemetry reads are unavailable, not zeros)."""

    name: str
    workdir: str = "/w"
    processes: list[Process] = field(default_factory=list)
    commands: list[str] = field(default_factory=list)
    calls: list[tuple[str, float]] = field(default_factory=list)
    values: list[NodeCommand] = field(default_factory=list)

    @property
    def where(self) -> str:
        return f"{self.name} (fake)"

    def run(self, command: str | NodeCommand, timeout: float | None = None, check: bool = True,
            sudo: bool = False, quiet: bool = False) -> CommandResult:
        value = node_command(command, timeout)
        self.values.append(value)
        command, timeout = value.line(), value.timeout
        self.commands.append(command)
        self.calls.append((command, timeout))
        if command.startswith("wrk --help"):
            result = CommandResult(command, 1, WRK_HELP, "", 0.0)
        elif "https://" in command:
            result = CommandResult(command, 0, WRK_OUTPUT, "", 0.0)
        elif "iperf3" in command and " -c " in command:
            result = CommandResult(command, 0, IPERF_OUTPUT, "", 0.0)
        elif command.startswith("cat /sys/class/net/"):
            result = CommandResult(command, 0, "1500\n", "", 0.0)
        elif command.startswith("ip link set dev "):
            result = CommandResult(command, 0, "", "", 0.0)
        elif "tsenart/vegeta" in command:
            result = CommandResult(command, 3, "", "", 0.0)
        else:
            result = CommandResult(command, 127, "", "sh: not found", 0.0)
        if check and result.exit_code != 0:
            raise CommandError(self.where, command, result.exit_code, result.stdout,
                               result.stderr)
        return result

    def is_running(self, process: Process) -> bool:
        return True


def _testbed() -> Testbed:
    topology = load_topology("3node")
    return Testbed(topology, "t", {name: FakeNode(name) for name in topology.nodes})


def _nginx(node: str, name: str, port: int) -> NginxHandle:
    process = SimpleNamespace(name=name, pid=100)
    return NginxHandle(node, name, process, f"/w/{name}/nginx.conf",  # type: ignore[arg-type]
                       f"/w/{name}", f"/w/{name}/error.log", (port,))


def _proxy_case(log: Log, mtls: bool = False) -> SslProxyCase:
    testbed = _testbed()
    setup = ProxySetup(HttpsServer(_nginx("server", "nginx-server", 8445), mtls, status=False),
                       _nginx("dut", "nginx-proxy", 8089))
    request = LoadRequest("tg", "/1kb", 10, TrialPlan(trials=2, duration=1, warmup=0),
                          "kernel")
    return SslProxyCase(CaseContext(testbed, log=log), setup, request)


def test_the_rows_wrk_line_is_the_one_the_architecture_walk_gives():
    """``1kb-10c-kernel-ssl-proxy`` on 3node, every run setting at its declared default and
    the workdir named as a Robot run names it: the whole line a measured proxied trial sends
    (ARCHITECTURE.md's walk quotes it), and the warm-up's and the direct path's parts."""
    topology = load_topology("3node")
    nodes = {name: FakeNode(name, workdir=node_workdir("hr1a2b3", name))
             for name in topology.nodes}
    ctx = CaseContext(Testbed(topology, "hr1a2b3", nodes), log=Log())
    setup = ProxySetup(HttpsServer(_nginx("server", "nginx-server", 8445), False, status=False),
                       _nginx("dut", "nginx-proxy", 8089))
    plan = ctx.settings.plan
    case = SslProxyCase(ctx, setup, LoadRequest("tg", "/1kb", 10, plan, "kernel"))
    case.measure()
    sent = [value.rendered() for value in nodes["tg"].values if "https://" in value.line()]
    ledger = "/tmp/hoststack-hr1a2b3/tg/cpu-ledger"
    assert sent[2] == (  # the warm-up ran the proxy and the direct path first
        f"timeout -k 2 19 sh -c 'mkdir -p {ledger}; (taskset -c 1 wrk -t 1 -c 10 -d 2s "
        f"https://198.18.1.1:8089/1kb); rc=$?; cat /proc/$$/stat > {ledger}/wrk.$$.stat; "
        "exit $rc'")
    assert "timeout -k 2 18 " in sent[0] and " -d 1s https://198.18.1.1:8089/1kb" in sent[0]
    assert " -d 1s https://198.18.2.2:8445/1kb" in sent[1]
    assert " -d 2s https://198.18.2.2:8445/1kb" in sent[3]


def test_the_ssl_proxy_case_measures_both_paths_with_wrk_pinned_and_timed():
    log = Log()
    case = _proxy_case(log)
    measurement = case.measure()
    assert measurement.metrics["rps"].summary.values == (29968.73, 29968.73)
    assert measurement.metrics["direct_rps"].summary.median == 29968.73
    assert measurement.metrics["proxy_direct_ratio"].summary.median == 1.0
    assert measurement.parameters["tool"] == "wrk" and measurement.parameters["mtls"] is False
    runs = [c for c in case.tg.commands if "https://" in c]
    assert len(runs) == 4  # two rounds of proxy and direct, no warm-up
    assert "taskset -c 1 " in runs[0] and "https://198.18.1.1:8089/1kb" in runs[0]
    assert "https://198.18.2.2:8445/1kb" in runs[1]
    # no constant-rate generator on the fake TG: the latency pass says why, never zeros
    assert any(note.startswith("latency unavailable: vegeta not installed on tg")
               for note in measurement.notes)
    assert case.searcher is None
    assert "proxy trial 1: wrk output" in log.lines
    # the proxy's CPU per request is judged beside rps in an A/B run; unread here: no figure
    assert case.case().costs == {"cost": "lower_is_better"}
    assert measurement.cost["unit"] == "CPU µs/request" and "cost" not in measurement.metrics
    assert "nginx-proxy" in measurement.cost["counts"]


def test_the_architecture_walk_shows_the_wrk_command_the_case_renders():
    """ARCHITECTURE.md's walk from tests/ssl_proxy to the node command ends with the exact
    line of ``1kb-10c-kernel-ssl-proxy`` on 3node: a measured proxied trial of 2 s."""
    walk = (Path(__file__).resolve().parent.parent / "ARCHITECTURE.md").read_text()
    shown = next(line.strip() for line in walk.splitlines()
                 if line.strip().startswith("timeout -k 2 19 sh -c"))
    case = _proxy_case(Log())
    case.trial(Trial("proxy", 2, 1))
    assert case.tg.values[-1].rendered() == shown.replace("/tmp/hoststack-<prefix>/tg", "/w")


def test_the_mtls_row_has_no_direct_path():
    case = _proxy_case(Log(), mtls=True)
    assert set(case.urls) == {"proxy"}


def test_the_proxy_case_needs_its_server_and_proxy():
    with pytest.raises(HostStackError, match="start the HTTPS server and the reverse proxy"):
        SslProxyCase(CaseContext(_testbed()), ProxySetup(),
                     LoadRequest("tg", "/1kb", 10, TrialPlan(5, 2, 1), "kernel"))


def test_the_capacity_search_is_skipped_without_a_generator_and_not_made_in_ab():
    log = Log()
    ctx = CaseContext(_testbed(), log=log)
    measured = _proxy_case(log)
    measurement = Measurement(case="ssl_proxy", stack="kernel", parameters={})
    measurement.notes.append("latency unavailable: no vegeta")
    with pytest.raises(Skip, match="no constant-rate generator on the load node: latency "
                                   "unavailable: no vegeta"):
        search_capacity(ctx, measurement, measured)
    with pytest.raises(HostStackError, match="measure the paths first"):
        search_capacity(ctx, measurement, None)
    measurement.ab = {"verdict": "no change"}
    assert search_capacity(ctx, measurement, None) is measurement
    assert log.lines[-1].startswith("A/B run: the capacity search is not made")


def test_the_tcp_term_case_measures_the_receivers_throughput():
    testbed = _testbed()
    server = Process("dut", "iperf3-server", "iperf3 -s", 200, "/w/iperf3.log")
    setup = TcpTermSetup(("dut", server))
    request = TcpRequest("tg", False, 1, TrialPlan(trials=2, duration=1, warmup=0), "kernel")
    case = TcpTermCase(CaseContext(testbed, log=Log()), setup, request)
    measurement = case.measure()
    assert measurement.case == "tcp_term"
    assert measurement.metrics["throughput"].summary.unit == "Gbit/s"
    # its cost per GB: judged in an A/B run; here every read is unavailable: said, never 0
    assert case.case().costs == {"cost": "lower_is_better"}
    assert "cost" not in measurement.metrics
    assert measurement.cost["metric"] == "cost" and measurement.cost["unit"] == "CPU s/GB"
    assert measurement.cost["unavailable"].startswith("cost unavailable: trial 1 of iperf3: ")
    assert measurement.parameters["path"] == "through links"
    clients = [c for c in testbed.nodes["tg"].commands if " -c " in c]
    assert len(clients) == 2 and "198.18.1.1" in clients[0]


def test_the_ebpf_stream_case_measures_direct_and_native_interleaved_with_their_ratio():
    testbed = _testbed()
    server = Process("server", "iperf3-server", "iperf3 -s", 200, "/w/iperf3.log")
    setup = StreamSetup(("server", server), {"native": _nginx("dut", "nginx-stream", 10001)})
    request = StreamRequest("tg", True, TrialPlan(trials=2, duration=1, warmup=0))
    case = EbpfStreamCase(CaseContext(testbed, log=Log()), setup, request)
    measurement = case.measure()
    assert set(measurement.metrics) >= {"direct", "native", "native_direct_ratio"}
    assert measurement.parameters["variants"] == ["direct", "native"]
    assert case.case().compared == {"native": "higher_is_better"}  # the proxy under test
    assert case.case().costs == {"native_cost": "lower_is_better"}  # its CPU per GB
    assert measurement.cost["metric"] == "native_cost"
    assert "the native nginx stream proxy (nginx-stream" in measurement.cost["counts"]
    clients = [c for c in testbed.nodes["tg"].commands if " -c " in c]
    assert [("198.18.2.2" in c, "198.18.1.1" in c) for c in clients] == [
        (True, False), (False, True)] * 2  # direct, native, direct, native


def test_the_jumbo_row_sets_both_ends_of_the_link_and_puts_them_back():
    testbed = _testbed()
    setup = TcpTermSetup()
    set_link_mtu(CaseContext(testbed), setup, "tg", "dut", 9000)
    assert [(node.name, ifname, mtu) for node, ifname, mtu in setup.mtus] == [
        ("tg", "eth1", 1500), ("dut", "eth1", 1500)]
    assert testbed.nodes["dut"].commands[-1] == "ip link set dev eth1 mtu 9000"
    restore_link_mtus(setup)
    assert setup.mtus == [] and testbed.nodes["tg"].commands[-1] == "ip link set dev eth1 mtu 1500"
    one_node = Testbed(load_topology("1node"), "t", {"dut": FakeNode("dut")})
    with pytest.raises(Skip, match="share no link whose MTU could be raised"):
        set_link_mtu(CaseContext(one_node), TcpTermSetup(), "dut", "dut", 9000)


@dataclass
class _Running:
    footprint: str = "probe"


def test_a_kernel_tracer_that_hangs_once_runs_its_trial_again_and_leftovers_fail(
        monkeypatch: pytest.MonkeyPatch):
    """The tracer retry (bpftrace not stopping on SIGTERM) and the leftover check, with the
    tools' functions replaced by plain stand-ins."""
    hung = ParseError("dut: output of 'bpftrace'", "the tracer was killed or cut off before "
                      "printing its maps", "")
    seen = SimpleNamespace(total_events=40, lost_events=0, events_per_pid={101: 40})
    stops = [hung, seen]

    def stop(node: object, running: object) -> object:
        outcome = stops.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    started: list[object] = []
    monkeypatch.setattr(tracers_case, "group_pids", lambda node, pid: {100, 101})
    monkeypatch.setattr(tracers_case, "start_sslsniff",
                        lambda node, params, tracer, sudo: started.append(params) or _Running())
    monkeypatch.setattr(tracers_case, "stop_sslsniff", stop)
    monkeypatch.setattr(tracers_case, "uprobe_leftovers", lambda node, footprint: [])
    monkeypatch.setattr(tracers_case, "check_attachment", lambda *args: None)
    log = Log()
    server = ProxySetup(HttpsServer(_nginx("dut", "nginx-server", 8445), False, True))
    trials = KernelTracerTrials(log, FakeNode("dut"), server,  # type: ignore[arg-type]
                                TracerSetup(kernel=SimpleNamespace()), per_event=True)  # type: ignore[arg-type]
    loads: list[int] = []
    result = trials.traced(lambda: loads.append(1) or SimpleNamespace(total_requests=20),
                           Trial("traced", 1, 1))
    assert result.total_requests == 20 and len(loads) == 2 and len(started) == 2
    assert "the tracer hung on SIGTERM; the trial runs again" in log.warnings[0]
    assert trials.evidence == [{"events": 40, "lost": 0, "events_per_pid": {"101": 40},
                                "wrk_requests": 20}]
    monkeypatch.setattr(tracers_case, "uprobe_leftovers", lambda node, footprint: ["p:ssl"])
    stops.append(seen)
    with pytest.raises(HostStackError, match="the tracer left probes attached: \\['p:ssl'\\]"):
        trials.traced(lambda: SimpleNamespace(total_requests=20), Trial("traced", 1, 1))


class _Session:
    """An A/B session whose sides change nothing this test uses."""

    duet = None

    def __init__(self, unused: str) -> None:
        self.settings = SimpleNamespace(unused=unused)

    def measure(self, *args: object, **kwargs: object) -> Measurement:
        raise NothingToCompare("the sides differ in nothing this test uses (nginx-proxy)")


def test_an_ab_test_using_nothing_the_sides_change_is_skipped_or_measured_plainly():
    testbed = _testbed()
    case = Case("t", "kernel", {"v": lambda trial: 1.0}, TrialPlan(trials=1, duration=1,
                                                                     warmup=0),
                lambda results, seconds: Measurement(case="t", stack="kernel", parameters={}),
                {"v": "higher_is_better"}, {})
    skipping = CaseContext(testbed, log=Log(), ab=_Session("skip"))  # type: ignore[arg-type]
    with pytest.raises(Skip, match="the sides differ in nothing this test uses"):
        run_case(skipping, case, TrialTelemetry(testbed))
    plain = CaseContext(testbed, log=Log(), ab=_Session("plain"))  # type: ignore[arg-type]
    measurement = run_case(plain, case, TrialTelemetry(testbed))
    assert measurement.evidence["ab_unused"].endswith("measured plainly (-v AB_UNUSED:plain)")


SESSIONS = "\n".join([
    "Connection                                                  State          Rx-f      Tx-f",
    "[0:0][T] 198.18.101.1:8445->0.0.0.0:0                       LISTEN         0         0",
    "Thread 0: active sessions 1", ""])
"""``vppctl show session verbose`` with the server listening in VPP (one-node layout)."""


class _Placement:
    """VPP on the DUT with the one-node layout's server namespace, answering its sessions."""

    def __init__(self) -> None:
        self.rendered: list[tuple[str, str, str]] = []

    def runs_vpp(self, name: str) -> bool:
        return name == "dut"

    def app_address(self, app: str) -> str | None:
        return "198.18.101.1" if app == "server" else None

    def app_environment(self, name: str, app: str, program: str,
                        extra: tuple[str, ...] = ()) -> tuple[dict[str, str], str, str]:
        self.rendered.append((name, app, program))
        path = f"/w/vcl-{app}.conf"
        return {"LD_PRELOAD": "/l/libvcl_ldpreload.so", "VCL_CONFIG": path}, path, "vcl {}"

    def sessions(self, name: str) -> str:
        return SESSIONS

    @staticmethod
    def require_listener(text: str, port: int, app: str) -> None:
        VppPlacement.require_listener(text, port, app)


def test_an_application_goes_on_vpp_only_where_the_suite_runs_it():
    log = Log()
    placement = _Placement()
    ctx = CaseContext(_testbed(), log=log, vpp=placement)  # type: ignore[arg-type]
    assert app_environment(ctx, "dut", "proxy", "kernel", "nginx") is None
    assert app_environment(ctx, "tg", "client", "vpp", "wrk") is None  # only the DUT runs VPP
    assert app_environment(ctx, "dut", "proxy", "vpp", "nginx") == {
        "LD_PRELOAD": "/l/libvcl_ldpreload.so", "VCL_CONFIG": "/w/vcl-proxy.conf"}
    assert placement.rendered == [("dut", "proxy", "nginx")]
    assert log.lines == ["VCL config of proxy on dut (/w/vcl-proxy.conf):\nvcl {}"]
    with pytest.raises(HostStackError, match="unknown stack 'dpdk'"):
        app_environment(ctx, "dut", "proxy", "dpdk", "nginx")
    assert app_address(ctx, "server", "dut", "tg", "vpp") == "198.18.101.1"
    assert app_address(ctx, "proxy", "dut", "tg", "vpp") == "198.18.1.1"  # the topology's
    assert app_address(ctx, "server", "server", "tg", "kernel") == "198.18.2.2"
    require_app_on_vpp(ctx, "dut", 8445, "nginx HTTPS server")
    with pytest.raises(HostStackError, match="the application is not on VPP's host stack"):
        require_app_on_vpp(ctx, "dut", 8089, "nginx HTTPS reverse proxy")
    with pytest.raises(HostStackError, match="VPP keywords are not imported"):
        require_app_on_vpp(CaseContext(_testbed()), "dut", 8445, "nginx HTTPS server")
