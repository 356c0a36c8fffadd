"""A command for a node as one value (:class:`NodeCommand`: argv or a script, CPUs,
environment, CPU ledger, hard timeout), and the one place a command becomes the line a node's
shell runs.

Every tool's runner builds the value (``libraries.tools.wrk.run.wrk_command``,
``libraries.tools.iperf3.iperf3_client_command``, ``vegeta_command``, ``oha_command``,
``libraries.tools.nginx.service.nginx_command``, ``libraries.tools.perf.record_command``,
``libraries.vpp.vppctl.vppctl_command``, the tracers' start commands, ...) and gives it to
``Node.run`` (a foreground command) or ``Node.start`` (a background process); a plain shell line
given to ``Node.run`` becomes a script value (:meth:`NodeCommand.shell`). A tool that needs a
shell script (several processes, a pipeline, their reports: vegeta, oha) builds a ``script``
value; the others an ``argv``. Rendered (:meth:`NodeCommand.rendered`, called by ``Node.run``
alone), a foreground command reads from the inside out:

1. ``argv`` quoted (a ``script`` as it is); ``env`` exported to the tool alone
   (``sh -c 'export K=v; exec tool ...'``, so a preloaded library such as VPP's LD_PRELOAD is
   loaded by the tool, never by ``taskset``); pinned with ``taskset -c <cpus>``
   (:func:`tool_command`);
2. with ``times``: ``(...); rc=$?; echo @@hoststack-cpu; times; exit $rc``, the shell's own
   account of the tool's CPU, read back from its output (:func:`timed`);
3. with a ``ledger``: ``mkdir -p <dir>; (...); rc=$?; cat /proc/$$/stat > <dir>/<name>.$$.stat;
   exit $rc``, the tool's CPU left for the next telemetry read (:func:`accounted`);
4. the hard timeout: ``timeout -k 2 <timeout> sh -c '<line>'`` (:func:`hard_timeout`), which
   ``Node.run`` sends over SSH as it is (behind ``sudo -n`` when the command needs root).

A background process has no timeout (it runs until stopped): ``Node.start`` runs
:meth:`NodeCommand.background_line` in its own session, the shell pinning itself and
exporting the environment before it ``exec``s the tool.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
TIMES_MARKER = "@@hoststack-cpu"
"""The line before the shell's ``times`` in a timed command's output."""
KILL_AFTER = 2
"""Seconds ``timeout`` waits after its TERM before it sends KILL."""


def env_exports(env: Mapping[str, str] | None) -> list[str]:
    """``export NAME='value'`` statements; a name that is not a shell identifier is refused
    (a topology value must never become a command)."""
    exports = []
    for key, value in (env or {}).items():
        if not isinstance(key, str) or not _ENV_NAME.match(key):
            raise ValueError(f"environment variable name {key!r} is not a valid name")
        exports.append(f"export {key}={shlex.quote(str(value))}")
    return exports


def tool_command(argv: Sequence[str], cpus: Sequence[int] | None = None,
                 env: Mapping[str, str] | None = None) -> str:
    """Quote ``argv``; pin it with ``taskset -c``; export ``env`` to the tool only.

    The environment goes through ``sh -c 'export ...; exec tool'`` after taskset, so a
    preloaded library (LD_PRELOAD for VPP's VCL) is loaded by the tool and never by taskset.
    """
    command = " ".join(shlex.quote(arg) for arg in argv)
    exports = env_exports(env)
    if exports:
        command = "sh -c " + shlex.quote("; ".join(exports) + "; exec " + command)
    if cpus:
        command = f"taskset -c {','.join(str(int(cpu)) for cpu in cpus)} {command}"
    return command


def timed(command: str) -> str:
    """``command`` followed by the marker and ``times`` (its exit code kept)."""
    return f"({command}); rc=$?; echo {TIMES_MARKER}; times; exit $rc"


def accounted(command: str, ledger: str, name: str) -> str:
    """``command`` run so that its CPU time (it and every child it waited for) lands in
    ``<ledger>/<name>.<pid>.stat`` for the next snapshot; the exit code is kept.

    The wrapping shell waits for ``command`` (a subshell), then saves its own
    ``/proc/self/stat`` whose ``cutime``/``cstime`` are exactly that tree's CPU.
    """
    if not re.fullmatch(r"[A-Za-z0-9_-]+", name):
        raise ValueError(f"ledger name {name!r}: expected one word")
    quoted = shlex.quote(ledger)
    return (f"mkdir -p {quoted}; ({command}); rc=$?; "
            f"cat /proc/$$/stat > {quoted}/{name}.$$.stat; exit $rc")


def hard_timeout(command: str, timeout: float) -> str:
    """``command`` (a shell line) stopped after ``timeout`` s: TERM, then KILL
    :data:`KILL_AFTER` s later; ``timeout`` exits 124 then."""
    return f"timeout -k {KILL_AFTER} {timeout:g} sh -c {shlex.quote(command)}"


@dataclass(frozen=True)
class Ledger:
    """Where a command leaves its CPU time: the node's ledger ``directory`` and the entry's
    ``name`` (``wrk``: the telemetry reads it as that process)."""

    directory: str
    name: str


@dataclass(frozen=True)
class NodeCommand:
    """One command for a node: ``argv`` (or a shell ``script``, for a tool that needs one),
    pinned to ``cpus``, with ``env`` for the tool alone, its CPU left in ``ledger`` and, with
    ``times``, printed after its output; stopped after ``timeout`` seconds (a foreground
    command; ``None`` for a background process, which runs until stopped)."""

    argv: tuple[str, ...] = ()
    timeout: float | None = None
    cpus: tuple[int, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    ledger: Ledger | None = None
    times: bool = False
    script: str = ""

    def __post_init__(self) -> None:
        if bool(self.argv) == bool(self.script):
            raise ValueError(f"a node command is an argv or a script, got argv={self.argv!r} "
                             f"and script={self.script!r}")
        if self.timeout is not None and not self.timeout > 0:
            raise ValueError(f"node command {self.tool_line()!r}: timeout {self.timeout!r}, "
                             "expected seconds > 0")

    @classmethod
    def shell(cls, script: str, timeout: float | None = None, *, ledger: Ledger | None = None,
              times: bool = False, cpus: tuple[int, ...] = (),
              env: tuple[tuple[str, str], ...] = ()) -> NodeCommand:
        """A shell line as a command value (``cpus`` and ``env`` for a background process)."""
        return cls(timeout=timeout, cpus=cpus, env=env, ledger=ledger, times=times,
                   script=script)

    def quoted(self) -> str:
        """The script, or the argv quoted: the command alone, not pinned, no environment."""
        return self.script or " ".join(shlex.quote(arg) for arg in self.argv)

    def tool_line(self) -> str:
        """The tool's own line: quoted, its environment, pinned (step 1 of the module); a
        script pins and exports inside itself."""
        if self.script:
            if self.cpus or self.env:
                raise ValueError(f"script {self.script!r}: pin and export inside the script "
                                 "(cpus and env are for an argv or a background process)")
            return self.script
        return tool_command(self.argv, self.cpus, dict(self.env))

    def line(self) -> str:
        """The command before its hard timeout (steps 1 to 3): what the node's log shows."""
        line = self.tool_line()
        if self.times:
            line = timed(line)
        if self.ledger is not None:
            line = accounted(line, self.ledger.directory, self.ledger.name)
        return line

    def rendered(self) -> str:
        """The whole line the node's shell runs in the foreground (steps 1 to 4)."""
        if self.timeout is None:
            raise ValueError(f"node command {self.line()!r} runs in the foreground: it needs "
                             "a timeout")
        return hard_timeout(self.line(), self.timeout)

    def background_line(self) -> str:
        """The line of a background process's shell: it pins itself (``taskset -p``: no
        taskset process is preloaded), exports ``env`` and ``exec``s the tool."""
        if self.timeout is not None or self.ledger is not None or self.times:
            raise ValueError(f"node command {self.tool_line()!r}: a background process has no "
                             "timeout, ledger or times (it runs until stopped)")
        inner = []
        if self.cpus:
            inner.append(f"taskset -p -c {','.join(str(int(c)) for c in self.cpus)} $$ "
                         ">/dev/null")
        inner.extend(env_exports(dict(self.env)))
        inner.append(f"exec {self.quoted()}")
        return "; ".join(inner)


def node_command(command: str | NodeCommand, timeout: float | None = None) -> NodeCommand:
    """What ``Node.run`` is given, as a value: a :class:`NodeCommand` as it is (a ``timeout``
    beside it is refused: the value holds its own), a shell line as a script value with
    ``timeout`` (60 s unless given)."""
    if isinstance(command, NodeCommand):
        if timeout is not None:
            raise ValueError(f"node command {command.line()!r} holds its timeout "
                             f"({command.timeout}); got timeout={timeout} beside it")
        return command
    return NodeCommand.shell(command, 60.0 if timeout is None else timeout)


def background_command(command: str | NodeCommand, env: Mapping[str, str] | None = None,
                       cpus: Sequence[int] | None = None) -> NodeCommand:
    """What ``Node.start`` is given, as a value: a :class:`NodeCommand` as it is (``env`` and
    ``cpus`` beside it are refused: the value holds its own), a shell line as a script value
    with ``env`` and ``cpus``."""
    if isinstance(command, NodeCommand):
        if env or cpus:
            raise ValueError(f"background command {command.quoted()!r}: env and cpus belong "
                             "in the command value")
        return command
    return NodeCommand.shell(command, cpus=tuple(cpus or ()), env=tuple((env or {}).items()))
