"""Keywords for the TCP termination case (seed 001): an iperf3 server terminates TCP on the
DUT, an iperf3 client on the TG sends (or, with ``-R``, receives)."""

from __future__ import annotations

from robot.api.deco import keyword, library

from libraries.cases.tcp_term import (
    TcpRequest,
    TcpTermCase,
    restore_link_mtus,
    set_link_mtu,
    start_server,
)
from libraries.keywords import context
from libraries.results.measurement import Measurement


@library(scope="SUITE", auto_keywords=False)
class TcpTermKeywords:
    """Keywords of the TCP termination case (seed 001): iperf3 terminates TCP on the DUT.

    An iperf3 server runs on one node (the DUT), iperf3 clients on another (the TG) send to
    it, or with ``reverse`` receive from it, for a number of trials; the result is a
    measurement that ``Record Result`` and ``Check Criteria`` of the results library record
    and judge. The server runs on the Linux kernel's TCP stack or, with ``stack=vpp``, on
    VPP's host stack (started by ``Set Up VPP Host Stack On Node`` of the VPP library). The
    jumbo-frame row raises the MTU of the link between the nodes first and puts it back
    after the test.

    The library needs the testbed library (``Set Up Testbed``) in the same suite; suites
    import it through ``resources/tcp.resource``. A test, as ``resources/tcp.resource``
    writes it:

    | =Setting= | =Value= |
    | Library | libraries.keywords.tcp_term.TcpTermKeywords |

    | =Keyword= | =Arguments= | | | |
    | Set Link MTU Between Nodes | tg | dut | 9000 | |
    | Start Iperf3 Server On Node | dut | stack=kernel | | |
    | ${result} = | Measure TCP Throughput From Node | tg | streams=4 | reverse=${True} |
    | Record Result | ${result} | | | |
    | Check Criteria | ${result} | | | |
    | Restore Link MTUs | | | | |
    """

    @keyword("Start Iperf3 Server On Node")
    def start_iperf3_server_on_node(self, node: str = "dut", stack: str = "kernel") -> None:
        """Start an iperf3 server on a node and wait until it listens.

        Runs ``iperf3 -s`` on port 5201, pinned to the CPUs the topology gives the node's
        ``server`` role. In an A/B run a side that changes iperf3 restarts it.

        Args:
            node: The node to run the server on: a node name of the topology or a role
                (``dut``, ``tg``, ``server``...). Default ``dut``.
            stack: ``kernel`` (default) runs it on the Linux TCP stack; ``vpp`` runs it on
                VPP's host stack (LD_PRELOAD + VCL, IPv4 only) where the suite runs VPP on
                the node (``Set Up VPP Host Stack On Node``), else on the kernel's.

        Fails when port 5201 is taken on the node or the server does not listen.

        Examples:
        | Start Iperf3 Server On Node | dut | |
        | Start Iperf3 Server On Node | dut | stack=vpp |
        """
        start_server(context.case_context(), context.suite().tcp, node, stack)

    @keyword("Measure TCP Throughput From Node")
    def measure_tcp_throughput_from_node(
        self, client: str = "tg", reverse: bool = False, streams: int = 1,
        stack: str = "kernel",
        mtu: int | None = None,
    ) -> Measurement:
        """Measure TCP throughput with iperf3 clients from a node to the running server.

        Runs ``iperf3 -c`` from ``client`` (pinned to the node's ``load`` CPUs) to the
        server of `Start Iperf3 Server On Node`: a warm-up of ``-v WARMUP`` seconds, then
        ``-v TRIALS`` runs of ``-v DURATION`` seconds, and more while a pass criterion is
        still inconclusive (up to the budget of ``-v MAX_TRIALS`` / ``-v MAX_SECONDS``). In
        an A/B run the trials alternate between the two sides.

        Metric ``throughput`` is the receiver's Gbit/s (with ``reverse`` the client is the
        receiver). The sender's Gbit/s and the retransmits of each trial are evidence
        (retransmits are unavailable on VPP's host stack). Every node's CPU is read around
        each measured trial (record ``telemetry``); from it ``gbps_per_dut_core``,
        ``dut_busy_cores``, ``dut_softirq_share`` and the server's CPU
        (``iperf3_server_cpu``; ``vpp_cpu`` too on VPP).

        Args:
            client: The node iperf3's client runs on, a node name or a role. Default ``tg``.
            reverse: ``${True}`` adds ``-R``: the server sends, the client receives.
                Default ``${False}``.
            streams: Parallel streams (iperf3 ``-P``), default 1.
            stack: ``kernel`` (default) or ``vpp``: the stack the test measures; with
                ``vpp`` the client runs over VPP where the suite runs VPP on its node.
            mtu: The links' MTU the test set (e.g. ``9000``), recorded as a parameter;
                ``${None}`` (default): the links' own.

        Returns:
            The measurement (metrics with every trial, parameters, evidence) to give to
            ``Record Result`` and ``Check Criteria``.

        Fails when no iperf3 server was started, a setting is not a whole number, an
        iperf3 run fails or the server dies during a trial.

        Examples:
        | ${result} = | Measure TCP Throughput From Node | tg | | |
        | ${result} = | Measure TCP Throughput From Node | tg | reverse=${True} | streams=4 |
        | ${result} = | Measure TCP Throughput From Node | tg | streams=4 | mtu=9000 |
        """
        ctx = context.case_context()
        request = TcpRequest.given(client, reverse, streams, ctx.settings.plan, stack, mtu)
        return TcpTermCase(ctx, context.suite().tcp, request).measure()

    @keyword("Set Link MTU Between Nodes")
    def set_link_mtu_between_nodes(self, node_a: str, node_b: str, mtu: int) -> None:
        """Set the MTU on both ends of the link joining two nodes.

        The old MTUs are kept and come back with `Restore Link MTUs` (call it in the test's
        teardown). An end that is a DPDK NIC (``vpp_driver: dpdk``) is left to VPP, which
        sets its MTU itself.

        Args:
            node_a: One end of the link: a node name or a role (e.g. ``tg``).
            node_b: The other end (e.g. ``dut``).
            mtu: The MTU to set, in bytes (e.g. ``9000`` for jumbo frames).

        Skips the test when the nodes share no link (e.g. the one-node loopback testbed) or
        the topology does not allow MTU changes (a lab without ``may_change: [mtu]``); fails
        when ``ip link set`` fails.

        Examples:
        | Set Link MTU Between Nodes | tg | dut | 9000 |
        """
        set_link_mtu(context.case_context(), context.suite().tcp, node_a, node_b, mtu)

    @keyword("Restore Link MTUs")
    def restore_link_mtus(self) -> None:
        """Put back every MTU changed by `Set Link MTU Between Nodes`.

        Every MTU is restored even when one fails; nothing happens when none was changed,
        so it belongs in the test teardown.

        Fails naming each MTU that could not be put back.

        Examples:
        | [Teardown] | Restore Link MTUs |
        """
        restore_link_mtus(context.suite().tcp)
