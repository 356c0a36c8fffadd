"""Access to one testbed node over SSH: run commands, upload files, start and stop processes.

One :class:`Node` per topology node, one reused paramiko connection per node. Every command is
logged (command, exit code, duration at INFO; output at DEBUG) through the standard ``logging``
module, which Robot Framework writes to its log. Every command has a timeout enforced on the node
itself (coreutils ``timeout`` kills the command's whole process group) and locally as a backstop;
a timeout raises :class:`CommandTimeout` carrying the partial output. A command is a
:class:`~libraries.testbed.command.NodeCommand` value (a plain shell line becomes one), rendered
with its timeout by :meth:`NodeCommand.rendered <libraries.testbed.command.NodeCommand.rendered>`
alone; this module adds ``sudo -n`` where the command needs root. A background process
(:meth:`Node.start`) is held by the shell that started it, in an SSH session of its own, which
reaps it when it ends.
"""

from __future__ import annotations

import io
import logging
import re
import shlex
import tarfile
import time
from dataclasses import dataclass, field

import paramiko

from libraries.testbed.command import NodeCommand, background_command, node_command
from libraries.testbed.errors import CommandError, CommandTimeout, NodeError
from libraries.testbed.ssh import (
    HeldSessions,
    SshTarget,
    collect,
    exit_status,
    leave,
    open_client,
    read_line,
)

LOG = logging.getLogger(__name__)
# How long the local side waits past the node-side timeout before giving up on the channel.
_BACKSTOP = 10.0


@dataclass(frozen=True)
class CommandResult:
    """Outcome of one command: ``exit_code``, ``stdout``, ``stderr``, ``duration`` (s)."""

    command: str
    exit_code: int
    stdout: str
    stderr: str
    duration: float


@dataclass
class Process:
    """A background process started by :meth:`Node.start` (``pid`` is its process group;
    ``sudo``: started as root through sudo, so signalled and read through sudo too)."""

    node: str
    name: str
    command: str
    pid: int
    log_path: str
    sudo: bool = False
    started: float = field(default_factory=time.monotonic)
    stopped: bool = False
    channel: paramiko.Channel | None = field(default=None, repr=False, compare=False)
    """The SSH session whose shell started the process and waits for it: it reaps the process
    the moment it ends, whoever ends it (never left to the node's init), and leaves with it."""
    birth: str | None = None
    """The kernel's start time of ``pid`` (``/proc/<pid>/stat`` field 22, clock ticks since
    boot), read as it started: a pid is reused once its process is gone (PIDs wrap at 32768
    here within minutes beside a build), and a stop or a liveness check must not take the
    new process for this one."""


@dataclass
class RunningCommand:
    """A foreground command sent to ``node`` (:meth:`Node.launch`), its output not read yet."""

    node: Node
    command: NodeCommand
    channel: paramiko.Channel
    start: float

    def wait(self, check: bool = True, quiet: bool = False) -> CommandResult:
        """Read the command's output until it exits; its :class:`CommandResult`
        (:class:`CommandError`, :class:`CommandTimeout` as :meth:`Node.run` raises them)."""
        name, command, timeout = self.node.name, self.command.line(), self.command.timeout
        assert timeout is not None  # rendered() refused a foreground command without one
        out, err, status = collect(self.channel, self.start + timeout + _BACKSTOP)
        duration = time.monotonic() - self.start
        stdout, stderr = out.decode(errors="replace"), err.decode(errors="replace")
        if status is None or status == 124:
            LOG.info("%s: `%s` timed out after %.2f s", name, command, duration)
            raise CommandTimeout(self.node.where, command, timeout, stdout, stderr)
        LOG.log(logging.DEBUG if quiet else logging.INFO, "%s: `%s` -> %d in %.3f s", name,
                command, status, duration)
        if stdout or stderr:
            LOG.debug("%s: stdout:\n%s\nstderr:\n%s", name, stdout[-20000:], stderr[-20000:])
        if check and status != 0:
            raise CommandError(self.node.where, command, status, stdout, stderr)
        return CommandResult(command, status, stdout, stderr, duration)


def _birth(pid: str) -> str:
    """A shell command printing the start time of process ``pid`` (``/proc/<pid>/stat`` field
    22, after the parenthesised command name, which may hold spaces), nothing once gone."""
    return f"sed 's/^.*) //' /proc/{pid}/stat 2>/dev/null | cut -d' ' -f20"


class Node:
    """One node of the testbed, reached over SSH.

    ``workdir`` is this run's scratch directory on the node (created on connect, removed by
    :meth:`close` when ``remove_workdir`` is set): ``/tmp/hoststack-<prefix>/<node>``, named
    by :func:`libraries.testbed.run_paths.node_workdir` and given by ``Testbed.up``.
    """

    def __init__(self, name: str, target: SshTarget, workdir: str):
        self.name = name
        self.target = target
        self.workdir = workdir
        self._client: paramiko.SSHClient | None = None
        self._held = HeldSessions(target, self.where)
        self._processes: list[Process] = []
        self._which: dict[str, str | None] = {}

    # -- connection ------------------------------------------------------------------------

    @property
    def where(self) -> str:
        """``name (host:port)`` for messages."""
        return f"{self.name} ({self.target.host}:{self.target.port})"

    def connect(self) -> None:
        """Open the SSH connection (idempotent) and create the work directory."""
        if self._client is not None:
            return
        client = open_client(self.target, self.where)
        transport = client.get_transport()
        if transport is not None:
            transport.set_keepalive(15)
        self._client = client
        LOG.info("%s: connected as %s", self.where, self.target.user)
        self.run(f"mkdir -p {shlex.quote(self.workdir)}", timeout=10)

    def close(self, remove_workdir: bool = False) -> None:
        """Stop every tracked process, optionally remove the work directory (and its parent,
        ``/tmp/hoststack-<run>``, once empty), disconnect."""
        if self._client is None:
            return
        try:
            self.stop_all()
            if remove_workdir:
                parent = shlex.quote(self.workdir.rstrip("/").rsplit("/", 1)[0] or "/")
                self.run(f"rm -rf {shlex.quote(self.workdir)} && "
                         f"{{ rmdir {parent} 2>/dev/null || true; }}", timeout=20,
                         sudo=self.can_sudo, check=False)
        finally:
            self._disconnect()

    def abandon(self) -> None:
        """Drop the connection without a command: the node is gone (its testbed removed)."""
        self._disconnect()
        self._processes.clear()

    def _disconnect(self) -> None:
        self._held.close()
        if self._client is not None:
            self._client.close()
        self._client = None

    @property
    def can_sudo(self) -> bool:
        """True when commands may run as root here (the login user is root, or sudo: true)."""
        return self.target.user == "root" or self.target.sudo

    def which(self, binary: str) -> str | None:
        """Absolute path of ``binary`` as this node finds it, or None: a path is taken as it
        is; a bare name is looked up in the login user's PATH and, for a sudo user, in sudo's
        (secure_path has /usr/sbin, where nginx and bpftool live; a non-root login PATH has
        not)."""
        if "/" in binary:
            return binary
        if binary not in self._which:
            lookup = f"command -v {shlex.quote(binary)}"
            found = self.run(lookup, timeout=10, check=False, quiet=True).stdout.strip()
            if not found.startswith("/") and self.target.sudo and self.target.user != "root":
                found = self.run(lookup, timeout=10, sudo=True, check=False,
                                 quiet=True).stdout.strip()
            self._which[binary] = found if found.startswith("/") else None
        return self._which[binary]

    # -- commands --------------------------------------------------------------------------

    def _wrap(self, command: NodeCommand, sudo: bool) -> str:
        return self._as_root(command.rendered(), command.line(), sudo)

    def _as_root(self, line: str, shown: str, sudo: bool) -> str:
        """``line`` behind ``sudo -n`` when it needs root (``sudo``) from a login that is not
        root; ``NodeError`` naming the command (``shown``) where the topology allows no sudo."""
        if not sudo or self.target.user == "root":
            return line
        if not self.target.sudo:
            raise NodeError(
                f"{self.where}: command {shown!r} needs root, but user "
                f"{self.target.user!r} is not root and the topology does not set sudo: true"
            )
        return f"sudo -n {line}"

    def run(self, command: str | NodeCommand, timeout: float | None = None, sudo: bool = False,
            check: bool = True, stdin: bytes | None = None, quiet: bool = False) -> CommandResult:
        """Run ``command`` (a :class:`NodeCommand`, which holds its timeout, or a shell command
        line, stopped after ``timeout`` s: 60 unless given) and return its
        :class:`CommandResult` (``command``: the line before its hard timeout).

        Raises :class:`CommandError` on a non-zero exit when ``check`` is set, and
        :class:`CommandTimeout` (with the partial output) past the timeout.
        """
        return self.launch(command, timeout, sudo, stdin).wait(check, quiet)

    def launch(self, command: str | NodeCommand, timeout: float | None = None,
               sudo: bool = False, stdin: bytes | None = None) -> RunningCommand:
        """Send ``command`` as :meth:`run` does and return at once; its result is collected by
        :meth:`RunningCommand.wait`. The command still runs in the foreground of its SSH
        session (its shell waits for it, and ``timeout`` ends it), so a command that runs
        beside a trial (``perf record``) is waited for and never left to init."""
        value = node_command(command, timeout)
        if self._client is None:
            self.connect()
        assert self._client is not None
        transport = self._client.get_transport()
        if transport is None or not transport.is_active():
            raise NodeError(f"{self.where}: SSH connection is closed (node down?)")
        start = time.monotonic()
        try:
            channel = transport.open_session(timeout=self.target.connect_timeout)
            channel.exec_command(self._wrap(value, sudo))
            if stdin is not None:
                channel.sendall(stdin)
            channel.shutdown_write()
        except (OSError, paramiko.SSHException) as error:
            raise NodeError(f"{self.where}: cannot run {value.line()!r}: {error}") from None
        return RunningCommand(self, value, channel, start)

    def put(self, text: str | bytes, path: str, mode: int = 0o644, sudo: bool = False) -> None:
        """Write ``text`` to ``path`` on the node (parent directories created)."""
        data = text.encode() if isinstance(text, str) else text
        quoted = shlex.quote(path)
        self.run(
            f"mkdir -p \"$(dirname {quoted})\" && cat > {quoted} && chmod {mode:o} {quoted}",
            timeout=30,
            sudo=sudo,
            stdin=data,
        )

    def put_files(self, directory: str, files: dict[str, tuple[str, int]],
                  sudo: bool = False) -> None:
        """Write several files (``name -> (text, mode)``) into ``directory`` in one command
        (a tar stream), e.g. a set of certificates and keys."""
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as archive:
            for name, (text, mode) in files.items():
                if "/" in name or name in ("", ".", ".."):
                    raise ValueError(f"put_files: {name!r} is not a plain file name")
                data = text.encode()
                info = tarfile.TarInfo(name)
                info.size, info.mode, info.mtime = len(data), mode, int(time.time())
                archive.addfile(info, io.BytesIO(data))
        quoted = shlex.quote(directory)
        self.run(f"mkdir -p {quoted} && tar -x -p --no-same-owner -C {quoted}", timeout=30,
                 sudo=sudo, stdin=buffer.getvalue())

    def get(self, path: str, sudo: bool = False, check: bool = True) -> str:
        """Contents of the text file ``path`` on the node."""
        return self.run(f"cat {shlex.quote(path)}", timeout=30, sudo=sudo, check=check,
                        quiet=True).stdout

    # -- background processes ---------------------------------------------------------------

    def start(self, command: str | NodeCommand, name: str, env: dict[str, str] | None = None,
              cpus: list[int] | None = None, sudo: bool = False) -> Process:
        """Start ``command`` in the background, detached, and track it.

        ``command``: a :class:`NodeCommand` without a timeout (it runs until stopped), or a
        shell line with ``env`` and ``cpus``. The process runs in its own session
        (``setsid``), with output to ``<workdir>/<name>.log``. The environment is exported to
        the target program only (``exec`` after the export, so wrappers such as nohup never
        see e.g. LD_PRELOAD); the CPUs pin it (the shell pins itself and then ``exec``s, so no
        taskset process is preloaded either): :meth:`NodeCommand.background_line`.

        The shell that starts it stays, in an SSH session of its own, and waits for it:
        when it ends (stopped, or on its own) that shell reaps it at once and leaves, and sshd
        reaps the shell. Nothing is left to the node's init, which in a container may reap
        late or never (:class:`~libraries.testbed.ssh.HeldSessions`).
        """
        value = background_command(command, env, cpus)
        command = value.quoted()
        log_path = f"{self.workdir}/{name}.log"
        launcher = (
            f"cd {shlex.quote(self.workdir)} && "
            f"setsid nohup sh -c {shlex.quote(value.background_line())} "
            f"> {shlex.quote(log_path)} 2>&1 "
            f"< /dev/null & p=$!; echo $p $({_birth('$p')}); wait $p"
        )
        line = self._as_root(f"sh -c {shlex.quote(launcher)}", command, sudo)
        if self._client is None:
            self.connect()
        assert self._client is not None
        held = [p.channel for p in self._processes if p.channel is not None]
        channel = self._held.open(self._client, held, f"start {name!r}")
        try:
            channel.exec_command(line)
            channel.shutdown_write()
            pid, *birth = read_line(channel, time.monotonic() + 15.0).split()
            pid = int(pid)
        except (NodeError, OSError, paramiko.SSHException, ValueError) as error:
            channel.close()
            raise NodeError(f"{self.where}: starting {name!r} printed no PID: {error}"
                            ) from None
        process = Process(self.name, name, command, pid, log_path, sudo=sudo, channel=channel,
                          birth=birth[0] if birth else None)
        self._processes.append(process)
        LOG.info("%s: started %s (pid %d): %s", self.name, name, pid, command)
        return process

    def is_running(self, process: Process) -> bool:
        """True while the process (group leader) exists and is not a zombie (a process that
        reused its pid is not it)."""
        result = self.run(f"cat /proc/{process.pid}/stat", timeout=10, sudo=process.sudo,
                          check=False, quiet=True)
        fields = result.stdout.rsplit(")", 1)[-1].split()
        if result.exit_code != 0 or len(fields) < 20 or fields[0] == "Z":
            return False
        return process.birth is None or fields[19] == process.birth

    def read_log(self, process: Process) -> str:
        """The process's output so far (stdout and stderr; read as the user who started it)."""
        return self.get(process.log_path, sudo=process.sudo, check=False)

    def stop(self, process: Process, grace: float = 5.0) -> str:
        """Stop the process group: SIGTERM, up to ``grace`` s, then SIGKILL. Returns its log."""
        if not process.stopped:
            pid = process.pid
            alive = f"ps -eo pgid=,stat= | awk '$1 == {pid} && $2 !~ /^Z/' | grep -q ."
            # a leader born at another time reused the pid: ours is gone with its group (a
            # pid still naming a group is never reused), and the other is not to be touched
            reused = (f'b=$({_birth(str(pid))}); [ -n "$b" ] && [ "$b" != "{process.birth}" ]'
                      if process.birth else "false")
            script = (
                f"if {reused}; then echo reused; exit 0; fi; "
                f"kill -s TERM -- -{pid} 2>/dev/null || kill -s TERM {pid} 2>/dev/null; "
                f"i=0; while {alive} && [ $i -lt {int(grace * 10)} ]; "
                f"do sleep 0.1; i=$((i+1)); done; "
                f"if {alive}; then kill -s KILL -- -{pid}; echo killed; i=0; "
                f"while {alive} && [ $i -lt 30 ]; do sleep 0.1; i=$((i+1)); done; fi; "
                f"if {alive}; then echo 'still running after SIGKILL' >&2; exit 1; fi"
            )
            result = self.run(script, timeout=grace + 10, sudo=process.sudo, check=False,
                              quiet=True)
            if result.exit_code != 0:
                raise NodeError(f"{self.where}: cannot stop {process.name} (pid {pid}"
                                f"{', started with sudo' if process.sudo else ''}): "
                                f"{(result.stderr or result.stdout).strip()[-500:]}")
            process.stopped = True
            if process.channel is not None:
                leave(process.channel)
                process.channel = None
            how = ("nothing: it had exited and its pid is another process's"
                   if "reused" in result.stdout else
                   "SIGKILL after grace" if "killed" in result.stdout else "SIGTERM")
            LOG.info("%s: stopped %s (pid %d) with %s", self.name, process.name, pid, how)
        if process in self._processes:
            self._processes.remove(process)
        return self.read_log(process)

    def stop_all(self) -> None:
        """Stop every process this node started and has not stopped yet (newest first)."""
        errors = []
        for process in reversed(list(self._processes)):
            try:
                self.stop(process)
            except NodeError as error:
                errors.append(str(error))
        if errors:
            raise NodeError("; ".join(errors))

    @property
    def processes(self) -> tuple[Process, ...]:
        """Processes started and not yet stopped."""
        return tuple(self._processes)

    def listener_pids(self, port: int, udp: bool = False) -> list[int]:
        """PIDs of the processes listening on ``port`` (empty when the port is free)."""
        flag = "u" if udp else "t"
        result = self.run(
            f"ss -Hl{flag}np 'sport = :{int(port)}'", timeout=10, sudo=True, quiet=True
        )
        return sorted({int(pid) for pid in re.findall(r"pid=(\d+)", result.stdout)})

    def _ps(self, fields: str, pids: list[int]) -> str:
        """``ps -o <fields>`` for ``pids`` (empty output for processes already gone)."""
        return self.run(f"ps -o {fields} -p {','.join(map(str, pids))}", timeout=10,
                        check=False, quiet=True).stdout

    def ensure_port_free(self, port: int, udp: bool = False) -> None:
        """Fail naming the holder when something already listens on ``port``."""
        pids = self.listener_pids(port, udp)
        if pids:
            holders = self._ps("pid=,args=", pids).strip()
            raise NodeError(f"{self.where}: port {port} is already in use by: {holders}")

    def wait_for_listener(self, port: int, process: Process, timeout: float = 10.0,
                          udp: bool = False) -> None:
        """Wait until ``process`` (or a child of it) listens on ``port``; fail early, with its
        log, when it exits first (port in use, bad config)."""
        deadline = time.monotonic() + timeout
        while True:
            pids = self.listener_pids(port, udp)
            if pids and str(process.pid) in self._ps("pgid=", pids).split():
                return
            if not self.is_running(process):
                log = self.read_log(process).strip()[-2000:]
                status = exit_status(process.channel) if process.channel else None
                how = "" if status is None else f" (exit status {status})"
                raise NodeError(
                    f"{self.where}: {process.name} exited{how} before listening on port "
                    f"{port}; its output:\n    {log or '(empty)'}"
                )
            if time.monotonic() > deadline:
                raise NodeError(
                    f"{self.where}: {process.name} does not listen on port {port} after "
                    f"{timeout:g} s (listeners: {pids or 'none'})"
                )
            time.sleep(0.1)
