"""Per-trial CPU telemetry of a node: two reads of ``/proc`` (trial start and end), no
sampling process.

:func:`take_snapshot` runs one command on a node that prints ``/proc/stat``'s cpu lines, the
``/proc/<pid>/stat`` and ``task/*/stat`` lines of every process in the tracked process groups
(a process started by ``Node.start`` leads its group: nginx workers are in their master's)
and each thread's ``task/*/schedstat`` (its time on a CPU in nanoseconds, where the kernel has
``CONFIG_SCHED_INFO``), the accounting of foreground commands run since the last read (a
command value with a ``ledger``, ``libraries.testbed.command.NodeCommand``, leaves it in a
ledger directory), optional extra sections (VPP's ``show runtime``) and the sampling shell's
own CPU. :func:`cpu_usage` turns two snapshots into per-core percentages (like ``mpstat -P
ALL``) and per-process percent of one core, named as the test named them, with each name's
CPU seconds (``cpu_s``, what a cost per request divides) counted in nanoseconds from
``schedstat`` where every process of that name had it at both reads and kept all its threads,
in 10 ms ticks from ``stat`` otherwise (``cpu_s_source`` says which).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from libraries.testbed.errors import HostStackError
from libraries.tools.cpu.proc_stat import (
    CORE_FIELDS,
    MAGIC,
    ProcessSample,
    Snapshot,
    TaskStat,
    parse_snapshot,
)

if TYPE_CHECKING:
    from libraries.testbed.node import Node

CORE_COLUMNS = ("usr", "nice", "sys", "iowait", "irq", "soft", "steal", "idle")
"""Column names of the per-core table (mpstat's, without guest: guest time is in usr)."""
_COLUMN_OF = {"user": "usr", "nice": "nice", "system": "sys", "iowait": "iowait",
              "irq": "irq", "softirq": "soft", "steal": "steal", "idle": "idle"}
_NGINX_TITLE = re.compile(r"^nginx: (\w+)")


class TelemetryError(HostStackError):
    """Two snapshots cannot be compared (another boot, no time elapsed, cores changed)."""


def snapshot_script(groups: list[int], ledger: str | None = None,
                    sections: Mapping[str, str] | None = None, *, pids: list[int] = (),
                    counters_last: bool = False) -> str:
    """The one shell command of a read (POSIX sh). Only ``getconf`` runs, plus ``pgrep``
    when there are ``groups`` and ``rm`` when the ledger has entries: the rest is shell
    builtins, so a read costs a few ms of CPU.

    ``groups``: process group ids whose members are listed with ``pgrep``; ``pids``:
    processes read directly; both: ``pids`` are the groups' members from an earlier read,
    listed again (``pgrep``) only when one of them is gone. ``ledger``: a directory whose
    ``*.stat`` files (left by a command value's ``ledger``) are read and removed;
    ``sections``: name -> command whose output is passed through (single-word names).
    ``counters_last`` reads ``/proc/uptime`` and ``/proc/stat`` after everything else (a
    trial's start: the read's own cost then falls before the measured window; at the end
    they are read first).
    """
    read = 'read -r l < "$f" && echo "$l"'
    head = [f"echo '{MAGIC}'", "getconf CLK_TCK",
            'read -r l < /proc/sys/kernel/random/boot_id; echo "$l"',
            'read -r l < /proc/uptime; echo "$l"']
    counters = ['echo @uptime; read -r l < /proc/uptime; echo "$l"', "echo @stat",
                'while read -r l; do case "$l" in cpu*) echo "$l";; *) break;; esac; done '
                "< /proc/stat"]
    body = []
    known = " ".join(str(int(p)) for p in sorted(set(pids)))
    if groups:
        listing = f"pgrep -g {','.join(str(int(g)) for g in sorted(set(groups)))}"
        if known:  # members known from an earlier read: list again only if one is gone
            body.append(f'm="{known}"; for p in $m; do [ -d /proc/$p ] || '
                        f'{{ m=$({listing}); break; }}; done')
        else:
            body.append(f"m=$({listing})")
    elif known:
        body.append(f'm="{known}"')
    if groups or known:
        body.append(
            "for p in $m; do echo \"@pid $p\"; "
            f"for f in /proc/$p/stat /proc/$p/task/*/stat; do {read}; done 2>/dev/null; "
            "echo \"@sched $p\"; for f in /proc/$p/task/*/schedstat; do read -r l < \"$f\" "
            "&& t=${f%/schedstat} && echo \"${t##*/} $l\"; done 2>/dev/null; "
            "echo \"@cmdline $p\"; c=; read -r c < /proc/$p/cmdline 2>/dev/null; "
            "echo \"=$c\"; done")
    if ledger:
        quoted = shlex.quote(ledger)
        body.append(f"echo @ledger; n=0; for f in {quoted}/*.stat; do [ -f \"$f\" ] || "
                    f"continue; echo \"@fg ${{f##*/}}\"; {read}; n=1; done; "
                    f"[ $n = 0 ] || rm -f {quoted}/*.stat")
    for name, command in (sections or {}).items():
        if not re.fullmatch(r"[A-Za-z0-9_-]+", name):
            raise ValueError(f"section name {name!r}: expected one word")
        body.append(f"echo '@section {name}'; {command} 2>&1")
    parts = head + body + counters if counters_last else head + counters + body
    return "; ".join([*parts, "echo @end", "times"])


def take_snapshot(node: Node, groups: list[int], ledger: str | None = None,
                  sections: Mapping[str, str] | None = None, sudo: bool = False,
                  timeout: float = 15.0, *, pids: list[int] = (),
                  counters_last: bool = False) -> Snapshot:
    """Read a :class:`Snapshot` of ``node`` in one command (:func:`snapshot_script`);
    ParseError quotes bad output."""
    script = snapshot_script(groups, ledger, sections, pids=pids, counters_last=counters_last)
    result = node.run(script, timeout=timeout, sudo=sudo, quiet=True)
    return parse_snapshot(result.stdout, source=f"{node.name}: telemetry snapshot")


@dataclass(frozen=True)
class ProcessUsage:
    """CPU of one named process (or several with the same name, e.g. two nginx workers)
    over a window, in percent of one core; ``threads`` by thread name when the threads are
    named apart (VPP's ``vpp_main``, ``vpp_wk_0``); ``cpu_s``: the same user + system time
    in seconds, unrounded by the window's length (what a cost per unit of work divides;
    nanoseconds from ``schedstat`` where :attr:`cpu_source` is ``schedstat``, else ticks);
    ``niced_s``: of its user time, the seconds its niced tasks ran, by the core each last ran
    on (the cores' ``nice`` column is the user time of niced tasks: a run started with
    ``nice`` is not foreign load; their system time is in ``sys``).
    """

    name: str
    cpu: float
    usr: float
    sys: float
    count: int
    threads: dict[str, float]
    cpu_s: float | None = None
    niced_s: dict[str, float] = field(default_factory=dict)
    cpu_source: str = "ticks"

    def as_record(self) -> dict[str, Any]:
        record: dict[str, Any] = {"cpu": self.cpu, "usr": self.usr, "sys": self.sys,
                                  "count": self.count}
        if self.cpu_s is not None:
            record["cpu_s"] = self.cpu_s
        if self.niced_s:
            record["niced_s"] = self.niced_s
        if self.threads:
            record["threads"] = self.threads
        return record


@dataclass(frozen=True)
class CpuUsage:
    """One node over one window: per-core percentages (:data:`CORE_COLUMNS`, keys ``all``,
    ``0``, ``1`` ...), named processes, what exited inside the window (its CPU is lost),
    the window's length and the sampler's own CPU seconds (both reads). The record keeps
    each process's ``cpu_source`` in ``cpu_s_source`` (beside the table, whose rows the
    record's schema fixes)."""

    elapsed_s: float
    boot_id: str
    cores: dict[str, dict[str, float]]
    processes: dict[str, ProcessUsage]
    exited: tuple[str, ...]
    sampler_cpu_s: float

    def as_record(self) -> dict[str, Any]:
        record: dict[str, Any] = {
            "elapsed_s": self.elapsed_s, "boot_id": self.boot_id, "cores": self.cores,
            "processes": {name: p.as_record() for name, p in self.processes.items()},
            "sampler_cpu_s": self.sampler_cpu_s,
        }
        sources = {name: p.cpu_source for name, p in self.processes.items()
                   if p.cpu_s is not None}
        if sources:
            record["cpu_s_source"] = sources
        if self.exited:
            record["exited"] = list(self.exited)
        return record


def core_percentages(before: Snapshot, after: Snapshot) -> dict[str, dict[str, float]]:
    """Per-core percentages between two snapshots (a counter that went back, as iowait may
    on tickless kernels, counts as 0)."""
    table: dict[str, dict[str, float]] = {}
    for core, end in after.cores.items():
        start = before.cores.get(core)
        if start is None:
            raise TelemetryError(f"cpu{core} appeared between the two reads (CPU hotplug?)")
        deltas = [max(0, b - a) for a, b in zip(start.values(), end.values(), strict=True)]
        total = sum(deltas)
        if total == 0:
            raise TelemetryError(f"no CPU time elapsed on cpu{core} between the two reads")
        table[core] = {_COLUMN_OF[name]: round(100.0 * delta / total, 2)
                       for name, delta in zip(CORE_FIELDS, deltas, strict=True)}
    return {core: {column: row[column] for column in CORE_COLUMNS}
            for core, row in table.items()}


def process_label(sample: ProcessSample, group_name: str) -> str:
    """The name a process is shown under: the test's name for its group, plus nginx's role
    (``master``/``worker``/``cache``) from its title, or the program name of a child."""
    role = _NGINX_TITLE.match(sample.cmdline)
    if role:
        return f"{group_name} {role.group(1)}"
    if sample.stat.pid == sample.stat.pgid:
        return group_name
    return f"{group_name} {sample.stat.comm}"


def cpu_usage(before: Snapshot, after: Snapshot, names: Mapping[int, str]) -> CpuUsage:
    """Usage between two snapshots of one node; ``names`` maps a process group id to the
    name the test gave it (``Process.name``). A process started inside the window counts
    from its start; one gone by the end is listed in ``exited``."""
    if before.boot_id != after.boot_id:
        raise TelemetryError("the node rebooted between the two reads")
    elapsed = after.uptime - before.uptime
    if elapsed <= 0:
        raise TelemetryError(f"no time elapsed between the two reads ({elapsed:g} s)")
    tick = float(after.clk_tck)
    window_start = before.uptime * tick
    ticks: dict[str, list[float]] = {}
    nanoseconds: dict[str, int | None] = {}
    threads: dict[str, dict[str, float]] = {}
    niced: dict[str, dict[str, float]] = {}

    def nice_time(label: str, task: TaskStat, spent: float) -> None:
        if task.nice > 0 and task.processor is not None and spent > 0:
            cores = niced.setdefault(label, {})
            cores[str(task.processor)] = cores.get(str(task.processor), 0.0) + spent / tick

    for pid, sample in after.processes.items():
        group = names.get(sample.stat.pgid)
        if group is None:
            continue
        label = process_label(sample, group)
        start = before.processes.get(pid)
        if start is not None and start.stat.starttime != sample.stat.starttime:
            start = None  # the PID was reused
        if start is None and sample.stat.starttime < window_start - tick:
            continue  # older than the window but not read at its start: not measurable
        used = ticks.setdefault(label, [0.0, 0.0, 0.0])
        used[0] += sample.stat.utime - (start.stat.utime if start else 0)
        used[1] += sample.stat.stime - (start.stat.stime if start else 0)
        used[2] += 1
        spent_ns = _schedstat_delta(start, sample)
        so_far = nanoseconds.get(label, 0)
        nanoseconds[label] = None if spent_ns is None or so_far is None else so_far + spent_ns
        if len(sample.threads) > 1:
            old = {t.pid: t for t in start.threads} if start else {}
            per_thread = threads.setdefault(label, {})
            for thread in sample.threads:
                prior = old.get(thread.pid)
                spent = thread.utime + thread.stime - (
                    prior.utime + prior.stime if prior else 0)
                per_thread[thread.comm] = per_thread.get(thread.comm, 0.0) + spent
                nice_time(label, thread, thread.utime - (prior.utime if prior else 0))
        else:
            nice_time(label, sample.stat,
                      sample.stat.utime - (start.stat.utime if start else 0))
    for name, stat in _ledger_totals(after.ledger).items():
        used = ticks.setdefault(name, [0.0, 0.0, 0.0])
        used[0] += stat[0]
        used[1] += stat[1]
        used[2] += stat[2]
        nanoseconds[name] = None  # a foreground command's children: ticks only

    def percent(value: float) -> float:
        return round(100.0 * value / tick / elapsed, 2)

    processes = {}
    for label, (u, s, n) in sorted(ticks.items()):
        named = threads.get(label, {})
        # a breakdown only says something when threads have names of their own (vpp_main,
        # vpp_wk_0); wrk's threads are all "wrk"
        by_thread = {t: percent(v) for t, v in sorted(named.items())} if len(named) > 1 else {}
        spent_ns = nanoseconds.get(label)
        seconds, source = ((round(spent_ns / 1e9, 6), "schedstat") if spent_ns is not None
                           else (round((u + s) / tick, 4), "ticks"))
        processes[label] = ProcessUsage(label, percent(u + s), percent(u), percent(s), int(n),
                                        by_thread, seconds,
                                        {c: round(v, 4) for c, v in
                                         sorted(niced.get(label, {}).items())}, source)
    exited = sorted({process_label(sample, names[sample.stat.pgid])
                     for pid, sample in before.processes.items()
                     if pid not in after.processes and sample.stat.pgid in names})
    return CpuUsage(round(elapsed, 2), after.boot_id[:8], core_percentages(before, after),
                    processes, tuple(exited),
                    round(before.sampler_seconds + after.sampler_seconds, 3))


def _schedstat_delta(start: ProcessSample | None, end: ProcessSample) -> int | None:
    """Nanoseconds ``end``'s threads ran on a CPU since ``start`` (from 0 for a process
    started inside the window); None when either read has no ``schedstat`` or a thread of the
    start is gone (its time left the sum: the ticks of ``stat``, which keep it, count then)."""
    if end.schedstat is None or (start is not None and start.schedstat is None):
        return None
    before = start.schedstat if start is not None else {}
    if not set(before) <= set(end.schedstat):
        return None
    spent = sum(end.schedstat.values()) - sum(before.values())
    return spent if spent >= 0 else None


def _ledger_totals(ledger: tuple[tuple[str, TaskStat], ...]) -> dict[str, tuple[int, int, int]]:
    totals: dict[str, tuple[int, int, int]] = {}
    for name, stat in ledger:
        u, s, n = totals.get(name, (0, 0, 0))
        totals[name] = (u + stat.cutime, s + stat.cstime, n + 1)
    return totals
