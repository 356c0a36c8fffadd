"""wrk and wrk2 output: the typed result and the parser of both tools' summaries.

wrk 4.x and wrk2 print the same summary (``Requests/sec:``, ``Transfer/sec:``, thread stats,
socket errors); their ``--latency`` reports differ (wrk: ``50%  216.00us``; wrk2: an HdrHistogram
with ``50.000%    1.33ms``). wrk2 prints ``-nan`` for statistics of short runs: those fields are
``None``, never zero. Anything without a summary raises :class:`ParseError` quoting the text.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from libraries.testbed.errors import ParseError

Flavour = Literal["wrk", "wrk2"]


@dataclass(frozen=True)
class WrkErrors:
    """wrk's ``Socket errors:`` line: ``connect``, ``read``, ``write``, ``timeout`` counts."""

    connect: int = 0
    read: int = 0
    write: int = 0
    timeout: int = 0

    @property
    def total(self) -> int:
        """Sum of the four counts."""
        return self.connect + self.read + self.write + self.timeout


@dataclass(frozen=True)
class WrkResult:
    """Parsed wrk/wrk2 summary. Times are seconds, sizes bytes, rates per second.

    Fields: ``requests_per_second`` and ``transfer_bytes_per_second`` (the ``Requests/sec:``
    and ``Transfer/sec:`` lines), ``total_requests``, ``total_bytes`` (bytes read, as precise as
    wrk's 2-decimal print), ``duration_s``, ``latency_avg_s`` / ``latency_stdev_s`` /
    ``latency_max_s`` and ``thread_req_per_sec`` (per-thread average; each ``None`` where wrk
    printed nan), ``percentiles`` (percent -> seconds, e.g. ``{50.0: 0.000151, 99.9: ...}``;
    empty without --latency), ``errors`` (:class:`WrkErrors`), ``non_2xx_3xx`` (0 when the line
    is absent, as wrk omits it then), ``threads``, ``connections``, ``url``, ``flavour``
    (``"wrk"``/``"wrk2"`` when the output shows it, else ``None``), ``raw`` (the text) and
    ``cpu_s``: wrk's own CPU seconds where the run was timed (:func:`run_wrk`'s ``cpu_times``).
    """

    requests_per_second: float
    transfer_bytes_per_second: float
    total_requests: int
    total_bytes: float
    duration_s: float
    latency_avg_s: float | None
    latency_stdev_s: float | None
    latency_max_s: float | None
    thread_req_per_sec: float | None
    percentiles: dict[float, float] = field(hash=False)
    errors: WrkErrors
    non_2xx_3xx: int
    threads: int
    connections: int
    url: str | None
    flavour: Flavour | None
    raw: str = field(default="", repr=False, compare=False)
    spectrum: tuple[tuple[float, int], ...] = field(default=(), repr=False, compare=False)
    cpu_s: float | None = field(default=None, compare=False)

    @property
    def total_errors(self) -> int:
        """Socket errors plus non-2xx/3xx responses."""
        return self.errors.total + self.non_2xx_3xx

    def over(self, limit_s: float) -> int:
        """Completed requests whose latency exceeded ``limit_s``, from wrk2's corrected
        histogram (its "Detailed Percentile spectrum": value, and the count of recorded
        requests up to it): the recorded count above the last value within the limit, scaled to
        every completed request when the histogram holds only part of the run (wrk2 resets it
        after its calibration, ~10 s in). ``ValueError`` when the output has no spectrum."""
        if not self.spectrum:
            raise ValueError("no latency spectrum: run wrk2 with --latency")
        recorded = self.spectrum[-1][1]
        within = max((count for value, count in self.spectrum if value <= limit_s), default=0)
        return round((recorded - within) / recorded * self.total_requests) if recorded else 0


_TIME_UNITS = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_SIZE_UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4, "P": 1024**5}
_COUNT_UNITS = {"": 1, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
_NAN = ("nan", "-nan", "+nan")
_NUMBER = r"(\d+(?:\.\d+)?)"


class _Parser:
    """Helpers that quote the whole output in every error."""

    def __init__(self, text: str, source: str):
        self.text = text
        self.source = source

    def fail(self, problem: str) -> ParseError:
        return ParseError(self.source, problem, self.text)

    def _scaled(self, token: str, pattern: str, units: Mapping[str, float], what: str) -> float:
        match = re.fullmatch(_NUMBER + pattern, token)
        if not match:
            raise self.fail(f"{what} {token!r} is not a number with a known unit")
        return float(match.group(1)) * units[match.group(2)]

    def time(self, token: str, what: str) -> float:
        return self._scaled(token, r"(us|ms|s|m|h)", _TIME_UNITS, what)

    def size(self, token: str, what: str) -> float:
        return self._scaled(token, r"([KMGTP]?)B", _SIZE_UNITS, what)

    def count(self, token: str, what: str) -> float:
        return self._scaled(token, r"([kMGTP]?)", _COUNT_UNITS, what)

    def number(self, token: str, what: str) -> float:
        match = re.fullmatch(_NUMBER, token)
        if not match:
            raise self.fail(f"{what} {token!r} is not a number")
        return float(match.group(1))

    def optional_time(self, token: str, what: str) -> float | None:
        # wrk2 prints nan with a unit when nothing was recorded: "-nanus", "nanms"
        bare = re.sub(r"(us|ms|s|m|h)$", "", token.lower())
        return None if bare in _NAN else self.time(token, what)

    def optional_count(self, token: str, what: str) -> float | None:
        return None if token.lower() in _NAN else self.count(token, what)


def _check_for_tool_error(parser: _Parser, lines: list[str]) -> None:
    """Name wrk's own complaint when it printed one instead of results."""
    if any(line.startswith("Usage: wrk") for line in lines):
        raise parser.fail("wrk printed its usage text: it rejected the command line")
    if not any(line.startswith("Requests/sec:") for line in lines):
        for line in lines:
            if re.match(r"(unable to |invalid URL|unsupported |PANIC|.*: No such file)", line):
                raise parser.fail(f"wrk reported an error instead of results: {line!r}")


def _stats_row(lines: list[str], name: str) -> list[str] | None:
    for line in lines:
        tokens = line.split()
        if len(tokens) == 5 and tokens[0] == name:
            return tokens[1:]
    return None


def _percentiles(parser: _Parser, lines: list[str]) -> dict[float, float]:
    """The block under ``Latency Distribution`` (wrk) or its HdrHistogram summary (wrk2)."""
    result: dict[float, float] = {}
    for index, line in enumerate(lines):
        if line.startswith("Latency Distribution"):
            for row in lines[index + 1:]:
                match = re.fullmatch(r"(\d+(?:\.\d+)?)%\s+(\S+)", row)
                if not match:
                    break
                result[float(match.group(1))] = parser.time(
                    match.group(2), f"latency percentile {match.group(1)}%"
                )
            if not result:
                raise parser.fail("'Latency Distribution' is not followed by percentile lines")
            break
    return result


def _spectrum(parser: _Parser, lines: list[str]) -> tuple[tuple[float, int], ...]:
    """wrk2's "Detailed Percentile spectrum": (value in seconds, recorded count up to it) per
    row, checked against its ``Total count`` line."""
    try:
        start = lines.index("Detailed Percentile spectrum:")
    except ValueError:
        return ()
    rows: list[tuple[float, int]] = []
    for line in lines[start + 1:]:
        tokens = line.split()
        if not tokens or tokens[0] == "Value":
            continue
        if line.startswith("#["):
            break
        if len(tokens) != 4:
            raise parser.fail(f"a spectrum row of value, percentile, count, 1/(1-p): {line!r}")
        rows.append((parser.number(tokens[0], "spectrum value") / 1000.0,
                     int(parser.number(tokens[2], "spectrum count"))))
    total = re.search(r"Total count\s+=\s+(\d+)\]", "\n".join(lines[start:]))
    if not rows or total is None or int(total.group(1)) != rows[-1][1]:
        raise parser.fail("a percentile spectrum ending in its 'Total count' line")
    return tuple(rows)


def _flavour(lines: list[str], percentiles_wrk_form: bool) -> Flavour | None:
    for line in lines:
        if (
            line.startswith(("Thread calibration:", "Initialised "))
            or "HdrHistogram" in line
        ):
            return "wrk2"
    return "wrk" if percentiles_wrk_form else None


def parse_wrk_output(text: str, source: str = "wrk output") -> WrkResult:
    """Parse the summary that wrk 4.x or wrk2 prints at the end of a run.

    Understands both percentile forms (wrk ``50%  216.00us``; wrk2 ``50.000%    1.33ms``, from
    the "Latency Distribution" summary only, not the detailed spectrum), units us/ms/s/m/h,
    B/KB/MB/GB (1024 multiples) and k/M counts. ``nan``/``-nan`` statistics (wrk2 short runs)
    become ``None``. Raises :class:`ParseError` quoting ``text`` when wrk printed an error or
    its usage, when a required line (threads and connections, Latency, Req/Sec, requests in,
    Requests/sec, Transfer/sec) is missing, or when a value is not a number with a unit.
    ``source`` names the output in error messages (e.g. node and command).
    """
    parser = _Parser(text, source)
    lines = [line.strip() for line in text.splitlines()]
    _check_for_tool_error(parser, lines)

    def find(pattern: str, what: str) -> re.Match[str]:
        for line in lines:
            match = re.fullmatch(pattern, line)
            if match:
                return match
        raise parser.fail(f"no {what} line (truncated or not wrk output?)")

    rps = find(r"Requests/sec:\s+(\S+)", "'Requests/sec:'")
    transfer = find(r"Transfer/sec:\s+(\S+)", "'Transfer/sec:'")
    totals = find(r"(\d+) requests in (\S+), (\S+) read", "'N requests in T, S read'")
    setup = find(r"(\d+) threads and (\d+) connections", "'N threads and M connections'")
    running = re.search(r"^Running \S+ test @ (\S+)", text, re.MULTILINE)
    latency = _stats_row(lines, "Latency")
    req_sec = _stats_row(lines, "Req/Sec")
    if latency is None or req_sec is None:
        raise parser.fail("no 'Latency' / 'Req/Sec' thread statistics lines")
    socket = re.search(
        r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", text
    )
    if socket is None and "Socket errors" in text:
        raise parser.fail("malformed 'Socket errors:' line")
    non_2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    if non_2xx is None and "Non-2xx" in text:
        raise parser.fail("malformed 'Non-2xx or 3xx responses:' line")

    duration = parser.time(totals.group(2), "duration")
    if duration <= 0:
        raise parser.fail(f"run duration {totals.group(2)!r} is not positive")
    percentiles = _percentiles(parser, lines)
    wrk_form = any(re.fullmatch(r"\d+%\s+\S+", line) for line in lines)
    return WrkResult(
        requests_per_second=parser.number(rps.group(1), "Requests/sec"),
        transfer_bytes_per_second=parser.size(transfer.group(1), "Transfer/sec"),
        total_requests=int(totals.group(1)),
        total_bytes=parser.size(totals.group(3), "bytes read"),
        duration_s=duration,
        latency_avg_s=parser.optional_time(latency[0], "latency average"),
        latency_stdev_s=parser.optional_time(latency[1], "latency stdev"),
        latency_max_s=parser.optional_time(latency[2], "latency max"),
        thread_req_per_sec=parser.optional_count(req_sec[0], "Req/Sec average"),
        percentiles=percentiles,
        errors=WrkErrors(*(int(value) for value in socket.groups())) if socket else WrkErrors(),
        non_2xx_3xx=int(non_2xx.group(1)) if non_2xx else 0,
        threads=int(setup.group(1)),
        connections=int(setup.group(2)),
        url=running.group(1) if running else None,
        flavour=_flavour(lines, wrk_form),
        raw=text,
        spectrum=_spectrum(parser, lines),
    )

