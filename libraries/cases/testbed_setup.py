"""The testbed a suite runs on (:class:`SuiteTestbed`): set up from a topology, or from a free
lab of a pool shared through pabot's value sets; guarded against a forced stop (a second
Ctrl-C, Robot's forced exit that skips teardowns); torn down with everything started on its
nodes; and the checks a test asks of it (a stack, a tool, a node that answers). Plain Python:
the keyword layer (``libraries.keywords.testbed``) hands each keyword here with the suite's
log and metadata writer, and a unit test drives it without Robot.
"""

from __future__ import annotations

import atexit
import functools
import logging
import shlex
from collections.abc import Callable
from typing import Protocol

from libraries.cases.context import Log, Skip
from libraries.testbed.errors import HostStackError, ToolMissing
from libraries.testbed.interrupt import InterruptGuard
from libraries.testbed.provision import Testbed
from libraries.testbed.run_paths import make_prefix
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


Metadata = Callable[[str, str], None]
"""``metadata(name, value)``: a line of the suite's metadata (Robot's log)."""


class Pool(Protocol):
    """A lab pool's client (:class:`libraries.keywords.pool.PoolClient`)."""

    def acquire(self) -> tuple[str, str]:
        """(lab, topology) of a free lab; raises when no lab is left."""

    def disable(self, reason: str) -> None:
        """Take the acquired lab out of the pool for the rest of the run."""

    def release(self) -> None:
        """Give the acquired lab back."""


class SuiteTestbed:
    """A suite's testbed: None until :meth:`up` (or :meth:`up_from_pool`), each node's tool
    ``versions`` read then, the lab ``pool`` it came from (None: a topology of its own)."""

    def __init__(self) -> None:
        self._testbed: Testbed | None = None
        self.pool: Pool | None = None
        self.versions: dict[str, dict[str, str]] = {}
        self._at_exit: functools.partial[None] | None = None

    @property
    def current(self) -> Testbed:
        """The running testbed; fails when none was set up in this suite."""
        if self._testbed is None:
            raise HostStackError("no testbed: the suite setup must call 'Set Up Testbed'")
        return self._testbed

    def up(self, topology: str, metadata: Metadata) -> None:
        """Load ``topology``, build it when it says ``provision: netns`` (a Ctrl-C while it is
        built removes what was built), connect, and write each node's tool versions as
        metadata (``Topology``, ``Versions <node>``)."""
        if self._testbed is not None:
            raise HostStackError("Set Up Testbed called twice in one suite")
        spec = load_topology(topology)
        prefix = make_prefix(spec.name, "robot")
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
        metadata("Topology", self._testbed.topology.name)
        for name, node in self._testbed.nodes.items():
            spec = self._testbed.topology.nodes[name]
            versions = node_versions(node, spec.tools)
            self.versions[name] = versions
            text = versions_line(versions, spec.optional_tools)
            metadata(f"Versions {name}", text)
            LOG.info("%s versions: %s", name, text)

    def up_from_pool(self, pool: Pool, tag: str, metadata: Metadata, log: Log) -> str:
        """Acquire a free lab of ``pool`` and set its testbed up; a lab whose set-up fails
        leaves the pool (a warning) and the next is tried. Returns the lab's name."""
        if self.pool is not None:
            raise HostStackError("Set Up Testbed From Lab Pool called twice in one suite")
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
                self.up(topology, metadata)
            except (HostStackError, OSError) as error:
                failures.append(f"{lab}: {error}")
                log.warn(f"lab {lab} failed its pre-flight and leaves the pool: {error}")
                self._discard(log)
                pool.disable(str(error))
                continue
            self.pool = pool
            metadata("Lab", lab)
            return lab

    def _discard(self, log: Log) -> None:
        testbed, self._testbed = self._testbed, None
        if testbed is not None:
            try:
                testbed.down()
            except HostStackError as error:
                log.warn(f"testbed teardown after a failed set-up: {error}")
            finally:
                self._unguard(testbed)

    def down(self, log: Log) -> None:
        """Stop everything started, disconnect, remove a built testbed; give a pool's lab
        back whatever happened. Nothing to do when none was set up."""
        pool, self.pool = self.pool, None
        try:
            if self._testbed is None:
                return
            testbed, self._testbed = self._testbed, None
            if testbed.removed:
                log.info(f"testbed {testbed.run_id} was already removed after the interrupt")
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

    def stop_processes(self, log_output: bool, log: Log) -> None:
        """Stop every process started on any node, newest first (``log_output``: their output's
        tail logged); fails listing what could not be stopped, after trying all."""
        if self.current.removed:
            log.info("no process to stop: the testbed was removed after the interrupt")
            return
        errors = []
        for node in self.current.nodes.values():
            for process in reversed(node.processes):
                try:
                    output = node.stop(process)
                except HostStackError as error:
                    errors.append(str(error))
                    continue
                if log_output:
                    log.info(f"{node.name}: output of {process.name} ({process.command}):\n"
                             f"{output[-3000:] or '(empty)'}")
        if errors:
            raise HostStackError("; ".join(errors))

    def require_stack(self, node: str, stack: str) -> None:
        """Skip unless ``node`` can run ``stack`` (``kernel`` always; ``vpp`` where the
        topology declares it and its binary is there); any other stack fails."""
        if stack == "kernel":
            return
        if stack != "vpp":
            raise HostStackError(f"unknown stack {stack!r}: expected kernel or vpp")
        topology = self.current.topology
        name = topology.resolve_node(node)
        vpp = topology.nodes[name].vpp
        installed = vpp is not None and self.current.nodes[name].run(
            f"test -x {shlex.quote(vpp.bin)}", timeout=10, check=False).exit_code == 0
        if (reason := vpp_skip_reason(topology, name, installed=installed)) is not None:
            raise Skip(reason)

    def check_reachable(self, node: str) -> None:
        """Fail unless ``node`` answers ``uname -sr`` with a Linux kernel."""
        target = self.current.node(node)
        kernel = target.run("uname -sr", timeout=10).stdout.strip()
        if not kernel.startswith("Linux"):
            raise HostStackError(f"{target.where}: `uname -sr` answered {kernel!r}")

    def declared_tools(self, node: str) -> list[str]:
        """The names of the tools the topology declares on ``node``."""
        topology = self.current.topology
        return list(topology.nodes[topology.resolve_node(node)].tools)

    def tool_answer(self, node: str, tool: str, log: Log) -> str:
        """The version ``tool`` on ``node`` reports; an absent optional tool is ``absent
        (optional): <reason>`` with a warning; a tool the node does not declare fails."""
        topology = self.current.topology
        name = topology.resolve_node(node)
        spec = topology.nodes[name]
        binary = spec.tools.get(tool)
        if binary is None:
            raise HostStackError(f"topology {topology.name}: node {name} declares no tool "
                                 f"{tool!r}")
        try:
            return tool_version(self.current.nodes[name], tool, binary)
        except ToolMissing as error:
            if tool not in spec.optional_tools:
                raise
            log.warn(f"optional tool absent: {error}")
            return f"absent (optional): {error}"

    def require_tool(self, node: str, tool: str) -> str:
        """The absolute path of ``tool`` on ``node`` as the node runs it (the declared name
        when it cannot be resolved); skips where it is not declared or does not answer."""
        topology = self.current.topology
        name = topology.resolve_node(node)
        binary = topology.nodes[name].tools.get(tool)
        if binary is None:
            raise Skip(f"{tool} not declared on {name} in topology {topology.name}")
        target = self.current.nodes[name]
        try:
            tool_version(target, tool, binary)
        except ToolMissing as error:
            raise Skip(str(error)) from None
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
