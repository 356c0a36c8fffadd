"""The TCP termination case (seed 001): an iperf3 server terminates TCP on the DUT, an iperf3
client on the TG sends (or, with ``-R``, receives); the receiver's Gbit/s per trial.

:class:`TcpTermCase` is one test: its ``trial`` (one iperf3 client run, the server still
alive) and ``build`` (the measurement) are what the case runner calls; before it,
:func:`start_server` starts the iperf3 server and, for the jumbo-frame row,
:func:`set_link_mtu` changes the link's MTU (both kept in a :class:`TcpTermSetup`,
:func:`restore_link_mtus` puts the MTUs back). The keyword
library (``libraries.keywords.tcp_term``) makes one call per keyword.
"""

from __future__ import annotations

import logging
import shlex
from dataclasses import dataclass, field

from libraries.cases.case_runner import Case, run_case
from libraries.cases.context import CaseContext, Skip
from libraries.cases.stack import (
    app_address,
    app_environment,
    client_environment,
    wait_until_listed,
)
from libraries.cases.trial_observer import TrialTelemetry, dut_cores, judged_costs
from libraries.results.cost import CostSpec, add_costs
from libraries.results.efficiency import ProcessCost, RateCost, add_process_costs, add_rate_costs
from libraries.results.inference import DEFAULT_ALPHA
from libraries.results.measurement import Measurement, Trial
from libraries.results.plan import TrialPlan
from libraries.testbed.errors import HostStackError
from libraries.testbed.node import Node, Process
from libraries.tools.iperf3 import (
    IperfClientOptions,
    IperfResult,
    IperfServerOptions,
    run_iperf3_client,
    start_iperf3_server,
)

LOG = logging.getLogger(__name__)
IPERF_PORT = 5201


@dataclass
class TcpTermSetup:
    """The running iperf3 server ``(node, process)`` (an A/B switch restarts it and replaces
    it here, so a trial reads the running one) and the link MTUs changed, with the MTU each
    had: ``(node, interface, mtu)``."""

    server: tuple[str, Process] | None = None
    mtus: list[tuple[Node, str, int]] = field(default_factory=list)


def set_link_mtu(ctx: CaseContext, setup: TcpTermSetup, node_a: str, node_b: str,
                 mtu: int) -> None:
    """``mtu`` on both ends of the link joining ``node_a`` and ``node_b``, the old MTUs kept
    in ``setup`` for :func:`restore_link_mtus`; an end that is a DPDK NIC (vpp_driver dpdk) is
    left to VPP. A skip where the nodes share no link or the topology does not allow MTU
    changes (a lab without ``may_change: [mtu]``)."""
    testbed = ctx.testbed
    a = testbed.topology.resolve_node(node_a)
    b = testbed.topology.resolve_node(node_b)
    if not testbed.topology.allows_change("mtu"):
        raise Skip(f"topology {testbed.topology.name} does not allow changing the lab's "
                   "interface MTUs (add `may_change: [mtu]` to let the test set them and put "
                   "them back)")
    for link in testbed.topology.links:
        ends = link.ends()
        if {ends[0][0], ends[1][0]} == {a, b}:
            break
    else:
        raise Skip(f"topology {testbed.topology.name}: {a} and {b} share no link whose MTU "
                   "could be raised (loopback only)")
    for name, ifname, _ in ends:
        declared = testbed.topology.nodes[name].interfaces.get(ifname)
        if declared is not None and declared.vpp_driver == "dpdk":
            LOG.info("%s:%s is a DPDK NIC, not a kernel interface: VPP sets its MTU",
                     name, ifname)
            continue
        node = testbed.nodes[name]
        current = int(node.run(f"cat /sys/class/net/{shlex.quote(ifname)}/mtu",
                               timeout=10).stdout)
        node.run(f"ip link set dev {shlex.quote(ifname)} mtu {int(mtu)}", timeout=10,
                 sudo=True)
        setup.mtus.append((node, ifname, current))


def restore_link_mtus(setup: TcpTermSetup) -> None:
    """Put back every MTU :func:`set_link_mtu` changed (all of them, then the errors)."""
    errors = []
    while setup.mtus:
        node, ifname, mtu = setup.mtus.pop()
        try:
            node.run(f"ip link set dev {shlex.quote(ifname)} mtu {mtu}", timeout=10, sudo=True)
        except HostStackError as error:
            errors.append(str(error))
    if errors:
        raise HostStackError("; ".join(errors))


@dataclass(frozen=True)
class TcpRequest:
    """One test's load: from node ``client``, ``reverse`` (``-R``), ``streams`` (``-P``), the
    trial ``plan``, the ``stack`` and the links' ``mtu`` (a parameter of the record)."""

    client: str
    reverse: bool
    streams: int
    plan: TrialPlan
    stack: str
    mtu: int | None = None

    @classmethod
    def given(cls, client: str, reverse: object, streams: object, plan: TrialPlan, stack: str,
              mtu: object) -> TcpRequest:
        """The request from a keyword's arguments (Robot gives strings; an MTU of None or 0
        is the links' own)."""
        return cls(client, bool(reverse), int(streams), plan, stack,  # type: ignore[call-overload]
                   int(mtu) if mtu else None)  # type: ignore[call-overload]


def start_server(ctx: CaseContext, setup: TcpTermSetup, node: str, stack: str) -> None:
    """``iperf3 -s`` on ``node`` (port 5201, pinned to the node's ``server`` CPUs, on VPP's
    host stack with ``stack`` vpp where the suite runs VPP there), listening before it
    returns; an A/B side restarts it."""
    testbed = ctx.testbed
    target = testbed.node(node)
    vpp_env = app_environment(ctx, target.name, "server", stack, program="iperf3")
    env = testbed.topology.env_of(target.name, "iperf3", vpp_env)
    binary = testbed.topology.nodes[target.name].tools.get("iperf3", "iperf3")
    target.ensure_port_free(IPERF_PORT)
    options = IperfServerOptions(port=IPERF_PORT, ipv4_only=vpp_env is not None,
                                 cpus=testbed.topology.cpus_of(target.name, "server"))
    process = start_iperf3_server(target, binary, options, name="iperf3-server", env=env)
    if vpp_env:
        wait_until_listed(ctx, target.name, IPERF_PORT, "iperf3 server", process)
    else:
        target.wait_for_listener(IPERF_PORT, process)
    setup.server = (target.name, process)
    uses = {("tool", target.name, "iperf3"), ("env", "iperf3")}
    uses |= {("vpp", target.name), ("vcl", "server")} if vpp_env else set()
    ctx.component_started("iperf3-server", uses, lambda: target.stop(process),
                          lambda: start_server(ctx, setup, node, stack))


class TcpTermCase:
    """One test of the TCP termination case in ``ctx``."""

    def __init__(self, ctx: CaseContext, setup: TcpTermSetup, request: TcpRequest) -> None:
        if setup.server is None:
            raise HostStackError("start the iperf3 server first")
        testbed = ctx.testbed
        self.ctx, self.setup, self.request = ctx, setup, request
        self.tg = testbed.node(request.client)
        self.server = testbed.node(setup.server[0])
        self.address = app_address(ctx, "server", self.server.name, self.tg.name, request.stack)
        self.client_env = client_environment(ctx, self.tg.name, request.stack,
                                             program="iperf3")
        self.tcp_info = request.stack == "kernel"
        self.telemetry = TrialTelemetry.of(ctx)

    def trial(self, run: Trial) -> IperfResult:
        """One iperf3 client run; the server must still run after it."""
        # binary, environment and server read per trial: an A/B run switches them
        testbed, tg = self.ctx.testbed, self.tg
        binary = testbed.topology.nodes[tg.name].tools.get("iperf3", "iperf3")
        env = testbed.topology.env_of(tg.name, "iperf3", self.client_env())
        server_process = self.setup.server[1] if self.setup.server else None
        options = IperfClientOptions(server=self.address, port=IPERF_PORT,
                                     duration=run.seconds, reverse=self.request.reverse,
                                     parallel=self.request.streams,
                                     cpus=testbed.topology.cpus_of(tg.name, "load"))
        result = run_iperf3_client(tg, binary, options, stack_reports_tcp_info=self.tcp_info,
                                   env=env, cpu_ledger=self.telemetry.ledger(tg.name))
        if server_process is None or not self.server.is_running(server_process):
            log = self.server.read_log(server_process)[-1000:] if server_process else ""
            raise HostStackError(f"{self.server.where}: the iperf3 server died: {log!r}")
        return result

    def build(self, results: dict[str, list[IperfResult]], seconds: float) -> Measurement:
        """The measurement of the trials: throughput, the sender's figures, retransmits, the
        telemetry of these very trials, the efficiency metrics and the server's CPU per GB
        received (:mod:`libraries.results.cost`)."""
        runs = results["iperf3"]
        request, plan = self.request, self.request.plan
        measurement = Measurement(
            case="tcp_term", stack=request.stack,
            parameters={"reverse": request.reverse, "streams": request.streams,
                        "mtu": request.mtu, "trials": plan.trials,
                        "duration_s": plan.duration, "warmup_s": plan.warmup,
                        "path": "loopback" if self.address == "127.0.0.1" else "through links"},
            trial_seconds=seconds, alpha=self.ctx.alpha(DEFAULT_ALPHA),
        )
        measurement.add("throughput", [r.gbps for r in runs], "Gbit/s")
        measurement.evidence["sender_gbps"] = [r.sender_bps / 1e9 for r in runs]
        measurement.evidence["retransmits"] = [r.retransmits for r in runs]
        if not self.tcp_info:
            measurement.notes.append("retransmits and cwnd unavailable: VPP's host stack "
                                     "does not report TCP_INFO to iperf3")
        server = self.server.name
        self.telemetry.attach(measurement, results)
        trials = measurement.trial_telemetry or {}
        add_rate_costs(measurement, trials,
                       [RateCost("iperf3", "throughput", "gbps", dut=server)])
        costs = [ProcessCost("iperf3", server, "iperf3-server", "iperf3_server_cpu")]
        if request.stack == "vpp":
            costs.append(ProcessCost("iperf3", server, "vpp", "vpp_cpu"))
        add_process_costs(measurement, trials, costs)
        add_costs(measurement, [CostSpec(
            "iperf3", server, ("iperf3-server",), "GB", "the iperf3 server",
            dut_cores(self.ctx.testbed, server), vpp=request.stack == "vpp")],
            {"iperf3": [r.receiver_bytes / 1e9 for r in runs]}, trials)
        return measurement

    def case(self) -> Case:
        """The test as the runner measures it."""
        tg, stack = self.tg.name, self.request.stack
        uses = {("tool", tg, "iperf3"), ("env", "iperf3")}
        uses |= {("vcl", "client"), ("vpp", tg)} if stack == "vpp" else set()
        return Case("tcp_term", stack, {"iperf3": self.trial}, self.request.plan, self.build,
                    {"throughput": "higher_is_better"},
                    {"reverse": self.request.reverse, "streams": self.request.streams},
                    frozenset(uses), output="iperf3 JSON", generator=(tg, "iperf3-client"),
                    costs=judged_costs("", stack == "vpp"))

    def measure(self) -> Measurement:
        """Measure the test, plainly or as an A/B test."""
        return run_case(self.ctx, self.case(), self.telemetry)
