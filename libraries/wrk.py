"""wrk and wrk2: command line builder, capability probe, output parser and runner.

wrk 4.x and wrk2 share a command line and a summary format. wrk2 adds the mandatory
``-R/--rate`` (constant throughput) and an HdrHistogram ``--latency`` report. wrk2's binary is
also called ``wrk`` and its ``-v`` says 4.0.0, so the two are told apart by capability: wrk2's
usage text lists ``-R, --rate``.

Latency caveat: wrk2 run at a rate far above capacity (e.g. ``--rate 100000000``) measures
throughput only; its latency figures are then an artefact of its coordinated-omission
correction. Use latency figures only from runs at a rate below capacity.
"""

from __future__ import annotations

import logging
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal
from urllib.parse import urlsplit

from libraries.errors import CommandError, ParseError, ToolMissing
from libraries.shell import tool_command

if TYPE_CHECKING:
    from libraries.node import Node

LOG = logging.getLogger(__name__)

Flavour = Literal["wrk", "wrk2"]



def _positive_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"wrk option {name}: expected a positive integer, got {value!r}")
    return value


@dataclass(frozen=True)
class WrkOptions:
    """Parameters of one wrk/wrk2 run.

    ``url`` (http:// or https://), ``threads`` (-t), ``connections`` (-c, at least one per
    thread), ``duration`` (-d, whole seconds), ``rate`` (-R, total requests/s: required by wrk2,
    refused by wrk 4.x; ``None`` for plain wrk), ``latency`` (--latency: print percentiles),
    ``timeout`` (wrk's own --timeout in whole seconds; ``None`` keeps wrk's default of 2 s),
    ``script`` (-s, Lua script path on the node), ``headers`` (-H, e.g. ``"Connection: close"``),
    ``cpus`` (CPU list for ``taskset -c``; ``None`` leaves wrk unpinned).
    """

    url: str
    threads: int = 1
    connections: int = 10
    duration: int = 10
    rate: int | None = None
    latency: bool = False
    timeout: int | None = None
    script: str | None = None
    headers: Sequence[str] = ()
    cpus: Sequence[int] | None = None

    def __post_init__(self) -> None:
        parts = urlsplit(self.url) if isinstance(self.url, str) else None
        if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(
                f"wrk option url: expected an http:// or https:// URL with a host, "
                f"got {self.url!r}"
            )
        threads = _positive_int("threads", self.threads)
        connections = _positive_int("connections", self.connections)
        if connections < threads:
            raise ValueError(
                f"wrk option connections: expected at least one connection per thread "
                f"(connections >= threads), got connections={connections}, threads={threads}"
            )
        _positive_int("duration", self.duration)
        if self.rate is not None:
            _positive_int("rate", self.rate)
        if self.timeout is not None:
            _positive_int("timeout", self.timeout)
        if self.script is not None and (not isinstance(self.script, str) or not self.script):
            raise ValueError(f"wrk option script: expected a file path, got {self.script!r}")
        headers = tuple(self.headers)
        for header in headers:
            if not isinstance(header, str) or ":" not in header:
                raise ValueError(
                    f"wrk option headers: expected 'Name: value' strings, got {header!r}"
                )
        object.__setattr__(self, "headers", headers)
        if self.cpus is not None:
            object.__setattr__(self, "cpus", _cpu_list(self.cpus, "wrk option cpus"))


def _cpu_list(cpus: Sequence[int], what: str) -> tuple[int, ...]:
    values = tuple(cpus)
    if not values or any(
        isinstance(cpu, bool) or not isinstance(cpu, int) or cpu < 0 for cpu in values
    ):
        raise ValueError(f"{what}: expected a non-empty list of CPU numbers, got {cpus!r}")
    return values


def build_wrk_command(
    binary: str,
    options: WrkOptions,
    *,
    flavour: Flavour | None = None,
    env: Mapping[str, str] | None = None,
) -> str:
    """Shell command line running ``binary`` with ``options`` (every value quoted).

    With ``cpus`` the line starts ``taskset -c 1,2``. ``flavour`` (from :func:`probe_wrk`)
    checks the rate: wrk2 requires ``rate``, wrk 4.x has no ``-R``. ``env`` is exported to wrk
    itself (e.g. ``LD_PRELOAD`` and ``VCL_CONFIG`` for VPP's host stack), not to taskset.
    """
    if flavour == "wrk2" and options.rate is None:
        raise ValueError(f"{binary} is wrk2: option rate (-R, requests/s) is required")
    if flavour == "wrk" and options.rate is not None:
        raise ValueError(
            f"{binary} is wrk 4.x, which has no -R/--rate option; got rate={options.rate}"
        )
    argv = [
        binary,
        "-t", str(options.threads),
        "-c", str(options.connections),
        "-d", f"{options.duration}s",
    ]
    if options.rate is not None:
        argv += ["-R", str(options.rate)]
    if options.latency:
        argv.append("--latency")
    if options.timeout is not None:
        argv += ["--timeout", f"{options.timeout}s"]
    if options.script is not None:
        argv += ["-s", options.script]
    for header in options.headers:
        argv += ["-H", header]
    argv.append(options.url)
    return tool_command(argv, options.cpus, env)


def detect_wrk_flavour(help_text: str) -> Flavour:
    """``"wrk2"`` when the usage text offers ``-R, --rate``, ``"wrk"`` for wrk 4.x usage text.

    Raises :class:`ParseError` when ``help_text`` is not wrk's usage text at all.
    """
    if not re.search(r"Usage: wrk\b", help_text) or "--connections" not in help_text:
        raise ParseError("wrk --help output", "not wrk's usage text (no 'Usage: wrk')", help_text)
    if re.search(r"-R,?\s+--rate\b", help_text):
        return "wrk2"
    return "wrk"


def probe_wrk(node: Node, binary: str) -> Flavour:
    """Run ``binary --help`` on ``node`` and tell wrk from wrk2 by its options.

    ``wrk --help`` exits 1 (it prints usage for an unknown option), so the exit code is not
    checked; the usage text is. Raises :class:`ToolMissing` when the binary is not there.
    """
    command = f"{shlex.quote(binary)} --help"
    result = node.run(command, timeout=15.0, check=False)
    text = result.stdout + result.stderr
    if result.exit_code in (126, 127) or "not found" in text or "No such file" in text:
        raise ToolMissing(
            f"{node.name}: wrk binary {binary!r} is missing or not executable: {text.strip()!r}"
        )
    flavour = detect_wrk_flavour(text)
    LOG.info("%s: %s is %s", node.name, binary, flavour)
    return flavour


def choose_load_tool(node: Node, tools: Mapping[str, str]) -> tuple[str, Flavour]:
    """The HTTP load tool of a node: ``tools["wrk2"]`` when declared and answering as wrk2,
    else ``tools["wrk"]`` (probed). Returns ``(binary, flavour)``; raises ToolMissing naming
    what was tried when neither answers."""
    tried = []
    for name in ("wrk2", "wrk"):
        binary = tools.get(name)
        if binary is None:
            continue
        try:
            return binary, probe_wrk(node, binary)
        except ToolMissing as error:
            tried.append(str(error))
    raise ToolMissing(f"{node.name}: no HTTP load tool answers (declared: "
                      f"{[t for t in ('wrk2', 'wrk') if t in tools]}): {'; '.join(tried)}")


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
    (``"wrk"``/``"wrk2"`` when the output shows it, else ``None``) and ``raw`` (the text).
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

    @property
    def total_errors(self) -> int:
        """Socket errors plus non-2xx/3xx responses."""
        return self.errors.total + self.non_2xx_3xx


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
    )


def default_timeout(options: WrkOptions) -> float:
    """Hard timeout for a run: the duration plus a margin for start-up and wrk's own timeout."""
    return options.duration + max(15.0, 0.25 * options.duration) + (options.timeout or 2)


def run_wrk(
    node: Node,
    binary: str,
    options: WrkOptions,
    timeout: float | None = None,
    *,
    flavour: Flavour | None = None,
    env: Mapping[str, str] | None = None,
) -> WrkResult:
    """Run wrk on ``node`` with a hard timeout and return the parsed :class:`WrkResult`.

    ``timeout`` defaults to :func:`default_timeout`. The raw output is logged at debug level
    and kept in ``result.raw``. Raises :class:`ParseError` (quoting wrk's message, e.g.
    "unable to connect ...") when wrk printed no results, :class:`CommandError` when it
    printed results but exited non-zero, :class:`CommandTimeout` past the timeout.
    """
    command = build_wrk_command(binary, options, flavour=flavour, env=env)
    limit = default_timeout(options) if timeout is None else timeout
    result = node.run(command, timeout=limit, check=False)
    LOG.debug("%s: wrk output:\n%s%s", node.name, result.stdout, result.stderr)
    source = f"{node.name}: output of {command!r} (exit {result.exit_code})"
    text = result.stdout if "Requests/sec:" in result.stdout else result.stdout + result.stderr
    parsed = parse_wrk_output(text, source=source)
    if result.exit_code != 0:
        raise CommandError(node.name, command, result.exit_code, result.stdout, result.stderr)
    LOG.info(
        "%s: wrk %.2f req/s, %d requests in %.2f s, %d socket errors, %d non-2xx/3xx",
        node.name, parsed.requests_per_second, parsed.total_requests, parsed.duration_s,
        parsed.errors.total, parsed.non_2xx_3xx,
    )
    return parsed
