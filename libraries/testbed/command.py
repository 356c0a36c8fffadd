"""A command for a node as one value (:class:`NodeCommand`: argv, CPUs, environment, CPU
ledger, hard timeout), and the one place a command becomes the line a node's shell runs.

A tool's runner builds the value (``libraries.tools.wrk.run.wrk_command``,
``libraries.tools.iperf3.iperf3_client_command``; the other runners still assemble their line
with :func:`tool_command`, :func:`timed` and :func:`accounted` from here); rendered, it reads
from the inside out:

1. ``argv`` quoted; ``env`` exported to the tool alone (``sh -c 'export K=v; exec tool ...'``,
   so a preloaded library such as VPP's LD_PRELOAD is loaded by the tool, never by
   ``taskset``); pinned with ``taskset -c <cpus>`` (:func:`tool_command`);
2. with ``times``: ``(...); rc=$?; echo @@hoststack-cpu; times; exit $rc``, the shell's own
   account of the tool's CPU, read back from its output (:func:`timed`);
3. with a ``ledger``: ``mkdir -p <dir>; (...); rc=$?; cat /proc/$$/stat > <dir>/<name>.$$.stat;
   exit $rc``, the tool's CPU left for the next telemetry read (:func:`accounted`);
4. the hard timeout: ``timeout -k 2 <timeout> sh -c '<line>'`` (:func:`hard_timeout`), which
   ``Node.run`` sends over SSH as it is (behind ``sudo -n`` when the command needs root).
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
    """One command for a node: ``argv``, pinned to ``cpus``, with ``env`` for the tool alone,
    its CPU left in ``ledger`` and, with ``times``, printed after its output; stopped after
    ``timeout`` seconds."""

    argv: tuple[str, ...]
    timeout: float
    cpus: tuple[int, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    ledger: Ledger | None = None
    times: bool = False

    def tool_line(self) -> str:
        """The tool's own line: quoted, its environment, pinned (step 1 of the module)."""
        return tool_command(self.argv, self.cpus, dict(self.env))

    def line(self) -> str:
        """The line ``Node.run`` is given (steps 1 to 3); it adds the hard timeout."""
        line = self.tool_line()
        if self.times:
            line = timed(line)
        if self.ledger is not None:
            line = accounted(line, self.ledger.directory, self.ledger.name)
        return line

    def rendered(self) -> str:
        """The whole line the node's shell runs (steps 1 to 4)."""
        return hard_timeout(self.line(), self.timeout)
