"""Parsers of the kernel's CPU accounting: ``/proc/stat``, ``/proc/<pid>/stat``,
``/proc/<pid>/task/<tid>/schedstat`` and a telemetry snapshot (the output of
:func:`libraries.tools.cpu.telemetry.snapshot_script`).

Every parser returns typed values in clock ticks (``getconf CLK_TCK``), or nanoseconds for
``schedstat``, or raises :class:`ParseError` naming the file and quoting the text: a truncated
or garbled file never becomes zeros.

Why ``schedstat``: its first field is the task's time on a CPU in nanoseconds (the
scheduler's ``sum_exec_runtime``: user and system time alike), the very total that
``/proc/<pid>/stat``'s ``utime + stime`` is scaled to and then truncated to 10 ms ticks. A
2 s trial of a proxy using 0.4 s of CPU is 40 ticks there, so the truncation alone moves a
trial's CPU by up to a tick (about 1.4 % of a round's cost ratio); in nanoseconds it does not.
The file exists when the kernel has ``CONFIG_SCHED_INFO`` (``schedstat`` sums only the live
threads: a thread that exited loses its time, which the caller checks).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from libraries.testbed.errors import ParseError

CORE_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
"""The ``/proc/stat`` cpu columns kept (guest time is already inside user and nice)."""
MAGIC = "@telemetry 1"


@dataclass(frozen=True)
class CoreTicks:
    """One ``cpu``/``cpuN`` line of ``/proc/stat`` in clock ticks (see :data:`CORE_FIELDS`)."""

    user: int
    nice: int
    system: int
    idle: int
    iowait: int
    irq: int
    softirq: int
    steal: int

    def values(self) -> tuple[int, ...]:
        return tuple(getattr(self, name) for name in CORE_FIELDS)


@dataclass(frozen=True)
class TaskStat:
    """The fields of one ``/proc/<pid>/stat`` (or ``task/<tid>/stat``) line that telemetry
    uses: CPU times in ticks (``cutime``/``cstime``: waited-for children), the process group,
    the start time (ticks after boot), the CPU it last ran on and its nice value (a niced
    task's time is the cores' ``nice`` column, not ``usr``)."""

    pid: int
    comm: str
    state: str
    ppid: int
    pgid: int
    utime: int
    stime: int
    cutime: int
    cstime: int
    num_threads: int
    starttime: int
    processor: int | None
    nice: int = 0


@dataclass(frozen=True)
class ProcessSample:
    """A process of a tracked process group: its own line, its threads' lines, its title."""

    stat: TaskStat
    threads: tuple[TaskStat, ...]
    cmdline: str
    schedstat: dict[int, int] | None = None
    """Thread id -> nanoseconds on a CPU (``task/<tid>/schedstat``); None when the kernel
    gave none (no ``CONFIG_SCHED_INFO``, or the process exited while being read)."""


@dataclass(frozen=True)
class Snapshot:
    """What one sample of a node read, in one command.

    ``cores`` maps ``"all"`` and ``"0"``, ``"1"`` ... to their ticks; ``processes`` the PIDs
    of the tracked process groups; ``ledger`` each foreground command's accounting (name ->
    the ``/proc/<pid>/stat`` of the shell that waited for it); ``sections`` the raw output
    of extra commands (e.g. VPP's ``show runtime``); ``sampler`` the sampling shell's own
    user+system and children's user+system seconds.
    """

    clk_tck: int
    boot_id: str
    uptime: float
    cores: dict[str, CoreTicks]
    processes: dict[int, ProcessSample] = field(default_factory=dict)
    ledger: tuple[tuple[str, TaskStat], ...] = ()
    sections: dict[str, str] = field(default_factory=dict)
    sampler_seconds: float = 0.0


def parse_proc_stat(text: str, source: str = "/proc/stat") -> dict[str, CoreTicks]:
    """The ``cpu`` lines of ``/proc/stat``: ``{"all": ..., "0": ..., ...}``.

    Other lines (intr, ctxt, ...) are ignored; a ``cpu`` line with fewer than 8 numbers, a
    non-number, or a text with no aggregate ``cpu`` line raises :class:`ParseError`.
    """
    cores: dict[str, CoreTicks] = {}
    for line in text.splitlines():
        if not line.startswith("cpu"):
            continue
        name, *numbers = line.split()
        core = "all" if name == "cpu" else name.removeprefix("cpu")
        if core != "all" and not core.isdigit():
            raise ParseError(source, f"unexpected cpu line {line!r}", text)
        if len(numbers) < len(CORE_FIELDS) or not all(n.isdigit() for n in numbers):
            raise ParseError(source, f"expected at least {len(CORE_FIELDS)} tick counts in "
                             f"{line!r}", text)
        cores[core] = CoreTicks(*(int(n) for n in numbers[:len(CORE_FIELDS)]))
    if "all" not in cores or len(cores) < 2:
        raise ParseError(source, "no 'cpu' and 'cpuN' lines", text)
    return cores


_STAT_HEAD = re.compile(r"^(\d+) \((.*)\) (\S) (.*)$", re.DOTALL)


def parse_pid_stat(line: str, source: str = "/proc/<pid>/stat") -> TaskStat:
    """One ``/proc/<pid>/stat`` line. ``comm`` may hold spaces and parentheses (the last
    ``)`` ends it); fewer than the 22 fields up to ``starttime`` raises :class:`ParseError`."""
    match = _STAT_HEAD.match(line.strip())
    if match is None:
        raise ParseError(source, "not a '<pid> (<comm>) <state> ...' stat line", line)
    rest = match.group(4).split()
    # rest[0] is field 4 (ppid): field n is rest[n - 4]
    if len(rest) < 19 or not all(re.fullmatch(r"-?\d+", v) for v in rest):
        raise ParseError(source, "expected at least 22 numeric fields", line)

    def number(field_number: int) -> int:
        return int(rest[field_number - 4])

    processor = number(39) if len(rest) > 35 else None
    return TaskStat(pid=int(match.group(1)), comm=match.group(2), state=match.group(3),
                    ppid=number(4), pgid=number(5), utime=number(14), stime=number(15),
                    cutime=number(16), cstime=number(17), num_threads=number(20),
                    starttime=number(22), processor=processor, nice=number(19))


_TIMES = re.compile(r"^(\d+)m([\d.]+)s\s+(\d+)m([\d.]+)s$")


def parse_times(text: str, source: str = "sh times") -> float:
    """Seconds of CPU a shell and its waited-for children used, from the ``times`` builtin
    (two lines ``XmY.YYYs XmY.YYYs``: the shell's user and system, its children's)."""
    lines = [line.strip() for line in text.strip().splitlines()]
    matches = [_TIMES.match(line) for line in lines]
    if len(lines) != 2 or not all(matches):
        raise ParseError(source, "expected two 'XmY.YYYs XmY.YYYs' lines", text)
    return sum(int(m[1]) * 60 + float(m[2]) + int(m[3]) * 60 + float(m[4])
               for m in matches if m is not None)


def parse_schedstat(line: str, source: str) -> int:
    """Nanoseconds on a CPU from one ``schedstat`` line (``<on-cpu ns> <waiting ns>
    <timeslices>``); anything else raises :class:`ParseError` naming ``source`` (the file)
    and quoting the line."""
    numbers = line.split()
    if len(numbers) != 3 or not all(n.isdigit() for n in numbers):
        raise ParseError(source, "expected '<ns on cpu> <ns waiting> <timeslices>'", line)
    return int(numbers[0])


def parse_snapshot(text: str, source: str) -> Snapshot:
    """A whole snapshot: header (CLK_TCK, boot id, /proc/uptime), ``@stat``, ``@pid`` /
    ``@sched`` (``<tid> <schedstat line>`` per thread, optional) / ``@cmdline`` blocks,
    ``@fg`` ledger entries, ``@section`` outputs, an optional ``@uptime`` (read next to
    ``/proc/stat`` when that comes last) and the closing ``@end`` + ``times``.

    A process that exited between listing and reading leaves an empty ``@pid`` block and is
    left out; anything else missing or malformed raises :class:`ParseError` quoting ``text``.
    """
    lines = text.split("\n")
    if lines[0].strip() != MAGIC:
        raise ParseError(source, f"expected the first line {MAGIC!r}", text)
    if "@end" not in (line.strip() for line in lines):
        raise ParseError(source, "truncated: no '@end' line", text)
    blocks = _blocks(lines[1:], source, text)
    clk_tck, boot_id, uptime = _header(blocks.pop(0)[1], source, text)
    reader = _BlockReader(source, text)
    for tag, body in blocks:
        reader.read(tag, body)
    if reader.cores is None or reader.sampler is None:
        raise ParseError(source, "no '@stat' block", text)
    if reader.read_uptime is not None:  # read next to /proc/stat: the window's edge
        uptime = reader.read_uptime
    return Snapshot(clk_tck, boot_id, uptime, reader.cores, reader.processes,
                    tuple(reader.ledger), reader.sections, reader.sampler)


def _header(header: list[str], source: str, text: str) -> tuple[int, str, float]:
    if len(header) != 3:
        raise ParseError(source, "expected CLK_TCK, boot_id and /proc/uptime lines", text)
    try:
        clk_tck = int(header[0])
        uptime = float(header[2].split()[0])
    except (ValueError, IndexError):
        raise ParseError(source, "bad CLK_TCK or /proc/uptime line", text) from None
    boot_id = header[1].strip()
    if clk_tck <= 0 or not re.fullmatch(r"[0-9a-f-]{36}", boot_id):
        raise ParseError(source, "bad CLK_TCK or boot_id line", text)
    return clk_tck, boot_id, uptime


class _BlockReader:
    """Accumulates the blocks of one snapshot (see :func:`parse_snapshot`)."""

    def __init__(self, source: str, text: str):
        self.source, self.text = source, text
        self.cores: dict[str, CoreTicks] | None = None
        self.processes: dict[int, ProcessSample] = {}
        self.ledger: list[tuple[str, TaskStat]] = []
        self.sections: dict[str, str] = {}
        self.sampler: float | None = None
        self.read_uptime: float | None = None
        self.pending: tuple[int, list[TaskStat]] | None = None
        self.sched: dict[int, int] | None = None

    def fail(self, problem: str) -> ParseError:
        return ParseError(self.source, problem, self.text)

    def read(self, tag: str, body: list[str]) -> None:
        kind, _, argument = tag.partition(" ")
        handler = {"@stat": self.stat, "@uptime": self.uptime, "@pid": self.pid,
                   "@sched": self.schedstat, "@cmdline": self.cmdline,
                   "@fg": self.foreground, "@section": self.section, "@end": self.end,
                   "@ledger": lambda _argument, _body: None}.get(kind)
        if handler is None:
            raise self.fail(f"unknown block {tag!r}")
        handler(argument, body)

    def stat(self, _argument: str, body: list[str]) -> None:
        self.cores = parse_proc_stat("\n".join(body), source=f"{self.source}: /proc/stat")

    def uptime(self, _argument: str, body: list[str]) -> None:
        try:
            self.read_uptime = float(body[0].split()[0])
        except (ValueError, IndexError):
            raise self.fail("bad '@uptime' block") from None

    def pid(self, argument: str, body: list[str]) -> None:
        if not argument.isdigit():
            raise self.fail(f"bad block header '@pid {argument}'")
        stats = [parse_pid_stat(line, f"{self.source}: /proc/{argument}/stat")
                 for line in body if line.strip()]
        self.pending = (int(argument), stats)
        self.sched = None

    def schedstat(self, argument: str, body: list[str]) -> None:
        if self.pending is None or str(self.pending[0]) != argument:
            raise self.fail(f"'@sched {argument}' without its '@pid' block")
        found: dict[int, int] = {}
        for line in body:
            tid, _, rest = line.partition(" ")
            where = f"{self.source}: /proc/{argument}/task/{tid}/schedstat"
            if not tid.isdigit():
                raise ParseError(where, "expected '<tid> <schedstat line>'", line)
            found[int(tid)] = parse_schedstat(rest, where)
        self.sched = found or None  # none: no CONFIG_SCHED_INFO, or the process exited

    def cmdline(self, argument: str, body: list[str]) -> None:
        if self.pending is None or str(self.pending[0]) != argument:
            raise self.fail(f"'@cmdline {argument}' without its '@pid' block")
        if len(body) > 1 or (body and not body[0].startswith("=")):
            raise self.fail(f"'@cmdline {argument}': expected one '=<title>' line")
        pid, stats = self.pending
        self.pending = None
        if stats and stats[0].pid == pid:  # empty: the process exited meanwhile
            self.processes[pid] = ProcessSample(stats[0], tuple(stats[1:]),
                                                body[0][1:].strip() if body else "",
                                                self.sched)
        self.sched = None

    def foreground(self, argument: str, body: list[str]) -> None:
        entries = [parse_pid_stat(line, f"{self.source}: {argument}") for line in body
                   if line.strip()]
        if len(entries) != 1:
            raise self.fail(f"ledger entry {argument!r}: expected one stat line")
        self.ledger.append((argument.split(".", maxsplit=1)[0], entries[0]))

    def section(self, argument: str, body: list[str]) -> None:
        self.sections[argument] = "\n".join(body)

    def end(self, _argument: str, body: list[str]) -> None:
        self.sampler = parse_times("\n".join(body), source=f"{self.source}: times")


def _blocks(lines: list[str], source: str, text: str) -> list[tuple[str, list[str]]]:
    """Split at ``@tag`` lines: ``[("", header lines), ("@stat", lines), ...]``; trailing
    blank lines of each block dropped."""
    blocks: list[tuple[str, list[str]]] = [("", [])]
    for line in lines:
        if line.startswith("@"):
            blocks.append((line.strip(), []))
        else:
            blocks[-1][1].append(line)
    for _, body in blocks:
        while body and not body[-1].strip():
            body.pop()
    if any(not line.strip() for line in blocks[0][1]):
        raise ParseError(source, "blank line in the header", text)
    return blocks
