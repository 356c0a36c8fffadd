"""Keywords for the TCP termination case (seed 001): an iperf3 server terminates TCP on the
DUT, an iperf3 client on the TG sends (or, with ``-R``, receives)."""

from __future__ import annotations

from robot.api.deco import keyword, library

from libraries.cases.tcp_term import (
    TcpRequest,
    TcpTermCase,
    TcpTermSetup,
    restore_link_mtus,
    set_link_mtu,
    start_server,
)
from libraries.keywords import context
from libraries.results.measurement import Measurement
from libraries.results.settings import parse_plan


@library(scope="SUITE", auto_keywords=False)
class TcpTermKeywords:
    """Start an iperf3 server, measure TCP throughput with iperf3 clients, change link MTUs
    for the jumbo-frame variant (restored by ``Restore Link MTUs``)."""

    def __init__(self) -> None:
        self._setup = TcpTermSetup()

    @keyword("Start Iperf3 Server On Node")
    def start_iperf3_server_on_node(self, node: str = "dut", stack: str = "kernel") -> None:
        """Start ``iperf3 -s`` on ``node`` (port 5201, pinned to the node's ``server`` CPUs)
        and wait until it listens."""
        start_server(context.case_context(), self._setup, node, stack)

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
        request = TcpRequest(client, bool(reverse), int(streams),
                             parse_plan(trials, duration, warmup), stack,
                             int(mtu) if mtu else None)
        return TcpTermCase(context.case_context(), self._setup, request).measure()

    @keyword("Set Link MTU Between Nodes")
    def set_link_mtu_between_nodes(self, node_a: str, node_b: str, mtu: int) -> None:
        """Set ``mtu`` on both ends of the link joining ``node_a`` and ``node_b``; the old
        MTUs come back with ``Restore Link MTUs``; an end that is a DPDK NIC (vpp_driver
        dpdk) is left to VPP. Skips when the nodes share no link (e.g. the 1node loopback
        testbed) or the topology does not allow MTU changes (a lab without
        ``may_change: [mtu]``)."""
        set_link_mtu(context.case_context(), self._setup, node_a, node_b, mtu)

    @keyword("Restore Link MTUs")
    def restore_link_mtus(self) -> None:
        """Put back every MTU changed by ``Set Link MTU Between Nodes``."""
        restore_link_mtus(self._setup)
