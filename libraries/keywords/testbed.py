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
from libraries.testbed.topology_file import load_topology
from libraries.tools.versions import node_versions, tool_version

LOG = logging.getLogger(__name__)


@library(scope="SUITE", auto_keywords=False)
class TestbedKeywords:
    """Set up the testbed a topology describes, run commands on its nodes, tear it down.

    A topology is named with ``-v TOPOLOGY:<name>`` (``topologies/<name>.yaml``) or a path.
    With ``provision: netns`` the testbed is built on this machine in network namespaces and
    removed at teardown, failures included; a second Ctrl-C (Robot's forced stop, which skips
    teardowns) removes it at once (:mod:`libraries.testbed.interrupt`), and an exit that skips
    the teardown anyway (a third Ctrl-C) still removes it on the way out.
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
        """Load and validate ``topology``, build it when it says ``provision: netns``, connect
        to every node and record each node's tool versions as suite metadata.

        Fails with the file, key path and expectation for a bad topology, or with host:port and
        the SSH error for an unreachable node; nothing built is left behind on failure.
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
            text = ", ".join(f"{tool} {version}" for tool, version in versions.items())
            builtin.set_suite_metadata(f"Versions {name}", text)
            LOG.info("%s versions: %s", name, text)

    @keyword("Set Up Testbed From Lab Pool")
    def set_up_testbed_from_lab_pool(self, tag: str) -> str:
        """Acquire a free lab of the pabot pool ``tag`` (PabotLib value sets; waits while
        every lab is busy) and set up its testbed; returns the lab's name.

        A lab whose set-up fails (pre-flight: SSH, links, routes) is disabled for the rest of
        the run and the next free lab is tried; with none left, fails naming each lab and
        why. ``Tear Down Testbed`` releases the lab.
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
        """Stop every process started on any node, disconnect, and remove a built testbed;
        give a lab acquired from the pool back, whatever happened."""
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
        """Stop (TERM, then KILL) every process any keyword started on any node.

        With ``log_output`` (e.g. after a failure) each process's output tail is logged.
        Nothing to do once an interrupt removed the testbed.
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
        """Pass for ``kernel``; for ``vpp`` skip the test, with the reason, unless the
        topology declares VPP on ``node`` and its binary is there."""
        if stack == "kernel":
            return
        if stack != "vpp":
            raise HostStackError(f"unknown stack {stack!r}: expected kernel or vpp")
        name = self.testbed.topology.resolve_node(node)
        vpp = self.testbed.topology.nodes[name].vpp
        if vpp is None:
            raise SkipExecution(f"VPP not declared on {name} in topology "
                                f"{self.testbed.topology.name} (no 'vpp:' paths)")
        check = self.testbed.nodes[name].run(f"test -x {shlex.quote(vpp.bin)}", timeout=10,
                                             check=False)
        if check.exit_code != 0:
            raise SkipExecution(f"VPP not installed on {name}: {vpp.bin} missing")

    @keyword("Get Topology Name")
    def get_topology_name(self) -> str:
        """Name of the running testbed's topology (e.g. for tags)."""
        return self.testbed.topology.name

    @keyword("Run On Node")
    def run_on_node(self, node: str, command: str, timeout: float = 60.0,
                    sudo: bool = False) -> str:
        """Run ``command`` on ``node`` (a node name or a role) and return its stdout.

        Fails with the exit code and output when the command exits non-zero.
        """
        return self.testbed.node(node).run(command, timeout=timeout, sudo=sudo).stdout

    @keyword("Node Should Be Reachable")
    def node_should_be_reachable(self, node: str) -> None:
        """Run a command on ``node`` over SSH and check it answers with the node's kernel."""
        target = self.testbed.node(node)
        kernel = target.run("uname -sr", timeout=10).stdout.strip()
        if not kernel.startswith("Linux"):
            raise HostStackError(f"{target.where}: `uname -sr` answered {kernel!r}")

    @keyword("Get Nodes")
    def get_nodes(self) -> list[str]:
        """Names of the topology's nodes."""
        return list(self.testbed.topology.nodes)

    @keyword("Get Declared Tools")
    def get_declared_tools(self, node: str) -> list[str]:
        """Tools the topology declares on ``node``."""
        name = self.testbed.topology.resolve_node(node)
        return list(self.testbed.topology.nodes[name].tools)

    @keyword("Tool Should Answer On Node")
    def tool_should_answer_on_node(self, node: str, tool: str) -> str:
        """Ask ``tool`` on ``node`` for its version; fail with what it printed otherwise.

        A tool the topology lists in ``optional_tools`` may be absent: then this returns
        ``absent (optional): <reason>`` and logs a warning instead of failing.
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
        """Return the absolute path of ``tool`` on ``node`` (a bare name resolved as the node
        runs it, sudo's PATH included); skip the test, with the reason, when the topology
        declares no such tool or it does not answer there."""
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
