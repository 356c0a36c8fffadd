"""VPP's host stack under a suite's applications: start VPP on a node, lay its host stack out,
and undo all of it (:class:`VppHostStack`).

Two layouts, as in seeds 000/001:

* loopback (one node): one VPP loopback, IP table and app namespace per application (server,
  proxy, client), cross-table routes between them; every application on the node runs over
  VPP in its own namespace;
* Ethernet (several nodes): VPP takes the DUT's link interfaces over, each as its topology
  ``vpp_driver`` says (af_packet on a kernel interface, dpdk on a NIC by PCI address,
  dpdk_vdev: DPDK on a kernel interface; ``libraries.vpp.ports``); applications on the DUT
  use VPP's default app namespace; the other nodes stay on the kernel stack.

The other cases read where the applications sit through the context's ``vpp``
(:class:`~libraries.vpp.placement.VppPlacement`, which a :class:`VppHostStack` fills).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from dataclasses import dataclass, field

from libraries.cases.context import CaseContext, Skip
from libraries.testbed.errors import HostStackError
from libraries.testbed.node import Node
from libraries.vpp.instance import (
    VppLayout,
    has_hugepages,
    jumbo_needs_hugepages,
    release_local_side,
    start_vpp,
    stop_vpp,
    vpp_diagnostics,
)
from libraries.vpp.loopback import (
    LoopbackHostStack,
    LoopbackHostStackPlan,
    NamespaceSpec,
    configure_loopback_host_stack,
    teardown_loopback_host_stack,
)
from libraries.vpp.placement import SECRET, AppPlacement, VppPlacement
from libraries.vpp.ports import (
    AttachedPort,
    VppPort,
    attach_ports,
    check_ports,
    complete_peer_checksums,
    detach_ports,
    mtu_unsupported,
    plan_ports,
    restore_peer_checksums,
    return_kernel_addresses,
    startup_contribution,
)

LOOPBACK_ADDRESSES = {"server": "198.18.101.1/24", "proxy": "198.18.102.1/24",
                      "client": "198.18.103.1/24"}
"""The one-node layout's addresses: inside VPP only, never in a kernel table."""
APPS = ("server", "proxy", "client")


@dataclass
class VppHostStack:
    """The VPPs a suite runs and what was set up on them, so that :meth:`stop_all` undoes
    exactly that: ``placement`` (the instances and where applications sit, read by the other
    cases), the loopback layouts, the interfaces handed to VPP and the peers' checksum
    settings changed, by node."""

    placement: VppPlacement = field(default_factory=VppPlacement)
    loopbacks: dict[str, LoopbackHostStack] = field(default_factory=dict)
    ports: dict[str, list[AttachedPort]] = field(default_factory=dict)
    peer_checksums: dict[str, list[tuple[Node, str]]] = field(default_factory=dict)

    def start(self, ctx: CaseContext, node: str, mtu: int | None = None) -> None:
        """Start VPP on ``node`` from the topology's install and CPUs (an A/B side's startup
        sections too) and wait until its API answers; its startup.conf goes to the log.
        :class:`Skip` where a jumbo ``mtu`` needs hugepages the node lacks or its interfaces
        cannot take the MTU; ``HostStackError`` when the topology declares no VPP there or VPP
        already runs there."""
        testbed = ctx.testbed
        name = testbed.topology.resolve_node(node)
        install = testbed.topology.nodes[name].vpp
        if install is None:
            raise HostStackError(f"topology {testbed.topology.name}: {name} declares no vpp")
        if name in self.placement.instances:
            raise HostStackError(f"VPP already runs on {name}")
        ports = self._planned_ports(ctx, name, mtu)
        check_ports(testbed.nodes[name], ports)
        main = testbed.topology.cpus_of(name, "vpp_main")
        layout = VppLayout(main_core=main[0] if main else None,
                           workers=tuple(testbed.topology.cpus_of(name, "vpp_workers") or ()),
                           ports=startup_contribution(ports), mtu=int(mtu) if mtu else None,
                           extra_sections=ctx.side_startup(name))
        reason = mtu_unsupported(ports) or jumbo_needs_hugepages(
            layout, has_hugepages(testbed.nodes[name]))
        if reason:
            raise Skip(f"{name}: {reason}")
        instance = start_vpp(testbed.nodes[name], install, layout=layout)
        self.placement.instances[name] = instance
        ctx.log.folded(f"{name}: VPP startup.conf",
                       instance.node.get(instance.startup_path, sudo=True))

    def set_up(self, ctx: CaseContext, node: str, apps: tuple[str, ...] = (),
               mtu: int | None = None) -> None:
        """Start VPP on ``node`` and lay out its host stack: the loopback layout for ``apps``
        (none given: all three) on a one-node topology, else the node's link interfaces
        handed to VPP. In an A/B run a side with another VPP install or startup sections
        restarts VPP and lays it out again. :class:`Skip` as :meth:`start` does, and where
        the topology does not allow moving the node's link addresses into VPP."""
        topology = ctx.testbed.topology
        one_node = len(topology.nodes) == 1
        name = topology.resolve_node(node)
        if not one_node:
            _require_address_change(ctx, name)
        self.start(ctx, node, mtu=mtu)
        if one_node:
            self.configure_loopback(ctx, node, apps or APPS)
        else:
            self.give_interfaces(ctx, node, mtu=mtu)
        ctx.component_started(f"vpp-{name}", {("vpp", name)}, lambda: self.stop_all(ctx),
                              lambda: self.set_up(ctx, node, apps, mtu))

    def configure_loopback(self, ctx: CaseContext, node: str,
                           apps: tuple[str, ...] | list[str] = APPS) -> None:
        """Seed 000/001's one-node layout on the running VPP, through PAPI: per application a
        loopback, an IP table, its address (:data:`LOOPBACK_ADDRESSES`) and an app namespace
        (secret 1234, numbered from 1 in ``apps``' order), then routes between every pair.
        ``HostStackError`` for an application that is not one of the three."""
        name = ctx.testbed.topology.resolve_node(node)
        unknown = [app for app in apps if app not in LOOPBACK_ADDRESSES]
        if unknown:
            raise HostStackError(f"VPP loopback layout: unknown application(s) {unknown}; "
                                 f"expected any of {', '.join(APPS)}")
        instance = self.placement.instances[name]
        specs = tuple(NamespaceSpec(app, index + 1, LOOPBACK_ADDRESSES[app], SECRET)
                      for index, app in enumerate(apps))
        links = tuple((a, b) for i, a in enumerate(apps) for b in apps[i + 1:])
        self.loopbacks[name] = configure_loopback_host_stack(
            instance.hoststack, LoopbackHostStackPlan(specs, links))
        for spec in specs:
            address = str(ipaddress.ip_interface(spec.address).ip)
            self.placement.apps[spec.namespace_id] = AppPlacement(name, spec.namespace_id, address)

    def give_interfaces(self, ctx: CaseContext, node: str, mtu: int | None = None) -> None:
        """Hand each of ``node``'s link interfaces to the running VPP as its topology
        ``vpp_driver`` says (a ``netns`` testbed's ``dpdk_vdev`` peers get their TX checksum
        offload off); :meth:`stop_all` gives addresses and peer settings back."""
        testbed = ctx.testbed
        name = testbed.topology.resolve_node(node)
        _require_address_change(ctx, name)
        instance = self.placement.instances[name]
        ports = self._planned_ports(ctx, name, mtu)
        complete_peer_checksums(testbed.topology, testbed.nodes, name, ports,
                                self.peer_checksums.setdefault(name, []))
        self.ports.setdefault(name, []).extend(attach_ports(instance.node, instance.hoststack,
                                                            ports))

    def stop_started(self, ctx: Callable[[], CaseContext]) -> None:
        """:meth:`stop_all` when a VPP was started (``ctx()``: the suite's context, built only
        then); nothing otherwise."""
        if self.placement.instances:
            self.stop_all(ctx())

    def stop_all(self, ctx: CaseContext) -> None:
        """Undo every VPP set-up and stop every VPP: VPP's show outputs and its own output to
        the log, the loopback layout and the interfaces undone (PAPI), VPP stopped, moved
        kernel addresses and peer checksum settings given back; every step runs even if one
        fails, then ``HostStackError`` lists the failures. Once an interrupt removed the
        testbed (VPP went with it) only the local side (PAPI, the socket forward) is closed.
        Nothing to do when no VPP was started."""
        if ctx.testbed.removed:
            for instance in self.placement.instances.values():
                release_local_side(instance)
            self.placement.instances.clear()
            self.placement.apps.clear()
            self.ports.clear()
            self.loopbacks.clear()
            self.peer_checksums.clear()
            return
        errors: list[str] = []
        for name, instance in list(self.placement.instances.items()):
            for command, text in vpp_diagnostics(instance).items():
                ctx.log.folded(f"{name}: vppctl {command}", text)
            if name in self.loopbacks:
                try:
                    teardown_loopback_host_stack(instance.hoststack, self.loopbacks.pop(name))
                except HostStackError as error:
                    errors.append(str(error))
            ports = self.ports.pop(name, [])
            errors += detach_ports(instance.hoststack, ports)
            try:
                ctx.log.folded(f"{name}: VPP output", stop_vpp(instance)[-20000:])
            except HostStackError as error:
                errors.append(str(error))
            errors += return_kernel_addresses(instance.node, ports)
            errors += restore_peer_checksums(self.peer_checksums.pop(name, []))
            del self.placement.instances[name]
        self.placement.apps.clear()
        if errors:
            raise HostStackError("; ".join(errors))

    @staticmethod
    def _planned_ports(ctx: CaseContext, name: str, mtu: int | None) -> tuple[VppPort, ...]:
        topology = ctx.testbed.topology
        if len(topology.nodes) == 1:
            return ()  # the loopback layout: no link interfaces
        return plan_ports(topology, name, int(mtu) if mtu else None)


def _require_address_change(ctx: CaseContext, name: str) -> None:
    """:class:`Skip`, with the reason, unless the topology lets tests move ``name``'s link
    addresses from the kernel into VPP (and back): a lab must say ``may_change:
    [addresses]``. DPDK NICs (``vpp_driver: dpdk``) move no kernel address: they need no such
    permission."""
    topology = ctx.testbed.topology
    if topology.kernel_interfaces_for_vpp(name) and not topology.allows_change("addresses"):
        raise Skip(f"topology {topology.name} does not allow moving {name}'s link "
                   "addresses from the kernel into VPP (add `may_change: [addresses]` "
                   "to let the test move them and put them back)")
