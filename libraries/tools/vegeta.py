"""vegeta: a constant-rate (open-loop) HTTP(S) load generator, for latency at a known offered
rate and for the capacity search.

Open loop: vegeta sends each request at its scheduled time and starts another worker when all
are busy, so a slow response does not delay the requests behind it (no coordinated omission;
a closed-loop tool such as wrk waits and under-reports the stall: see ``utest/test_vegeta.py``
for the measured difference). One run on the node is one command: ``vegeta attack`` into a
results file, then ``vegeta report -type=json`` (counts, rate, success, status codes, errors,
p50/p90/p99) and ``-type=hdrplot`` (the percentile spectrum, for p99.9), then the file is
removed. A parser given anything else raises ``ParseError`` quoting it.
"""

from __future__ import annotations

import json
import logging
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from libraries.testbed.errors import CommandError, ParseError, ToolMissing
from libraries.testbed.shell import tool_command
from libraries.tools.cpu import accounted_command

if TYPE_CHECKING:
    from libraries.testbed.node import Node

LOG = logging.getLogger(__name__)
PLOT_MARKER = "@@hoststack-hdrplot"
CPU_MARKER = "@@hoststack-cpu"
_TIMES = re.compile(r"(\d+)m([0-9.]+)s\s+(\d+)m([0-9.]+)s")
_VERSION = re.compile(r"mod\tgithub\.com/tsenart/vegeta/v\d+\t(v[0-9.]+)")


@dataclass(frozen=True)
class VegetaOptions:
    """One attack: ``url``, ``rate`` (requests/s, offered), ``duration`` (s), ``timeout`` per
    request (s), ``max_workers`` (concurrency cap: a path that cannot keep up shows as a lower
    achieved rate, not as an exhausted load node), ``max_connections`` (keep-alive connections
    to the target: requests beyond them wait for one, and the wait counts in their latency,
    so an overloaded target does not attract a storm of TLS handshakes past its
    ``worker_connections``), ``cpus`` (``taskset -c``)."""

    url: str
    rate: float
    duration: int
    timeout: int = 5
    max_workers: int = 2000
    max_connections: int = 100
    cpus: Sequence[int] | None = None

    def __post_init__(self) -> None:
        parts = urlsplit(self.url) if isinstance(self.url, str) else None
        if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"vegeta option url: expected an http:// or https:// URL with a "
                             f"host, got {self.url!r}")
        for name in ("rate", "duration", "timeout", "max_workers", "max_connections"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                raise ValueError(f"vegeta option {name}: expected a positive number, got "
                                 f"{value!r}")
        if self.cpus is not None:
            object.__setattr__(self, "cpus", tuple(int(c) for c in self.cpus))


@dataclass(frozen=True)
class VegetaResult:
    """A run's figures: ``requests`` sent, ``success`` (share of 2xx/3xx answers),
    ``send_rate`` (requests/s actually sent), ``duration_s`` of the attack, ``wait_s`` for the
    last responses, ``status_codes``, ``errors`` (vegeta's distinct error texts),
    ``percentiles`` (fraction -> seconds: 0.5, 0.9, 0.99, 0.999), ``attack_cpu_s`` (CPU time
    of the attack, where the command measured it) and ``raw``."""

    requests: int
    success: float
    send_rate: float
    duration_s: float
    wait_s: float
    status_codes: dict[str, int]
    errors: tuple[str, ...]
    percentiles: dict[float, float]
    attack_cpu_s: float | None = None
    raw: str = field(repr=False, default="")

    @property
    def failed(self) -> int:
        """Requests without a 2xx/3xx answer (errors, timeouts, other statuses)."""
        return self.requests - round(self.requests * self.success)

    @property
    def achieved(self) -> float:
        """Successful responses per second of the attack."""
        return self.requests * self.success / self.duration_s if self.duration_s else 0.0


def build_vegeta_command(binary: str, options: VegetaOptions, workdir: str,
                         env: Mapping[str, str] | None = None) -> str:
    """The shell command of one run (attack, its CPU time from the shell's ``times``, both
    reports, results file removed)."""
    attack = tool_command([
        binary, "attack", f"-rate={options.rate:.0f}/1s", f"-duration={options.duration}s",
        f"-timeout={options.timeout}s", "-insecure", "-keepalive", "-http2=false",
        "-workers=10", f"-max-workers={options.max_workers}",
        f"-max-connections={options.max_connections}"],
        cpus=options.cpus, env=env)
    quoted = shlex.quote(binary)
    target = shlex.quote(f"GET {options.url}")
    # the results file: unique per run (mktemp), removed whatever the outcome
    return (f"out=$(mktemp {shlex.quote(workdir)}/vegeta.XXXXXX) && "
            f"{{ printf '%s\\n' {target} | {attack} > \"$out\" && echo {CPU_MARKER} && "
            f"times && {quoted} report -type=json \"$out\" && echo {PLOT_MARKER} && "
            f"{quoted} report -type=hdrplot \"$out\"; }}; rc=$?; rm -f \"$out\"; exit $rc")


def _number(data: dict[str, Any], key: str, source: str, text: str) -> float:
    value = data.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ParseError(source, f"report field {key!r}: expected a number, got {value!r}",
                         text)
    return float(value)


def _plot(lines: list[str], source: str, text: str) -> list[tuple[float, float]]:
    """(percentile, seconds) rows of an hdrplot report."""
    rows = []
    for line in lines:
        parts = line.split()
        if not parts or parts[0].startswith("Value"):
            continue
        try:
            rows.append((float(parts[1]), float(parts[0]) / 1000.0))
        except (IndexError, ValueError):
            raise ParseError(source, f"hdrplot rows of numbers, got {line!r}", text) from None
    if not rows:
        raise ParseError(source, "an empty hdrplot report", text)
    return rows


def parse_vegeta_output(text: str, source: str = "vegeta output") -> VegetaResult:
    """Parse the two reports :func:`build_vegeta_command` prints."""
    if PLOT_MARKER not in text:
        raise ParseError(source, f"no hdrplot report (marker {PLOT_MARKER})", text)
    report, plot = text.split(PLOT_MARKER, 1)
    cpu_s = None
    if CPU_MARKER in report:
        times, report = _split_times(report.split(CPU_MARKER, 1)[1], source, text)
        cpu_s = times
    try:
        data = json.loads(report)
    except ValueError:
        raise ParseError(source, "the JSON report is not JSON", text) from None
    if not isinstance(data, dict) or not isinstance(data.get("latencies"), dict):
        raise ParseError(source, "a JSON report with 'latencies'", text)
    requests = _number(data, "requests", source, text)
    if requests < 1:
        raise ParseError(source, "no request was sent", text)
    rows = _plot(plot.strip().splitlines(), source, text)
    latencies = data["latencies"]
    percentiles = {q: _number(latencies, key, source, text) / 1e9
                   for q, key in ((0.5, "50th"), (0.9, "90th"), (0.99, "99th"))}
    percentiles[0.999] = next((value for q, value in rows if q >= 0.999), rows[-1][1])
    codes = data.get("status_codes") or {}
    errors = data.get("errors") or []
    if not isinstance(codes, dict) or not isinstance(errors, list):
        raise ParseError(source, "status_codes as an object and errors as a list", text)
    return VegetaResult(
        requests=int(requests), success=_number(data, "success", source, text),
        send_rate=_number(data, "rate", source, text),
        duration_s=_number(data, "duration", source, text) / 1e9,
        wait_s=_number(data, "wait", source, text) / 1e9,
        status_codes={str(k): int(v) for k, v in codes.items()},
        errors=tuple(str(e) for e in errors), percentiles=percentiles, attack_cpu_s=cpu_s,
        raw=text)


def _split_times(section: str, source: str, text: str) -> tuple[float, str]:
    """The attack's CPU seconds (user + system of the shell's children: the second line of
    ``times``) and the rest of ``section``."""
    lines = section.strip().splitlines()
    match = _TIMES.fullmatch(lines[1].strip()) if len(lines) > 2 else None
    if match is None:
        raise ParseError(source, f"two lines of the shell's times after {CPU_MARKER}", text)
    minutes_u, seconds_u, minutes_s, seconds_s = match.groups()
    cpu = 60 * (int(minutes_u) + int(minutes_s)) + float(seconds_u) + float(seconds_s)
    return cpu, "\n".join(lines[2:])


def run_vegeta(node: Node, binary: str, options: VegetaOptions,
               env: Mapping[str, str] | None = None,
               cpu_ledger: str | None = None) -> VegetaResult:
    """Run one attack on ``node`` with a hard timeout and return its parsed result (the CPU
    it took goes to ``cpu_ledger`` as ``vegeta`` for the telemetry)."""
    command = build_vegeta_command(binary, options, node.workdir, env)
    wrapped = accounted_command(command, cpu_ledger, "vegeta") if cpu_ledger else command
    limit = options.duration + options.timeout + max(15.0, 0.25 * options.duration)
    result = node.run(wrapped, timeout=limit, check=False)
    source = f"{node.name}: output of vegeta (exit {result.exit_code})"
    if result.exit_code != 0 and PLOT_MARKER not in result.stdout:
        raise CommandError(node.where, command, result.exit_code, result.stdout, result.stderr)
    parsed = parse_vegeta_output(result.stdout, source)
    LOG.info("%s: vegeta %.0f req/s offered, %.0f achieved, p99 %.3g ms, %d failed",
             node.name, options.rate, parsed.achieved, parsed.percentiles[0.99] * 1e3,
             parsed.failed)
    return parsed


def vegeta_version(node: Node, binary: str) -> str:
    """vegeta's module version, read from the build information in its binary (``vegeta
    -version`` prints nothing of it when built with ``go install``); :class:`ToolMissing`
    when the binary is absent."""
    quoted = shlex.quote(binary)
    script = (f"b={quoted}; [ -x \"$b\" ] || b=$(command -v {quoted}) || exit 3; "
              "grep -a -o -m 1 'mod.github.com/tsenart/vegeta/v[0-9]*.v[0-9.]*' \"$b\"")
    result = node.run(script, timeout=20, check=False, quiet=True)
    if result.exit_code == 3:
        raise ToolMissing(f"vegeta not installed on {node.name}: {binary} missing (./setup.sh "
                          "installs it with go install)")
    found = _VERSION.search(result.stdout)
    return found.group(1) if found else "unknown (no module version in the binary)"
