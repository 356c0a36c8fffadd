"""sslsniff as a bpftrace script: parameters, rendering, output parsing and attachment proof.

The script (``templates/bpftrace/sslsniff.bt.j2``) attaches what bcc's sslsniff attaches: a
uprobe and a uretprobe on libssl's ``SSL_read`` and ``SSL_write``. A uprobe on a library path
fires in *every* process mapping that file (wrk on the same machine included), so the script
is filtered by PID list and/or command name. Running and stopping it on a node lives in
:mod:`libraries.tools.sslsniff.kernel`; the userspace (bpftime) variant in
:mod:`libraries.tools.sslsniff.userspace`.

Output of the script and of bcc's ``sslsniff`` share the per-event line
``FUNC TIME(s) COMM PID LEN [DATA]``; the script adds an end-of-run summary of its counter map.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from libraries.testbed.errors import HostStackError, ParseError, RenderError
from libraries.tools.render import render

DEFAULT_LIBSSL = "/usr/lib/x86_64-linux-gnu/libssl.so.3"
TEMPLATE = "bpftrace/sslsniff.bt.j2"
#: libssl function -> the FUNC label sslsniff prints for it.
FUNCTIONS = (("SSL_read", "READ/RECV"), ("SSL_write", "WRITE/SEND"))
LABELS = tuple(label for _, label in FUNCTIONS)
#: uprobes + uretprobes the script attaches (BEGIN/END are not uprobes).
UPROBE_COUNT = 2 * len(FUNCTIONS)
MAX_PIDS = 64
DEFAULT_STRLEN = 64  # bpftrace's default BPFTRACE_STRLEN, which also bounds buf()
MAX_DATA_BYTES = 200  # bpftrace 0.17 refuses BPFTRACE_STRLEN above 200

SUMMARY_BEGIN = "=== sslsniff summary ==="
SUMMARY_END = "=== sslsniff end ==="

TracerKind = Literal["bpftrace", "bcc", "libbpf", "bpftime"]


class TracerError(HostStackError):
    """The tracer did not attach, attached to the wrong processes, or left probes behind."""


#: lines a tracer prints on every start on some machines, whatever follows: bpftrace 0.17 on a
#: kernel without a memlock limit to raise. They are no reason for a failure, so the quoted
#: reason leaves them out (and says so).
START_NOISE = (re.compile(r"couldn't set RLIMIT_MEMLOCK for bpftrace"),)


def exit_reason(log: str, limit: int = 2000) -> str:
    """The part of a tracer's output that can explain why it stopped: its lines without the
    ones it prints on every start (:data:`START_NOISE`), the last ``limit`` characters.
    Says so when the output held nothing else."""
    lines = log.strip().splitlines()
    kept = [line for line in lines if not any(p.search(line) for p in START_NOISE)]
    dropped = len(lines) - len(kept)
    text = "\n    ".join(kept)[-limit:]
    if not text:
        return (f"(nothing but its start-up notice: {lines[0].strip()[:200]!r})" if lines
                else "(empty)")
    note = f"\n    ({dropped} start-up notice line(s) left out)" if dropped else ""
    return text + note


def _fail(field_name: str, expected: str, value: object) -> RenderError:
    return RenderError(f"SslsniffParams.{field_name}: expected {expected}, got {value!r}")


@dataclass(frozen=True, kw_only=True)
class SslsniffParams:
    """Parameters of the sslsniff bpftrace script.

    Fields: ``library`` (absolute path of the libssl whose SSL_read/SSL_write are probed),
    ``pids`` (process IDs to trace; events of other processes are dropped in the kernel),
    ``comm`` (command name to trace, e.g. "nginx"; with ``pids`` both must match),
    ``per_event`` (True: print one sslsniff line per call; False: count only),
    ``show_data`` (add the first ``data_bytes`` bytes of each buffer, escaped; per-event only),
    ``data_bytes`` (1-200), ``all_processes`` (explicitly trace every process: no filter).
    """

    library: str = DEFAULT_LIBSSL
    pids: tuple[int, ...] = ()
    comm: str | None = None
    per_event: bool = True
    show_data: bool = False
    data_bytes: int = DEFAULT_STRLEN
    all_processes: bool = False

    def __post_init__(self) -> None:
        lib = self.library
        if not isinstance(lib, str) or not re.fullmatch(r"/[A-Za-z0-9_./+-]+", lib):
            raise _fail("library", "an absolute path of letters, digits and _./+-", lib)
        if isinstance(self.pids, str | int) or not isinstance(self.pids, Iterable):
            raise _fail("pids", "a list of process IDs", self.pids)
        pids = tuple(self.pids)
        if any(isinstance(p, bool) or not isinstance(p, int) or p < 1 for p in pids):
            raise _fail("pids", "process IDs >= 1", self.pids)
        if len(pids) > MAX_PIDS:
            raise _fail("pids", f"at most {MAX_PIDS} process IDs", len(pids))
        object.__setattr__(self, "pids", tuple(sorted(set(pids))))
        if self.comm is not None and (
            not isinstance(self.comm, str) or not re.fullmatch(r"[A-Za-z0-9_.:/+-]{1,15}",
                                                                self.comm)
        ):
            raise _fail("comm", "a command name of 1-15 letters, digits or _.:/+-", self.comm)
        for name in ("per_event", "show_data", "all_processes"):
            if not isinstance(getattr(self, name), bool):
                raise _fail(name, "True or False", getattr(self, name))
        if not self.pids and self.comm is None and not self.all_processes:
            raise RenderError(
                "SslsniffParams: expected pids and/or comm to filter on (a uprobe on a library "
                "fires in every process using it, the load generator included); set "
                "all_processes=True to trace everything on purpose"
            )
        if self.all_processes and (self.pids or self.comm is not None):
            raise _fail("all_processes", "False when pids or comm are given", True)
        if self.show_data and not self.per_event:
            raise _fail("show_data", "False in count-only mode (per_event=False)", True)
        data = self.data_bytes
        if isinstance(data, bool) or not isinstance(data, int) or not 1 <= data <= MAX_DATA_BYTES:
            raise _fail("data_bytes", f"an integer 1-{MAX_DATA_BYTES}", data)

    @property
    def predicate(self) -> str:
        """The bpftrace predicate (without slashes) selecting traced processes; '' for all."""
        parts = []
        if self.pids:
            parts.append("(" + " || ".join(f"pid == {pid}" for pid in self.pids) + ")")
        if self.comm is not None:
            parts.append(f'comm == "{self.comm}"')
        return " && ".join(parts)

    @property
    def filter_text(self) -> str:
        """The filter in words, for logs and the script's header comment."""
        parts = []
        if self.pids:
            parts.append("pid in " + ",".join(map(str, self.pids)))
        if self.comm is not None:
            parts.append(f"comm {self.comm}")
        return " and ".join(parts) or "none (all processes)"

    @property
    def mode_name(self) -> str:
        """'per-event' (with or without data) or 'count-only'."""
        if not self.per_event:
            return "count-only"
        return "per-event with data" if self.show_data else "per-event"

    @property
    def functions(self) -> tuple[tuple[str, str], ...]:
        """(libssl function, sslsniff FUNC label) pairs probed."""
        return FUNCTIONS

    @property
    def env(self) -> dict[str, str]:
        """Environment bpftrace needs: a larger BPFTRACE_STRLEN for data beyond 64 bytes."""
        if self.show_data and self.data_bytes > DEFAULT_STRLEN:
            return {"BPFTRACE_STRLEN": str(self.data_bytes)}
        return {}

    def render(self) -> str:
        """The bpftrace script text."""
        return render(TEMPLATE, self)


@dataclass(frozen=True)
class SslsniffResult:
    """What the tracer saw.

    Fields: ``total_events`` (successful SSL_read/SSL_write calls counted),
    ``events_per_pid`` / ``events_per_comm`` / ``events_per_function`` (FUNC label ->
    count), ``comms`` (pid -> command name), ``printed_events`` (per-event lines in the
    output; lower than the total when events were lost), ``lost_events`` (perf buffer
    overflows reported by the tracer), ``tracer`` ("bpftrace", "bcc", "libbpf": the seed's
    sslsniff binary in the kernel, or "bpftime": the same binary under bpftime),
    ``diagnostics``
    (ERROR/WARNING lines the tracer printed, e.g. detach problems).
    """

    total_events: int
    events_per_pid: Mapping[int, int]
    events_per_comm: Mapping[str, int]
    events_per_function: Mapping[str, int]
    comms: Mapping[int, str]
    printed_events: int
    lost_events: int
    tracer: TracerKind = "bpftrace"
    diagnostics: tuple[str, ...] = field(default=())


_EVENT = re.compile(
    r"^(?P<func>READ/RECV|WRITE/SEND)\s+(?P<time>\d+\.\d+)\s+(?P<comm>.{1,16}?)\s+"
    r"(?P<pid>\d+)\s+(?P<len>-?\d+)(?:\s.*)?$"
)
_SUMMARY = re.compile(r"^@events\[(?P<pid>\d+), (?P<comm>.*), (?P<func>[A-Z/]+)\]: (?P<n>\d+)$")
_LOST = re.compile(
    r"^(?:Lost (\d+) events|Possibly lost (\d+) samples|lost (\d+) events on CPU #\d+)$"
)
_HEADER = re.compile(r"^FUNC\s+TIME\(s\)\s+COMM\s+PID\s+LEN\b")
_DIAGNOSTIC = re.compile(r"^(?:ERROR|WARNING|Error|Warning)\b")


def parse_sslsniff_output(
    text: str, source: str = "sslsniff output", tracer: TracerKind = "bpftrace"
) -> SslsniffResult:
    """Parse the whole output of a stopped tracer into an :class:`SslsniffResult`.

    For the bpftrace script the counts come from its end-of-run summary (complete even when
    per-event lines were lost); for the seed's sslsniff binary (kernel or bpftime) from the
    same summary, printed by the event counter its output goes through
    (:mod:`libraries.tools.sslsniff.seed`); for bcc's sslsniff from its event lines.
    Raises :class:`ParseError` quoting the text when the header is missing (the tracer never
    started), the summary is missing or cut off (killed before printing its maps), or an
    event or summary line is malformed.
    """
    lines = text.splitlines()
    header = next((i for i, line in enumerate(lines) if _HEADER.match(line.strip())), None)
    if header is None:
        raise ParseError(source, "no 'FUNC TIME(s) COMM PID LEN' header: the tracer never "
                         "started tracing", text)
    diagnostics = tuple(line.strip() for line in lines if _DIAGNOSTIC.match(line.strip()))
    printed: dict[tuple[int, str, str], int] = {}
    lost = 0
    summary_at = None
    in_data = False
    for index in range(header + 1, len(lines)):
        line = lines[index].strip()
        if line == SUMMARY_BEGIN:
            summary_at = index
            break
        if line.startswith("----- DATA"):  # bcc's data block around each event's bytes
            in_data = True
        elif line.startswith("----- END DATA"):
            in_data = False
        elif in_data:
            continue
        elif lost_match := _LOST.match(line):
            lost += int(next(g for g in lost_match.groups() if g))
        elif line.startswith(LABELS):
            match = _EVENT.match(line)
            if not match:
                raise ParseError(source, f"malformed event line {line!r}", text)
            key = (int(match["pid"]), match["comm"].strip(), match["func"])
            printed[key] = printed.get(key, 0) + 1
    counts = printed
    if tracer != "bcc":
        if summary_at is None:
            raise ParseError(source, f"no {SUMMARY_BEGIN!r} block: the tracer was killed or "
                             "cut off before printing its maps", text)
        counts = _summary(lines[summary_at + 1:], source, text)
    return _result(counts, sum(printed.values()), lost, tracer, diagnostics)


def _summary(lines: list[str], source: str, text: str) -> dict[tuple[int, str, str], int]:
    counts: dict[tuple[int, str, str], int] = {}
    for raw in lines:
        line = raw.strip()
        if line == SUMMARY_END:
            return counts
        if not line:
            continue
        match = _SUMMARY.match(line)
        if not match or match["func"] not in LABELS:
            raise ParseError(source, f"malformed summary line {line!r}", text)
        counts[(int(match["pid"]), match["comm"], match["func"])] = int(match["n"])
    raise ParseError(source, f"summary not terminated by {SUMMARY_END!r} (output cut off)", text)


def _result(
    counts: Mapping[tuple[int, str, str], int], printed: int, lost: int, tracer: TracerKind,
    diagnostics: tuple[str, ...],
) -> SslsniffResult:
    per_pid: dict[int, int] = {}
    per_comm: dict[str, int] = {}
    per_function = dict.fromkeys(LABELS, 0)
    comms: dict[int, str] = {}
    for (pid, comm, func), count in counts.items():
        per_pid[pid] = per_pid.get(pid, 0) + count
        per_comm[comm] = per_comm.get(comm, 0) + count
        per_function[func] += count
        comms[pid] = comm
    return SslsniffResult(
        total_events=sum(per_pid.values()), events_per_pid=per_pid, events_per_comm=per_comm,
        events_per_function=per_function, comms=comms, printed_events=printed,
        lost_events=lost, tracer=tracer, diagnostics=diagnostics,
    )


def check_attachment(result: SslsniffResult, traced_pids: Iterable[int], what: str = "nginx",
                     where: str = "node") -> None:
    """Attachment proof: events were seen, and only from ``traced_pids``.

    Raises :class:`TracerError` "tracer attached nothing" when no event was counted, and
    "events came from other processes: wrk (pid 42): 9473 events" when any event came from a
    process outside ``traced_pids``.
    """
    pids = set(traced_pids)
    if result.total_events == 0:
        raise TracerError(
            f"{where}: {result.tracer} sslsniff attached nothing: 0 SSL_read/SSL_write events "
            f"from {what} (pids {sorted(pids)}) during the trial; lost events: "
            f"{result.lost_events}"
        )
    foreign = {pid: n for pid, n in result.events_per_pid.items() if pid not in pids}
    if foreign:
        listed = ", ".join(
            f"{result.comms.get(pid, '?')} (pid {pid}): {n} events"
            for pid, n in sorted(foreign.items())
        )
        raise TracerError(
            f"{where}: {result.tracer} sslsniff events came from other processes: {listed}; "
            f"expected only {what} (pids {sorted(pids)})"
        )
