"""VPP host-stack configuration through PAPI: typed operations on interfaces, tables, namespaces.

``HostStack`` turns the seed documents' vppctl commands into PAPI calls (every retval checked
by ``PapiConnection.call``). The seeds' one-node layout built from these operations lives in
``libraries.vpp.loopback``. Enum values are VPP 26.10's (see the fixture definitions in
``utest/fixtures/vpp_api``).
"""

from __future__ import annotations

import ipaddress
import logging
from dataclasses import dataclass

from libraries.testbed.errors import PapiError
from libraries.vpp.papi import PapiConnection

logger = logging.getLogger(__name__)

NO_SW_IF_INDEX = 0xFFFFFFFF
IF_STATUS_API_FLAG_ADMIN_UP = 1
IF_STATUS_API_FLAG_LINK_UP = 2
FIB_API_PATH_TYPE_NORMAL = 0
FIB_API_PATH_FLAG_NONE = 0
FIB_API_PATH_NH_PROTO_IP4 = 0
FIB_API_PATH_NH_PROTO_IP6 = 1
RT_BACKEND_ENGINE_API_RULE_TABLE = 1
AF_PACKET_API_MODE_ETHERNET = 1
AF_PACKET_API_FLAG_QDISC_BYPASS = 1
AF_PACKET_API_FLAG_CKSUM_GSO = 2
MPLS_LABEL_STACK_SIZE = 16


@dataclass(frozen=True)
class VppVersion:
    """``show_version`` reply: program, version, build_date, build_directory."""

    program: str
    version: str
    build_date: str
    build_directory: str


@dataclass(frozen=True)
class VppInterface:
    """One ``sw_interface_details``: sw_if_index, name, dev_type, admin_up, link_up, mtu (L3),
    link_mtu (the hardware MTU, what ``hw_interface_set_mtu`` sets), mac (aa:bb:cc:dd:ee:ff)."""

    sw_if_index: int
    name: str
    dev_type: str
    admin_up: bool
    link_up: bool
    mtu: int
    link_mtu: int = 0
    mac: str = ""


@dataclass(frozen=True)
class VppThread:
    """One ``show_threads`` entry: id, name (vpp_main, vpp_wk_0, ...), type, cpu_id."""

    id: int
    name: str
    type: str
    cpu_id: int


def interface_address(prefix: str) -> str:
    """``prefix`` normalised as ADDRESS/LENGTH; PapiError naming the expected form otherwise."""
    try:
        return str(ipaddress.ip_interface(prefix))
    except ValueError as err:
        raise PapiError(f"invalid interface address {prefix!r}: expected ADDRESS/LENGTH, "
                        "e.g. 198.18.0.1/24") from err


class HostStack:
    """Typed VPP host-stack operations over one PapiConnection."""

    def __init__(self, papi: PapiConnection) -> None:
        self.papi = papi

    def show_version(self) -> VppVersion:
        """VPP's version strings."""
        reply = self.papi.call("show_version")
        return VppVersion(reply.program, reply.version, reply.build_date, reply.build_directory)

    def enable_session_layer(self, socket_api: bool = True) -> None:
        """Enable the session layer (rule-table engine) and, if asked, the app socket API.

        VPP 26.10 deprecates ``session_enable_disable`` for ``session_enable_disable_v2``;
        the old message is used only when the connected VPP lacks the new one.
        """
        if self.papi.has_message("session_enable_disable_v2"):
            self.papi.call("session_enable_disable_v2",
                           rt_engine_type=RT_BACKEND_ENGINE_API_RULE_TABLE)
        else:
            self.papi.call("session_enable_disable", is_enable=True)
        if socket_api:
            self.papi.call("session_sapi_enable_disable", is_enable=True)

    def create_loopback(self) -> int:
        """Create a loopback (VPP names it loopN); returns its sw_if_index."""
        return int(self.papi.call("create_loopback").sw_if_index)

    def delete_loopback(self, sw_if_index: int) -> None:
        self.papi.call("delete_loopback", sw_if_index=sw_if_index)

    def set_interface_up(self, sw_if_index: int, up: bool = True) -> None:
        """Set the admin state (``set interface state X up|down``)."""
        flags = IF_STATUS_API_FLAG_ADMIN_UP if up else 0
        self.papi.call("sw_interface_set_flags", sw_if_index=sw_if_index, flags=flags)

    def add_ip_table(self, table_id: int, ipv6: bool = False) -> None:
        """``ip table add N`` (adding an existing table is harmless in VPP)."""
        self.papi.call("ip_table_add_del", is_add=True,
                       table={"table_id": table_id, "is_ip6": ipv6})

    def delete_ip_table(self, table_id: int, ipv6: bool = False) -> None:
        self.papi.call("ip_table_add_del", is_add=False,
                       table={"table_id": table_id, "is_ip6": ipv6})

    def bind_interface_to_table(self, sw_if_index: int, table_id: int,
                                ipv6: bool = False) -> None:
        """``set interface ip table X N``: must precede the interface's addresses."""
        self.papi.call("sw_interface_set_table", sw_if_index=sw_if_index, is_ipv6=ipv6,
                       vrf_id=table_id)

    def add_interface_address(self, sw_if_index: int, prefix: str) -> None:
        """``set interface ip address X A.B.C.D/LEN``."""
        self.papi.call("sw_interface_add_del_address", sw_if_index=sw_if_index, is_add=True,
                       prefix=interface_address(prefix))

    def delete_interface_address(self, sw_if_index: int, prefix: str) -> None:
        self.papi.call("sw_interface_add_del_address", sw_if_index=sw_if_index, is_add=False,
                       prefix=interface_address(prefix))

    def add_app_namespace(self, namespace_id: str, secret: int, sw_if_index: int,
                          sock_name: str = "") -> int:
        """``app ns add id ID secret S if X``; returns the appns_index.

        An empty ``sock_name`` keeps VPP's default socket ``app_ns_sockets/<ID>``.
        """
        reply = self.papi.call("app_namespace_add_del_v4", namespace_id=namespace_id,
                               secret=secret, sw_if_index=sw_if_index, is_add=True,
                               sock_name=sock_name)
        return int(reply.appns_index)

    def delete_app_namespace(self, namespace_id: str, secret: int, sw_if_index: int) -> None:
        self.papi.call("app_namespace_add_del_v4", namespace_id=namespace_id, secret=secret,
                       sw_if_index=sw_if_index, is_add=False, sock_name="")

    def add_route_via_table_lookup(self, prefix: str, table_id: int, via_table_id: int,
                                   is_add: bool = True) -> None:
        """``ip route add PREFIX table T via lookup in table V`` (``is_add=False`` deletes).

        The path has no interface (sw_if_index ~0) and a zero next-hop, so VPP resolves it as
        a lookup of the destination in table ``via_table_id``.
        """
        try:
            network = ipaddress.ip_network(prefix)
        except ValueError as err:
            raise PapiError(f"invalid route prefix {prefix!r}: expected NETWORK/LENGTH") from err
        ipv6 = network.version == 6
        path = {
            "sw_if_index": NO_SW_IF_INDEX, "table_id": via_table_id, "rpf_id": 0,
            "weight": 1, "preference": 0, "type": FIB_API_PATH_TYPE_NORMAL,
            "flags": FIB_API_PATH_FLAG_NONE,
            "proto": FIB_API_PATH_NH_PROTO_IP6 if ipv6 else FIB_API_PATH_NH_PROTO_IP4,
            "nh": {"address": {"ip6" if ipv6 else "ip4": bytes(16 if ipv6 else 4)}},
            "n_labels": 0, "label_stack": [{}] * MPLS_LABEL_STACK_SIZE,
        }
        route = {"table_id": table_id, "prefix": str(network), "n_paths": 1, "paths": [path]}
        self.papi.call("ip_route_add_del", is_add=is_add, is_multipath=False, route=route)

    def create_af_packet_interface(self, host_if_name: str, mac: str | None = None,
                                   num_rx_queues: int = 1, num_tx_queues: int = 1) -> int:
        """``create host-interface name IF``: VPP owns the Linux interface; returns sw_if_index.

        Frame sizes 0 mean VPP's defaults; qdisc bypass and checksum/GSO offload are on,
        as with the CLI. VPP names the interface ``host-<IF>``.
        """
        reply = self.papi.call(
            "af_packet_create_v3", mode=AF_PACKET_API_MODE_ETHERNET,
            hw_addr=mac or "00:00:00:00:00:00", use_random_hw_addr=mac is None,
            host_if_name=host_if_name, rx_frame_size=0, tx_frame_size=0,
            rx_frames_per_block=0, tx_frames_per_block=0,
            flags=AF_PACKET_API_FLAG_QDISC_BYPASS | AF_PACKET_API_FLAG_CKSUM_GSO,
            num_rx_queues=num_rx_queues, num_tx_queues=num_tx_queues)
        return int(reply.sw_if_index)

    def delete_af_packet_interface(self, host_if_name: str) -> None:
        self.papi.call("af_packet_delete", host_if_name=host_if_name)

    def set_hardware_mtu(self, sw_if_index: int, mtu: int) -> None:
        """Set the hardware (link) MTU, ``set interface mtu MTU X``: for a DPDK NIC its max
        frame size, for an af_packet interface the host interface's MTU (VPP sets it)."""
        self.papi.call("hw_interface_set_mtu", sw_if_index=sw_if_index, mtu=mtu)

    def list_interfaces(self, name_filter: str | None = None) -> list[VppInterface]:
        """Every VPP interface (``sw_interface_dump``), or those whose name contains
        ``name_filter`` (VPP's filter is a substring match)."""
        fields = {"sw_if_index": NO_SW_IF_INDEX}
        if name_filter is not None:
            fields |= {"name_filter_valid": True, "name_filter": name_filter}
        return [VppInterface(
            sw_if_index=int(d.sw_if_index), name=d.interface_name,
            dev_type=d.interface_dev_type,
            admin_up=bool(int(d.flags) & IF_STATUS_API_FLAG_ADMIN_UP),
            link_up=bool(int(d.flags) & IF_STATUS_API_FLAG_LINK_UP), mtu=int(d.mtu[0]),
            link_mtu=int(d.link_mtu), mac=str(d.l2_address).lower())
            for d in self.papi.call("sw_interface_dump", **fields)]

    def interface_by_name(self, name: str) -> VppInterface:
        """The interface called exactly ``name`` (one filtered dump); PapiError listing every
        interface VPP has otherwise."""
        for interface in self.list_interfaces(name_filter=name):
            if interface.name == name:
                return interface
        raise PapiError(f"VPP has no interface named {name!r}; it has: "
                        f"{', '.join(i.name for i in self.list_interfaces()) or 'none'}")

    def interface_by_mac(self, mac: str) -> VppInterface:
        """The interface whose MAC address is ``mac``; PapiError listing them otherwise."""
        interfaces = self.list_interfaces()
        for interface in interfaces:
            if interface.mac == mac.lower():
                return interface
        raise PapiError(f"VPP has no interface with MAC address {mac}; it has: "
                        f"{', '.join(f'{i.name} ({i.mac})' for i in interfaces) or 'none'}")

    def list_threads(self) -> list[VppThread]:
        """VPP's threads (``show_threads``): the main thread, then one per worker."""
        reply = self.papi.call("show_threads")
        return [VppThread(int(t.id), t.name, t.type, int(t.cpu_id)) for t in reply.thread_data]
