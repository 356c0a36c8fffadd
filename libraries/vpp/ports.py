"""A node's link interfaces handed to VPP, one driver per ``vpp_driver`` of the topology.

A driver says what it adds to startup.conf, how its VPP interface comes to exist (created
through PAPI, or made by VPP at start-up from startup.conf) and how it goes away. What every
driver shares is done here, in seed 000/001's order: the interface is found by name through
``sw_interface_dump``, gets the hardware MTU, admin up, then the address, all through PAPI;
teardown undoes it in reverse. An interface the kernel still sees (af_packet, dpdk_vdev) has
its kernel address taken out while VPP owns it and given back afterwards. NICs are never
rebound: a ``dpdk`` NIC must already be on a DPDK-capable driver (``check_ports``), as the lab
admin bound it, and stays so.

Adding a driver (rdma, avf, ...): a class with ``startup``/``create``/``delete``, an entry in
``DRIVERS`` and its name in ``libraries.testbed.topology.VppDriver``.
"""

from __future__ import annotations

import ipaddress
import logging
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Protocol

from libraries.testbed.errors import HostStackError, PapiError
from libraries.testbed.node import Node
from libraries.testbed.topology import KERNEL_NETDEV_DRIVERS, Topology
from libraries.vpp.conf_params import DpdkDevice
from libraries.vpp.hoststack import HostStack, VppInterface

LOG = logging.getLogger(__name__)
# Drivers under which VPP's dpdk plugin takes a NIC as it is (it would rebind any other, which
# this library never does): the userspace I/O drivers and Mellanox's bifurcated ones.
DPDK_READY_DRIVERS = ("vfio-pci", "uio_pci_generic", "igb_uio", "mlx5_core", "mlx4_core")


@dataclass(frozen=True)
class VppPort:
    """One link interface for VPP: topology name, driver, address (A.B.C.D/LEN), MTU, the name
    VPP gives it ("" when only VPP knows it: a DPDK virtual device, found by MAC address), and
    the driver's data (``pci`` of a NIC, ``vdev`` of a DPDK virtual device)."""

    ifname: str
    driver: str
    address: str
    mtu: int
    vpp_name: str
    pci: str | None = None
    vdev: str | None = None

    @property
    def kernel_netdev(self) -> bool:
        """True when the kernel still sees the interface (its address must leave the kernel)."""
        return self.driver in KERNEL_NETDEV_DRIVERS


@dataclass(frozen=True)
class StartupContribution:
    """What the ports add to startup.conf: ``dpdk { dev PCI { name X } }`` and vdevs."""

    dpdk_devices: tuple[DpdkDevice, ...] = ()
    dpdk_vdevs: tuple[str, ...] = ()


@dataclass(frozen=True)
class AttachedPort:
    """A port VPP has: sw_if_index, the hardware MTU before ours, whether the kernel address
    was taken out (and must come back)."""

    port: VppPort
    sw_if_index: int
    previous_mtu: int
    kernel_address_moved: bool


class PortDriver(Protocol):
    """How VPP gets one kind of interface."""

    def startup(self, port: VppPort) -> StartupContribution: ...

    def create(self, hs: HostStack, port: VppPort, mac: str | None) -> None: ...

    def delete(self, hs: HostStack, port: VppPort) -> None: ...


class AfPacketDriver:
    """``create host-interface name IF``: VPP opens the kernel interface (named host-IF)."""

    def startup(self, port: VppPort) -> StartupContribution:
        return StartupContribution()

    def create(self, hs: HostStack, port: VppPort, mac: str | None) -> None:
        hs.create_af_packet_interface(port.ifname, mac=mac)

    def delete(self, hs: HostStack, port: VppPort) -> None:
        hs.delete_af_packet_interface(port.ifname)


class DpdkDriver:
    """VPP's dpdk plugin: the NIC (``dev PCI { name X }``) or virtual device (``vdev ...``)
    is VPP's from start-up; nothing to create or delete through PAPI."""

    def startup(self, port: VppPort) -> StartupContribution:
        if port.vdev is not None:
            return StartupContribution(dpdk_vdevs=(port.vdev,))
        if port.pci is None:
            raise HostStackError(f"interface {port.ifname}: vpp_driver dpdk needs a pci address")
        return StartupContribution(dpdk_devices=(DpdkDevice(pci=port.pci, name=port.vpp_name),))

    def create(self, hs: HostStack, port: VppPort, mac: str | None) -> None:
        return None

    def delete(self, hs: HostStack, port: VppPort) -> None:
        return None


DRIVERS: Mapping[str, PortDriver] = MappingProxyType({
    "af_packet": AfPacketDriver(), "dpdk": DpdkDriver(), "dpdk_vdev": DpdkDriver(),
})


def driver_of(port: VppPort) -> PortDriver:
    """The port's driver; HostStackError naming the known ones otherwise."""
    try:
        return DRIVERS[port.driver]
    except KeyError:
        raise HostStackError(f"interface {port.ifname}: no VPP driver {port.driver!r}; known: "
                             f"{', '.join(DRIVERS)}") from None


def plan_ports(topology: Topology, node: str, mtu: int | None = None) -> tuple[VppPort, ...]:
    """The ports of ``node``'s link ends, MTU ``mtu`` (else the link's), VPP's names fixed:
    af_packet ``host-IF``; dpdk the interface's own name (given in startup.conf, as the seeds
    do); dpdk_vdev none (VPP names it from the DPDK driver and port number, e.g. Ethernet0
    with DPDK 22.11's net_af_packet, af_packet0 with other DPDK versions)."""
    ports = []
    vdevs = 0
    for ifname, interface, address, link_mtu in topology.link_interfaces(node):
        driver, port_mtu = interface.vpp_driver, mtu or link_mtu
        if driver == "dpdk":
            ports.append(VppPort(ifname, driver, address, port_mtu, ifname, pci=interface.pci))
        elif driver == "dpdk_vdev":
            ports.append(VppPort(ifname, driver, address, port_mtu, "",
                                 vdev=f"net_af_packet{vdevs},iface={ifname}"))
            vdevs += 1
        else:
            ports.append(VppPort(ifname, driver, address, port_mtu, f"host-{ifname}"))
    return tuple(ports)


def mtu_unsupported(ports: Sequence[VppPort]) -> str | None:
    """Why VPP cannot give these ports their MTU (None: it can): DPDK's af_packet PMD takes
    frames of 2048 B, so VPP refuses a jumbo MTU on a dpdk_vdev interface
    (``hw_interface_set_mtu`` -> retval -7, seen with DPDK 22.11)."""
    jumbo = [p.ifname for p in ports if p.driver == "dpdk_vdev" and p.mtu > 1500]
    if not jumbo:
        return None
    return (f"dpdk_vdev interfaces {', '.join(jumbo)}: DPDK's af_packet PMD takes 2048-byte "
            "frames, so VPP refuses a jumbo MTU on them")


def startup_contribution(ports: Sequence[VppPort]) -> StartupContribution:
    """Every port's startup.conf part, merged in port order."""
    devices: list[DpdkDevice] = []
    vdevs: list[str] = []
    for port in ports:
        part = driver_of(port).startup(port)
        devices += part.dpdk_devices
        vdevs += part.dpdk_vdevs
    return StartupContribution(tuple(devices), tuple(vdevs))


def check_ports(node: Node, ports: Sequence[VppPort]) -> None:
    """Before VPP starts: every kernel interface exists; every dpdk NIC exists and is on a
    DPDK-capable driver (else VPP's dpdk plugin would rebind it, which we never do)."""
    lines = []
    for port in ports:
        if port.kernel_netdev:
            path = shlex.quote(f"/sys/class/net/{port.ifname}")
            lines.append(f"test -e {path} && echo ok || echo missing")
        elif port.pci is not None:
            device = shlex.quote(f"/sys/bus/pci/devices/{port.pci}")
            lines.append(f"if test -e {device}; then basename \"$(readlink {device}/driver)\" "
                         "2>/dev/null || echo unbound; else echo missing; fi")
        else:
            lines.append("echo ok")
    if not lines:
        return
    answers = node.run("; ".join(lines), timeout=10, quiet=True).stdout.split()
    if len(answers) != len(ports):
        raise HostStackError(f"{node.where}: interface check printed {answers!r} for "
                             f"{len(ports)} interfaces")
    for port, answer in zip(ports, answers, strict=True):
        where = f"{node.where}: interface {port.ifname} (vpp_driver {port.driver})"
        if port.kernel_netdev and answer != "ok":
            raise HostStackError(f"{where}: the kernel has no interface {port.ifname}")
        if port.pci is None or port.kernel_netdev:
            continue
        if answer == "missing":
            raise HostStackError(f"{where}: no PCI device {port.pci} on this machine "
                                 "(lshw -c net -businfo lists the NICs)")
        if answer not in DPDK_READY_DRIVERS:
            raise HostStackError(
                f"{where}: {port.pci} is bound to {answer}, not to a DPDK-capable driver "
                f"({', '.join(DPDK_READY_DRIVERS)}); VPP's dpdk plugin would rebind it, and "
                f"this library never rebinds NICs: bind it yourself, e.g. "
                f"'dpdk-devbind.py --bind=vfio-pci {port.pci}'")


@dataclass
class _Progress:
    attached: list[AttachedPort] = field(default_factory=list)


def attach_ports(node: Node, hs: HostStack, ports: Sequence[VppPort]) -> list[AttachedPort]:
    """Give each port to VPP: kernel address out (if the kernel sees it), the driver's create,
    then through PAPI: look up by name, hardware MTU, admin up, address. On failure, undo what
    was done and re-raise."""
    progress = _Progress()
    try:
        for port in ports:
            progress.attached.append(_attach(node, hs, port, progress))
    except (PapiError, HostStackError):
        problems = detach_ports(hs, progress.attached) + return_kernel_addresses(
            node, progress.attached)
        if problems:
            LOG.warning("undo of the partial VPP interfaces left: %s", "; ".join(problems))
        raise
    return progress.attached


def _attach(node: Node, hs: HostStack, port: VppPort, progress: _Progress) -> AttachedPort:
    mac = None
    moved = False
    if port.kernel_netdev:
        # VPP's interface keeps the kernel's MAC address: the neighbours' ARP caches (filled
        # by earlier kernel-stack tests) stay valid.
        quoted = shlex.quote(port.ifname)
        mac = node.run(f"cat /sys/class/net/{quoted}/address", timeout=10).stdout.strip()
        host = ipaddress.ip_interface(port.address).ip
        held = node.run(f"ip -o addr show dev {quoted} to {host}/{host.max_prefixlen}",
                        timeout=10).stdout.strip()
        if held:
            node.run(f"ip addr del {shlex.quote(port.address)} dev {quoted}", timeout=10,
                     sudo=True)
            moved = True
    partial = AttachedPort(port, -1, port.mtu, moved)
    try:
        driver_of(port).create(hs, port, mac)
        interface = _find(hs, port, mac)
    except (PapiError, HostStackError):
        progress.attached.append(partial)  # so that the kernel address comes back
        raise
    attached = AttachedPort(port, interface.sw_if_index, interface.link_mtu, moved)
    progress.attached.append(attached)
    hs.set_hardware_mtu(attached.sw_if_index, port.mtu)
    hs.set_interface_up(attached.sw_if_index)
    hs.add_interface_address(attached.sw_if_index, port.address)
    progress.attached.pop()
    LOG.info("%s: %s is VPP's %s (sw_if_index %d, %s, MTU %d)", node.name, port.ifname,
             interface.name, attached.sw_if_index, port.address, port.mtu)
    return attached


def _find(hs: HostStack, port: VppPort, mac: str | None) -> VppInterface:
    try:
        if not port.vpp_name and mac:
            return hs.interface_by_mac(mac)
        return hs.interface_by_name(port.vpp_name)
    except PapiError as error:
        if port.driver == "af_packet":
            raise
        source = port.pci or port.vdev
        raise HostStackError(f"{error}: VPP's dpdk plugin did not take {source} for "
                             f"interface {port.ifname} (see VPP's 'show log')") from error


def detach_ports(hs: HostStack, attached: Sequence[AttachedPort]) -> list[str]:
    """Through PAPI, in reverse: address off, admin down, the old hardware MTU back, the
    driver's delete. Every step is tried; returns the problems."""
    problems = []
    for item in reversed(attached):
        port, index = item.port, item.sw_if_index
        steps = []
        if index >= 0:
            steps = [(hs.delete_interface_address, (index, port.address)),
                     (hs.set_interface_up, (index, False))]
            if item.previous_mtu and item.previous_mtu != port.mtu:
                steps.append((hs.set_hardware_mtu, (index, item.previous_mtu)))
        steps.append((driver_of(port).delete, (hs, port)))
        for function, args in steps:
            try:
                function(*args)
            except (PapiError, HostStackError) as error:
                problems.append(str(error))
    return problems


def complete_peer_checksums(topology: Topology, nodes: Mapping[str, Node], node: str,
                            ports: Sequence[VppPort], changed: list[tuple[Node, str]]) -> None:
    """On a netns testbed, switch TX checksum offload off on the veth peer of each dpdk_vdev
    port: a veth hands the packet over with its TCP checksum still to be filled in, which
    VPP's af_packet driver completes but DPDK's af_packet PMD does not (VPP then drops every
    segment: 'bad tcp checksum'). Physical links carry complete checksums. Appends each
    change to ``changed`` as it is made, for :func:`restore_peer_checksums`."""
    if topology.provision != "netns":
        return
    vdevs = {port.ifname for port in ports if port.driver == "dpdk_vdev"}
    for link in topology.links:
        (a_node, a_if, _), (b_node, b_if, _) = link.ends()
        for (end_node, end_if), (peer_node, peer_if) in (((a_node, a_if), (b_node, b_if)),
                                                          ((b_node, b_if), (a_node, a_if))):
            if end_node == node and end_if in vdevs:
                peer = nodes[peer_node]
                peer.run(f"ethtool -K {shlex.quote(peer_if)} tx off", timeout=10, sudo=True)
                changed.append((peer, peer_if))


def restore_peer_checksums(changed: Sequence[tuple[Node, str]]) -> list[str]:
    """TX checksum offload back on where :func:`complete_peer_checksums` switched it off."""
    problems = []
    for peer, ifname in changed:
        result = peer.run(f"ethtool -K {shlex.quote(ifname)} tx on", timeout=10, sudo=True,
                          check=False)
        if result.exit_code != 0:
            problems.append(f"{peer.name}: could not switch TX checksum offload back on for "
                            f"{ifname}: {result.stderr.strip()}")
    return problems


def return_kernel_addresses(node: Node, attached: Sequence[AttachedPort]) -> list[str]:
    """Give the kernel back the addresses taken out (interface up again); returns problems."""
    problems = []
    for item in attached:
        if not item.kernel_address_moved:
            continue
        quoted = shlex.quote(item.port.ifname)
        result = node.run(f"ip addr replace {shlex.quote(item.port.address)} dev {quoted} && "
                          f"ip link set {quoted} up", timeout=10, sudo=True, check=False)
        if result.exit_code != 0:
            problems.append(f"{node.name}: could not give {item.port.address} back to "
                            f"{item.port.ifname}: {result.stderr.strip()}")
    return problems
