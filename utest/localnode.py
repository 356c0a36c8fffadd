"""A Node that runs commands on this machine with subprocess, for real-tool unit tests.

It follows the :class:`libraries.testbed.node.Node` contract that runners rely on (``name``,
``workdir``, ``run`` with timeout/check, ``put``, ``start``/``stop``) without SSH, so a test
can run the real wrk / iperf3 / nginx through the same runner code a suite uses.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import random
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from libraries.testbed.command import NodeCommand, background_command, node_command
from libraries.testbed.errors import CommandError, CommandTimeout
from libraries.testbed.node import CommandResult


@dataclass
class LocalProcess:
    """A background process started by :meth:`LocalNode.start`."""

    name: str
    command: str
    popen: subprocess.Popen[bytes]
    log_path: str

    @property
    def pid(self) -> int:
        return self.popen.pid


@dataclass
class LocalRunning:
    """A command started by :meth:`LocalNode.launch` (``Node.launch``'s RunningCommand)."""

    where: str
    command: NodeCommand
    proc: subprocess.Popen[bytes]
    start: float

    def wait(self, check: bool = True, quiet: bool = False) -> CommandResult:
        command, proc = self.command.line(), self.proc
        try:
            out, err = proc.communicate(timeout=self.command.timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            raise CommandTimeout(self.where, command, self.command.timeout,
                                 out.decode(errors="replace"),
                                 err.decode(errors="replace")) from None
        result = CommandResult(command, proc.returncode, out.decode(errors="replace"),
                               err.decode(errors="replace"), time.monotonic() - self.start)
        if check and result.exit_code != 0:
            raise CommandError(self.where, command, result.exit_code, result.stdout,
                               result.stderr)
        return result


@dataclass(frozen=True)
class LocalUser:
    """The login user of a :class:`LocalNode`."""

    user: str


@dataclass
class LocalNode:
    """Runs commands locally through ``sh -c``; records every command it ran in ``history``."""

    workdir: str
    name: str = "local"
    history: list[str] = field(default_factory=list)
    started: list[LocalProcess] = field(default_factory=list)

    @property
    def where(self) -> str:
        return f"{self.name} (localhost)"

    @property
    def target(self) -> LocalUser:
        """Who runs the commands (``user``, as ``Node.target`` has it)."""
        return LocalUser(getpass.getuser())

    @property
    def processes(self) -> tuple[LocalProcess, ...]:
        """Processes started and still running (``Node.processes``)."""
        return tuple(p for p in self.started if p.popen.poll() is None)

    def which(self, binary: str) -> str | None:
        """``binary``'s path on this machine, or None."""
        return binary if "/" in binary else shutil.which(binary)

    def is_running(self, process: LocalProcess) -> bool:
        """True while the process has not exited."""
        return process.popen.poll() is None

    def read_log(self, process: LocalProcess) -> str:
        """The process's output so far (``Node.read_log``)."""
        return Path(process.log_path).read_text(errors="replace")

    def run(self, command: str | NodeCommand, timeout: float | None = None,
            sudo: bool = False, check: bool = True, quiet: bool = False) -> CommandResult:
        return self.launch(command, timeout, sudo).wait(check, quiet)

    def launch(self, command: str | NodeCommand, timeout: float | None = None,
               sudo: bool = False) -> LocalRunning:
        """Start ``command`` in the foreground of a local shell; collected by ``wait``."""
        value = node_command(command, timeout)
        self.history.append(value.line())
        proc = subprocess.Popen(
            ["sh", "-c", value.line()], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL, start_new_session=True,
        )
        return LocalRunning(self.where, value, proc, time.monotonic())

    def put(self, text: str, path: str, mode: int = 0o644, sudo: bool = False) -> None:
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        target.chmod(mode)

    def start(self, command: str | NodeCommand, name: str, env: dict[str, str] | None = None,
              cpus: list[int] | None = None, sudo: bool = False) -> LocalProcess:
        value = background_command(command, env, cpus)
        command, env, cpus = value.quoted(), dict(value.env), list(value.cpus)
        log_path = os.path.join(self.workdir, f"{name}.log")
        if cpus:
            command = f"taskset -c {','.join(map(str, cpus))} {command}"
        self.history.append(command)
        with open(log_path, "wb") as log:
            popen = subprocess.Popen(
                ["sh", "-c", f"exec {command}"], stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True,
                env={**os.environ, **(env or {})},
            )
        process = LocalProcess(name, command, popen, log_path)
        self.started.append(process)
        return process

    def stop(self, process: LocalProcess, grace: float = 5.0) -> str:
        """Stop the process group as ``Node.stop`` does: SIGTERM, up to ``grace`` s, then
        SIGKILL; members outliving the leader (reparented children) are stopped too."""
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(process.pid, sig)
            except ProcessLookupError:
                break
            deadline = time.monotonic() + grace
            while self._group_alive(process.pid) and time.monotonic() < deadline:
                time.sleep(0.05)
            if not self._group_alive(process.pid):
                break
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.popen.wait(timeout=grace)
        return Path(process.log_path).read_text(errors="replace")

    @staticmethod
    def _group_alive(pgid: int) -> bool:
        """A non-zombie process is left in group ``pgid``."""
        listing = subprocess.run(["ps", "-eo", "pgid=,stat="], capture_output=True, text=True,
                                 check=True).stdout
        return any(fields[0] == str(pgid) and not fields[1].startswith("Z")
                   for fields in (line.split() for line in listing.splitlines()))

    def wait_for_listener(self, port: int, process: LocalProcess, timeout: float = 10.0) -> None:
        """Wait until something listens on TCP ``port``; fail when ``process`` exits first."""
        deadline = time.monotonic() + timeout
        while not subprocess.run(["ss", "-Hltn", f"sport = :{port}"], capture_output=True,
                                 text=True, check=True).stdout.strip():
            if process.popen.poll() is not None or time.monotonic() > deadline:
                log = Path(process.log_path).read_text(errors="replace")[-2000:]
                raise RuntimeError(f"{process.name} does not listen on {port}: {log}")
            time.sleep(0.05)


def free_port(low: int = 18000, high: int = 19999) -> int:
    """A TCP port in [low, high] that is free on 127.0.0.1 right now (random start)."""
    ports = list(range(low, high + 1))
    random.shuffle(ports)
    for port in ports:
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free TCP port in {low}-{high}")


def wait_for_port(port: int, timeout: float = 10.0, host: str = "127.0.0.1") -> None:
    """Wait until something accepts TCP connections on ``host:port``."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError(f"nothing listens on {host}:{port} after {timeout} s") from None
            time.sleep(0.05)


def wait_for_listener(port: int, timeout: float = 10.0) -> None:
    """Wait until a TCP socket listens on ``port`` without connecting to it (``ss``), so a
    one-off server (``iperf3 -s -1``) is not consumed by the check."""
    deadline = time.monotonic() + timeout
    while True:
        listing = subprocess.run(
            ["ss", "-Hltn", f"sport = :{port}"], capture_output=True, text=True, check=True
        ).stdout
        if listing.strip():
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"nothing listens on TCP port {port} after {timeout} s")
        time.sleep(0.05)
