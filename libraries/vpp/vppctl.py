"""vppctl over a node for VPP's show commands, and the ``show session verbose`` parser.

``run_vppctl`` builds ``vppctl -s SOCK <words...>`` (a command value, ``vppctl_command``) and
runs it on a node with its timeout. ``parse_show_session_verbose`` turns the session table
into ``Session`` records; ``listeners_on_port`` / ``require_listener`` prove that an
application really sits on VPP's host stack (its listener shows up in VPP, not only in the
kernel).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from libraries.testbed.command import NodeCommand
from libraries.testbed.errors import HostStackError, NodeError, ParseError

if TYPE_CHECKING:
    from libraries.testbed.node import Node

logger = logging.getLogger(__name__)

DEFAULT_CLI_SOCKET = "/run/vpp/cli.sock"
DIAGNOSTIC_COMMANDS = ("show session verbose", "show app", "show errors", "show hardware",
                       "show log")


def vppctl_command(words: Sequence[str], socket: str = DEFAULT_CLI_SOCKET,
                   vppctl: str = "vppctl", timeout: float | None = 15.0) -> NodeCommand:
    """The command ``vppctl -s SOCKET WORD...`` (``quoted()``: every part quoted, as a
    telemetry read embeds it), stopped after ``timeout`` s."""
    if not words:
        raise ValueError("vppctl needs a CLI command, got no words")
    return NodeCommand((vppctl, "-s", socket, *words), timeout)


def run_vppctl(node: Node, command: str, socket: str = DEFAULT_CLI_SOCKET,
               vppctl: str = "vppctl", timeout: float = 15.0, sudo: bool = True) -> str:
    """Run the VPP CLI ``command`` (e.g. ``"show session verbose"``) on ``node``; its output.

    Raises CommandError/CommandTimeout from the node, and NodeError when VPP rejects the
    command (``unknown input``), since vppctl itself exits 0 then.
    """
    value = vppctl_command(command.split(), socket=socket, vppctl=vppctl, timeout=timeout)
    line = value.quoted()
    output = node.run(value, sudo=sudo).stdout
    for text in output.splitlines():
        if "unknown input `" in text:
            raise NodeError(f"{node.name}: VPP rejected {line!r}: {text.strip()}")
    return output


def collect_diagnostics(node: Node, socket: str = DEFAULT_CLI_SOCKET,
                        vppctl: str = "vppctl", commands: Sequence[str] = DIAGNOSTIC_COMMANDS,
                        timeout: float = 15.0) -> dict[str, str]:
    """Output of each diagnostic show command; a failing command yields its error text.

    Never raises: meant for teardown and failure logging, when VPP may already be gone.
    """
    outputs = {}
    for command in commands:
        try:
            outputs[command] = run_vppctl(node, command, socket=socket, vppctl=vppctl,
                                          timeout=timeout)
        except HostStackError as err:
            outputs[command] = f"(failed: {err})"
    return outputs


@dataclass(frozen=True)
class Session:
    """One ``show session verbose`` row.

    Fields: thread, index, transport (``T``, ``U``, ``CT:T``, ``TLS`` ...), state (``LISTEN``,
    ``ESTABLISHED`` ...), rx_fifo, tx_fifo (bytes queued), local_ip, local_port, remote_ip,
    remote_port (None when the row has no ``ip:port->ip:port`` endpoints), text (the row).
    """

    thread: int
    index: int
    transport: str
    state: str | None
    rx_fifo: int | None
    tx_fifo: int | None
    local_ip: str | None
    local_port: int | None
    remote_ip: str | None
    remote_port: int | None
    text: str


_HEADER = re.compile(r"^Connection\s+State\s+Rx-f\s+Tx-f$")
# past 50 sessions a thread prints "N sessions. Verbose output suppressed. ..." instead
_THREAD = re.compile(r"^Thread (\d+): (?:active sessions \d+(?: closed \d+)?|no sessions"
                     r"|\d+ sessions\. Verbose output suppressed\..*)$")
_ROW = re.compile(r"^\[(\d+):(\d+)\]\[([^\]]+)\]\s*(.*)$")
_BODY = re.compile(r"^(?P<conn>.*?)\s+(?P<state>[A-Z][A-Z_-]*)\s+(?P<rx>\d+)\s+(?P<tx>\d+)$")
_ENDPOINTS = re.compile(r"^(?P<lip>\S+):(?P<lport>\d+)->(?P<rip>\S+):(?P<rport>\d+)$")


def parse_show_session_verbose(text: str) -> list[Session]:
    """Sessions listed by ``show session verbose``; [] for a table without sessions.

    The text must contain at least one ``Thread N: ...`` summary line; any line that is not
    the header, a ``[thread:index][proto]`` row or a thread summary raises ParseError.
    """
    sessions = []
    threads = 0
    for raw in text.splitlines():
        line = raw.strip()
        if not line or _HEADER.match(line):
            continue
        if _THREAD.match(line):
            threads += 1
            continue
        row = _ROW.match(line)
        if row is None:
            raise ParseError("vppctl show session verbose",
                             f"unexpected line {line!r}", text)
        sessions.append(_session(row, line))
    if threads == 0:
        raise ParseError("vppctl show session verbose",
                         "no 'Thread N: active sessions' line", text)
    return sessions


def _session(row: re.Match[str], line: str) -> Session:
    thread, index, transport, rest = row.groups()
    state = rx = tx = lip = lport = rip = rport = None
    body = _BODY.match(rest)
    if body is not None:
        state, rx, tx = body["state"], int(body["rx"]), int(body["tx"])
        endpoints = _ENDPOINTS.match(body["conn"].strip())
        if endpoints is not None:
            lip, lport = endpoints["lip"], int(endpoints["lport"])
            rip, rport = endpoints["rip"], int(endpoints["rport"])
    return Session(thread=int(thread), index=int(index), transport=transport, state=state,
                   rx_fifo=rx, tx_fifo=tx, local_ip=lip, local_port=lport, remote_ip=rip,
                   remote_port=rport, text=line)


def listeners_on_port(sessions: Sequence[Session], port: int) -> list[Session]:
    """The LISTEN sessions whose local port is ``port``."""
    return [s for s in sessions if s.state == "LISTEN" and s.local_port == port]


def require_listener(sessions: Sequence[Session], port: int, app: str) -> list[Session]:
    """The listeners on ``port``; HostStackError naming ``app`` when there is none."""
    found = listeners_on_port(sessions, port)
    if not found:
        listing = "; ".join(s.text for s in sessions) or "no sessions"
        raise HostStackError(
            f"{app}: the application is not on VPP's host stack: no LISTEN session on port "
            f"{port} in 'show session verbose' (VPP has: {listing})")
    logger.info("%s listens in VPP: %s", app, "; ".join(s.text for s in found))
    return found
