"""vegeta: a constant-rate (open-loop) HTTP(S) load generator, for latency at a known offered
rate and for the capacity search.

Open loop: vegeta sends each request at its scheduled time and starts another worker when all
are busy, so a slow response does not delay the requests behind it (no coordinated omission;
a closed-loop tool such as wrk waits and under-reports the stall: see ``utest/test_vegeta.py``
for the measured difference). One run on the node is one command: one ``vegeta attack`` per
load core (each pinned to its core, at its share of the rate, into its own results file),
then, over all the files, ``vegeta report -type=json`` (counts, rate, success, status codes,
errors, p50/p90/p99), ``-type=hdrplot`` (the percentile spectrum, for p99.9) and, where latency
limits are asked (``slo_ms``), every request's result (``vegeta encode --to csv``) counted by
``awk`` on the node: the requests that failed, and per limit the ones whose latency *from their
scheduled send time* (lateness behind the schedule plus the response time) exceeded it. Then the
files are removed. A parser given anything else raises ``ParseError`` quoting it.
"""

from __future__ import annotations

import json
import logging
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from libraries.testbed.command import TIMES_MARKER, Ledger, NodeCommand, tool_command
from libraries.testbed.errors import CommandError, ParseError, ToolMissing
from libraries.tools.open_loop import check_open_loop_options, temporary_folder

if TYPE_CHECKING:
    from libraries.testbed.node import Node

LOG = logging.getLogger(__name__)
PLOT_MARKER = "@@hoststack-hdrplot"
SLO_MARKER = "@@hoststack-slo"
_SLO_LINE = re.compile(SLO_MARKER + r" rows=(\d+) failed=(\d+) late_max_ns=(-?\d+) over=([\d,]*)$",
                       re.MULTILINE)
# Per-request results (vegeta encode --to csv: timestamp ns, code, latency ns, bytes out, bytes
# in, error, body, attack, seq, ...), read twice: first each attack's start (the earliest
# timestamp - seq x interval of an answered request), then each request's lateness behind its
# schedule (start + seq x interval) plus its latency against every limit (ns, in ``lim``). A
# row with an error may hold commas in its quoted error text, so only the fields before it are
# read from such a row (it counts as failed).
_COUNT_AWK = r"""BEGIN { FS = ","; n = split(lim, L, " ") }
FNR == NR { if ($2 >= 200 && $2 < 400 && $6 == "") { s = $1 - $9 * iv
    if (!($8 in t0) || s < t0[$8]) t0[$8] = s }
  next }
{ rows++
  if ($2 < 200 || $2 >= 400 || $6 != "") { failed++; next }
  late = $1 - $9 * iv - t0[$8]; if (late > maxlate) maxlate = late
  for (i = 1; i <= n; i++) if (late + $3 > L[i]) over[i]++ }
END { printf "%s rows=%d failed=%d late_max_ns=%.0f over=", mark, rows, failed, maxlate
  for (i = 1; i <= n; i++) printf "%s%d", (i > 1 ? "," : ""), over[i]
  printf "\n" }"""
_TIMES = re.compile(r"(\d+)m([0-9.]+)s\s+(\d+)m([0-9.]+)s")
_VERSION = re.compile(r"mod\tgithub\.com/tsenart/vegeta/v\d+\t(v[0-9.]+)")


@dataclass(frozen=True)
class VegetaOptions:
    """One attack: ``url``, ``rate`` (requests/s offered, whole), ``duration`` (s, fractions
    allowed), ``timeout`` per request (s), ``max_workers`` (concurrency cap: a path that cannot
    keep up shows as a lower achieved rate, not as an exhausted load node), ``max_connections``
    (keep-alive connections to the target: requests beyond them wait for one, and the wait
    counts in their latency, so an overloaded target does not attract a storm of TLS
    handshakes past its ``worker_connections``), ``cpus`` (one attack process per CPU, each
    pinned to it with ``taskset -c`` and given its share of the rate, workers and connections;
    none: one unpinned process) and ``slo_ms`` (latency limits to count requests against)."""

    url: str
    rate: float
    duration: float
    timeout: int = 5
    max_workers: int = 2000
    max_connections: int = 100
    cpus: Sequence[int] | None = None
    slo_ms: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        check_open_loop_options("vegeta", self, ("rate", "duration", "timeout", "max_workers",
                                                 "max_connections"))

    @property
    def processes(self) -> int:
        """Attack processes: one per CPU given, else one."""
        return len(self.cpus) if self.cpus else 1

    @property
    def intended(self) -> int:
        """Requests the schedule holds: the whole rate for the whole duration."""
        return round(round(self.rate) * self.duration)


@dataclass(frozen=True)
class VegetaResult:
    """A run's figures: ``requests`` sent, ``success`` (share of 2xx/3xx answers),
    ``send_rate`` (requests/s actually sent), ``duration_s`` of the attack, ``wait_s`` for the
    last responses, ``status_codes``, ``errors`` (vegeta's distinct error texts),
    ``percentiles`` (fraction -> seconds: 0.5, 0.9, 0.99, 0.999), ``attack_cpu_s`` (CPU time
    of the attacks, where the command measured it), ``processes`` (attack processes), the
    per-request counts where limits were asked (``failed_rows``, ``over``: per limit of
    ``slo_ms``, answered requests late by more than it, counted from their scheduled send time;
    ``max_late_s``: the worst lateness behind the schedule) and ``raw``."""

    requests: int
    success: float
    send_rate: float
    duration_s: float
    wait_s: float
    status_codes: dict[str, int]
    errors: tuple[str, ...]
    percentiles: dict[float, float]
    attack_cpu_s: float | None = None
    processes: int = 1
    slo_ms: tuple[float, ...] = ()
    failed_rows: int | None = None
    over: tuple[int, ...] = ()
    max_late_s: float | None = None
    raw: str = field(repr=False, default="")

    @property
    def failed(self) -> int:
        """Requests without a 2xx/3xx answer (errors, timeouts, other statuses)."""
        return self.requests - round(self.requests * self.success)

    @property
    def achieved(self) -> float:
        """Successful responses per second of the attack."""
        return self.requests * self.success / self.duration_s if self.duration_s else 0.0

    def over_limit(self, limit_ms: float) -> int:
        """Answered requests later than ``limit_ms`` from their scheduled send time."""
        if limit_ms not in self.slo_ms:
            raise KeyError(f"no count for {limit_ms:g} ms: counted {self.slo_ms}")
        return self.over[self.slo_ms.index(limit_ms)]


def vegeta_command(binary: str, options: VegetaOptions, workdir: str,
                   env: Mapping[str, str] | None = None,
                   cpu_ledger: str | None = None) -> NodeCommand:
    """The command of one run, a script (the attacks, their CPU time from the shell's
    ``times``, both reports, the per-request counts where limits are asked, the files
    removed): its CPU left in ``cpu_ledger`` as ``vegeta``, stopped after the duration, the
    requests' timeout and a margin (max(15 s, a quarter of the duration))."""
    quoted = shlex.quote(binary)
    count = options.processes
    rate = round(options.rate)
    lines = [*temporary_folder(workdir, "vegeta"),
             "printf '%s\\n' " + shlex.quote(f"GET {options.url}") + ' > "$d/targets"']
    for number in range(count):
        attack = tool_command([
            binary, "attack", f"-name=g{number}", f"-rate={rate}/{count}s",
            f"-duration={options.duration:g}s", f"-timeout={options.timeout}s", "-insecure",
            "-keepalive", "-http2=false", "-max-body=0", "-workers=10",
            f"-max-workers={max(1, options.max_workers // count)}",
            f"-max-connections={max(1, -(-options.max_connections // count))}"],
            cpus=[options.cpus[number]] if options.cpus else None, env=env)
        lines.append(f'{attack} -targets="$d/targets" -output="$d/{number}.bin" & '
                     f"p{number}=$!")
    waits = "; ".join(f"wait $p{n} || rc=$?" for n in range(count))
    report = (f"echo {TIMES_MARKER} && times && {quoted} report -type=json \"$d\"/*.bin && "
              f"echo {PLOT_MARKER} && {quoted} report -type=hdrplot \"$d\"/*.bin")
    if options.slo_ms:
        limits = " ".join(f"{v * 1e6:.0f}" for v in options.slo_ms)
        interval = count * 1e9 / rate
        report += (f" && {quoted} encode --to csv \"$d\"/*.bin > \"$d/results.csv\" && "
                   f"awk -v mark={SLO_MARKER} -v lim={shlex.quote(limits)} "
                   f"-v iv={interval:.3f} {shlex.quote(_COUNT_AWK)} \"$d/results.csv\" "
                   f"\"$d/results.csv\"")
    lines += [f"rc=0; {waits}",
              f"if [ $rc -eq 0 ]; then {report}; rc=$?; fi",
              "exit $rc"]
    limit = options.duration + options.timeout + max(15.0, 0.25 * options.duration)
    return NodeCommand.shell("; ".join(lines), limit,
                             ledger=Ledger(cpu_ledger, "vegeta") if cpu_ledger else None)


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


def parse_vegeta_output(text: str, source: str = "vegeta output",
                        slo_ms: Sequence[float] = (), processes: int = 1) -> VegetaResult:
    """Parse what :func:`vegeta_command` prints: the two reports and, when ``slo_ms``
    limits were asked, the per-request counts (one per limit, in that order)."""
    if PLOT_MARKER not in text:
        raise ParseError(source, f"no hdrplot report (marker {PLOT_MARKER})", text)
    report, plot = text.split(PLOT_MARKER, 1)
    counts: dict[str, Any] = {}
    if slo_ms:
        if SLO_MARKER not in plot:
            raise ParseError(source, f"no per-request counts (marker {SLO_MARKER})", text)
        plot, section = plot.split(SLO_MARKER, 1)
        counts = _slo_counts(SLO_MARKER + section, len(slo_ms), source, text)
    cpu_s = None
    if TIMES_MARKER in report:
        times, report = _split_times(report.split(TIMES_MARKER, 1)[1], source, text)
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
        processes=processes, slo_ms=tuple(float(v) for v in slo_ms), raw=text, **counts)


def _slo_counts(section: str, limits: int, source: str, text: str) -> dict[str, Any]:
    """``failed_rows``, ``over`` and ``max_late_s`` from the awk line."""
    match = _SLO_LINE.search(section)
    over = [int(v) for v in match.group(4).split(",") if v] if match else []
    if match is None or len(over) != limits:
        raise ParseError(source, f"a line '{SLO_MARKER} rows=N failed=N late_max_ns=N "
                         f"over=N,...' with {limits} counts", text)
    return {"failed_rows": int(match.group(2)), "over": tuple(over),
            "max_late_s": int(match.group(3)) / 1e9}


def _split_times(section: str, source: str, text: str) -> tuple[float, str]:
    """The attack's CPU seconds (user + system of the shell's children: the second line of
    ``times``) and the rest of ``section``."""
    lines = section.strip().splitlines()
    match = _TIMES.fullmatch(lines[1].strip()) if len(lines) > 2 else None
    if match is None:
        raise ParseError(source, f"two lines of the shell's times after {TIMES_MARKER}", text)
    minutes_u, seconds_u, minutes_s, seconds_s = match.groups()
    cpu = 60 * (int(minutes_u) + int(minutes_s)) + float(seconds_u) + float(seconds_s)
    return cpu, "\n".join(lines[2:])


def run_vegeta(node: Node, binary: str, options: VegetaOptions,
               env: Mapping[str, str] | None = None,
               cpu_ledger: str | None = None) -> VegetaResult:
    """Run one attack on ``node`` with a hard timeout and return its parsed result (the CPU
    it took goes to ``cpu_ledger`` as ``vegeta`` for the telemetry)."""
    value = vegeta_command(binary, options, node.workdir, env, cpu_ledger)
    command = value.tool_line()
    result = node.run(value, check=False)
    source = f"{node.name}: output of vegeta (exit {result.exit_code})"
    if result.exit_code != 0 and PLOT_MARKER not in result.stdout:
        raise CommandError(node.where, command, result.exit_code, result.stdout, result.stderr)
    parsed = parse_vegeta_output(result.stdout, source, options.slo_ms, options.processes)
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
