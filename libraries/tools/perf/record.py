"""``perf record`` of running processes on a node, in the background while a trial runs.

The event is the kernel's software clock (``-e cpu-clock``): it works on a VM without a
hardware PMU (these VMs have none: ``cycles`` is not available), samples every ``1/frequency``
s of CPU a process uses, with call graphs unwound from a copy of each sample's user stack
(``--call-graph dwarf``: Debian builds OpenSSL, libc and nginx without frame pointers, so
``-g`` would see only the function on CPU and not who called it; the kernel's frames come from
the kernel either way). ``perf record -p`` follows every thread of the
processes it is given (nginx workers, VPP's main and worker threads), not children started
later. ``perf record`` runs as a foreground command sent before the trial and collected after
it (``Node.launch``): its SSH session's shell waits for it, so it is reaped the moment it ends
(started in the background, it was init's to reap: a ``[perf] <defunct>`` stood on the DUT
after a profiled A/B test), and its hard timeout ends one that does not stop. The samples are
turned into text on the node (``perf script``, which resolves the symbols where the binaries
are), then the data file is removed.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from libraries.testbed.command import NodeCommand
from libraries.testbed.errors import CommandError, CommandTimeout, HostStackError, ParseError
from libraries.testbed.node import Node, RunningCommand

EVENT = "cpu-clock"
FREQUENCY = 499
"""Samples per second of CPU: prime, so the sampling does not beat with a periodic timer."""
CALL_GRAPH = "dwarf,16384"
"""16 KiB of user stack per sample (about 8 MB/s per busy core at 499 Hz): deep enough for
nginx -> OpenSSL -> libc -> the system call."""
SCRIPT_TIMEOUT = 180.0
GRACE = 15.0
"""Seconds a recording may run past its ``delay + seconds`` before its timeout ends it."""


@dataclass(frozen=True)
class Recording:
    """A ``perf record`` running on ``node`` (``running``) into ``path`` for ``seconds``,
    after ``delay``, stopped ``grace`` s after that."""

    node: Node
    running: RunningCommand
    path: str
    pids: tuple[int, ...]
    seconds: float
    delay: float
    grace: float = GRACE
    started: float = field(default_factory=time.monotonic)


def record_command(perf: str, pids: Sequence[int], seconds: float, path: str,
                   delay: float, frequency: int = FREQUENCY,
                   grace: float = GRACE) -> NodeCommand:
    """The command: wait ``delay`` s (the load is up), then record ``pids`` for ``seconds``;
    stopped ``grace`` s after that."""
    listed = ",".join(str(int(pid)) for pid in sorted(set(pids)))
    inner = (f"sleep {delay:g}; exec {shlex.quote(perf)} record -q -e {EVENT} -F {frequency} "
             f"--call-graph {CALL_GRAPH} -p {listed} -o {shlex.quote(path)} -- sleep {seconds:g}")
    return NodeCommand.shell(inner, delay + seconds + grace)


def start_recording(node: Node, perf: str, pids: Sequence[int], seconds: float,
                    delay: float = 1.0, grace: float = GRACE) -> Recording:
    """Start ``perf record`` of ``pids`` on ``node`` (as root: through sudo where the login
    user is not root) and return at once."""
    if not pids:
        raise HostStackError(f"{node.where}: no process to profile")
    path = f"{node.workdir}/perf-{int(time.time() * 1000)}.data"
    running = node.launch(record_command(perf, pids, seconds, path, delay, grace=grace),
                          sudo=_sudo(node))
    return Recording(node, running, path, tuple(pids), seconds, delay, grace)


def finish_recording(recording: Recording) -> str:
    """Wait for the recording to end (its ``delay + seconds``, then up to its ``grace`` s
    more, when its timeout ends it, named in the error). Returns perf's own output."""
    try:
        result = recording.running.wait(check=False)
    except CommandTimeout:
        remove(recording)
        raise HostStackError(
            f"{recording.node.where}: perf record of pids "
            f"{','.join(map(str, recording.pids))} still ran {recording.grace:g} s after its "
            f"{recording.seconds:g} s: killed, no profile") from None
    return result.stdout + result.stderr


def script(recording: Recording, perf: str, record_log: str = "") -> str:
    """The recorded samples as ``perf script`` text (symbols resolved on the node); the data
    file is removed whatever happens. ``record_log``: what ``perf record`` printed (its
    reason when it recorded nothing), quoted in the error."""
    node = recording.node
    quoted = shlex.quote(recording.path)
    try:
        result = node.run(f"{shlex.quote(perf)} script -i {quoted}", timeout=SCRIPT_TIMEOUT,
                          sudo=_sudo(node), quiet=True)
    except CommandError as error:
        lines = (error.stderr.strip() or error.stdout.strip()).splitlines()
        said = " ".join(record_log.split())[-300:]
        raise HostStackError(f"{node.where}: perf script -i {recording.path} exited "
                             f"{error.exit_code}: {lines[-1] if lines else '(no output)'}"
                             + (f"; perf record said: {said}" if said else "")) from None
    finally:
        remove(recording)
    if not result.stdout.strip():
        raise ParseError("perf script", f"no samples of pids "
                         f"{','.join(map(str, recording.pids))} on {node.name} (were they on "
                         "CPU?)", result.stdout)
    return result.stdout


def remove(recording: Recording) -> None:
    """Remove the data file (and perf's ``.old`` copy); quiet when it is gone already."""
    quoted = shlex.quote(recording.path)
    recording.node.run(f"rm -f {quoted} {quoted}.old", timeout=15,
                       sudo=_sudo(recording.node), check=False, quiet=True)


def _sudo(node: Node) -> bool:
    """perf runs as root: through sudo where the node's login user is not root."""
    return node.target.user != "root"
