"""Keywords for the TCP termination case (seed 001): an iperf3 server terminates TCP on the
DUT, an iperf3 client on the TG sends (or, with ``-R``, receives)."""

from __future__ import annotations

import logging
import shlex

from robot.api import SkipExecution
from robot.api.deco import keyword, library

from libraries.keywords import context, tool_env
from libraries.keywords.ab import component_started
from libraries.keywords.case import Case, run_case
from libraries.keywords.telemetry import TrialTelemetry
from libraries.keywords.vpp import (
    app_address,
    app_environment,
    client_environment,
    wait_until_listed,
)
from libraries.results.efficiency import ProcessCost, RateCost, add_process_costs, add_rate_costs
from libraries.results.inference import DEFAULT_ALPHA
from libraries.results.measurement import Measurement, Trial
from libraries.results.settings import parse_plan
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


@library(scope="SUITE", auto_keywords=False)
class TcpTermKeywords:
    """Start an iperf3 server, measure TCP throughput with iperf3 clients, change link MTUs
    for the jumbo-frame variant (restored by ``Restore Link MTUs``)."""

    def __init__(self) -> None:
        self._server: tuple[str, Process] | None = None
        self._mtus: list[tuple[Node, str, int]] = []

    @keyword("Start Iperf3 Server On Node")
    def start_iperf3_server_on_node(self, node: str = "dut", stack: str = "kernel") -> None:
        """Start ``iperf3 -s`` on ``node`` (port 5201, pinned to the node's ``server`` CPUs)
        and wait until it listens."""
        testbed = context.testbed()
        target = testbed.node(node)
        vpp_env = app_environment(target.name, "server", stack, program="iperf3")
        env = tool_env(testbed, target.name, "iperf3", vpp_env)
        binary = testbed.topology.nodes[target.name].tools.get("iperf3", "iperf3")
        target.ensure_port_free(IPERF_PORT)
        options = IperfServerOptions(port=IPERF_PORT, ipv4_only=vpp_env is not None,
                                     cpus=testbed.topology.cpus_of(target.name, "server"))
        process = start_iperf3_server(target, binary, options, name="iperf3-server", env=env)
        if vpp_env:
            wait_until_listed(target.name, IPERF_PORT, "iperf3 server", process)
        else:
            target.wait_for_listener(IPERF_PORT, process)
        self._server = (target.name, process)
        uses = {("tool", target.name, "iperf3"), ("env", "iperf3")}
        uses |= {("vpp", target.name), ("vcl", "server")} if vpp_env else set()
        component_started("iperf3-server", uses, lambda: target.stop(process),
                          lambda: self.start_iperf3_server_on_node(node, stack))

    @keyword("Measure TCP Throughput From Node")
    def measure_tcp_throughput_from_node(
        self, client: str = "tg", reverse: bool = False, streams: int = 1,
        trials: str | int = 5, duration: str | int = 2, warmup: str | int = 1,
        stack: str = "kernel",
        mtu: int | None = None,
    ) -> Measurement:
        """Run ``iperf3 -c`` from ``client`` to the running server: a warm-up, then
        ``trials`` runs of ``duration`` s; ``reverse`` adds ``-R``, ``streams`` sets ``-P``.

        Metric ``throughput`` is the receiver's Gbit/s (with ``-R`` the client is the
        receiver). Retransmits per trial are evidence (unavailable on VPP's host stack).
        Every node's CPU is read around each measured trial (record ``telemetry``); from it
        ``gbps_per_dut_core``, ``dut_busy_cores``, ``dut_softirq_share`` and the server's
        CPU (``iperf3_server_cpu``; ``vpp_cpu`` on VPP).
        """
        if self._server is None:
            raise HostStackError("start the iperf3 server first")
        testbed = context.testbed()
        tg = testbed.node(client)
        server = testbed.node(self._server[0])
        address = app_address(testbed, "server", server.name, tg.name, stack)
        client_env = client_environment(tg.name, stack, program="iperf3")
        plan = parse_plan(trials, duration, warmup)
        tcp_info = stack == "kernel"
        telemetry = TrialTelemetry.for_current_suite(testbed)

        def trial(run: Trial) -> IperfResult:
            # binary, environment and server read per trial: an A/B run switches them
            binary = testbed.topology.nodes[tg.name].tools.get("iperf3", "iperf3")
            env = tool_env(testbed, tg.name, "iperf3", client_env())
            server_process = self._server[1] if self._server else None
            options = IperfClientOptions(server=address, port=IPERF_PORT, duration=run.seconds,
                                         reverse=bool(reverse), parallel=int(streams),
                                         cpus=testbed.topology.cpus_of(tg.name, "load"))
            result = run_iperf3_client(tg, binary, options, stack_reports_tcp_info=tcp_info,
                                       env=env, cpu_ledger=telemetry.ledger(tg.name))
            if server_process is None or not server.is_running(server_process):
                log = server.read_log(server_process)[-1000:] if server_process else ""
                raise HostStackError(f"{server.where}: the iperf3 server died: {log!r}")
            return result

        judge = context.judge()

        def build(results: dict[str, list[IperfResult]], seconds: float) -> Measurement:
            runs = results["iperf3"]
            measurement = Measurement(
                case="tcp_term", stack=stack,
                parameters={"reverse": bool(reverse), "streams": int(streams),
                            "mtu": int(mtu) if mtu else None, "trials": plan.trials,
                            "duration_s": plan.duration, "warmup_s": plan.warmup,
                            "path": "loopback" if address == "127.0.0.1" else "through links"},
                trial_seconds=seconds, alpha=judge.settings.alpha if judge else DEFAULT_ALPHA,
            )
            measurement.add("throughput", [r.gbps for r in runs], "Gbit/s")
            measurement.evidence["sender_gbps"] = [r.sender_bps / 1e9 for r in runs]
            measurement.evidence["retransmits"] = [r.retransmits for r in runs]
            if not tcp_info:
                measurement.notes.append("retransmits and cwnd unavailable: VPP's host stack "
                                         "does not report TCP_INFO to iperf3")
            telemetry.attach(measurement)
            add_rate_costs(measurement, telemetry.trials,
                           [RateCost("iperf3", "throughput", "gbps", dut=server.name)])
            costs = [ProcessCost("iperf3", server.name, "iperf3-server", "iperf3_server_cpu")]
            if stack == "vpp":
                costs.append(ProcessCost("iperf3", server.name, "vpp", "vpp_cpu"))
            add_process_costs(measurement, telemetry.trials, costs)
            return measurement

        uses = {("tool", tg.name, "iperf3"), ("env", "iperf3")}
        uses |= {("vcl", "client"), ("vpp", tg.name)} if stack == "vpp" else set()
        case = Case("tcp_term", stack, {"iperf3": trial}, plan, build,
                    {"throughput": "higher_is_better"},
                    {"reverse": bool(reverse), "streams": int(streams)}, frozenset(uses),
                    output="iperf3 JSON", generator=(tg.name, "iperf3-client"))
        return run_case(case, telemetry)

    @keyword("Set Link MTU Between Nodes")
    def set_link_mtu_between_nodes(self, node_a: str, node_b: str, mtu: int) -> None:
        """Set ``mtu`` on both ends of the link joining ``node_a`` and ``node_b``; the old
        MTUs come back with ``Restore Link MTUs``; an end that is a DPDK NIC (vpp_driver
        dpdk) is left to VPP. Skips when the nodes share no link (e.g. the 1node loopback
        testbed) or the topology does not allow MTU changes (a lab without
        ``may_change: [mtu]``)."""
        testbed = context.testbed()
        a = testbed.topology.resolve_node(node_a)
        b = testbed.topology.resolve_node(node_b)
        if not testbed.topology.allows_change("mtu"):
            raise SkipExecution(f"topology {testbed.topology.name} does not allow changing "
                                "the lab's interface MTUs (add `may_change: [mtu]` to let the "
                                "test set them and put them back)")
        for link in testbed.topology.links:
            ends = link.ends()
            if {ends[0][0], ends[1][0]} == {a, b}:
                break
        else:
            raise SkipExecution(f"topology {testbed.topology.name}: {a} and {b} share no "
                                "link whose MTU could be raised (loopback only)")
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
            self._mtus.append((node, ifname, current))

    @keyword("Restore Link MTUs")
    def restore_link_mtus(self) -> None:
        """Put back every MTU changed by ``Set Link MTU Between Nodes``."""
        errors = []
        while self._mtus:
            node, ifname, mtu = self._mtus.pop()
            try:
                node.run(f"ip link set dev {shlex.quote(ifname)} mtu {mtu}", timeout=10,
                         sudo=True)
            except HostStackError as error:
                errors.append(str(error))
        if errors:
            raise HostStackError("; ".join(errors))
