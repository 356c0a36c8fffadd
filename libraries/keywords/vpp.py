"""Keywords to run VPP's host stack on a node and place applications on it (LD_PRELOAD + VCL):
adapters of :class:`libraries.cases.vpp.VppHostStack`, which holds the logic and the layouts."""

from __future__ import annotations

from typing import TYPE_CHECKING

from robot.api.deco import keyword, library

from libraries.cases.capacity import skip_where_vpp_shares_its_cores
from libraries.keywords import context

if TYPE_CHECKING:
    pass


@library(scope="SUITE", auto_keywords=False)
class VppKeywords:
    """Keywords to run VPP's host stack on a node and place the applications on it.

    A test on VPP's host stack (``stack=vpp``) starts VPP on the DUT from the topology's
    ``vpp:`` install and CPUs, configures it through its Python API (PAPI), and the case
    keywords then start their applications (nginx, iperf3, wrk) over it with LD_PRELOAD and
    a VCL config. Two layouts, as in seeds 000/001:

    - loopback (a one-node topology): one VPP loopback, IP table and app namespace per
      application (server, proxy, client), with routes between them; every application on
      the node runs over VPP in its own namespace;
    - Ethernet (several nodes): VPP takes the DUT's link interfaces over, each as its
      topology ``vpp_driver`` says (``af_packet`` on a kernel interface, ``dpdk`` on a NIC
      by PCI address, ``dpdk_vdev``: DPDK on a kernel interface); applications on the DUT
      use VPP's default app namespace; the other nodes stay on the kernel stack.

    `Set Up VPP Host Stack On Node` chooses the layout; `Stop VPP On All Nodes` undoes
    everything in the test teardown. The library needs the testbed library (``Set Up
    Testbed``) in the same suite; suites import it through ``resources/measure.resource``,
    whose ``Prepare Stack On Node`` and ``Stop Test Processes And Collect Logs`` do:

    | =Setting= | =Value= |
    | Library | libraries.keywords.vpp.VppKeywords |

    | =Keyword= | =Arguments= | | | | |
    | Require Stack On Node | dut | vpp | | | |
    | Set Up VPP Host Stack On Node | dut | server | proxy | client | mtu=${None} |
    | Run Keyword And Continue On Failure | Stop VPP On All Nodes | | | | |
    """

    # -- keywords ------------------------------------------------------------------------------

    @keyword("Start VPP On Node")
    def start_vpp_on_node(self, node: str = "dut", mtu: int | None = None) -> None:
        """Start VPP on a node and wait until its API answers.

        Renders a startup.conf: main core ``cpus.vpp_main``, workers on ``cpus.vpp_workers``
        (none: ``workers 0``), the ``dpdk`` block of the node's dpdk interfaces (multi-node
        testbeds), seed 001's jumbo settings when ``mtu`` is above 1500, 4k pages when the
        node has no hugepages, and an A/B side's startup sections. Starts VPP, waits until
        its API answers over the SSH-forwarded socket and checks its threads
        (``show_threads``) against the topology; the startup.conf is attached to the log.
        `Set Up VPP Host Stack On Node` calls it; call it alone to lay out the host stack
        yourself.

        Args:
            node: The node VPP runs on: a node name of the topology or a role. Default
                ``dut``.
            mtu: The link MTU VPP's interfaces get (e.g. ``9000``); ``${None}``
                (default): the links' own.

        Skips the test, with the reason, where the node has no hugepages for a jumbo
        ``mtu`` or its interfaces cannot take that MTU. Fails when the topology declares no
        VPP on the node, VPP already runs there, an interface is missing (a DPDK NIC: or not
        on a DPDK-capable driver), or VPP does not start or answer.

        Examples:
        | Start VPP On Node | dut | |
        | Start VPP On Node | dut | mtu=9000 |
        """
        context.suite().vpp.start(context.case_context(), node, mtu=mtu)

    @keyword("Set Up VPP Host Stack On Node")
    def set_up_vpp_host_stack_on_node(self, node: str = "dut", *apps: str,
                                      mtu: int | None = None) -> None:
        """Start VPP on a node and lay its host stack out for the test's applications.

        On a one-node topology: the loopback layout (`Configure VPP Loopback Host Stack`
        for ``apps``). Otherwise the Ethernet layout: the node's link interfaces handed to
        VPP (`Give Node Interfaces To VPP`). In an A/B run a side with another VPP install
        or startup sections restarts VPP and lays it out again.

        Args:
            node: The node VPP runs on: a node name of the topology or a role. Default
                ``dut``.
            apps: The applications that run over VPP on a one-node topology, in order:
                any of ``server``, ``proxy`` and ``client``; none given: all three. Ignored
                by the Ethernet layout.
            mtu: The MTU of the interfaces handed to VPP (e.g. ``9000``, seed 001's jumbo
                row); ``${None}`` (default): the link's. A named argument.

        Skips the test, with the reason, where the topology does not allow moving the
        node's link addresses into VPP (a lab without ``may_change: [addresses]``; DPDK
        NICs need no such permission), or as `Start VPP On Node` does. Fails as `Start VPP
        On Node` does.

        Examples:
        | Set Up VPP Host Stack On Node | dut | server | proxy | client |
        | Set Up VPP Host Stack On Node | dut | server | client | mtu=9000 |
        """
        context.suite().vpp.set_up(context.case_context(), node, apps, mtu=mtu)

    @keyword("Configure VPP Loopback Host Stack")
    def configure_vpp_loopback_host_stack(self, node: str = "dut",
                                          apps: tuple[str, ...] | list[str] = (
                                              "server", "proxy", "client")) -> None:
        """Configure seed 000/001's one-node loopback layout on the running VPP.

        Through PAPI, per application: a loopback interface, an IP table, its address
        (``server`` 198.18.101.1/24, ``proxy`` 198.18.102.1/24, ``client``
        198.18.103.1/24, inside VPP only) and an app namespace (secret 1234); then routes
        via lookup between every pair of them. The case keywords then run each application
        in its namespace. `Set Up VPP Host Stack On Node` calls it on a one-node topology.

        Args:
            node: The node VPP runs on (`Start VPP On Node` first): a node name or a role.
                Default ``dut``.
            apps: The applications, a list of ``server``, ``proxy`` and ``client``
                (default: all three); the order numbers their namespaces from 1.

        Fails when VPP does not run on the node, an application is not one of the three,
        or a PAPI call fails.

        Examples:
        | Start VPP On Node | dut | |
        | Configure VPP Loopback Host Stack | dut | ${apps} |
        """
        context.suite().vpp.configure_loopback(context.case_context(), node, tuple(apps))

    @keyword("Give Node Interfaces To VPP")
    def give_node_interfaces_to_vpp(self, node: str = "dut", mtu: int | None = None) -> None:
        """Hand each of a node's link interfaces to the running VPP.

        Each interface goes to VPP as its topology ``vpp_driver`` says (``af_packet``: a
        host interface with the kernel interface's MAC; ``dpdk`` / ``dpdk_vdev``: the
        interface the dpdk plugin made at start-up), then through PAPI: found by name,
        hardware MTU, admin up, the topology's address. On a ``netns`` testbed the veth peer
        of each ``dpdk_vdev`` interface gets its TX checksum offload switched off (DPDK's
        af_packet driver would leave TCP checksums unfilled). Kernel addresses of
        interfaces the kernel still sees, and the peers' settings, come back with `Stop VPP
        On All Nodes`. `Set Up VPP Host Stack On Node` calls it on a multi-node topology.

        Args:
            node: The node VPP runs on (`Start VPP On Node` first): a node name or a role.
                Default ``dut``.
            mtu: The interfaces' MTU (e.g. ``9000``); ``${None}`` (default): the link's.

        Skips the test, with the reason, where the topology does not allow moving the
        node's link addresses into VPP (``may_change: [addresses]``). Fails when VPP does
        not run on the node or an interface cannot be attached.

        Examples:
        | Give Node Interfaces To VPP | dut | |
        | Give Node Interfaces To VPP | dut | mtu=9000 |
        """
        context.suite().vpp.give_interfaces(context.case_context(), node, mtu=mtu)

    @keyword("Skip Capacity Where VPP Shares Its Cores")
    def skip_capacity_where_vpp_shares_its_cores(self, node: str, stack: str) -> None:
        """Skip a capacity test where VPP would share its cores with other programs.

        Skips where ``stack`` is ``vpp`` and VPP on ``node`` forwards on a core the topology
        also pins other programs to (``Topology.vpp_core_sharers``: the proxy, the server,
        the load generator on a one-machine testbed), or on cores it does not pin
        (``cpus.vpp_main`` not set).

        VPP's main loop polls (it takes every cycle the scheduler gives it: 69 % of CPU 0
        beside the proxy and the server on the 2-core VM), so a capacity under a latency
        goal (``${LATENCY_SLO}``: a millisecond budget per request) there measures how they
        take turns on that core, not the host stack: on the 2-core VM every VPP placement
        shares CPU 0, four quiet runs confirmed 1,435 to 4,620 requests/s and a fifth
        refused its knee of 1,105 as far below the closed-loop maximum. The closed-loop
        rows are not affected (their interval carries the turn-taking). An A/B run
        (``-v AB``) compares closed-loop rates, not capacities, and is never skipped here;
        the kernel stack neither. ``-v CAPACITY_SHARED_CORES:yes`` measures it anyway, with a
        warning naming the keys. Call it before anything is started.

        Args:
            node: The node VPP would run on: a node name or a role (e.g. ``dut``).
            stack: The test's stack: ``kernel`` (never skipped) or ``vpp``.

        Examples:
        | Skip Capacity Where VPP Shares Its Cores | dut | ${stack} |
        | Skip Capacity Where VPP Shares Its Cores | dut | vpp |
        """
        skip_where_vpp_shares_its_cores(context.case_context(), node, stack)

    @keyword("Stop VPP On All Nodes")
    def stop_vpp_on_all_nodes(self) -> None:
        """Undo every VPP set-up of the test and stop VPP on every node.

        For each VPP started: logs VPP's show outputs (``show session verbose``, ``show
        app``, ``show errors``, ``show hardware``, ``show log``), undoes the loopback
        layout and the interfaces' set-up (PAPI), stops VPP (its output attached
        to the log), gives moved interface addresses back to the kernel and restores the
        peers' checksum settings; every step runs even if one fails. Once an interrupt
        removed the testbed (VPP went with it) only the local side (PAPI, the socket
        forward) is closed. Does nothing when no VPP was started: use it in every test
        teardown.

        Fails listing every step that failed, after running all of them.

        Examples:
        | Run Keyword And Continue On Failure | Stop VPP On All Nodes |
        """
        context.suite().vpp.stop_started(context.case_context)
