"""The fake VPP's state and the handlers of its state-changing messages (see fake_vpp.py).

Retval codes follow VPP's api_errno where known (-2 invalid sw_if_index, -3 no such FIB, -6 no
such entry, -7 invalid value); they are the fake's approximations.
"""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass, field
from typing import Any

NO_INDEX = 0xFFFFFFFF
ADMIN_UP = 1
INVALID_SW_IF_INDEX = -2
NO_SUCH_FIB = -3
NO_SUCH_ENTRY = -6
INVALID_VALUE = -7
ADDRESS_FOUND_FOR_INTERFACE = -65


@dataclass
class FakeInterface:
    """An interface of the fake VPP."""

    sw_if_index: int
    name: str
    dev_type: str
    admin_up: bool = False
    table_id: int = 0
    link_mtu: int = 9000
    mac: str | None = None  # None: 02:fe:00:00:00:<sw_if_index>
    mtu: list[int] = field(default_factory=lambda: [9000, 0, 0, 0])
    addresses: list[ipaddress.IPv4Interface | ipaddress.IPv6Interface] = field(
        default_factory=list)


@dataclass
class FakeState:
    """What the fake VPP holds; tests may read it after the calls."""

    interfaces: dict[int, FakeInterface] = field(default_factory=dict)
    tables: set[int] = field(default_factory=lambda: {0})
    routes: dict[tuple[int, str], list[Any]] = field(default_factory=dict)
    namespaces: dict[str, dict[str, Any]] = field(default_factory=dict)
    session_enabled: bool = True
    sapi_enabled: bool = True


class StateHandlers:
    """Message handlers over ``self.state`` (a FakeState) and ``self.threads`` (id, name,
    type, cpu) tuples; run in the fake's server thread."""

    state: FakeState
    threads: list[tuple[int, str, str, int]]

    def _new_interface(self, name: str, dev_type: str) -> int:
        index = max(self.state.interfaces) + 1
        self.state.interfaces[index] = FakeInterface(index, name, dev_type)
        return index

    def _create_loopback(self, fields: dict[str, Any]) -> dict[str, Any]:
        used = {i.name for i in self.state.interfaces.values()}
        instance = next(n for n in range(1 << 16) if f"loop{n}" not in used)
        return {"sw_if_index": self._new_interface(f"loop{instance}", "Loopback")}

    def _delete_loopback(self, fields: dict[str, Any]) -> dict[str, Any]:
        interface = self.state.interfaces.get(fields["sw_if_index"])
        if interface is None or interface.dev_type != "Loopback":
            return {"retval": INVALID_SW_IF_INDEX}
        del self.state.interfaces[interface.sw_if_index]
        return {}

    def _set_flags(self, fields: dict[str, Any]) -> dict[str, Any]:
        interface = self.state.interfaces.get(fields["sw_if_index"])
        if interface is None:
            return {"retval": INVALID_SW_IF_INDEX}
        interface.admin_up = bool(int(fields["flags"]) & ADMIN_UP)
        return {}

    def _set_table(self, fields: dict[str, Any]) -> dict[str, Any]:
        interface = self.state.interfaces.get(fields["sw_if_index"])
        if interface is None:
            return {"retval": INVALID_SW_IF_INDEX}
        if fields["vrf_id"] not in self.state.tables:
            return {"retval": NO_SUCH_FIB}
        if interface.addresses and interface.table_id != fields["vrf_id"]:
            return {"retval": ADDRESS_FOUND_FOR_INTERFACE}
        interface.table_id = fields["vrf_id"]
        return {}

    def _add_del_address(self, fields: dict[str, Any]) -> dict[str, Any]:
        interface = self.state.interfaces.get(fields["sw_if_index"])
        if interface is None:
            return {"retval": INVALID_SW_IF_INDEX}
        prefix = fields["prefix"]
        if fields["del_all"]:
            interface.addresses.clear()
        elif fields["is_add"]:
            if prefix not in interface.addresses:
                interface.addresses.append(prefix)
        elif prefix in interface.addresses:
            interface.addresses.remove(prefix)
        else:
            return {"retval": NO_SUCH_ENTRY}
        return {}

    def _set_mtu(self, fields: dict[str, Any]) -> dict[str, Any]:
        interface = self.state.interfaces.get(fields["sw_if_index"])
        if interface is None:
            return {"retval": INVALID_SW_IF_INDEX}
        interface.mtu = [new or old for new, old in zip(fields["mtu"], interface.mtu,
                                                         strict=True)]
        return {}

    def _set_hw_mtu(self, fields: dict[str, Any]) -> dict[str, Any]:
        interface = self.state.interfaces.get(fields["sw_if_index"])
        if interface is None:
            return {"retval": INVALID_SW_IF_INDEX}
        if interface.dev_type == "local":
            return {"retval": INVALID_VALUE}  # not an ethernet interface
        interface.link_mtu = fields["mtu"]
        interface.mtu[0] = fields["mtu"]  # VPP carries the new hardware MTU to the L3 one
        return {}

    def _show_threads(self, fields: dict[str, Any]) -> dict[str, Any]:
        data = [{"id": index, "name": name, "type": kind, "pid": os.getpid(), "cpu_id": cpu,
                 "core": cpu, "cpu_socket": 0} for index, name, kind, cpu in self.threads]
        return {"count": len(data), "thread_data": data}

    def _interface_dump(self, fields: dict[str, Any]) -> list[dict[str, Any]]:
        selected = list(self.state.interfaces.values())
        if fields["name_filter_valid"]:
            selected = [i for i in selected if fields["name_filter"] in i.name]
        elif fields["sw_if_index"] != NO_INDEX:
            selected = [i for i in selected if i.sw_if_index == fields["sw_if_index"]]
        return [{"sw_if_index": i.sw_if_index, "sup_sw_if_index": i.sw_if_index,
                 "l2_address": bytes.fromhex(i.mac.replace(":", "")) if i.mac
                 else bytes([2, 0xFE, 0, 0, 0, i.sw_if_index % 256]),
                 "flags": ADMIN_UP if i.admin_up else 0, "link_mtu": i.link_mtu, "mtu": i.mtu,
                 "interface_name": i.name, "interface_dev_type": i.dev_type}
                for i in selected]

    def _address_dump(self, fields: dict[str, Any]) -> list[dict[str, Any]]:
        interface = self.state.interfaces.get(fields["sw_if_index"])
        if interface is None:
            return []
        version = 6 if fields["is_ipv6"] else 4
        return [{"sw_if_index": interface.sw_if_index, "prefix": address}
                for address in interface.addresses if address.version == version]

    def _table_add_del(self, fields: dict[str, Any]) -> dict[str, Any]:
        table_id = fields["table"].table_id
        if fields["is_add"]:
            self.state.tables.add(table_id)
        elif table_id == 0 or table_id not in self.state.tables:
            return {"retval": NO_SUCH_FIB}
        else:
            self.state.tables.discard(table_id)
        return {}

    def _route_add_del(self, fields: dict[str, Any]) -> dict[str, Any]:
        route = fields["route"]
        if route.table_id not in self.state.tables:
            return {"retval": NO_SUCH_FIB}
        key = (route.table_id, str(route.prefix))
        if fields["is_add"]:
            if any(path.table_id not in self.state.tables for path in route.paths):
                return {"retval": NO_SUCH_FIB}
            self.state.routes[key] = list(route.paths)
        elif self.state.routes.pop(key, None) is None:
            return {"retval": NO_SUCH_ENTRY}
        return {"stats_index": len(self.state.routes)}

    def _session_enable(self, fields: dict[str, Any]) -> dict[str, Any]:
        self.state.session_enabled = bool(fields["is_enable"])
        return {}

    def _session_enable_v2(self, fields: dict[str, Any]) -> dict[str, Any]:
        self.state.session_enabled = int(fields["rt_engine_type"]) != 0
        return {}

    def _sapi_enable(self, fields: dict[str, Any]) -> dict[str, Any]:
        self.state.sapi_enabled = bool(fields["is_enable"])
        return {}

    def _namespace_add_del(self, fields: dict[str, Any]) -> dict[str, Any]:
        name = fields["namespace_id"]
        if not fields["is_add"]:
            if self.state.namespaces.pop(name, None) is None:
                return {"retval": NO_SUCH_ENTRY}
            return {}
        if not name:
            return {"retval": INVALID_VALUE}
        if (fields["sw_if_index"] != NO_INDEX
                and fields["sw_if_index"] not in self.state.interfaces):
            return {"retval": INVALID_SW_IF_INDEX}
        index = len(self.state.namespaces) + 1
        self.state.namespaces[name] = {**fields, "appns_index": index}
        return {"appns_index": index}

    def _af_packet_create(self, fields: dict[str, Any]) -> dict[str, Any]:
        name = f"host-{fields['host_if_name']}"
        if any(i.name == name for i in self.state.interfaces.values()):
            return {"retval": INVALID_VALUE}
        index = self._new_interface(name, "af_packet")
        self.state.interfaces[index].link_mtu = 1500  # the host interface's MTU
        return {"sw_if_index": index}

    def _af_packet_delete(self, fields: dict[str, Any]) -> dict[str, Any]:
        name = f"host-{fields['host_if_name']}"
        for index, interface in list(self.state.interfaces.items()):
            if interface.name == name:
                del self.state.interfaces[index]
                return {}
        return {"retval": INVALID_SW_IF_INDEX}
