"""Evidence of the nginx stream eBPF module at work, parsed: its error log and its verdict program.

The module logs ``[stream_ebpf]  update sock map index N to client fd X`` (and ``upstream``) per
spliced connection, ``ngx_stream_ebpf_proxy_handler without ebpf object`` per connection that
fell back to native proxying, and ``call 'ngx_ebpf_init' fail`` per worker that could not load
its program. ``bpftool -j prog show name stream_verdict`` gives the sk_skb program's
``run_cnt`` (counted while the kernel's BPF run statistics are on). Pure parsers: no node
access.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from libraries.testbed.errors import ParseError

if TYPE_CHECKING:
    pass



VERDICT_PROGRAM = "stream_verdict"
_LOG_LINE = re.compile(r"^\d{4}/\d\d/\d\d \d\d:\d\d:\d\d \[(\w+)\] (\d+)#\d+: ")
_UPDATE = re.compile(r"\[stream_ebpf\]\s+update sock map index (\d+) to (client|upstream) fd (\d+)")
_FALLBACK = "ngx_stream_ebpf_proxy_handler without ebpf object"
_INIT_FAILURES = ("call 'ngx_ebpf_init' fail", "[stream_ebpf]init ebpf error")


# ---------------------------------------------------------------------------- error log
@dataclass(frozen=True)
class SockMapUpdate:
    """One ``update sock map`` line: ``index`` (sockmap slot), ``side`` ("client" or
    "upstream"), ``fd`` (the socket put there), ``pid`` (the worker)."""

    index: int
    side: str
    fd: int
    pid: int


@dataclass(frozen=True)
class ErrorLogEvidence:
    """What the module's error-log lines say: ``updates`` (SockMapUpdate, in log order),
    ``fallbacks`` (connections handled "without ebpf object"), ``init_failures`` (workers
    whose program load failed: they proxy natively), ``programs_opened`` (program loads
    started by workers)."""

    updates: tuple[SockMapUpdate, ...]
    fallbacks: int
    init_failures: int
    programs_opened: int

    @property
    def spliced_connections(self) -> int:
        """Connections whose client socket went into the sockmap."""
        return sum(1 for u in self.updates if u.side == "client")

    @property
    def client_fds(self) -> tuple[int, ...]:
        return tuple(u.fd for u in self.updates if u.side == "client")

    @property
    def upstream_fds(self) -> tuple[int, ...]:
        return tuple(u.fd for u in self.updates if u.side == "upstream")


def parse_error_log(text: str, source: str = "nginx error log") -> ErrorLogEvidence:
    """Parse (a window of) an nginx error log for the eBPF module's lines.

    Empty text is an empty window (no evidence, which :meth:`EngagementEvidence.require_engaged`
    rejects). Raises ParseError quoting the text when it has lines but none is an nginx log
    line, or when an ``update sock map`` line has an unexpected shape.
    """
    updates: list[SockMapUpdate] = []
    fallbacks = init_failures = opened = nginx_lines = 0
    for line in text.splitlines():
        head = _LOG_LINE.match(line)
        if head is None:
            continue  # blank lines after libbpf messages, multi-line verifier output
        nginx_lines += 1
        if "update sock map" in line:
            update = _UPDATE.search(line)
            if update is None:
                raise ParseError(source, "unexpected 'update sock map' line", line)
            updates.append(SockMapUpdate(int(update.group(1)), update.group(2),
                                         int(update.group(3)), int(head.group(2))))
        elif _FALLBACK in line:
            fallbacks += 1
        elif any(failure in line for failure in _INIT_FAILURES):
            init_failures += 1
        elif "[stream_ebpf] open nginx stream ebpf code success" in line:
            opened += 1
    if text.strip() and nginx_lines == 0:
        raise ParseError(source, "no nginx error-log line ('YYYY/MM/DD HH:MM:SS [level] "
                         "PID#TID: ...')", text)
    return ErrorLogEvidence(tuple(updates), fallbacks, init_failures, opened)


# ---------------------------------------------------------------------------- bpftool
@dataclass(frozen=True)
class VerdictProgram:
    """One loaded ``stream_verdict`` program: ``prog_id``, ``run_cnt`` (0 when bpftool omits
    it: never run while stats were on), ``run_time_ns`` (None when omitted)."""

    prog_id: int
    run_cnt: int
    run_time_ns: int | None


@dataclass(frozen=True)
class VerdictStats:
    """All loaded ``stream_verdict`` programs (one per eBPF server per worker):
    ``programs``, ``reason`` (why there is none, else None). ``run_cnt`` sums the runs,
    ``run_time_ns`` the time (None when no program reports it)."""

    programs: tuple[VerdictProgram, ...]
    reason: str | None = None

    @property
    def run_cnt(self) -> int:
        return sum(p.run_cnt for p in self.programs)

    @property
    def run_time_ns(self) -> int | None:
        times = [p.run_time_ns for p in self.programs if p.run_time_ns is not None]
        return sum(times) if times else None

    @property
    def ids(self) -> frozenset[int]:
        return frozenset(p.prog_id for p in self.programs)

    def growth_since(self, before: VerdictStats) -> tuple[int, int | None]:
        """(runs, run time ns) added since ``before``, over the programs loaded now
        (a program loaded in between counts from zero)."""
        old = {p.prog_id: p for p in before.programs}
        runs, times = 0, []
        for program in self.programs:
            previous = old.get(program.prog_id)
            runs += program.run_cnt - (previous.run_cnt if previous else 0)
            if program.run_time_ns is not None:
                times.append(program.run_time_ns - ((previous.run_time_ns or 0)
                                                    if previous else 0))
        return runs, (sum(times) if times else None)


def _count(value: Any, what: str, text: str, source: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ParseError(source, f"{what} is {value!r}, expected a non-negative integer", text)
    return value


def parse_bpftool_prog_json(text: str, name: str = VERDICT_PROGRAM,
                            source: str = "bpftool -j prog show output") -> VerdictStats:
    """Parse ``bpftool -j prog show name NAME``: one object, a list (several programs share
    the name), or nothing (no such program: empty stats with the reason). Raises ParseError
    quoting the text for non-JSON, a bpftool ``{"error": ...}`` report, or a program
    without an integer ``id``, or with another name."""
    if not text.strip():
        return VerdictStats((), f"no BPF program named {name} is loaded")
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        raise ParseError(source, f"not valid JSON ({error.msg})", text) from None
    if isinstance(document, dict) and "error" in document:
        raise ParseError(source, f"bpftool reported an error: {document['error']!r}", text)
    entries = document if isinstance(document, list) else [document]
    programs = []
    for entry in entries:
        if not isinstance(entry, dict) or entry.get("name") != name:
            raise ParseError(source, f"expected program objects named {name!r}", text)
        run_time = entry.get("run_time_ns")
        programs.append(VerdictProgram(
            prog_id=_count(entry.get("id"), "id", text, source),
            run_cnt=_count(entry.get("run_cnt", 0), "run_cnt", text, source),
            run_time_ns=None if run_time is None else _count(run_time, "run_time_ns", text,
                                                             source),
        ))
    if not programs:
        return VerdictStats((), f"no BPF program named {name} is loaded")
    return VerdictStats(tuple(programs))

