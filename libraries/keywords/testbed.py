"""Keywords to set up and tear down a testbed, reach its nodes and check their tools; the
work is :class:`libraries.cases.testbed_setup.SuiteTestbed`'s, kept in the suite's state."""

from __future__ import annotations

from robot.api.deco import keyword, library

from libraries.cases.suite_state import tear_down_suite
from libraries.keywords import context
from libraries.keywords.pool import PoolClient


@library(scope="SUITE", auto_keywords=False)
class TestbedKeywords:
    """Keywords to set up the testbed a topology describes, reach its nodes and tear it down.

    A topology file describes the nodes (their SSH address or, with ``provision: netns``,
    network namespaces built on this machine), their links, roles, CPUs and tools. A suite
    names it with ``-v TOPOLOGY:<name>`` (``topologies/<name>.yaml``: ``1node``, ``2node``,
    ``3node``) or a path. `Set Up Testbed` loads it, builds a ``netns`` testbed, connects to
    every node and records each node's tool versions as suite metadata; `Tear Down
    Testbed` stops everything started and removes what was built, failures included. A
    second Ctrl-C (Robot's forced stop, which skips teardowns) removes a built testbed at
    once (``libraries.testbed.interrupt``), and an exit that skips the teardown anyway (a
    third Ctrl-C) still removes it on the way out. Every other library of the suite reaches
    the nodes through the testbed set up here.

    Suites import it through ``resources/testbed.resource``:

    | =Setting= | =Value= | |
    | Library | libraries.keywords.testbed.TestbedKeywords | |
    | Suite Setup | Set Up Testbed | |
    | Suite Teardown | Tear Down Testbed | |

    | =Keyword= | =Arguments= | | |
    | ${nodes} = | Get Nodes | | |
    | Node Should Be Reachable | dut | | |
    | ${kernel} = | Run On Node | dut | uname -r |
    """

    @keyword("Set Up Testbed")
    def set_up_testbed(self, topology: str | None = None) -> None:
        """Set up the testbed of a topology: build it if asked, connect, record versions.

        Loads and validates the topology, builds it when it says ``provision: netns``,
        connects to every node over SSH and records each node's tool versions as suite
        metadata (``Topology``, ``Versions <node>``). Without ``topology``, the run's: ``-v
        TOPOLOGY``, or with ``-v LAB_POOL:<tag>`` a free lab of that pool (`Set Up Testbed
        From Lab Pool`). Call it once, in the suite setup; the suite teardown calls `Tear
        Down Testbed`.

        Args:
            topology: A topology's name (``topologies/<name>.yaml``, e.g. ``1node``,
                ``2node``, ``3node``) or a path to a topology file; none (default): the
                run's ``-v TOPOLOGY`` or ``-v LAB_POOL``.

        Fails with the file, key path and expectation for a bad topology, or with
        host:port and the SSH error for an unreachable node; nothing built is left behind
        on failure. Fails when called twice in one suite.

        Examples:
        | Set Up Testbed | |
        | Set Up Testbed | 1node |
        | Set Up Testbed | topologies/examples/lab-3node.yaml |
        """
        context.suite().set_up_testbed(topology, PoolClient.for_suite,
                                       context.set_suite_metadata, context.RobotLog())

    @keyword("Set Up Testbed From Lab Pool")
    def set_up_testbed_from_lab_pool(self, tag: str) -> str:
        """Acquire a free lab of a pabot lab pool and set up its testbed; return the lab's name.

        The pool is pabot's value sets (``pabot --resourcefile``; ``python -m
        libraries.nightly --pool`` writes them): one set per lab, tagged ``tag``, its
        ``topology`` value the lab's topology file. Waits while every lab is busy. A lab
        whose set-up fails (pre-flight: SSH, links, routes) is disabled for the rest of the
        run, with a warning, and the next free lab is tried. `Tear Down Testbed` gives the
        lab back. Events go to ``-v POOL_LOG:<file>`` when given. The suite must import
        ``pabot.PabotLib``.

        Args:
            tag: The pool's tag (`Set Up Testbed` gives ``-v LAB_POOL:<tag>``'s).

        Returns:
            The name of the lab acquired (also the suite metadata ``Lab``).

        Fails, naming each lab and why, when no lab of the pool is left; fails when called
        twice in one suite.

        Examples:
        | ${lab} = | Set Up Testbed From Lab Pool | hoststack-lab |
        """
        return context.suite().testbed.up_from_pool(PoolClient.for_suite(tag), tag,
                                                    context.set_suite_metadata,
                                                    context.RobotLog())

    @keyword("Tear Down Testbed")
    def tear_down_testbed(self) -> None:
        """Stop everything started on the nodes, disconnect and remove a built testbed.

        Stops every process started on any node, disconnects and removes a testbed built
        in namespaces; gives a lab acquired from the pool back, whatever happened. Does
        nothing when no testbed was set up, so it is safe in a suite teardown after a
        failed set-up.

        Fails listing what could not be stopped or removed (the lab is given back all the
        same).

        Examples:
        | Tear Down Testbed |
        """
        tear_down_suite(context.opened_suite(), context.RobotLog())

    @keyword("Stop Processes On All Nodes")
    def stop_processes_on_all_nodes(self, log_output: bool = False) -> None:
        """Stop every process any keyword started on any node (TERM, then KILL).

        The processes are stopped newest first on each node. Nothing to do once an
        interrupt removed the testbed. Use it in a test teardown.

        Args:
            log_output: ``${True}`` logs the tail of each process's output (e.g. after a
                failure); ``${False}`` (default) does not.

        Fails listing the processes that could not be stopped, after trying all of them.

        Examples:
        | Stop Processes On All Nodes | | |
        | ${failed} = | Evaluate | $TEST_STATUS == "FAIL" |
        | Stop Processes On All Nodes | log_output=${failed} | |
        """
        context.suite().testbed.stop_processes(bool(log_output), context.RobotLog())

    @keyword("Require Stack On Node")
    def require_stack_on_node(self, node: str, stack: str) -> None:
        """Skip the test unless a node can run the stack it measures.

        ``kernel`` always passes. ``vpp`` skips the test, with the reason, unless the
        topology declares VPP on the node (its ``vpp:`` paths) and VPP's binary is there.

        Args:
            node: The node: a node name of the topology or a role (``dut``, ``tg``,
                ``server``...; the first node with that role).
            stack: ``kernel`` or ``vpp``.

        Fails on any other ``stack``.

        Examples:
        | Require Stack On Node | dut | vpp |
        | Require Stack On Node | dut | ${stack} |
        """
        context.suite().testbed.require_stack(node, stack)

    @keyword("Get Topology Name")
    def get_topology_name(self) -> str:
        """Return the name of the running testbed's topology (e.g. for tags).

        Returns:
            The topology's ``name``, e.g. ``3node``.

        Fails when no testbed was set up in this suite.

        Examples:
        | ${name} = | Get Topology Name |
        | Set Tags | ${name} |
        """
        return context.testbed().topology.name

    @keyword("Run On Node")
    def run_on_node(self, node: str, command: str, timeout: float = 60.0,
                    sudo: bool = False) -> str:
        """Run a shell command on a node and return its standard output.

        Args:
            node: The node: a node name of the topology or a role (``dut``, ``tg``,
                ``server``...; the first node with that role).
            command: The shell command line, run by the node's shell over SSH.
            timeout: Seconds the command may take (default 60); past them it fails with
                the output so far.
            sudo: ``${True}`` runs it as root through sudo; ``${False}`` (default) as the
                node's user.

        Returns:
            The command's standard output, as it printed it.

        Fails with the exit code and output when the command exits non-zero, and when it
        times out.

        Examples:
        | ${kernel} = | Run On Node | dut | uname -r | |
        | Run On Node | dut | sysctl -w net.core.somaxconn=4096 | sudo=${True} | |
        | ${out} = | Run On Node | tg | iperf3 --version | timeout=10 | |
        """
        return context.testbed().node(node).run(command, timeout=timeout, sudo=sudo).stdout

    @keyword("Node Should Be Reachable")
    def node_should_be_reachable(self, node: str) -> None:
        """Check that a node answers over SSH with a Linux kernel.

        Runs ``uname -sr`` on the node.

        Args:
            node: The node: a node name of the topology or a role (``dut``, ``tg``,
                ``server``...; the first node with that role).

        Fails when the node cannot be reached or does not report a Linux kernel.

        Examples:
        | Node Should Be Reachable | dut |
        """
        context.suite().testbed.check_reachable(node)

    @keyword("Get Nodes")
    def get_nodes(self) -> list[str]:
        """Return the names of the topology's nodes.

        Returns:
            The node names, in the topology's order, e.g. ``['tg', 'dut', 'server']``.

        Examples:
        | ${nodes} = | Get Nodes | | |
        | FOR | ${node} | IN | @{nodes} |
        """
        return list(context.testbed().topology.nodes)

    @keyword("Get Declared Tools")
    def get_declared_tools(self, node: str) -> list[str]:
        """Return the names of the tools the topology declares on a node.

        Args:
            node: The node: a node name of the topology or a role (``dut``, ``tg``,
                ``server``...; the first node with that role).

        Returns:
            The names under the node's ``tools`` (e.g. ``nginx``, ``wrk``, ``iperf3``).

        Examples:
        | ${tools} = | Get Declared Tools | dut |
        """
        return context.suite().testbed.declared_tools(node)

    @keyword("Tool Should Answer On Node")
    def tool_should_answer_on_node(self, node: str, tool: str) -> str:
        """Ask a tool on a node for its version and return it.

        Runs the tool's version command on the node.

        Args:
            node: The node: a node name of the topology or a role (``dut``, ``tg``,
                ``server``...; the first node with that role).
            tool: A tool the topology declares on the node (a key of its ``tools``, e.g.
                ``nginx``).

        Returns:
            The version the tool reported; for a tool the topology lists in
            ``optional_tools`` that is absent, ``absent (optional): <reason>`` (and a
            warning is logged).

        Fails when the node declares no such tool, or the tool does not answer (with what
        it printed).

        Examples:
        | ${version} = | Tool Should Answer On Node | dut | nginx |
        """
        return context.suite().testbed.tool_answer(node, tool, context.RobotLog())

    @keyword("Require Tool On Node")
    def require_tool_on_node(self, node: str, tool: str) -> str:
        """Return the absolute path of a tool on a node, or skip the test.

        The tool's binary from the topology is resolved as the node runs it, sudo's PATH
        included, and must answer its version command.

        Args:
            node: The node: a node name of the topology or a role (``dut``, ``tg``,
                ``server``...; the first node with that role).
            tool: A tool name, a key of the node's ``tools`` (e.g. ``bpftrace``).

        Returns:
            The absolute path of the tool's binary on the node (the declared name when it
            cannot be resolved).

        Skips the test, with the reason, when the topology declares no such tool on the
        node or it does not answer there.

        Examples:
        | ${bpftrace} = | Require Tool On Node | dut | bpftrace |
        """
        return context.suite().testbed.require_tool(node, tool)



