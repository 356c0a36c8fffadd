"""Keywords to set up and tear down a testbed, reach its nodes and check their tools."""

from __future__ import annotations

import atexit
import functools
import logging
import shlex

from robot.api import SkipExecution, logger
from robot.api.deco import keyword, library
from robot.libraries.BuiltIn import BuiltIn

from libraries.cases.context import CaseContext
from libraries.keywords.pool import PoolClient
from libraries.testbed.errors import HostStackError, ToolMissing
from libraries.testbed.interrupt import InterruptGuard
from libraries.testbed.netns import make_prefix
from libraries.testbed.provision import Testbed
from libraries.testbed.teardown import teardown_prefix
from libraries.testbed.topology import Topology
from libraries.testbed.topology_file import load_topology
from libraries.tools.versions import node_versions, tool_version, versions_line

LOG = logging.getLogger(__name__)


def vpp_skip_reason(topology: Topology, node: str, *, installed: bool) -> str | None:
    """Why a VPP test skips on ``node`` of ``topology`` (None: it runs): the topology declares
    no VPP there, or VPP's binary is not on the node (``installed``: ``test -x`` of it passed).
    The README and docs quote these messages (``utest/test_docs_quotes.py`` checks them)."""
    vpp = topology.nodes[node].vpp
    if vpp is None:
        return f"VPP not declared on {node} in topology {topology.name} (no 'vpp:' paths)"
    if not installed:
        return f"VPP not installed on {node}: {vpp.bin} missing"
    return None


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
    | Suite Setup | Set Up Testbed | ${TOPOLOGY} |
    | Suite Teardown | Tear Down Testbed | |

    | =Keyword= | =Arguments= | | |
    | ${nodes} = | Get Nodes | | |
    | Node Should Be Reachable | dut | | |
    | ${kernel} = | Run On Node | dut | uname -r |
    """

    def __init__(self) -> None:
        self._testbed: Testbed | None = None
        self._pool: PoolClient | None = None
        self._at_exit: functools.partial[None] | None = None
        self.versions: dict[str, dict[str, str]] = {}
        self.case_context: CaseContext | None = None
        """The cases' context of this suite, kept for :mod:`libraries.keywords.context`."""

    @property
    def testbed(self) -> Testbed:
        """The running testbed; fails when ``Set Up Testbed`` has not run in this suite."""
        if self._testbed is None:
            raise HostStackError("no testbed: the suite setup must call 'Set Up Testbed'")
        return self._testbed

    @keyword("Set Up Testbed")
    def set_up_testbed(self, topology: str = "3node") -> None:
        """Set up the testbed of a topology: build it if asked, connect, record versions.

        Loads and validates the topology, builds it when it says ``provision: netns``,
        connects to every node over SSH and records each node's tool versions as suite
        metadata (``Topology``, ``Versions <node>``). Call it once, in the suite setup; the
        suite teardown calls `Tear Down Testbed`.

        Args:
            topology: A topology's name (``topologies/<name>.yaml``, e.g. ``1node``,
                ``2node``, ``3node``) or a path to a topology file (``${TOPOLOGY}``, from
                ``-v TOPOLOGY``). Default ``3node``.

        Fails with the file, key path and expectation for a bad topology, or with
        host:port and the SSH error for an unreachable node; nothing built is left behind
        on failure. Fails when called twice in one suite.

        Examples:
        | Set Up Testbed | ${TOPOLOGY} |
        | Set Up Testbed | 1node |
        | Set Up Testbed | topologies/examples/lab-3node.yaml |
        """
        if self._testbed is not None:
            raise HostStackError("Set Up Testbed called twice in one suite")
        spec = load_topology(topology)
        prefix = make_prefix(spec.name, "robot")
        # a Ctrl-C while it is built fails the set-up, which removes what was built; a second
        # one in the middle of that removal removes the rest at once (as during a test)
        guard = InterruptGuard.install() if spec.provision == "netns" else None
        building = f"testbed {prefix} (being built)"
        if guard is not None:
            guard.protect(building, functools.partial(teardown_prefix, prefix))
        try:
            self._testbed = Testbed.up(spec, prefix=prefix)
        finally:
            if guard is not None:
                guard.release(building)
        self._guard_against_forced_stop(self._testbed)
        builtin = BuiltIn()
        builtin.set_suite_metadata("Topology", self._testbed.topology.name)
        for name, node in self._testbed.nodes.items():
            spec = self._testbed.topology.nodes[name]
            versions = node_versions(node, spec.tools)
            self.versions[name] = versions
            text = versions_line(versions, spec.optional_tools)
            builtin.set_suite_metadata(f"Versions {name}", text)
            LOG.info("%s versions: %s", name, text)

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
            tag: The pool's tag (``${LAB_POOL}``, from ``-v LAB_POOL:<tag>``).

        Returns:
            The name of the lab acquired (also the suite metadata ``Lab``).

        Fails, naming each lab and why, when no lab of the pool is left; fails when called
        twice in one suite.

        Examples:
        | ${lab} = | Set Up Testbed From Lab Pool | ${LAB_POOL} |
        """
        if self._pool is not None:
            raise HostStackError("Set Up Testbed From Lab Pool called twice in one suite")
        pool = PoolClient.for_suite(tag)
        failures: list[str] = []
        while True:
            try:
                lab, topology = pool.acquire()
            except Exception as error:  # PabotLib: every lab disabled, or no pool at all
                raise HostStackError(
                    f"no lab left in pool {tag!r}: " + ("; ".join(failures) or str(error))
                    + " (run with pabot --resourcefile; see python -m libraries.nightly "
                    "--pool)") from None
            try:
                self.set_up_testbed(topology)
            except (HostStackError, OSError) as error:
                failures.append(f"{lab}: {error}")
                logger.warn(f"lab {lab} failed its pre-flight and leaves the pool: {error}")
                self._discard_testbed()
                pool.disable(str(error))
                continue
            self._pool = pool
            BuiltIn().set_suite_metadata("Lab", lab)
            return lab

    def _discard_testbed(self) -> None:
        testbed, self._testbed = self._testbed, None
        if testbed is not None:
            try:
                testbed.down()
            except HostStackError as error:
                logger.warn(f"testbed teardown after a failed set-up: {error}")
            finally:
                self._unguard(testbed)

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
        pool, self._pool = self._pool, None
        try:
            if self._testbed is None:
                return
            testbed, self._testbed = self._testbed, None
            if testbed.removed:
                logger.info(f"testbed {testbed.run_id} was already removed after the interrupt")
            try:
                testbed.down()
            finally:  # a second Ctrl-C while down() runs still removes everything at once
                self._unguard(testbed)
        finally:
            if pool is not None:
                pool.release()

    def _guard_against_forced_stop(self, testbed: Testbed) -> None:
        if testbed.local is not None:
            guard = InterruptGuard.install()
            if guard is not None:
                guard.protect(f"testbed {testbed.run_id}", testbed.remove_now)
        self._at_exit = functools.partial(_down_at_exit, testbed)
        atexit.register(self._at_exit)

    def _unguard(self, testbed: Testbed) -> None:
        guard = InterruptGuard.install()
        if guard is not None:
            guard.release(f"testbed {testbed.run_id}")
        if self._at_exit is not None:
            atexit.unregister(self._at_exit)
            self._at_exit = None

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
        if self.testbed.removed:
            logger.info("no process to stop: the testbed was removed after the interrupt")
            return
        errors = []
        for node in self.testbed.nodes.values():
            for process in reversed(node.processes):
                try:
                    output = node.stop(process)
                except HostStackError as error:
                    errors.append(str(error))
                    continue
                if log_output:
                    logger.info(f"{node.name}: output of {process.name} ({process.command}):\n"
                                f"{output[-3000:] or '(empty)'}")
        if errors:
            raise HostStackError("; ".join(errors))

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
        if stack == "kernel":
            return
        if stack != "vpp":
            raise HostStackError(f"unknown stack {stack!r}: expected kernel or vpp")
        topology = self.testbed.topology
        name = topology.resolve_node(node)
        vpp = topology.nodes[name].vpp
        installed = vpp is not None and self.testbed.nodes[name].run(
            f"test -x {shlex.quote(vpp.bin)}", timeout=10, check=False).exit_code == 0
        if (reason := vpp_skip_reason(topology, name, installed=installed)) is not None:
            raise SkipExecution(reason)

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
        return self.testbed.topology.name

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
        return self.testbed.node(node).run(command, timeout=timeout, sudo=sudo).stdout

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
        target = self.testbed.node(node)
        kernel = target.run("uname -sr", timeout=10).stdout.strip()
        if not kernel.startswith("Linux"):
            raise HostStackError(f"{target.where}: `uname -sr` answered {kernel!r}")

    @keyword("Get Nodes")
    def get_nodes(self) -> list[str]:
        """Return the names of the topology's nodes.

        Returns:
            The node names, in the topology's order, e.g. ``['tg', 'dut', 'server']``.

        Examples:
        | ${nodes} = | Get Nodes | | |
        | FOR | ${node} | IN | @{nodes} |
        """
        return list(self.testbed.topology.nodes)

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
        name = self.testbed.topology.resolve_node(node)
        return list(self.testbed.topology.nodes[name].tools)

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
        name = self.testbed.topology.resolve_node(node)
        spec = self.testbed.topology.nodes[name]
        binary = spec.tools.get(tool)
        if binary is None:
            raise HostStackError(f"topology {self.testbed.topology.name}: node {name} "
                                 f"declares no tool {tool!r}")
        try:
            return tool_version(self.testbed.nodes[name], tool, binary)
        except ToolMissing as error:
            if tool not in spec.optional_tools:
                raise
            logger.warn(f"optional tool absent: {error}")
            return f"absent (optional): {error}"

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
        name = self.testbed.topology.resolve_node(node)
        binary = self.testbed.topology.nodes[name].tools.get(tool)
        if binary is None:
            raise SkipExecution(f"{tool} not declared on {name} in topology "
                                f"{self.testbed.topology.name}")
        target = self.testbed.nodes[name]
        try:
            tool_version(target, tool, binary)
        except ToolMissing as error:
            raise SkipExecution(str(error)) from None
        return target.which(binary) or binary


def _down_at_exit(testbed: Testbed) -> None:
    """Backstop when the interpreter exits with a testbed still up (Robot's forced exit skips
    teardowns): remove it, quietly; the next run's sweep is the last resort."""
    try:
        if testbed.local is not None:
            testbed.remove_now()
        testbed.down()
    except Exception as error:
        LOG.warning("testbed %s not removed at exit: %s", testbed.run_id, error)
