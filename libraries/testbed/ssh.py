"""Opening the SSH connection to a node: where and how to log in (:class:`SshTarget`), which
host keys are trusted, and errors that say who tried to log in where, with what.

Host keys are trusted from the runner's ``~/.ssh/known_hosts``, the system-wide
``/etc/ssh/ssh_known_hosts`` (as OpenSSH does) and the known_hosts files a topology names
(``known_hosts:`` top level or per node). A testbed the library built itself trusts only its
own file. Unknown hosts are refused, naming the files consulted and the key offered.
"""

from __future__ import annotations

import base64
import hashlib
import select
import socket
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import paramiko

from libraries.testbed.errors import NodeError


@dataclass(frozen=True)
class SshTarget:
    """Where and how to log in: ``host:port`` as ``user`` with a key file or a password."""

    host: str
    port: int = 22
    user: str = "root"
    key_file: str | None = None
    password: str | None = None
    sudo: bool = False
    known_hosts: tuple[str, ...] = ()  # known_hosts files to trust (the topology's)
    system_known_hosts: bool = True  # also trust ~/.ssh/known_hosts, /etc/ssh/ssh_known_hosts
    connect_timeout: float = 10.0


#: what OpenSSH trusts by default: the user's file, then the system-wide one
SYSTEM_KNOWN_HOSTS = ("~/.ssh/known_hosts", "/etc/ssh/ssh_known_hosts")


class UnknownHostKey(paramiko.SSHException):
    """The host offered a key that no trusted known_hosts file lists."""


class _RefuseUnknownHost(paramiko.MissingHostKeyPolicy):
    def __init__(self, files: list[str]):
        self.files = files

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str,
                         key: paramiko.PKey) -> None:
        digest = base64.b64encode(hashlib.sha256(key.asbytes()).digest()).decode().rstrip("=")
        consulted = ", ".join(self.files) or "none (no known_hosts file exists)"
        raise UnknownHostKey(
            f"host key {key.get_name()} SHA256:{digest} of {hostname} is not in any trusted "
            f"known_hosts file (consulted: {consulted}); unknown hosts are refused: add it "
            f"(ssh-keyscan) to one of them or name the lab's file in the topology "
            f"(known_hosts:)")


def trusted_known_hosts(target: SshTarget, where: str) -> list[str]:
    """The known_hosts files trusted for ``target``: the system ones that exist, and every file
    the topology names (which must exist)."""
    files = []
    if target.system_known_hosts:
        files += [str(Path(f).expanduser()) for f in SYSTEM_KNOWN_HOSTS
                  if Path(f).expanduser().is_file()]
    for name in target.known_hosts:
        path = Path(name).expanduser()
        if not path.is_file():
            raise NodeError(f"{where}: known_hosts file {name} (named by the topology) does "
                            "not exist or is not a file")
        files.append(str(path))
    return files


def _credentials(target: SshTarget, key_file: str | None) -> str:
    if key_file:
        return f"key {key_file}"
    if target.password is not None:
        return "a password"
    return "the runner's default keys (~/.ssh/id_*)"


def open_client(target: SshTarget, where: str) -> paramiko.SSHClient:
    """A connected, authenticated paramiko client for ``target`` (``where`` names the node in
    errors). Raises :class:`NodeError` naming user, host:port and key on every failure."""
    files = trusted_known_hosts(target, where)
    client = paramiko.SSHClient()
    for path in files:
        client.load_system_host_keys(path)
    client.set_missing_host_key_policy(_RefuseUnknownHost(files))
    key_file = str(Path(target.key_file).expanduser()) if target.key_file else None
    try:
        # TCP_NODELAY: without it every command waits out a delayed ACK (~40 ms here).
        sock = socket.create_connection((target.host, target.port),
                                        timeout=target.connect_timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        client.connect(
            target.host,
            sock=sock,
            port=target.port,
            username=target.user,
            key_filename=key_file,
            password=target.password,
            timeout=target.connect_timeout,
            banner_timeout=target.connect_timeout,
            auth_timeout=target.connect_timeout,
            allow_agent=False,
            look_for_keys=key_file is None and target.password is None,
        )
    except paramiko.AuthenticationException as error:
        client.close()
        raise NodeError(
            f"{where}: cannot log in as {target.user!r} with {_credentials(target, key_file)}: "
            f"{error} Expected: the key's public half in {target.user}'s authorized_keys on "
            f"{target.host}, and an unlocked account (`passwd -S {target.user}` there must "
            "not say L)") from None
    except (OSError, paramiko.SSHException) as error:
        client.close()
        raise NodeError(f"{where}: cannot connect over SSH as {target.user!r}: {error}") from None
    return client


HELD_SESSIONS = 7
"""Background processes a connection holds, each in an SSH session of its own whose shell
waits for it (``Node.start``). sshd allows 10 sessions a connection unless told otherwise
(``MaxSessions``): the node's connection keeps 3 for its foreground commands (a command and a
``perf record`` beside it); a node running more processes opens another connection for
them."""


@dataclass
class HeldSessions:
    """The SSH sessions a node holds open for its background processes: on the node's own
    connection while it holds fewer than :data:`HELD_SESSIONS`, else on connections of their
    own, opened as needed and closed with the node."""

    target: SshTarget
    where: str
    extra: list[paramiko.SSHClient] = field(default_factory=list)

    def open(self, main: paramiko.SSHClient, held: list[paramiko.Channel],
             purpose: str) -> paramiko.Channel:
        """A new session on the first connection (``main`` first) holding fewer than
        :data:`HELD_SESSIONS` of the ``held`` sessions; ``NodeError`` naming ``purpose``."""
        counts = Counter(id(channel.get_transport()) for channel in held)
        client = next((c for c in (main, *self.extra) if c.get_transport() is not None
                       and counts[id(c.get_transport())] < HELD_SESSIONS), None)
        if client is None:
            client = open_client(self.target, self.where)
            self.extra.append(client)
        transport = client.get_transport()
        if transport is None or not transport.is_active():
            raise NodeError(f"{self.where}: SSH connection is closed (node down?): cannot "
                            f"{purpose}")
        try:
            return transport.open_session(timeout=self.target.connect_timeout)
        except (OSError, paramiko.SSHException) as error:
            raise NodeError(f"{self.where}: cannot open an SSH session to {purpose}: "
                            f"{error}") from None

    def close(self) -> None:
        """Close the connections of their own (their sessions with them)."""
        for client in self.extra:
            client.close()
        self.extra.clear()


def exit_status(channel: paramiko.Channel, wait: float = 1.0) -> int | None:
    """The exit status of a held background process (its shell's, which waited for it: a
    signal's is 128 + its number), once it ended; None while it runs (after ``wait`` s) or
    when the session is gone."""
    deadline = time.monotonic() + wait
    try:
        while not channel.exit_status_ready():
            if time.monotonic() >= deadline:
                return None
            select.select([channel], [], [], 0.1)
            while channel.recv_ready():
                channel.recv(65536)
        return channel.recv_exit_status()
    except (OSError, paramiko.SSHException):
        return None


def leave(channel: paramiko.Channel, wait: float = 3.0) -> None:
    """Close the session of a background process that is gone: its shell reaped it and
    leaves (waited for up to ``wait`` s, so that sshd reaps the shell too)."""
    deadline = time.monotonic() + wait
    try:
        while not channel.exit_status_ready() and time.monotonic() < deadline:
            select.select([channel], [], [], 0.1)
            while channel.recv_ready():
                channel.recv(65536)
    except (OSError, paramiko.SSHException):
        pass  # the connection went: the session with it
    channel.close()


def read_line(channel: paramiko.Channel, deadline: float) -> str:
    """The first line a command prints on stdout (without its newline), read as soon as it
    arrives; ``NodeError`` with what it printed when the command ends or ``deadline`` passes
    first. The channel stays open: the command runs on."""
    out, err = bytearray(), bytearray()
    try:
        while b"\n" not in out:
            while channel.recv_ready():
                out += channel.recv(65536)
            while channel.recv_stderr_ready():
                err += channel.recv_stderr(65536)
            if b"\n" in out:
                break
            printed = bytes(out + err).decode(errors="replace").strip()
            if channel.exit_status_ready() and not channel.recv_ready():
                raise NodeError(f"it ended (exit status {channel.recv_exit_status()}) before "
                                f"printing a line: {printed!r}")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise NodeError(f"it printed no line in time: {printed!r}")
            select.select([channel], [], [], min(remaining, 0.5))
    except (OSError, paramiko.SSHException) as error:
        raise NodeError(f"lost the SSH channel: {error}") from None
    return bytes(out).split(b"\n", 1)[0].decode(errors="replace")


def collect(channel: paramiko.Channel, deadline: float) -> tuple[bytes, bytes, int | None]:
    """Read a command's stdout and stderr until it exits (or ``deadline``: exit status None);
    closes the channel."""
    out, err = bytearray(), bytearray()
    try:
        while True:
            while channel.recv_ready():
                out += channel.recv(65536)
            while channel.recv_stderr_ready():
                err += channel.recv_stderr(65536)
            if (
                channel.exit_status_ready()
                and channel.eof_received
                and not channel.recv_ready()
                and not channel.recv_stderr_ready()
            ):
                return bytes(out), bytes(err), channel.recv_exit_status()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return bytes(out), bytes(err), None
            select.select([channel], [], [], min(remaining, 1.0))
    except (OSError, paramiko.SSHException) as error:
        raise NodeError(f"lost the SSH channel: {error}") from None
    finally:
        channel.close()
