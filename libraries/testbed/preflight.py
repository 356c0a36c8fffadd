"""Pre-flight check of a testbed's paths, from the nodes themselves, before anything is measured.

Each link is pinged from its ``a`` end to its ``b`` address, and each declared route is followed:
from its node, every topology address inside the route's destination is pinged. A failure names
the broken hop, not just the symptom:

- an interface of a link missing its address (``dut:eth1 has no address 198.18.1.1/24``);
- a link whose far end does not answer;
- a node without the route the topology declares (``ip route get`` does not go via it);
- a router on the way that does not forward (``net.ipv4.ip_forward=0``);
- a destination without a route back to the source.

A link end whose interface the kernel does not have (a NIC bound to DPDK for VPP) is not
checked, and the log says so.
"""

from __future__ import annotations

import ipaddress
import logging
import re
import shlex
from dataclasses import dataclass
from typing import TYPE_CHECKING

from libraries.testbed.errors import NodeError

if TYPE_CHECKING:
    from libraries.testbed.node import Node
    from libraries.testbed.topology import Topology

LOG = logging.getLogger(__name__)
_FACTS = ("echo \"forward=$(cat /proc/sys/net/ipv4/ip_forward)\"; "
          "echo \"ping=$(command -v ping)\"; "
          "for i in /sys/class/net/*; do echo \"if=${i##*/}\"; done; ip -o -4 addr show")


@dataclass(frozen=True)
class Probe:
    """``source`` pings ``address`` (of node ``target``); ``route`` is ``(to, via)`` when the
    ping follows a declared route, None across a link."""

    source: str
    address: str
    target: str
    what: str
    route: tuple[str, str] | None = None


@dataclass(frozen=True)
class NodeFacts:
    """What a node has: ``interfaces``, ``addresses`` (``ip/len`` per interface),
    ``forwarding`` and whether ``ping`` is installed."""

    interfaces: frozenset[str]
    addresses: dict[str, tuple[str, ...]]
    forwarding: bool
    ping: bool


def parse_facts(text: str) -> NodeFacts:
    """Parse the output of :data:`_FACTS`."""
    interfaces = frozenset(re.findall(r"^if=(\S+)$", text, flags=re.M))
    addresses: dict[str, list[str]] = {}
    for ifname, address in re.findall(r"^\d+:\s+(\S+)\s+inet (\S+)", text, flags=re.M):
        addresses.setdefault(ifname, []).append(address)
    return NodeFacts(interfaces, {k: tuple(v) for k, v in addresses.items()},
                     "forward=1" in text, bool(re.search(r"^ping=/", text, flags=re.M)))


def plan_probes(topology: Topology, facts: dict[str, NodeFacts]) -> tuple[list[Probe],
                                                                           list[str]]:
    """The pings to run, and the problems already visible (addresses missing)."""
    probes: list[Probe] = []
    problems: list[str] = []
    owners: dict[str, str] = {}
    for link in topology.links:
        ends = link.ends()
        usable = True
        for node, ifname, address in ends:
            owners[str(address.ip)] = node
            if ifname not in facts[node].interfaces:
                LOG.info("pre-flight: %s:%s is not a kernel interface (bound to DPDK?): "
                         "link not checked", node, ifname)
                usable = False
            elif str(address) not in facts[node].addresses.get(ifname, ()):
                have = ", ".join(facts[node].addresses.get(ifname, ())) or "none"
                problems.append(f"{node}:{ifname} has no address {address} (it has: {have})")
                usable = False
        (a, a_if, a_ip), (b, b_if, b_ip) = ends
        if usable:
            probes.append(Probe(a, str(b_ip.ip), b, f"link {a}:{a_if} ({a_ip.ip}) - "
                                                    f"{b}:{b_if} ({b_ip.ip})"))
    for node, spec in topology.nodes.items():
        for route in spec.routes:
            for address, target in owners.items():
                if target != node and ipaddress.IPv4Address(address) in route.to:
                    probes.append(Probe(node, address, target,
                                        f"route {route.to} via {route.via}",
                                        (str(route.to), str(route.via))))
    return probes, problems


def _ping_script(addresses: list[str]) -> str:
    lines = []
    for address in addresses:
        quoted = shlex.quote(address)
        lines.append(f"if ping -n -q -c 1 -W 3 {quoted} >/dev/null 2>&1; then echo ok {quoted}; "
                     f"else echo fail {quoted} $(ip -o -4 route get {quoted} 2>&1 | head -n 1); fi")
    return "\n".join(lines)


def _route_lookup(node: Node, address: str) -> str:
    result = node.run(f"ip -o -4 route get {shlex.quote(address)} 2>&1 | head -n 1", timeout=10,
                      check=False, quiet=True)
    return result.stdout.strip()


def _diagnose(probe: Probe, route_get: str, topology: Topology, nodes: dict[str, Node],
              facts: dict[str, NodeFacts]) -> str:
    head = f"{probe.source} -> {probe.target} ({probe.address}) along {probe.what}"
    if probe.route is None:
        return (f"{head}: no answer (ping from {probe.source}); ip route get: {route_get!r}")
    to, via = probe.route
    if f"via {via} " not in route_get + " ":
        return (f"{probe.source}: no route to {to} via {via} as the topology declares "
                f"(ip route get there: {route_get!r})")
    router = next((name for name, f in facts.items()
                   if any(a.split("/")[0] == via for addrs in f.addresses.values()
                          for a in addrs)), None)
    if router is not None and not facts[router].forwarding:
        return f"{head}: {router} ({via}) does not forward (net.ipv4.ip_forward=0)"
    source = re.search(r"\bsrc (\S+)", route_get)
    if source is None or probe.target not in nodes:
        return f"{head}: no answer; ip route get: {route_get!r}"
    back = _route_lookup(nodes[probe.target], source.group(1))
    return (f"{head}: no answer although {probe.source}'s route and {router or via} are fine: "
            f"check {probe.target}'s route back to {source.group(1)} (ip route get there: "
            f"{back!r})")


def check_paths(topology: Topology, nodes: dict[str, Node]) -> int:
    """Ping across every link and along every declared route; raise :class:`NodeError` listing
    every broken hop. Returns the number of pings that answered."""
    if not topology.links:
        return 0
    facts = {name: parse_facts(node.run(_FACTS, timeout=15, quiet=True).stdout)
             for name, node in nodes.items()}
    probes, problems = plan_probes(topology, facts)
    answered = 0
    for source in sorted({p.source for p in probes}):
        mine = [p for p in probes if p.source == source]
        if not facts[source].ping:
            problems.append(f"{source}: ping not found (install iputils-ping: the pre-flight "
                            "check pings across each link and route)")
            continue
        out = nodes[source].run(_ping_script([p.address for p in mine]), timeout=15 + 4 *
                                len(mine), quiet=True).stdout
        results = {m.group(2): (m.group(1), m.group(3).strip()) for m in
                   re.finditer(r"^(ok|fail) (\S+)(.*)$", out, flags=re.M)}
        for probe in mine:
            state, route_get = results.get(probe.address, ("fail", "(no answer from the check)"))
            if state == "ok":
                answered += 1
            else:
                problems.append(_diagnose(probe, route_get, topology, nodes, facts))
    if problems:
        raise NodeError(f"pre-flight check of topology {topology.name} failed before any "
                        "measurement:\n  - " + "\n  - ".join(dict.fromkeys(problems)))
    LOG.info("pre-flight: %d pings across links and routes answered", answered)
    return answered
