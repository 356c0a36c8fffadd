"""A protocol-level fake of VPP's binary API server, for unit tests of the PAPI layer.

It listens on a unix socket and speaks vpp_papi's socket transport: every message is a 16-byte
header (``>QII``: 0, payload length, 0) followed by the payload; the client's first message is
``sockclnt_create`` (message id 15), answered by ``sockclnt_create_reply`` (id 16) carrying the
message table (``name_crc`` -> id) the client then uses for every call. Requests are decoded and
replies encoded with vpp_papi's own serializer, built from the definitions in
``utest/fixtures/vpp_api`` (a subset of VPP 26.10's), so field names, types and CRCs are real.

The fake keeps just enough state (``fake_vpp_state``: interfaces, tables, addresses, routes,
app namespaces) to answer like VPP; it starts with the DPDK interfaces and the worker threads a
startup.conf would give it (``dpdk_interfaces``, ``main_core``, ``workers``). It records every
request (name + decoded fields), can fail the next call of a message with a given retval, or
drop the connection instead of answering (VPP dying).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import struct
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vpp_papi.vpp_papi import VPPApiJSONFiles

from utest.fake_vpp_state import (  # re-exported: tests read the state through these
    FakeInterface,
    FakeState,
    StateHandlers,
)

FIXTURE_API_DIR = str(Path(__file__).parent / "fixtures" / "vpp_api")
HEADER = struct.Struct(">QII")
MSG_ID = struct.Struct(">H")
SOCKCLNT_CREATE_ID = 15
SOCKCLNT_CREATE_REPLY_ID = 16
TRANSPORT_MESSAGES = frozenset({"sockclnt_create", "sockclnt_delete", "control_ping",
                                "memclnt_keepalive"})
__all__ = ["FIXTURE_API_DIR", "FakeInterface", "FakeState", "FakeVpp", "RecordedCall", "serve"]


@dataclass(frozen=True)
class RecordedCall:
    """One request the fake received: message ``name`` and its decoded ``fields``."""

    name: str
    fields: dict[str, Any]


class FakeVpp(StateHandlers):
    """Fake VPP API server on ``socket_path``; ``start()`` runs it in a thread, ``stop()`` ends it.

    ``omit`` leaves request messages out of the message table (an older VPP or a plugin that
    is not loaded). ``cli_output`` maps ``cli_inband`` commands to their reply text.
    ``dpdk_interfaces`` (names) and ``dpdk_vdev_macs`` (MAC addresses of DPDK af_packet
    virtual devices, named ``EthernetN`` as VPP 26.10 names DPDK 22.11's) are there from the
    start (dev type ``dpdk``, link MTU 1500), as the dpdk plugin makes them from startup.conf;
    ``show_threads`` lists ``vpp_main`` on ``main_core`` and one ``vpp_wk_N`` per CPU of
    ``workers``.
    """

    def __init__(self, socket_path: str, api_dir: str = FIXTURE_API_DIR,
                 omit: Iterable[str] = (), dpdk_interfaces: Iterable[str] = (),
                 main_core: int = 0, workers: Iterable[int] = (),
                 dpdk_vdev_macs: Iterable[str] = ()) -> None:
        self.socket_path = socket_path
        _, self._messages, self._services = VPPApiJSONFiles.load_api(apidir=api_dir)
        self.state = FakeState()
        self.state.interfaces[0] = FakeInterface(0, "local0", "local")
        devices = [(name, None) for name in dpdk_interfaces]
        devices += [(f"Ethernet{port}", mac) for port, mac in enumerate(dpdk_vdev_macs)]
        for name, mac in devices:
            index = self._new_interface(name, "dpdk")
            self.state.interfaces[index].link_mtu = 1500
            self.state.interfaces[index].mtu = [1500, 0, 0, 0]
            self.state.interfaces[index].mac = mac
        self.threads = [(0, "vpp_main", "", main_core)] + [
            (number + 1, f"vpp_wk_{number}", "workers", cpu)
            for number, cpu in enumerate(workers)]
        self.cli_output: dict[str, str] = {}
        self._calls: list[RecordedCall] = []
        self._failures: dict[str, list[int]] = {}
        self._die_on: set[str] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._conns: list[socket.socket] = []
        self._listener: socket.socket | None = None
        self._handlers = self._handler_table()
        self._ids, self._names = self._message_table(set(omit))

    # ---- test controls ---------------------------------------------------------------------

    @property
    def calls(self) -> list[RecordedCall]:
        """Every request received, transport messages included, in order."""
        with self._lock:
            return list(self._calls)

    def api_calls(self) -> list[RecordedCall]:
        """The requests without the transport ones (handshake, control_ping, delete)."""
        return [call for call in self.calls if call.name not in TRANSPORT_MESSAGES]

    def fail_next(self, message: str, retval: int) -> None:
        """Answer the next ``message`` with ``retval`` (and change nothing)."""
        with self._lock:
            self._failures.setdefault(message, []).append(retval)

    def die_on(self, message: str) -> None:
        """Close the client's connection when ``message`` arrives, without answering."""
        with self._lock:
            self._die_on.add(message)

    # ---- server ------------------------------------------------------------------------------

    def start(self) -> FakeVpp:
        """Bind the socket and serve in a background thread."""
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(self.socket_path)
        listener.listen(4)
        listener.settimeout(0.1)
        self._listener = listener
        self._spawn(self._accept_loop)
        return self

    def stop(self) -> None:
        """Stop serving, close every connection, remove the socket file."""
        self._stop.set()
        with self._lock:
            conns = list(self._conns)
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        for thread in self._threads:
            thread.join(timeout=5)
        if self._listener is not None:
            self._listener.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.socket_path)

    def _spawn(self, target: Callable[..., None], *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True,
                                  name=f"fake-vpp-{len(self._threads)}")
        self._threads.append(thread)
        thread.start()

    def _accept_loop(self) -> None:
        assert self._listener is not None
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            conn.settimeout(0.1)
            with self._lock:
                self._conns.append(conn)
            self._spawn(self._serve, conn, len(self._conns))

    def _serve(self, conn: socket.socket, client_index: int) -> None:
        with conn:
            while not self._stop.is_set():
                payload = self._read_message(conn)
                if payload is None:
                    return
                replies = self._dispatch(payload, client_index)
                if replies is None:
                    return
                for reply in replies:
                    conn.sendall(HEADER.pack(0, len(reply), 0) + reply)

    def _read_message(self, conn: socket.socket) -> bytes | None:
        header = self._read_exact(conn, HEADER.size)
        if header is None:
            return None
        _, length, _ = HEADER.unpack(header)
        return self._read_exact(conn, length)

    def _read_exact(self, conn: socket.socket, size: int) -> bytes | None:
        data = b""
        while len(data) < size:
            try:
                chunk = conn.recv(size - len(data))
            except TimeoutError:
                if self._stop.is_set():
                    return None
                continue
            except OSError:
                return None
            if not chunk:
                return None
            data += chunk
        return data

    # ---- messages ----------------------------------------------------------------------------

    def _message_table(self, omit: set[str]) -> tuple[dict[str, int], dict[int, str]]:
        names = ["sockclnt_create", "sockclnt_create_reply"]
        for request in sorted(self._handlers):
            if request in omit or request in names:
                continue
            service = self._services[request]
            names += [request, service["reply"]]
        ids = {"sockclnt_create": SOCKCLNT_CREATE_ID,
               "sockclnt_create_reply": SOCKCLNT_CREATE_REPLY_ID}
        next_id = 1
        for name in names[2:]:
            while next_id in (SOCKCLNT_CREATE_ID, SOCKCLNT_CREATE_REPLY_ID):
                next_id += 1
            ids[name] = next_id
            next_id += 1
        return ids, {index: name for name, index in ids.items()}

    def _dispatch(self, payload: bytes, client_index: int) -> list[bytes] | None:
        (msg_id,) = MSG_ID.unpack_from(payload)
        name = self._names.get(msg_id)
        if name is None or name not in self._handlers:
            raise AssertionError(f"fake VPP got message id {msg_id} it did not offer")
        decoded, _ = self._messages[name].unpack(payload)
        # (the namedtuple renames _vl_msg_id to _0: use the definition's own field names)
        fields = {key: value for key, value in zip(self._messages[name].fields, decoded,
                                                   strict=True)
                  if key not in ("_vl_msg_id", "client_index", "context")}
        with self._lock:
            self._calls.append(RecordedCall(name, fields))
            if name in self._die_on:
                return None
            pending = self._failures.get(name)
            retval = pending.pop(0) if pending else 0
        service = self._services[name]
        if retval != 0:
            results: Any = {"retval": retval}
        elif name == "sockclnt_create":
            results = self._sockclnt_create(client_index)
        else:
            results = self._handlers[name](fields)
        if isinstance(results, dict):
            results = [results]
        return [self._encode(service["reply"], decoded.context, result) for result in results]

    def _encode(self, name: str, context: int, result: dict[str, Any]) -> bytes:
        message = self._messages[name]
        values = {"_vl_msg_id": self._ids[name], "context": context}
        if "retval" in message.field_by_name:
            values["retval"] = 0
        values.update(result)
        return message.pack(values)

    def _sockclnt_create(self, client_index: int) -> dict[str, Any]:
        table = [{"index": index, "name": f"{name}_{self._messages[name].crc[2:]}"}
                 for name, index in sorted(self._ids.items(), key=lambda item: item[1])]
        return {"response": 0, "index": client_index, "count": len(table),
                "message_table": table}

    def _handler_table(self) -> dict[str, Callable[[dict[str, Any]], Any]]:
        return {
            "sockclnt_create": lambda f: {},  # answered by _sockclnt_create
            "sockclnt_delete": lambda f: {"response": 0},
            "control_ping": lambda f: {"vpe_pid": os.getpid()},
            "memclnt_keepalive": lambda f: {},
            "show_version": lambda f: {"program": "vpe", "version": "26.10-rc0~fake",
                                       "build_date": "fake", "build_directory": "/fake"},
            "cli_inband": lambda f: {"reply": self.cli_output.get(f["cmd"], "")},
            "create_loopback": self._create_loopback,
            "delete_loopback": self._delete_loopback,
            "sw_interface_set_flags": self._set_flags,
            "sw_interface_set_table": self._set_table,
            "sw_interface_add_del_address": self._add_del_address,
            "sw_interface_set_mtu": self._set_mtu,
            "hw_interface_set_mtu": self._set_hw_mtu,
            "show_threads": self._show_threads,
            "sw_interface_dump": self._interface_dump,
            "ip_address_dump": self._address_dump,
            "ip_table_add_del": self._table_add_del,
            "ip_route_add_del": self._route_add_del,
            "session_enable_disable": self._session_enable,
            "session_enable_disable_v2": self._session_enable_v2,
            "session_sapi_enable_disable": self._sapi_enable,
            "app_namespace_add_del_v4": self._namespace_add_del,
            "af_packet_create_v3": self._af_packet_create,
            "af_packet_delete": self._af_packet_delete,
        }


@contextlib.contextmanager
def serve(api_dir: str = FIXTURE_API_DIR, omit: Iterable[str] = (), **startup: Any
          ) -> Iterator[FakeVpp]:
    """Run a FakeVpp on a socket in a fresh short /tmp directory; stop it and clean up after.
    ``startup``: FakeVpp's dpdk_interfaces, dpdk_vdev_macs, main_core, workers.

    (Unix socket paths are limited to 107 bytes, too short for pytest's tmp_path.)
    """
    directory = tempfile.mkdtemp(prefix="fakevpp-")
    fake = FakeVpp(os.path.join(directory, "api.sock"), api_dir=api_dir, omit=omit,
                   **startup).start()
    try:
        yield fake
    finally:
        fake.stop()
        shutil.rmtree(directory, ignore_errors=True)
