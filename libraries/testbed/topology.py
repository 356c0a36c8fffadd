"""Testbed descriptions: YAML files in ``topologies/`` loaded into typed, validated models.

A topology names its nodes (roles, how to reach them, CPUs, tool paths, optional VPP install),
the links between node interfaces with their addresses, and whether the library builds the
testbed itself (``provision: netns``). Loading never happens at import time: suites call
:func:`~libraries.testbed.topology_file.load_topology` in their setup.

Every problem is reported as one :class:`TopologyError` whose lines read
``<file>: <key path>: <what was expected>, got <value>`` (reading and reporting:
:mod:`libraries.testbed.topology_file`).
"""

from __future__ import annotations

import ipaddress
import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    field_validator,
    model_validator,
)

from libraries.testbed.errors import TopologyError

TOPOLOGY_DIR = Path(__file__).resolve().parents[2] / "topologies"

Name = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]{0,9}$")]
#: Linux's IFNAMSIZ is 16 bytes, the terminating NUL included
IFNAME_MAX = 15


def _kernel_ifname(name: str) -> str:
    """An interface name the kernel accepts (``ip link add`` refuses the rest, too late)."""
    if len(name) > IFNAME_MAX:
        raise ValueError(f"interface name {name!r} has {len(name)} characters: Linux allows at "
                         f"most {IFNAME_MAX} (IFNAMSIZ)")
    if not re.fullmatch(r"[a-zA-Z][a-zA-Z0-9_.-]*", name):
        raise ValueError(f"interface name {name!r}: expected a letter, then letters, digits "
                         "or _ . -")
    return name


def _link_end(value: str) -> str:
    node, _, ifname = value.partition(":")
    if not re.fullmatch(r"[a-z][a-z0-9_]*", node) or not ifname:
        raise ValueError(f"expected 'node:interface' (e.g. 'dut:eth1'), got {value!r}")
    _kernel_ifname(ifname)
    return value


IfName = Annotated[str, AfterValidator(_kernel_ifname)]
LinkEnd = Annotated[str, AfterValidator(_link_end)]
Role = Literal["tg", "dut", "server"]
#: lab settings a test may change (and put back) when the topology allows it in ``may_change``
Setting = Literal["mtu", "addresses"]
CpuList = list[Annotated[int, Field(ge=0)]]
# How VPP gets a DUT interface (see libraries/vpp/ports.py, one driver each):
#   af_packet  VPP opens the kernel interface through a packet socket (veths, labs without DPDK)
#   dpdk       VPP's dpdk plugin drives the NIC at ``pci`` (bound to vfio-pci by the lab admin)
#   dpdk_vdev  VPP's dpdk plugin on the kernel interface through DPDK's af_packet PMD: the DPDK
#              path without a NIC, for testing
VppDriver = Literal["af_packet", "dpdk", "dpdk_vdev"]
KERNEL_NETDEV_DRIVERS = ("af_packet", "dpdk_vdev")
KNOWN_TOOLS = (
    "nginx", "nginx_ebpf", "iperf3", "wrk", "wrk2", "sslsniff", "bpftrace", "bpftime",
    "bpftool", "openssl", "taskset", "bpftime_sslsniff", "vegeta", "oha", "perf",
)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class VppInstall(_Strict):
    """Paths of a VPP installation on a node (absent: the node has no VPP)."""

    bin: str = "/usr/bin/vpp"
    vppctl: str = "/usr/bin/vppctl"
    ldpreload: str = "/usr/lib/x86_64-linux-gnu/libvcl_ldpreload.so"
    api_dir: str = "/usr/share/vpp/api"
    plugins: str = "/usr/lib/x86_64-linux-gnu/vpp_plugins"
    api_socket: str = "/run/vpp/api.sock"
    cli_socket: str = "/run/vpp/cli.sock"
    app_socket_dir: str = "/var/run/vpp/app_ns_sockets"


class Interface(_Strict):
    """A node interface: its kernel name, optional PCI address (real labs), MTU, and how VPP
    takes it over when the node runs VPP (``vpp_driver``; ``dpdk`` needs ``pci``)."""

    pci: str | None = Field(default=None, pattern=r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
    mtu: int | None = Field(default=None, ge=576, le=9216)
    vpp_driver: VppDriver = "af_packet"


class Route(_Strict):
    """A static route the testbed needs on a node (applied by netns provisioning)."""

    to: ipaddress.IPv4Network
    via: ipaddress.IPv4Address


class Node(_Strict):
    """One machine (or namespace) of the testbed."""

    roles: list[Role] = Field(min_length=1)
    host: str | None = None
    port: int = Field(default=22, ge=1, le=65535)
    user: str = "root"
    key: str | None = None
    password: str | None = None
    sudo: bool = False
    known_hosts: str | None = None
    cpus: dict[str, CpuList] = Field(default_factory=dict)
    tools: dict[str, str] = Field(default_factory=dict)
    optional_tools: list[str] = Field(default_factory=list)
    tool_env: dict[str, dict[str, str]] = Field(default_factory=dict)
    #: a folder a tool needs besides its binary (bpftime: its libraries, ``bpftime -i``)
    tool_dirs: dict[str, Annotated[str, StringConstraints(pattern=r"^(/|~/)")]] = Field(
        default_factory=dict)
    vpp: VppInstall | None = None
    interfaces: dict[IfName, Interface] = Field(default_factory=dict)
    routes: list[Route] = Field(default_factory=list)
    ip_forward: bool = False

    @field_validator("tools", "tool_env", "optional_tools", "tool_dirs")
    @classmethod
    def _known_tools(cls, value: dict[str, Any] | list[str]) -> dict[str, Any] | list[str]:
        for tool in value:
            if tool not in KNOWN_TOOLS:
                raise ValueError(f"unknown tool {tool!r}: expected one of {', '.join(KNOWN_TOOLS)}")
        return value


class Link(_Strict):
    """A point-to-point link ``node:interface`` <-> ``node:interface`` with addresses."""

    a: LinkEnd
    a_ip: ipaddress.IPv4Interface
    b: LinkEnd
    b_ip: ipaddress.IPv4Interface
    mtu: int = Field(default=1500, ge=576, le=9216)

    @model_validator(mode="after")
    def _same_subnet(self) -> Link:
        if self.a_ip.network != self.b_ip.network:
            raise ValueError(
                f"a_ip {self.a_ip} and b_ip {self.b_ip} must be in the same subnet"
            )
        return self

    def ends(self) -> tuple[tuple[str, str, ipaddress.IPv4Interface], ...]:
        """``((node, interface, address), (node, interface, address))``."""
        a_node, a_if = self.a.split(":")
        b_node, b_if = self.b.split(":")
        return ((a_node, a_if, self.a_ip), (b_node, b_if, self.b_ip))


class MeasurementBudget(_Strict):
    """A lab's bounds for a test whose verdict is still inconclusive after its planned trials:
    ``max_trials`` rounds in all, ``max_seconds`` of measuring (Robot variables override)."""

    max_trials: int | None = Field(default=None, ge=1)
    max_seconds: float | None = Field(default=None, gt=0)


class Topology(_Strict):
    """A whole testbed: nodes, links and how it is provisioned."""

    name: str = Field(pattern=r"^[A-Za-z0-9_-]{1,32}$")
    description: str = ""
    provision: Literal["netns"] | None = None
    known_hosts: str | None = None
    may_change: list[Setting] | None = None
    budget: MeasurementBudget | None = None
    nodes: dict[Name, Node] = Field(min_length=1)
    links: list[Link] = Field(default_factory=list)

    @model_validator(mode="after")
    def _consistent(self) -> Topology:
        seen_ends: set[str] = set()
        seen_ips: dict[ipaddress.IPv4Address, str] = {}
        for index, link in enumerate(self.links):
            for side, (node, ifname, address) in zip("ab", link.ends(), strict=True):
                where = f"links.{index}.{side}"
                if node not in self.nodes:
                    raise PathError(
                        where, f"unknown node {node!r}: expected one of {sorted(self.nodes)}"
                    )
                end = f"{node}:{ifname}"
                if end in seen_ends:
                    raise PathError(where, f"interface {end} is used by two links")
                seen_ends.add(end)
                if address.ip in seen_ips:
                    raise PathError(
                        f"{where}_ip",
                        f"duplicate address {address.ip} (also on {seen_ips[address.ip]})",
                    )
                seen_ips[address.ip] = end
        for name, node in self.nodes.items():
            for key in ("optional_tools", "tool_dirs"):
                for tool in getattr(node, key):
                    if tool not in node.tools:
                        raise PathError(f"nodes.{name}.{key}",
                                        f"{tool!r} is not in this node's tools")
            if self.provision is None and node.host is None:
                raise PathError(
                    f"nodes.{name}.host", "expected a host name or address (no provisioning)"
                )
            if self.provision == "netns" and node.host is not None:
                raise PathError(
                    f"nodes.{name}.host",
                    "must be absent with provision: netns (the testbed assigns it)",
                )
            if node.key is not None and node.password is not None:
                raise PathError(f"nodes.{name}.password", "give either key or password, not both")
            _check_vpp_interfaces(self, name, node, seen_ends)
            _check_vpp_cpus(name, node)
        self._own_keys_when_provisioned()
        return self

    def _own_keys_when_provisioned(self) -> None:
        if self.provision != "netns":
            return
        if self.known_hosts is not None:
            raise PathError("known_hosts", _OWN_KEYS)
        for name, node in self.nodes.items():
            if node.known_hosts is not None:
                raise PathError(f"nodes.{name}.known_hosts", _OWN_KEYS)

    # -- queries used by keyword libraries --------------------------------------------------

    def allows_change(self, setting: str) -> bool:
        """Whether a test may change ``setting`` (``mtu``, ``addresses``) on the nodes and put
        it back afterwards: as ``may_change`` lists; without it, yes on a testbed the library
        builds (``provision: netns``) and no on a lab."""
        if self.may_change is None:
            return self.provision == "netns"
        return setting in self.may_change

    def kernel_interfaces_for_vpp(self, node: str) -> list[str]:
        """``node``'s link interfaces whose kernel address moves into VPP for a VPP test
        (``vpp_driver`` af_packet or dpdk_vdev); a ``dpdk`` NIC is not the kernel's."""
        interfaces = self.nodes[node].interfaces
        return [ifname for link in self.links for end, ifname, _ in link.ends()
                if end == node and (interfaces[ifname].vpp_driver if ifname in interfaces
                                    else "af_packet") != "dpdk"]

    def known_hosts_files(self, node: str) -> tuple[str, ...]:
        """known_hosts files the topology names for ``node`` (its own, then the top-level)."""
        return tuple(f for f in (self.nodes[node].known_hosts, self.known_hosts) if f)

    def node_with_role(self, role: str) -> str:
        """Name of the first node carrying ``role`` (fails naming the roles present)."""
        for name, node in self.nodes.items():
            if role in node.roles:
                return name
        present = {r for n in self.nodes.values() for r in n.roles}
        raise TopologyError(
            f"topology {self.name}: no node has role {role!r} (roles present: {sorted(present)})"
        )

    def resolve_node(self, name_or_role: str) -> str:
        """Accept a node name or a role and return the node name."""
        if name_or_role in self.nodes:
            return name_or_role
        if name_or_role in ("tg", "dut", "server"):
            return self.node_with_role(name_or_role)
        raise TopologyError(
            f"topology {self.name}: no node or role {name_or_role!r}: "
            f"nodes are {sorted(self.nodes)}"
        )

    def address_of(self, target: str, seen_from: str) -> str:
        """The address ``seen_from`` uses to reach ``target``.

        Same node: ``127.0.0.1``. Directly linked: the target's address on that link.
        Otherwise the target's first link address (reached through routes).
        """
        target = self.resolve_node(target)
        seen_from = self.resolve_node(seen_from)
        if target == seen_from:
            return "127.0.0.1"
        fallback = None
        for link in self.links:
            (a_node, _, a_ip), (b_node, _, b_ip) = link.ends()
            if {a_node, b_node} == {target, seen_from}:
                return str(a_ip.ip if a_node == target else b_ip.ip)
            if fallback is None and target in (a_node, b_node):
                fallback = str(a_ip.ip if a_node == target else b_ip.ip)
        if fallback is None:
            raise TopologyError(
                f"topology {self.name}: node {target!r} has no link address reachable from "
                f"{seen_from!r}"
            )
        return fallback

    def link_interfaces(self, node: str) -> list[tuple[str, Interface, str, int]]:
        """``(interface, its declaration, address/len, link MTU)`` for each link end on ``node``;
        an interface the node does not declare gets the defaults (``vpp_driver: af_packet``)."""
        name = self.resolve_node(node)
        declared = self.nodes[name].interfaces
        return [(ifname, declared.get(ifname, Interface()), str(address), link.mtu)
                for link in self.links for end, ifname, address in link.ends() if end == name]

    def cpus_of(self, node: str, purpose: str) -> list[int] | None:
        """CPU list for ``purpose`` on ``node`` or None when the topology pins nothing."""
        return self.nodes[self.resolve_node(node)].cpus.get(purpose)

    def env_of(self, node: str, tool: str,
               base: dict[str, str] | None = None) -> dict[str, str] | None:
        """The environment ``tool`` runs with on ``node``: the node's ``tool_env`` for it (an
        A/B side's topology carries the side's ``env``), with ``base`` (e.g. VPP's LD_PRELOAD
        and VCL_CONFIG) over it; None when there is neither. ``tool`` is the tool's name as
        run: a probed wrk2 takes ``tool_env.wrk2``."""
        merged = {**self.nodes[self.resolve_node(node)].tool_env.get(tool, {}), **(base or {})}
        return merged or None

    def vpp_cores(self, node: str) -> list[int] | None:
        """The cores VPP on ``node`` forwards on: its ``cpus.vpp_workers``, else its
        ``cpus.vpp_main``; None where the topology pins neither."""
        return self.cpus_of(node, "vpp_workers") or self.cpus_of(node, "vpp_main")

    def vpp_core_sharers(self, node: str) -> list[str] | None:
        """The placements (``nodes.<name>.cpus.<purpose>``) that pin programs onto one of
        :meth:`vpp_cores`: on ``node`` itself and, on a ``provision: netns`` testbed (one
        machine), on every node. None where VPP's cores are not pinned (they could be any)."""
        name = self.resolve_node(node)
        cores = set(self.vpp_cores(name) or ())
        if not cores:
            return None
        machine = self.nodes if self.provision == "netns" else {name: self.nodes[name]}
        return [f"nodes.{other}.cpus.{purpose}"
                for other, each in machine.items() for purpose, listed in each.cpus.items()
                if not (other == name and purpose.startswith("vpp_")) and cores & set(listed)]


_OWN_KEYS = "must be absent with provision: netns (the testbed trusts its own host keys)"


def _check_vpp_interfaces(topology: Topology, name: str, node: Node, link_ends: set[str]) -> None:
    """Driver / PCI / provisioning combinations of one node's interfaces."""
    seen_pci: dict[str, str] = {}
    drivers = {i.vpp_driver for i in node.interfaces.values()}
    for ifname, interface in node.interfaces.items():
        where = f"nodes.{name}.interfaces.{ifname}"
        driver = interface.vpp_driver
        if interface.pci is not None:
            if interface.pci in seen_pci:
                raise PathError(f"{where}.pci", f"PCI address {interface.pci} is also "
                                 f"interface {seen_pci[interface.pci]}'s")
            seen_pci[interface.pci] = ifname
        if driver == "af_packet":
            continue
        if node.vpp is None:
            raise PathError(f"{where}.vpp_driver",
                             f"{driver} needs VPP on this node: declare nodes.{name}.vpp")
        if f"{name}:{ifname}" not in link_ends:
            raise PathError(f"{where}.vpp_driver", f"{driver} on an interface no link uses: "
                             "VPP would get it without an address")
        if driver == "dpdk" and interface.pci is None:
            raise PathError(f"{where}.pci", "required with vpp_driver dpdk: the NIC's PCI "
                             "address, e.g. '0000:01:00.0' (lshw -c net -businfo)")
        if driver == "dpdk" and topology.provision == "netns":
            raise PathError(f"{where}.vpp_driver", "dpdk drives a PCI NIC, which a netns "
                             "testbed's veths are not: use af_packet or dpdk_vdev")
        if driver == "dpdk_vdev" and interface.pci is not None:
            raise PathError(f"{where}.pci", "must be absent with vpp_driver dpdk_vdev (a DPDK "
                             "virtual device on the kernel interface; for a NIC use dpdk)")
    if {"dpdk", "dpdk_vdev"} <= drivers:
        raise PathError(f"nodes.{name}.interfaces", "dpdk and dpdk_vdev on one node: DPDK "
                         "virtual devices run with no-pci, so no NIC could be used as well")


def _check_vpp_cpus(name: str, node: Node) -> None:
    """``cpus.vpp_main`` is one core; ``cpus.vpp_workers`` are other cores, each once."""
    main = node.cpus.get("vpp_main")
    workers = node.cpus.get("vpp_workers")
    if main is not None and len(main) != 1:
        raise PathError(f"nodes.{name}.cpus.vpp_main",
                         f"expected exactly one CPU (VPP's main thread), got {main}")
    if workers is None:
        return
    if len(set(workers)) != len(workers):
        raise PathError(f"nodes.{name}.cpus.vpp_workers", f"a CPU listed twice in {workers}")
    if main is not None and main[0] in workers:
        raise PathError(f"nodes.{name}.cpus.vpp_workers",
                         f"CPU {main[0]} is also vpp_main: workers need cores of their own")


class PathError(ValueError):
    """A cross-field problem at an explicit key path (raised inside model validation)."""

    def __init__(self, path: str, message: str):
        super().__init__(message)
        self.path = path
        self.message = message
