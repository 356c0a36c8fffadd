"""The A/B session (libraries.ab.session) without Robot: switching restarts only the components
whose inputs differ between the sides (VPP and what runs on it when VPP's do), sets each side's
sysctls and puts the originals back; the record block and the message a user reads."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import pytest

from libraries.ab.ab_settings import ab_settings_from_variables as settings_from_variables
from libraries.ab.ab_settings import declared_ab_settings
from libraries.ab.comparison import load_comparison
from libraries.ab.rounds import AbOutcome, MetricComparison, RatioInterval
from libraries.ab.session import AbSession, NothingToCompare
from libraries.cases.context import CaseContext
from libraries.cases.stack import client_environment
from libraries.report.ab_section import ab_section, ratio_chart
from libraries.testbed.topology_file import load_topology

THREE = load_topology("3node")


@dataclass
class FakeNode:
    name: str
    commands: list[str] = field(default_factory=list)

    def run(self, command: str, timeout: float, sudo: bool = False, **_: object):
        self.commands.append(command)
        return SimpleNamespace(exit_code=0, stdout="", stderr="")

    def which(self, binary: str) -> str:
        return f"/usr/sbin/{binary}"

    @property
    def where(self) -> str:
        return self.name


def _session(tmp_path: Path, text: str) -> tuple[AbSession, dict[str, FakeNode], list[str]]:
    path = tmp_path / "ab.yaml"
    path.write_text(text)
    loaded = load_comparison(path, THREE)
    nodes = {name: FakeNode(name) for name in THREE.nodes}
    testbed = SimpleNamespace(topology=THREE, nodes=nodes)
    originals = {"dut": {"net.ipv4.tcp_rmem": "4096 131072 6291456"}}
    session = AbSession(loaded, testbed, declared_ab_settings(), originals,  # type: ignore[arg-type]
                        {"a": {"dut": {"nginx": "1.22.1"}}, "b": {"dut": {"nginx": "1.26.3"}}})
    events: list[str] = []
    for name, uses in (("vpp-dut", {("vpp", "dut")}),
                       ("nginx-server", {("tool", "server", "nginx"), ("nginx", "server"),
                                         ("env", "nginx")}),
                       ("nginx-proxy", {("tool", "dut", "nginx"), ("nginx", "proxy"),
                                        ("env", "nginx"), ("vpp", "dut"), ("vcl", "proxy")})):
        session.register(name, uses, lambda n=name: events.append(f"stop {n}"),
                         lambda n=name: events.append(f"start {n} as {session.side}"))
    return session, nodes, events


def test_a_proxy_knob_restarts_only_the_proxy(tmp_path: Path):
    session, _nodes, events = _session(tmp_path, "a: {name: no-log}\nb: {name: log, nginx: {proxy: "
                                      "{server: ['access_log /dev/null;']}}}\n")
    assert session.switch("b") >= 0
    assert events == ["stop nginx-proxy", "start nginx-proxy as b"]
    assert session.nginx("proxy") == ((), ("access_log /dev/null;",))
    assert session.nginx("server") == ((), ())


def test_a_vpp_startup_section_restarts_vpp_and_what_runs_on_it_in_order(tmp_path: Path):
    session, _, events = _session(tmp_path, "a: {name: cubic}\nb: {name: newreno, startup: "
                                  "{dut: {tcp: cc-algo newreno}}}\n")
    session.switch("b")
    assert events == ["stop nginx-proxy", "stop vpp-dut", "start vpp-dut as b",
                      "start nginx-proxy as b"]
    assert session.startup("dut") == (("tcp", "cc-algo newreno"),)


def test_components_that_register_again_on_restart_keep_their_start_order(tmp_path: Path):
    """Real VPP, 1node tcp_term: VPP's and the iperf3 server's restarts register them again;
    the second switch rendered the client's VCL environment before VPP was up (no LD_PRELOAD:
    the client ran on the kernel, 'Network is unreachable')."""
    path = tmp_path / "ab.yaml"
    path.write_text("a: {name: default}\nb: {name: mtu, startup: {dut: {tcp: mtu 1000}}}\n")
    session = AbSession(load_comparison(path, THREE),
                        SimpleNamespace(topology=THREE, nodes={}),  # type: ignore[arg-type]
                        declared_ab_settings(), {}, {"a": {}, "b": {}})
    events: list[str] = []

    def register(name: str) -> None:
        def start() -> None:
            events.append(f"start {name}")
            if name != "vcl-client-dut":  # a server's or VPP's set-up registers it again
                register(name)
        session.register(name, {("vpp", "dut")}, lambda: events.append(f"stop {name}"), start)

    for name in ("vpp-dut", "iperf3-server", "vcl-client-dut"):
        register(name)
    session.switch("b")
    session.switch("a")
    order = ["start vpp-dut", "start iperf3-server", "start vcl-client-dut"]
    stops = ["stop vcl-client-dut", "stop iperf3-server", "stop vpp-dut"]
    assert events == stops + order + stops + order


def test_a_binary_changes_the_topology_the_side_sees_and_switching_back_restores_it(
        tmp_path: Path):
    session, _, events = _session(tmp_path, "a: {name: debian}\nb: {name: candidate, tools: "
                                  "{server: {nginx: /opt/n/sbin/nginx}}}\n")
    session.switch("b")
    assert session.testbed.topology.nodes["server"].tools["nginx"] == "/opt/n/sbin/nginx"
    session.switch("a")
    assert session.testbed.topology.nodes["server"].tools["nginx"] == "nginx"
    assert events == ["stop nginx-server", "start nginx-server as b", "stop nginx-server",
                      "start nginx-server as a"]
    session.switch("a")  # already active: nothing restarts
    assert len(events) == 4


def test_sysctls_are_set_per_side_and_the_originals_restored(tmp_path: Path):
    session, nodes, events = _session(tmp_path, "a: {name: default}\nb: {name: capped, "
                                      "sysctl: {dut: {net.ipv4.tcp_rmem: 4096 131072 262144}}}\n")
    session.switch("b")
    # what runs on the node restarts after the sysctls are set (kernel 6.18: an iperf3 server's
    # listener made under side a's tcp_rmem served side b's next trial at side a's speed);
    # nginx-server runs on another node
    assert events == ["stop nginx-proxy", "stop vpp-dut", "start vpp-dut as b",
                      "start nginx-proxy as b"]
    assert nodes["dut"].commands[-1] == ("set -e; /usr/sbin/sysctl -q -w 'net.ipv4.tcp_rmem="
                                         "4096 131072 262144' >/dev/null")
    session.switch("a")
    assert "tcp_rmem=4096 131072 6291456" in nodes["dut"].commands[-1]
    session.switch("b")
    assert session.restore() == []
    assert "tcp_rmem=4096 131072 6291456" in nodes["dut"].commands[-1]
    assert session.components == [] and session.testbed.topology is THREE


TCP_TERM_TRIAL = frozenset({("tool", "tg", "iperf3"), ("env", "iperf3")})
"""What a tcp_term trial runs: the iperf3 client on tg."""


def _kernel_tcp_term(session: AbSession) -> AbSession:
    """The components of a kernel tcp_term test: the iperf3 server alone."""
    session.components = []
    session.register("iperf3-server", {("tool", "dut", "iperf3"), ("env", "iperf3")},
                     lambda: None, lambda: None)
    return session


@pytest.mark.parametrize(("text", "named"), [
    ("a: {name: x}\nb: {name: y, nginx: {proxy: {server: ['access_log /dev/null;']}}}\n",
     "nginx.proxy"),
    ("a: {name: x}\nb: {name: y, vcl: {client: ['tls-engine 4']}, startup: {dut: {tcp: "
     "cc-algo newreno}}}\n", "startup.dut, vcl.client"),
])
def test_a_test_that_uses_nothing_the_sides_change_is_skipped_with_what_differs(
        tmp_path: Path, text: str, named: str):
    session = _kernel_tcp_term(_session(tmp_path, text)[0])
    reason = session.unused_difference(TCP_TERM_TRIAL)
    assert reason is not None and f"differ only in {named}, which this test does not use " \
        "(it runs: iperf3 on tg, iperf3-server)" in reason
    with pytest.raises(NothingToCompare, match="nothing to compare"):
        session.measure("tcp_term", "kernel", {}, {}, None, None, {},  # type: ignore[arg-type]
                        trial_uses=TCP_TERM_TRIAL)


def test_nginx_builds_compared_on_tcp_term_are_skipped_naming_the_builds_and_what_runs(
        tmp_path: Path):
    """Issue 34's first defect: a comparison of nginx builds run on tcp_term measured iperf3
    against itself; the binaries a test never starts are no difference it can judge."""
    text = ("a: {name: debian, tools: {dut: {nginx: /usr/sbin/nginx}}}\n"
            "b: {name: candidate, tools: {dut: {nginx: /opt/nginx-candidate/sbin/nginx}}}\n")
    session = _kernel_tcp_term(_session(tmp_path, text)[0])
    reason = session.unused_difference(TCP_TERM_TRIAL)
    assert reason is not None and "differ only in tools.dut.nginx" in reason
    assert session.unused_difference(frozenset({("tool", "dut", "nginx")})) is None


@pytest.mark.parametrize("text", [
    "a: {name: x}\nb: {name: y, tools: {tg: {iperf3: /opt/iperf3}}}\n",  # per trial: counts
    "a: {name: x}\nb: {name: y, env: {iperf3: {X: '1'}}}\n",
    "a: {name: x}\nb: {name: y, sysctl: {dut: {net.ipv4.tcp_rmem: 4096 131072 262144}}}\n",
    "aa: true\na: {name: x}\nb: {name: y}\n",
    "a: {name: x}\nb: {name: y, vcl: {server: ['tls-engine 4']}}\n",  # the server's VCL: used
])
def test_a_difference_the_test_may_see_is_measured(tmp_path: Path, text: str):
    session, _, _ = _session(tmp_path, text)
    if "server" not in text:
        _kernel_tcp_term(session)
    else:
        session.register("iperf3-server", {("vcl", "server")}, lambda: None, lambda: None)
    assert session.unused_difference(TCP_TERM_TRIAL) is None


class _Placement:
    """A VPP placement that renders each app's environment from the active side's VCL lines
    (what :meth:`VppPlacement.app_environment` is given), uploading nothing."""

    def __init__(self, session: AbSession) -> None:
        self.session = session
        self.rendered: list[tuple[str, ...]] = []

    def runs_vpp(self, name: str) -> bool:
        return name == "dut"

    def app_environment(self, name: str, app: str, program: str,
                        extra: tuple[str, ...] = ()) -> tuple[dict[str, str], str, str]:
        self.rendered.append(extra)
        path = f"/w/vcl-{app}.conf"
        return {"VCL_CONFIG": path, "side": self.session.side}, path, "\n".join(extra)


def test_the_client_environment_is_rendered_again_on_a_switch(tmp_path: Path):
    session, _, _ = _session(tmp_path, "a: {name: x}\nb: {name: y, vcl: {client: "
                             "['tls-engine 4']}}\n")
    session.components = []
    placement = _Placement(session)
    testbed = SimpleNamespace(topology=SimpleNamespace(resolve_node=lambda node: node))
    ctx = CaseContext(testbed, ab=session, vpp=placement)  # type: ignore[arg-type]
    environment = client_environment(ctx, "dut", "vpp", "wrk")
    assert environment()["side"] == "a"
    session.switch("b")
    assert environment()["side"] == "b" and placement.rendered == [(), ("tls-engine 4",)]
    assert session.unused_difference(frozenset({("tool", "tg", "wrk")})) is None


def _outcome(change: float, verdict: str) -> AbOutcome:
    interval = RatioInterval(change, change - 0.01, change + 0.01, 0.99, 24)
    comparison = MetricComparison("rps", "higher_is_better", (change,) * 24, interval,
                                  verdict)  # type: ignore[arg-type]
    return AbOutcome({}, {}, {"rps": comparison}, 24, "conclusive at the look after 24 rounds",
                     [8, 16, 24], [0.4, 0.5, 0.6])


def test_the_message_says_who_is_slower_by_how_much_after_how_many_rounds(tmp_path: Path):
    session, _, _ = _session(tmp_path, "a: {name: debian-nginx}\nb: {name: nginx-1.26, "
                             "tools: {dut: {nginx: /opt/n/sbin/nginx}}}\n")
    assert session.message(_outcome(0.959, "regression")) == (
        "A/B nginx-1.26 4.1 % slower than debian-nginx on rps [-5.1, -3.1] after 24 rounds "
        "(debian-nginx: nginx 1.22.1; nginx-1.26: nginx 1.26.3)")
    assert session.message(_outcome(1.002, "no change")).startswith(
        "A/B rps: no change (+0.2 % [-0.8, +1.2], margin 1 %) after 24 rounds")


def test_an_inconclusive_message_and_record_say_what_the_rounds_could_tell(tmp_path: Path):
    """-0.9 % [-7.0, +3.5] after 60 rounds: a half-width of 5.4 % in logs, so only a change
    beyond about 6.5 % is called, and a 1 %-wide half needs (5.4 / 1) ** 2 * 60 rounds."""
    session, _, _ = _session(tmp_path, "a: {name: x}\nb: {name: y, nginx: {proxy: {http: "
                             "['ssl_buffer_size 4k;']}}}\n")
    interval = RatioInterval(0.991, 0.93, 1.035, 0.99, 60)
    outcome = AbOutcome({}, {}, {"rps": MetricComparison(
        "rps", "higher_is_better", (0.991,) * 60, interval, "inconclusive")}, 60,
        "round limit", [10, 20, 30, 40, 50, 60], [0.1])
    assert session.message(outcome).startswith(
        "A/B rps: inconclusive (-0.9 % [-7.0, +3.5], margin 1 %; at this scatter 60 rounds "
        "call only a change beyond about 6.5 %, and an interval within the margin would take "
        "about 1,734 rounds) after 60 rounds")
    assert session.block(outcome)["metrics"]["rps"]["resolution"] == {
        "smallest_change_pct": pytest.approx(6.549, abs=0.01), "rounds_for_margin": 1734}
    assert "resolution" not in session.block(_outcome(0.97, "regression"))["metrics"]["rps"]


def test_the_record_block_keeps_the_file_both_sides_the_rounds_and_the_switch_cost(
        tmp_path: Path):
    session, _, _ = _session(tmp_path, "a: {name: x}\nb: {name: y, nginx: {proxy: {http: "
                             "['ssl_buffer_size 4k;']}}}\n")
    block = session.block(_outcome(0.97, "regression"))
    assert block["comparison"]["text"] == session.loaded.text
    assert block["comparison"]["sha256"] == session.loaded.sha256
    assert block["sides"]["b"]["changes"] == {"nginx": {"proxy": {"http": ("ssl_buffer_size "
                                                                          "4k;",)}}}
    assert block["verdict"] == "regression" and block["rounds"]["looks"] == [8, 16, 24]
    assert block["switch"] == {"count": 3, "median_s": 0.5, "total_s": pytest.approx(1.5),
                               "each_s": [0.4, 0.5, 0.6]}


@pytest.mark.parametrize(("variables", "message"), [
    ({"AB_MARGIN": "two"}, "-v AB_MARGIN:two: expected a number"),
    ({"AB_LOOK": "7.5"}, "-v AB_LOOK:7.5: expected a whole number"),
    ({"AB_MAX_ROUNDS": "4"}, "-v AB_MAX_ROUNDS:4: expected whole rounds >= AB_LOOK"),
    ({"AB_BUDGET": "nan"}, "-v AB_BUDGET:nan: expected a finite number"),
])
def test_bad_ab_variables_are_refused_naming_them(variables, message):
    with pytest.raises(ValueError, match=message):
        settings_from_variables(variables.get)


def test_the_default_settings_and_a_margin_in_percent():
    settings = settings_from_variables({"AB_MARGIN": "3%"}.get)
    assert (settings.margin, settings.look, settings.max_rounds, settings.budget_s) == \
        (0.03, 10, 60, 600.0)
    assert settings_from_variables(lambda name, default: default).margin == 0.01


def test_the_run_report_shows_both_sides_the_change_and_the_rounds_chart(tmp_path: Path):
    session, _, _ = _session(tmp_path, "a: {name: debian-nginx}\nb: {name: nginx-1.26, "
                             "tools: {dut: {nginx: /opt/n/sbin/nginx}}}\n")
    outcome = _outcome(0.959, "regression")
    sides = {key: {"metrics": {"rps": {"value": value, "unit": "requests/s", "interval": {
        "low": value * 0.99, "high": value * 1.01, "level": 0.99}}}}
        for key, value in (("a", 30000.0), ("b", 28770.0))}
    record = {"name": "1kb-10c-kernel-ssl-proxy", "test_id": "3node/ssl_proxy/x",
              "ab": session.block(outcome), "evidence": {"sides": sides}}
    charts: list[str] = []
    page = ab_section([record], {}, charts, lambda test: "")
    assert "<h2>A/B</h2>" in page and "regression" in page
    assert "<b>debian-nginx</b> 30k requests/s [29.7k, 30.3k]" in page
    assert "dut: nginx 1.26.3" in page and "-4.1 % [-5.1, -3.1]" in page
    assert "3 x 0.50 s" in page and "24 rounds, looks [8, 16, 24]" in page
    (chart,) = charts
    layout = json.loads(chart)
    assert layout["data"][0]["y"] == [0.959] * 24
    assert any(s["type"] == "rect" for s in layout["layout"]["shapes"])  # the interval band
    assert ratio_chart({"name": "x"}) is None
