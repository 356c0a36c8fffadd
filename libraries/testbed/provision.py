"""A running testbed: a validated topology, provisioned if asked, with one connected Node each.

Also a command line for people::

    python -m libraries.testbed up 3node       # build it (provision: netns), print SSH targets
    python -m libraries.testbed status 3node
    python -m libraries.testbed down 3node
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from dataclasses import dataclass, field

from libraries.testbed.errors import HostStackError, NodeError, TopologyError
from libraries.testbed.netns import LocalTestbed
from libraries.testbed.node import Node
from libraries.testbed.preflight import check_paths
from libraries.testbed.run_paths import make_prefix, node_workdir
from libraries.testbed.ssh import SshTarget
from libraries.testbed.teardown import list_testbeds, teardown_prefix
from libraries.testbed.topology import Topology
from libraries.testbed.topology_file import load_topology

LOG = logging.getLogger(__name__)


@dataclass
class Testbed:
    """Topology + nodes of one run. Build with :meth:`up`, always finish with :meth:`down`."""

    __test__ = False  # not a pytest test class despite its name

    topology: Topology
    run_id: str
    nodes: dict[str, Node] = field(default_factory=dict)
    local: LocalTestbed | None = None
    removed: bool = False

    @classmethod
    def up(cls, topology: Topology | str, owner: str = "robot",
           prefix: str | None = None) -> Testbed:
        """Provision (``provision: netns``), connect to every node and check the paths between
        them (:func:`check_paths`: pings across each link and route, from the nodes).
        ``prefix``: the namespace testbed's name prefix (default: a new one for ``owner``).

        On failure everything built so far is removed before the error propagates.
        """
        if isinstance(topology, str):
            topology = load_topology(topology)
        prefix = prefix or make_prefix(topology.name, owner)
        testbed = cls(topology=topology, run_id=prefix)
        try:
            if topology.provision == "netns":
                testbed.local = LocalTestbed(topology, prefix, owner)
                targets = testbed.local.up().targets
            else:
                targets = {name: _lab_target(name, topology) for name in topology.nodes}
            for name, target in targets.items():
                node = Node(name, target, node_workdir(prefix, name))
                testbed.nodes[name] = node
                node.connect()
            check_paths(topology, testbed.nodes)
        except BaseException:
            testbed.down()
            raise
        return testbed

    def node(self, name_or_role: str) -> Node:
        """The node called ``name_or_role``, or the first node with that role."""
        return self.nodes[self.topology.resolve_node(name_or_role)]

    def remove_now(self) -> None:
        """Remove a namespace testbed at once, with local commands only (from a signal
        handler, where the interrupted code may hold an SSH connection's lock): every process
        in its namespaces, the namespaces, its files. :meth:`down` then only disconnects. A
        lab is left to :meth:`down`, which needs SSH."""
        if self.local is not None and not self.removed:
            self.removed = True
            self.local.down()

    def down(self) -> None:
        """Stop every tracked process, disconnect, and remove a provisioned testbed.

        Runs every step even when one fails, then raises the first failure. After
        :meth:`remove_now` it only drops the connections to the nodes, which are gone; that
        holds too when :meth:`remove_now` runs in the middle of it (a signal handler's).
        """
        if self.removed:
            for node in self.nodes.values():
                node.abandon()
            self.nodes.clear()
            return
        failures: list[str] = []
        for node in self.nodes.values():
            if self.removed:  # a second signal removed the testbed while this ran
                node.abandon()
                continue
            try:
                node.close(remove_workdir=self.local is None)
            except HostStackError as error:
                if not self.removed:
                    failures.append(str(error))
        if self.local is not None and not self.removed:
            try:
                self.local.down()
            except (HostStackError, OSError) as error:
                failures.append(str(error))
        self.nodes.clear()
        if failures:
            raise NodeError("testbed teardown: " + "; ".join(failures))


def _lab_target(name: str, topology: Topology) -> SshTarget:
    spec = topology.nodes[name]
    assert spec.host is not None  # validated: a lab node has a host
    return SshTarget(host=spec.host, port=spec.port, user=spec.user, key_file=spec.key,
                     password=spec.password, sudo=spec.sudo,
                     known_hosts=topology.known_hosts_files(name))


def _cli_up(name: str) -> int:
    started = time.monotonic()
    topology = load_topology(name)
    if topology.provision != "netns":
        print(f"{name}: nothing to build (no 'provision: netns'); it is a real lab")
        return 0
    testbed = LocalTestbed(topology, make_prefix(topology.name, "cli"), owner="cli")
    info = testbed.up()
    print(f"{name}: up in {time.monotonic() - started:.2f} s (prefix {info.prefix}, "
          f"management {info.mgmt_subnet})")
    for node, target in info.targets.items():
        print(f"  {node:8} ns {info.namespaces[node]:16} ssh -i {target.key_file} "
              f"-o UserKnownHostsFile={target.known_hosts[0]} root@{target.host}")
    return 0


def _cli_down(name: str) -> int:
    topology = load_topology(name)
    prefix = make_prefix(topology.name, "cli")
    started = time.monotonic()
    teardown_prefix(prefix)
    print(f"{name}: down in {time.monotonic() - started:.2f} s (prefix {prefix})")
    return 0


def _cli_status(name: str | None) -> int:
    states = [s for s in list_testbeds() if name is None or s.get("topology") == name]
    if not states:
        print("no local testbed" + (f" for {name}" if name else ""))
        return 1
    for state in states:
        print(json.dumps(state, indent=2))
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m libraries.testbed``."""
    parser = argparse.ArgumentParser(
        prog="python -m libraries.testbed", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Build, inspect or remove a local testbed: a topology whose nodes are "
                    "network\nnamespaces on this host (provision: netns; needs root).\n\n"
                    "  up TOPOLOGY      build its namespaces and links (a real lab: nothing to "
                    "build)\n"
                    "  down TOPOLOGY    remove them\n"
                    "  status [TOPOLOGY]  show what is up; no TOPOLOGY: every local testbed "
                    "(the default)")
    parser.add_argument("action", choices=["up", "down", "status"], metavar="ACTION",
                        help="up, down or status (see above)")
    parser.add_argument("topology", nargs="?", metavar="TOPOLOGY",
                        help="topology name (topologies/NAME.yaml) or file; up and down need "
                        "it, status without it shows every local testbed")
    args = parser.parse_args(argv)
    logging.basicConfig(level=os.environ.get("LOGLEVEL", "WARNING"))
    if args.action != "status" and not args.topology:
        parser.error(f"{args.action} needs a topology name")
    try:
        if args.action == "up":
            return _cli_up(args.topology)
        if args.action == "down":
            return _cli_down(args.topology)
        return _cli_status(args.topology)
    except (TopologyError, NodeError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
