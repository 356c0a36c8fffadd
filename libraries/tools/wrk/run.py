"""wrk and wrk2: command line builder, capability probe and runner (parser: ``output``).

wrk 4.x and wrk2 share a command line and a summary format. wrk2 adds the mandatory
``-R/--rate`` (constant throughput) and an HdrHistogram ``--latency`` report. wrk2's binary is
also called ``wrk`` and its ``-v`` says 4.0.0, so the two are told apart by capability: wrk2's
usage text lists ``-R, --rate``.

Latency caveat: wrk2 run at a rate far above capacity (e.g. :data:`CLOSED_LOOP_RATE`) measures
throughput only; its latency figures are then an artefact of its coordinated-omission
correction. Use latency figures only from runs at a rate below capacity.
"""

from __future__ import annotations

import logging
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from libraries.testbed.command import Ledger, NodeCommand
from libraries.testbed.errors import CommandError, ParseError, ToolMissing
from libraries.tools.cpu import before_times, children_cpu_s
from libraries.tools.wrk.output import Flavour, WrkResult, parse_wrk_output

if TYPE_CHECKING:
    from libraries.testbed.node import Node

LOG = logging.getLogger(__name__)




def _positive_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"wrk option {name}: expected a positive integer, got {value!r}")
    return value


THREADS = 1
"""wrk's ``-t`` unless a caller gives another (the seeds run one thread)."""
CONNECTIONS = 10
"""wrk's ``-c`` unless a caller gives another (the seeds' 10)."""
CLOSED_LOOP_RATE = 100000000
"""wrk2's ``-R`` for a closed-loop maximum (as the seeds run it): far above any rate it
reaches, so it paces nothing. Plain wrk takes no ``-R`` (:func:`closed_loop_rate`)."""


def closed_loop_rate(flavour: Flavour) -> int | None:
    """The ``rate`` of a closed-loop run: :data:`CLOSED_LOOP_RATE` for wrk2, None for wrk."""
    return CLOSED_LOOP_RATE if flavour == "wrk2" else None


@dataclass(frozen=True)
class WrkOptions:
    """Parameters of one wrk/wrk2 run.

    ``url`` (http:// or https://), ``threads`` (-t; one unless given, as the seeds run it),
    ``connections`` (-c, at least one per thread), ``duration`` (-d, whole seconds), ``rate``
    (-R, total requests/s: required by wrk2, refused by wrk 4.x; ``None`` for plain wrk),
    ``latency`` (--latency: print percentiles),
    ``request_timeout`` (wrk's own ``--timeout``, a response's, in whole seconds; ``None``
    keeps wrk's default of 2 s; not the run's hard timeout, which :func:`wrk_command` takes),
    ``script`` (-s, Lua script path on the node), ``headers`` (-H, e.g. ``"Connection: close"``),
    ``cpus`` (CPU list for ``taskset -c``; ``None`` leaves wrk unpinned).
    """

    url: str
    threads: int = THREADS
    connections: int = CONNECTIONS
    duration: int = 10
    rate: int | None = None
    latency: bool = False
    request_timeout: int | None = None
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
        if self.request_timeout is not None:
            _positive_int("request_timeout", self.request_timeout)
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


def wrk_command(
    binary: str,
    options: WrkOptions,
    timeout: float | None = None,
    *,
    flavour: Flavour | None = None,
    env: Mapping[str, str] | None = None,
    cpu_ledger: str | None = None,
    cpu_times: bool = False,
) -> NodeCommand:
    """The command running ``binary`` with ``options``: argv ``<binary> -t <threads> -c
    <connections> -d <duration>s [-R <rate>] [--latency] [--timeout <t>s] [-s <script>]
    [-H <header>]... <url>``, pinned to ``options.cpus``, ``env`` for wrk itself (e.g.
    ``LD_PRELOAD`` and ``VCL_CONFIG`` for VPP's host stack), its CPU left in ``cpu_ledger``
    as ``wrk``, timed with ``cpu_times``, stopped after ``timeout`` (default
    :func:`default_timeout`: the duration + max(15 s, a quarter of it) + wrk's own timeout,
    2 s unless given). ``Node.run`` renders it (:meth:`NodeCommand.rendered
    <libraries.testbed.command.NodeCommand.rendered>`).

    ``flavour`` (from :func:`probe_wrk`) checks the rate: wrk2 requires ``rate``, wrk 4.x has
    no ``-R``.
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
    if options.request_timeout is not None:
        argv += ["--timeout", f"{options.request_timeout}s"]
    if options.script is not None:
        argv += ["-s", options.script]
    for header in options.headers:
        argv += ["-H", header]
    argv.append(options.url)
    return NodeCommand(tuple(argv), default_timeout(options) if timeout is None else timeout,
                       tuple(options.cpus or ()), tuple((env or {}).items()),
                       Ledger(cpu_ledger, "wrk") if cpu_ledger else None, cpu_times)


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


CLOSED_LOOP_ORDER = ("wrk", "wrk2")
"""The closed-loop load tool: wrk where declared, wrk2 (at :data:`CLOSED_LOOP_RATE`, as the seeds
run it) only where it is all a node has. wrk2 at that rate starts its connections late: 1 s
trials here completed 1-2 requests (0.96 and 1.94 requests/s against 5.4k-6.1k direct, the
proxy and the server idle), and 2 s runs half their schedule in 3 of 20 (benchmarks/README);
a closed-loop rate read over the run's whole duration takes that start as the system's."""


def choose_load_tool(node: Node, tools: Mapping[str, str]) -> tuple[str, Flavour]:
    """The closed-loop HTTP load tool of a node (:data:`CLOSED_LOOP_ORDER`): ``tools["wrk"]``
    when declared and answering, else ``tools["wrk2"]`` (probed: a ``wrk`` entry that is
    wrk2's binary runs as wrk2). Returns ``(binary, flavour)``; raises ToolMissing naming
    what was tried when neither answers."""
    tried = []
    for name in CLOSED_LOOP_ORDER:
        binary = tools.get(name)
        if binary is None:
            continue
        try:
            return binary, probe_wrk(node, binary)
        except ToolMissing as error:
            tried.append(str(error))
    raise ToolMissing(f"{node.name}: no HTTP load tool answers (declared: "
                      f"{[t for t in CLOSED_LOOP_ORDER if t in tools]}): {'; '.join(tried)}")



def default_timeout(options: WrkOptions) -> float:
    """Hard timeout for a run: the duration plus a margin for start-up and wrk's own timeout."""
    return options.duration + max(15.0, 0.25 * options.duration) + (options.request_timeout or 2)


def run_wrk(
    node: Node,
    binary: str,
    options: WrkOptions,
    timeout: float | None = None,
    *,
    flavour: Flavour | None = None,
    env: Mapping[str, str] | None = None,
    cpu_ledger: str | None = None,
    cpu_times: bool = False,
) -> WrkResult:
    """Run wrk on ``node`` with a hard timeout and return the parsed :class:`WrkResult`.

    ``timeout`` defaults to :func:`default_timeout`. The raw output is logged at debug level
    and kept in ``result.raw``. Raises :class:`ParseError` (quoting wrk's message, e.g.
    "unable to connect ...") when wrk printed no results, :class:`CommandError` when it
    printed results but exited non-zero, :class:`CommandTimeout` past the timeout. With
    ``cpu_ledger`` (a directory on the node) wrk's CPU time is left there as ``wrk`` for the
    next telemetry snapshot; with ``cpu_times`` it is also read back into ``cpu_s`` (the
    shell's ``times`` after wrk ended: a constant-rate trial's generator share).
    """
    value = wrk_command(binary, options, timeout, flavour=flavour, env=env,
                        cpu_ledger=cpu_ledger, cpu_times=cpu_times)
    command = value.tool_line()
    result = node.run(value, check=False)
    LOG.debug("%s: wrk output:\n%s%s", node.name, result.stdout, result.stderr)
    source = f"{node.name}: output of {command!r} (exit {result.exit_code})"
    cpu_s = children_cpu_s(result.stdout, source) if cpu_times else None
    stdout = before_times(result.stdout)
    text = stdout if "Requests/sec:" in stdout else stdout + result.stderr
    parsed = replace(parse_wrk_output(text, source=source), cpu_s=cpu_s)
    if result.exit_code != 0:
        raise CommandError(node.name, command, result.exit_code, stdout, result.stderr)
    LOG.info(
        "%s: wrk %.2f req/s, %d requests in %.2f s, %d socket errors, %d non-2xx/3xx",
        node.name, parsed.requests_per_second, parsed.total_requests, parsed.duration_s,
        parsed.errors.total, parsed.non_2xx_3xx,
    )
    return parsed
