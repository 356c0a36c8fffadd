"""oha: a constant-rate HTTP(S) load generator in Rust, for the capacity search where vegeta's
CPU per request would set the pace (it costs about half of vegeta's per HTTPS request on the
2-core VM: 14-16 us against 32-34 us, so one core offers ~45k requests/s instead of ~30k).

Open loop with ``-q RATE --latency-correction``: each request's latency counts from its
scheduled send time. One run on the node is one command: one ``oha`` per load core (each
pinned to its core, at its share of the rate and connections, ``-w`` so requests in flight at
the deadline are answered), writing every answered request (``--output-format csv``:
start, DNS, dial-up, first byte, duration, bytes, status) to a file; then ``awk`` counts, over
all the files, the answers, the failed ones (not 2xx/3xx) and per latency limit the ones later
than it, and ``sort`` gives the percentiles. oha lists only answered requests, so a request
that failed to connect or was never sent is simply missing: it counts against the schedule.
A parser given anything else raises ``ParseError`` quoting it.
"""

from __future__ import annotations

import logging
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from libraries.testbed.command import TIMES_MARKER, Ledger, NodeCommand, tool_command
from libraries.testbed.errors import CommandError, ParseError, ToolMissing
from libraries.tools.cpu import children_cpu_s
from libraries.tools.open_loop import check_open_loop_options, temporary_folder

if TYPE_CHECKING:
    from libraries.testbed.node import Node

LOG = logging.getLogger(__name__)
COUNT_MARKER = "@@hoststack-oha"
_VALUE = r"(nan|\d+(?:\.\d*)?(?:e[+-]?\d+)?)"
_COUNTS = re.compile(COUNT_MARKER + r" answered=(\d+) failed=(\d+) over=([\d,]*) "
                     rf"p50={_VALUE} p90={_VALUE} p99={_VALUE} p999={_VALUE}$", re.MULTILINE)
_VERSION = re.compile(r"^oha (\d+\.\d+\.\d+)\s*$", re.MULTILINE)
# Over every CSV file (header lines skipped): answers, failed ones, and per limit (seconds, in
# ``lim``) the 2xx/3xx answers whose corrected duration exceeded it; the durations of every
# answer go to ``durations`` for the percentiles.
_COUNT_AWK = r"""BEGIN { FS = ","; n = split(lim, L, " ") }
FNR == 1 { next }
{ answered++
  if ($7 < 200 || $7 >= 400) { failed++; next }
  print $5 > out
  for (i = 1; i <= n; i++) if ($5 > L[i]) over[i]++ }
END { printf "%s answered=%d failed=%d over=", mark, answered, failed
  for (i = 1; i <= n; i++) printf "%s%d", (i > 1 ? "," : ""), over[i]
  printf " " }"""
_PERCENTILES_AWK = r"""{ v[NR] = $1 }
END { if (NR == 0) { printf "p50=nan p90=nan p99=nan p999=nan\n"; exit }
  split("0.5 0.9 0.99 0.999", q, " "); split("p50 p90 p99 p999", name, " ")
  for (i = 1; i <= 4; i++) { k = int(q[i] * NR + 0.999999); if (k < 1) k = 1
    printf "%s%s=%s", (i > 1 ? " " : ""), name[i], v[k] }
  printf "\n" }"""


@dataclass(frozen=True)
class OhaOptions:
    """One run: ``url``, ``rate`` (requests/s, whole), ``duration`` (s, fractions allowed),
    ``connections`` (keep-alive connections in all, shared by the processes), ``cpus`` (one
    process per CPU, pinned; none: one unpinned process), ``slo_ms`` (latency limits)."""

    url: str
    rate: float
    duration: float
    connections: int = 10
    cpus: Sequence[int] | None = None
    slo_ms: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        check_open_loop_options("oha", self, ("rate", "duration", "connections"))

    @property
    def processes(self) -> int:
        """oha processes: one per CPU given, else one."""
        return len(self.cpus) if self.cpus else 1


@dataclass(frozen=True)
class OhaResult:
    """A run's counts: ``answered`` requests (in the CSV), ``failed`` (answered, not
    2xx/3xx), ``over`` (per limit of ``slo_ms``: good answers later than it from their
    schedule), ``percentiles`` of the answers (fraction -> seconds; None without answers),
    ``cpu_s`` (CPU time of the oha processes), ``processes`` and ``raw``."""

    answered: int
    failed: int
    slo_ms: tuple[float, ...]
    over: tuple[int, ...]
    percentiles: dict[float, float | None]
    cpu_s: float | None
    processes: int
    raw: str = field(repr=False, default="")

    def over_limit(self, limit_ms: float) -> int:
        """Good answers later than ``limit_ms`` from their scheduled send time."""
        if limit_ms not in self.slo_ms:
            raise KeyError(f"no count for {limit_ms:g} ms: counted {self.slo_ms}")
        return self.over[self.slo_ms.index(limit_ms)]


def oha_command(binary: str, options: OhaOptions, workdir: str,
                cpu_ledger: str | None = None) -> NodeCommand:
    """The command of one run, a script (see the module docstring): its CPU left in
    ``cpu_ledger`` as ``oha``, stopped after the duration, 30 s and a quarter of the duration.
    oha runs on the kernel stack only: it is never given VPP's LD_PRELOAD environment."""
    count = options.processes
    rate = round(options.rate)
    lines = temporary_folder(workdir, "oha")
    for number in range(count):
        share = rate / count
        argv = [binary, "-z", f"{options.duration:g}s", "-q", f"{share:g}",
                "--latency-correction", "-c", str(max(1, -(-options.connections // count))),
                "-w", "--insecure", "--no-tui", "--output-format", "csv",
                "-o", f"@OUT{number}@", options.url]
        command = tool_command(argv, cpus=[options.cpus[number]] if options.cpus else None
                               ).replace(f"@OUT{number}@", f'"$d/{number}.csv"')
        lines.append(f"{command} & p{number}=$!")
    waits = "; ".join(f"wait $p{n} || rc=$?" for n in range(count))
    limits = " ".join(f"{v / 1e3:.9g}" for v in options.slo_ms)
    report = (f"echo {TIMES_MARKER} && times && awk -v mark={COUNT_MARKER} "
              f"-v lim={shlex.quote(limits)} -v out=\"$d/durations\" "
              f"{shlex.quote(_COUNT_AWK)} \"$d\"/*.csv && touch \"$d/durations\" && "
              f"sort -g \"$d/durations\" | awk {shlex.quote(_PERCENTILES_AWK)}")
    lines += [f"rc=0; {waits}", f"if [ $rc -eq 0 ]; then {report}; rc=$?; fi",
              "exit $rc"]
    return NodeCommand.shell("; ".join(lines), options.duration + 30.0 + 0.25 * options.duration,
                             ledger=Ledger(cpu_ledger, "oha") if cpu_ledger else None)


def _number(text: str) -> float | None:
    return None if text.lower() == "nan" else float(text)


def parse_oha_output(text: str, source: str = "oha output", slo_ms: Sequence[float] = (),
                     processes: int = 1) -> OhaResult:
    """Parse what :func:`oha_command` prints: the shell's ``times`` and the counts."""
    cpu_s = children_cpu_s(text, source)
    match = _COUNTS.search(text)
    over = [int(v) for v in match.group(3).split(",") if v] if match else []
    if match is None or len(over) != len(slo_ms):
        raise ParseError(source, f"a line '{COUNT_MARKER} answered=N failed=N over=N,... "
                         f"p50=S p90=S p99=S p999=S' with {len(slo_ms)} counts", text)
    percentiles = {q: _number(match.group(index))
                   for q, index in ((0.5, 4), (0.9, 5), (0.99, 6), (0.999, 7))}
    return OhaResult(answered=int(match.group(1)), failed=int(match.group(2)),
                     slo_ms=tuple(float(v) for v in slo_ms), over=tuple(over),
                     percentiles=percentiles, cpu_s=cpu_s, processes=processes, raw=text)


def run_oha(node: Node, binary: str, options: OhaOptions,
            cpu_ledger: str | None = None) -> OhaResult:
    """Run one constant-rate attack on ``node`` with a hard timeout; its parsed result (the CPU
    it took goes to ``cpu_ledger`` as ``oha`` for the telemetry)."""
    value = oha_command(binary, options, node.workdir, cpu_ledger)
    command = value.tool_line()
    result = node.run(value, check=False)
    source = f"{node.name}: output of oha (exit {result.exit_code})"
    if result.exit_code != 0:
        raise CommandError(node.where, command, result.exit_code, result.stdout, result.stderr)
    parsed = parse_oha_output(result.stdout, source, options.slo_ms, options.processes)
    LOG.info("%s: oha %.0f req/s offered for %g s: %d answered, %d failed", node.name,
             options.rate, options.duration, parsed.answered, parsed.failed)
    return parsed


def oha_version(node: Node, binary: str) -> str:
    """``oha --version`` (``1.16.0``); :class:`ToolMissing` when it does not answer."""
    result = node.run(f"{shlex.quote(binary)} --version", timeout=20, check=False, quiet=True)
    found = _VERSION.search(result.stdout)
    if result.exit_code != 0 or found is None:
        raise ToolMissing(f"oha not installed on {node.name}: {binary} does not answer "
                          f"--version ({(result.stdout + result.stderr).strip()[:200]!r}; "
                          "./setup.sh installs it with cargo install)")
    return found.group(1)
