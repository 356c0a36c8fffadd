"""Run a kernel sslsniff tracer on a node: choose it, start it, prove it attached, stop it.

Two implementations, chosen by what the node can run (:func:`detect_kernel_tracer`): bcc's
``sslsniff-bpfcc``/``sslsniff`` when the node has kernel headers (bcc compiles its program on
the node), else the project's bpftrace script (:mod:`libraries.tools.sslsniff.tracer`). The
tracer runs in the background through the Node protocol (``node.start``/``node.stop``);
readiness is proven by ``bpftool perf show`` listing its uprobes on the library. bpftrace
prints its maps on SIGTERM as on SIGINT (checked with bpftrace 0.17); :func:`stop_sslsniff`
sends it again while an idle bpftrace before 0.19 missed it (see :func:`interrupt_bpftrace`).
:func:`uprobe_leftovers` checks that nothing stays attached once the tracer is gone.
"""

from __future__ import annotations

import json
import logging
import re
import shlex
import time
from dataclasses import dataclass
from typing import Any, Protocol

from libraries.testbed.command import NodeCommand
from libraries.testbed.errors import CommandError, ToolMissing
from libraries.tools.sslsniff.tracer import (
    DEFAULT_LIBSSL,
    UPROBE_COUNT,
    SslsniffParams,
    SslsniffResult,
    TracerError,
    TracerKind,
    exit_reason,
    parse_sslsniff_output,
)

LOG = logging.getLogger(__name__)
TRACEFS = "/sys/kernel/tracing"
BPFFS = "/sys/fs/bpf"
BCC_NAMES = ("sslsniff-bpfcc", "sslsniff")
#: program names of the tracers' probes as ``bpftool prog show`` lists them
PROG_NAMES = re.compile(r"^(?:SSL_(?:read|write)|probe_SSL_\w*)$")


class _Process(Protocol):
    pid: int
    log_path: str


@dataclass(frozen=True)
class KernelTracer:
    """The kernel tracer a node can run: ``kind`` ("bcc" or "bpftrace"), ``binary`` (path),
    ``version`` (its own words), ``bpftool`` (path or None), ``notes`` (why the other
    implementation was not chosen, e.g. "bcc sslsniff-bpfcc not installed")."""

    kind: TracerKind
    binary: str
    version: str
    bpftool: str | None
    notes: tuple[str, ...]


@dataclass(frozen=True)
class TracerFootprint:
    """What one tracer put into the kernel, so that its leftovers are judged for it alone on a
    machine other runs share: ``programs`` (ids of the BPF programs behind its uprobes, from
    ``bpftool perf show``) and ``events_before`` (tracefs uprobe events that existed before it
    started)."""

    programs: frozenset[int] = frozenset()
    events_before: frozenset[str] = frozenset()


@dataclass
class RunningTracer:
    """A started tracer: ``process`` (node process handle), ``tracer``, ``command``,
    ``library`` probed, ``params`` (bpftrace script parameters), ``footprint`` (filled once
    attached)."""

    process: Any
    tracer: KernelTracer
    command: str
    library: str
    params: SslsniffParams
    footprint: TracerFootprint = TracerFootprint()


_PROBE_SCRIPT = """
for name in {bcc_names}; do p=$(command -v "$name") && {{ echo "bcc=$p"; break; }}; done
p=$(command -v {bpftrace}) && echo "bpftrace=$p" && echo "bpftrace_version=$($p --version 2>&1)"
p=$(command -v bpftool) && echo "bpftool=$p"
k=$(uname -r); echo "kernel=$k"
test -d "/lib/modules/$k/build/include" && echo headers=build
test -e /sys/kernel/kheaders.tar.xz && echo headers=kheaders
echo "uid=$(id -u)"
"""


def detect_kernel_tracer(node: Any, bpftrace: str = "bpftrace",
                         sudo: bool = False) -> KernelTracer:
    """Which kernel sslsniff can run on ``node``: bcc's when it can compile (kernel headers
    present), else bpftrace. Raises :class:`ToolMissing` naming what is absent when neither
    can run (the suite skips with that message). ``sudo``: look the tools up as the tracer
    will run, through sudo (whose PATH has /usr/sbin, where bpftool lives)."""
    script = _PROBE_SCRIPT.format(bcc_names=" ".join(BCC_NAMES), bpftrace=shlex.quote(bpftrace))
    out = node.run(script, timeout=20, check=False, sudo=sudo).stdout
    facts: dict[str, list[str]] = {}
    for line in out.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            facts.setdefault(key, []).append(value.strip())
    kernel = facts.get("kernel", ["?"])[0]
    bpftool = facts.get("bpftool", [None])[0]
    notes = []
    bcc = facts.get("bcc", [None])[0]
    if bcc is None:
        notes.append(f"bcc sslsniff not installed ({' / '.join(BCC_NAMES)} not in PATH)")
    elif "headers" not in facts:
        notes.append(
            f"bcc {bcc} cannot run: kernel {kernel} has no headers "
            f"(/lib/modules/{kernel}/build/include and /sys/kernel/kheaders.tar.xz absent)"
        )
    else:
        return KernelTracer("bcc", bcc, "bcc", bpftool, ())
    if "bpftrace" in facts:
        return KernelTracer("bpftrace", facts["bpftrace"][0],
                            facts.get("bpftrace_version", ["?"])[0], bpftool, tuple(notes))
    notes.append(f"{bpftrace} not installed")
    raise ToolMissing(f"{node.name}: no kernel sslsniff tracer can run: " + "; ".join(notes))


def mount_tracing(node: Any, sudo: bool = True) -> None:
    """Mount tracefs and bpffs where they are not mounted (they are not at boot here)."""
    node.run(
        f"mountpoint -q {TRACEFS} || mount -t tracefs tracefs {TRACEFS}; "
        f"mountpoint -q {BPFFS} || mount -t bpf bpf {BPFFS}",
        timeout=20, sudo=sudo,
    )


def bcc_command(binary: str, params: SslsniffParams) -> str:
    """bcc sslsniff command line: OpenSSL only, filtered by comm (bcc takes one ``-p``; with
    several PIDs the attachment proof checks them afterwards)."""
    argv = [binary, "--no-gnutls", "--no-nss"]
    if len(params.pids) == 1:
        argv += ["-p", str(params.pids[0])]
    if params.comm is not None:
        argv += ["-c", params.comm]
    return " ".join(shlex.quote(arg) for arg in argv)


def start_sslsniff(
    node: Any,
    params: SslsniffParams,
    tracer: KernelTracer,
    name: str = "sslsniff",
    cpus: list[int] | None = None,
    env: dict[str, str] | None = None,
    attach_timeout: float = 30.0,
    sudo: bool = False,
) -> RunningTracer:
    """Start ``tracer`` on ``node`` in the background and wait until its uprobes are attached.

    bpftrace runs the rendered script ``<workdir>/<name>.bt``. Raises :class:`TracerError`
    with the tracer's output when it exits before attaching or is not attached within
    ``attach_timeout`` seconds (the tracer is stopped then).
    """
    mount_tracing(node)
    events_before = frozenset(_uprobe_events(node, sudo=True))
    all_env = {**params.env, **(env or {})}
    if tracer.kind == "bpftrace":
        script_path = f"{node.workdir}/{name}.bt"
        node.put(params.render(), script_path)
        command = f"{shlex.quote(tracer.binary)} {shlex.quote(script_path)}"
    else:
        command = bcc_command(tracer.binary, params)
        all_env["PYTHONUNBUFFERED"] = "1"  # SIGTERM must not lose buffered event lines
    extra = {"sudo": True} if sudo else {}
    value = NodeCommand.shell(command, cpus=tuple(cpus or ()), env=tuple(all_env.items()))
    process = node.start(value, name=name, **extra)
    running = RunningTracer(process, tracer, command, params.library, params,
                            TracerFootprint(events_before=events_before))
    try:
        wait_attached(node, running, attach_timeout)
    except BaseException:
        node.stop(process)
        raise
    LOG.info("%s: %s sslsniff attached to %s (%s, filter: %s)", node.name, tracer.kind,
             params.library, params.mode_name, params.filter_text)
    return running


def _alive(node: Any, process: _Process) -> bool:
    result = node.run(f"ps -o stat= -p {int(process.pid)}", timeout=10, check=False,
                      sudo=getattr(process, "sudo", False))
    state = result.stdout.strip()
    return result.exit_code == 0 and bool(state) and not state.startswith("Z")


def _log(node: Any, process: _Process) -> str:
    """The tracer's output so far, read as the user who started it (root through sudo)."""
    return node.run(f"cat {shlex.quote(process.log_path)}", timeout=20, check=False,
                    sudo=getattr(process, "sudo", False)).stdout


def group_pids(node: Any, pgid: int) -> set[int]:
    """PIDs in process group ``pgid`` on ``node`` (e.g. nginx's master and workers, to trace
    and to check the attachment proof against)."""
    out = node.run("ps -eo pid=,pgid=", timeout=10).stdout
    return {int(p) for p, g in (line.split() for line in out.splitlines()) if int(g) == pgid}


def perf_uprobes(node: Any, library: str | None = None, sudo: bool = False) -> list[dict]:
    """``bpftool perf show`` entries that are uprobes/uretprobes (on ``library`` if given)."""
    out = node.run("bpftool -j perf show", timeout=20, sudo=sudo).stdout
    entries = json.loads(out or "[]")
    return [
        e for e in entries
        if str(e.get("fd_type", "")).startswith(("uprobe", "uretprobe"))
        and (library is None or e.get("filename") == library)
    ]


def wait_attached(node: Any, running: RunningTracer, timeout: float = 30.0) -> int:
    """Wait until the tracer's process group holds all its uprobes on the library (bpftool),
    or, without bpftool, until it printed its header. Returns the uprobes seen."""
    process = running.process
    deadline = time.monotonic() + timeout
    ready_text = "Attaching " if running.tracer.kind == "bpftrace" else "FUNC"
    while True:
        log = _log(node, process)
        if ready_text in log:
            if running.tracer.bpftool is None:
                if "FUNC" in log:
                    return 0
            else:
                group = group_pids(node, process.pid)
                probes = perf_uprobes(node, running.library, sudo=True)
                seen = [e for e in probes if e.get("pid") in group]
                if len(seen) >= UPROBE_COUNT:
                    running.footprint = TracerFootprint(
                        frozenset(int(e["prog_id"]) for e in seen if "prog_id" in e),
                        running.footprint.events_before)
                    return len(seen)
        if not _alive(node, process):
            # read again: the output read above may predate its last lines (written as it
            # exited); a process that is gone has written all it will
            raise TracerError(
                f"{node.name}: {running.tracer.kind} sslsniff exited before attaching to "
                f"{running.library}; its output:\n    {exit_reason(_log(node, process))}"
            )
        if time.monotonic() > deadline:
            raise TracerError(
                f"{node.name}: {running.tracer.kind} sslsniff not attached to "
                f"{running.library} after {timeout:g} s (expected {UPROBE_COUNT} uprobes in "
                f"bpftool perf show); its output:\n    {exit_reason(log)}"
            )
        time.sleep(0.2)


def interrupt_bpftrace(node: Any, process: _Process, grace: float = 15.0) -> int:
    """SIGTERM bpftrace and wait up to ``grace`` s for it to exit, sending SIGTERM again
    every second while it still holds every perf event it held before (it has not begun to
    detach). Returns how many times it was sent again.

    bpftrace before 0.19 (Debian's 0.17) reads its exit flag only when ``epoll_wait`` is
    interrupted: a signal that lands between two of its 100 ms waits is seen at the next
    event, never when no traffic comes (an idle tracer then runs until SIGKILL, without its
    summary). Once it detaches it clears the flag before its END block, so a late second
    signal cannot cut the summary; the perf events it drops as it detaches tell the two
    states apart.
    """
    pid = int(process.pid)
    alive = f"ps -o stat= -p {pid} | grep -q '^ *[^Z ]'"
    perf = f"{{ ls -l /proc/{pid}/fd 2>/dev/null | grep -c 'perf_event' || true; }}"
    script = (
        f"before=$({perf}); kill -s TERM {pid} 2>/dev/null; i=0; "
        f"end=$(($(date +%s) + {max(1, round(grace))})); "  # by the clock: a busy node is slow
        f"while {alive} && [ $(date +%s) -lt $end ]; do sleep 0.1; i=$((i+1)); "
        f"if [ $((i % 10)) -eq 0 ] && {alive} && [ \"$({perf})\" -ge \"$before\" ]; "
        f"then kill -s TERM {pid} 2>/dev/null; echo again; fi; done"
    )
    result = node.run(script, timeout=grace + 10, sudo=getattr(process, "sudo", False),
                      check=False, quiet=True)
    return result.stdout.split().count("again")


def stop_sslsniff(node: Any, running: RunningTracer, grace: float = 15.0) -> SslsniffResult:
    """Stop the tracer (SIGTERM: bpftrace prints its maps and detaches) and parse its output.

    bpftrace is interrupted with :func:`interrupt_bpftrace` first. Raises ParseError quoting
    the output when it is cut off (e.g. killed after ``grace``).
    """
    if running.tracer.kind == "bpftrace":
        again = interrupt_bpftrace(node, running.process, grace)
        if again:
            LOG.info("%s: bpftrace missed SIGTERM; sent it %d more time(s)", node.name, again)
    log = node.stop(running.process, grace=grace)
    result = parse_sslsniff_output(
        log, source=f"{node.name}: output of {running.command!r}", tracer=running.tracer.kind
    )
    LOG.info(
        "%s: sslsniff saw %d events (%s), %d lost; per process: %s", node.name,
        result.total_events, result.events_per_function, result.lost_events,
        {f"{result.comms[p]}/{p}": n for p, n in result.events_per_pid.items()},
    )
    return result


def uprobe_leftovers(node: Any, library: str = DEFAULT_LIBSSL, sudo: bool = True,
                     settle: float = 5.0, footprint: TracerFootprint | None = None) -> list[str]:
    """Probes still attached to ``library`` or still loaded after the tracers stopped.

    Looks at ``bpftool perf show`` (perf-event uprobes of any process), ``bpftool link
    show`` (uprobe links), ``bpftool prog show`` (sslsniff probe programs still loaded) and
    tracefs ``uprobe_events`` (mounting tracefs if needed). With a tracer's ``footprint`` only
    what that tracer loaded counts (its programs, tracefs events that were not there before
    it), so another run's tracer on the same machine is not taken for a leftover. The kernel
    frees a dead tracer's programs asynchronously, so the check is repeated for up to
    ``settle`` seconds until clean. Returns one line per leftover; an empty list means clean.
    """
    mount_tracing(node, sudo=sudo)
    deadline = time.monotonic() + settle
    while True:
        leftovers = _leftovers_now(node, library, sudo, footprint)
        if not leftovers or time.monotonic() >= deadline:
            return leftovers
        time.sleep(0.2)


def _uprobe_events(node: Any, sudo: bool) -> list[str]:
    text = node.run(f"cat {TRACEFS}/uprobe_events", timeout=10, sudo=sudo).stdout
    return [line for line in text.splitlines() if line.strip()]


def _leftovers_now(node: Any, library: str, sudo: bool,
                   footprint: TracerFootprint | None) -> list[str]:
    def ours(prog_id: Any) -> bool:
        return footprint is None or prog_id in footprint.programs

    leftovers = [
        f"bpftool perf: pid {e.get('pid')} fd {e.get('fd')} prog {e.get('prog_id')} "
        f"{e.get('fd_type')} {e.get('filename')}+{e.get('offset')}"
        for e in perf_uprobes(node, library, sudo=sudo) if ours(e.get("prog_id"))
    ]
    links = json.loads(node.run("bpftool -j link show", timeout=20, sudo=sudo).stdout or "[]")
    leftovers += [
        f"bpftool link {link.get('id')}: {link.get('type')} prog {link.get('prog_id')}"
        for link in links if "uprobe" in json.dumps(link) and ours(link.get("prog_id"))
    ]
    progs = json.loads(node.run("bpftool -j prog show", timeout=20, sudo=sudo).stdout or "[]")
    leftovers += [
        f"bpftool prog {prog.get('id')}: {prog.get('type')} {prog.get('name')} still loaded"
        for prog in progs if PROG_NAMES.match(str(prog.get("name", ""))) and ours(prog.get("id"))
    ]
    try:
        events = _uprobe_events(node, sudo)
    except CommandError as error:
        leftovers.append(f"cannot read {TRACEFS}/uprobe_events: {error}")
    else:
        before = footprint.events_before if footprint else frozenset()
        leftovers += [f"tracefs uprobe_events: {line}" for line in events
                      if library in line and line not in before]
    return leftovers
