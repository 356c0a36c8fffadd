"""Latency at a known offered rate and capacity under latency goals, for the HTTP(S) cases:
which constant-rate generator a load node has, one constant-rate trial of it (a
:class:`~libraries.capacity.trials.CapacityTrial`), the latency pass, and the capacity
searches of several paths (direct and proxied) with MLRsearch.

The generator, first found that the topology declares and that answers: for the latency pass
(:data:`PREFERENCE`) vegeta (``setup.sh`` installs it on every machine), oha, then wrk2
(constant rate with ``-R``, where a lab built it); for the capacity search
(:data:`CAPACITY_PREFERENCE`) wrk2 first. None: latency is recorded as unavailable with the
reason. oha and vegeta make their own system calls (Rust's and Go's runtimes), so
they are not run under VPP's ``LD_PRELOAD``; a load node whose client must run in VPP's host
stack (a one-node VPP testbed) uses wrk2 or goes without.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, replace

from libraries.capacity.search import DELIVERED, Measure, search_capacity
from libraries.capacity.search_settings import SearchSettings
from libraries.capacity.trials import CapacityTrial, PathCapacity
from libraries.results.measurement import Measurement
from libraries.testbed.errors import HostStackError, ToolMissing
from libraries.testbed.node import Node
from libraries.tools.oha import OhaOptions, oha_version, run_oha
from libraries.tools.vegeta import VegetaOptions, run_vegeta, vegeta_version
from libraries.tools.wrk.run import WrkOptions, probe_wrk, run_wrk

LOG = logging.getLogger(__name__)
PERCENTILES = ((0.5, "latency_p50"), (0.9, "latency_p90"), (0.99, "latency_p99"),
               (0.999, "latency_p99_9"))
WRK2_STAGGER_S = 0.005
"""wrk2 opens a thread's connections 5 ms apart, and each connection's schedule starts when it
opens: the schedule of a trial is that much shorter than its duration."""


@dataclass(frozen=True)
class Generator:
    """A constant-rate generator on ``node``: ``tool`` (``oha``, ``vegeta`` or ``wrk2``), its
    ``binary``, ``version``, load ``cpus``, ``env`` for the tool (VPP's VCL for wrk2), the
    CPU ``ledger`` of the node's telemetry and the keep-alive ``connections`` it opens (the
    case's own: a probe measures the rate the case's clients can be served at, and more
    connections would add their TLS handshakes to the tail: 100 connections instead of 10 gave
    p99 24 ms instead of 1 ms at 12k requests/s against nginx on loopback)."""

    node: Node
    tool: str
    binary: str
    version: str
    cpus: list[int] | None = None
    env: dict[str, str] | None = None
    ledger: str | None = None
    connections: int = 10


CAPACITY_PREFERENCE = ("wrk2", "vegeta", "oha")
"""The capacity search's order: wrk2 first where a lab built it. With the case's few keep-alive
connections, each connection's round trip carries the generator's own time per request, and
wrk2's (C, epoll) is about a third of vegeta's: on the 3node testbed it found the proxied
path's capacity at 27.3k requests/s where vegeta found 22.6k, and the direct path's at 58.6k
where vegeta stopped at its own ~30k (benchmarks/README.md)."""
PREFERENCE = ("vegeta", "oha", "wrk2")
"""The latency pass's order: vegeta first, for its percentiles (wrk2's count its own millisecond
timer: p50 1.21 ms where vegeta saw 0.15 ms at the same rate of the same path, measured on
this project's VM). oha costs half vegeta's CPU per HTTPS request but counts its own start-up
against the schedule (about one late request per trial: at 100 requests/s, 1 % of them over
10 ms) and has a wider tail at equal rates: its capacity searches failed their sanity check 3
times in 4 where vegeta's held 4 in 4 (benchmarks/README.md); it is used where a lab declares
only it."""


def find_generator(node: Node, tools: dict[str, str], cpus: list[int] | None,
                   env: dict[str, str] | None, ledger: str | None,
                   preference: tuple[str, ...] = PREFERENCE) -> tuple[Generator | None, str]:
    """The node's constant-rate generator (the first of ``preference`` that is declared and
    answers) and, when it has none, why (for the record)."""
    reasons = []
    for tool in preference:
        if tool not in tools:
            reasons.append(f"no {tool} declared on {node.name} (tools.{tool})")
            continue
        if env and tool != "wrk2":
            reasons.append(f"{tool} cannot run over VPP's LD_PRELOAD host stack (its runtime "
                           "makes its own system calls)")
            continue
        try:
            if tool == "wrk2":
                if probe_wrk(node, tools["wrk2"]) != "wrk2":
                    reasons.append(f"{tools['wrk2']} is plain wrk, not wrk2")
                    continue
                version = "wrk2"
            else:
                version = (oha_version if tool == "oha" else vegeta_version)(node, tools[tool])
        except ToolMissing as error:
            reasons.append(str(error))
            continue
        return Generator(node, tool, tools[tool], version, cpus,
                         env if tool == "wrk2" else None, ledger), ""
    return None, "; ".join(reasons)


def _workers(rate: float, slo_ms: float) -> int:
    """Concurrency enough to keep a rate on schedule at latencies up to 10 x the SLO (Little's
    law), never the thousands an overloaded target would otherwise attract."""
    return int(min(5000, max(64, math.ceil(rate * slo_ms / 1000.0 * 10))))


def constant_rate_trial(generator: Generator, url: str, rate: float, seconds: float,
                        limits_ms: tuple[float, ...]) -> CapacityTrial:
    """One constant-rate run at ``rate`` requests/s for ``seconds`` (vegeta: any length, one
    process per load CPU; wrk2: whole seconds, one thread per load CPU), with the requests
    over each latency limit counted by the tool (see :class:`CapacityTrial`)."""
    started = time.monotonic()
    cpus = list(generator.cpus or [])
    if generator.tool == "vegeta":
        result = run_vegeta(generator.node, generator.binary,
                            VegetaOptions(url=url, rate=rate, duration=seconds,
                                          max_workers=_workers(rate, max(limits_ms)),
                                          max_connections=generator.connections,
                                          cpus=cpus or None, slo_ms=limits_ms),
                            cpu_ledger=generator.ledger)
        p = {name.removeprefix("latency_"): result.percentiles[q] * 1e3
             for q, name in PERCENTILES}
        return CapacityTrial(
            rate=rate, duration=seconds, ran_s=result.duration_s or seconds,
            intended=round(round(rate) * seconds), sent=result.requests, failed=result.failed,
            over={limit: result.over_limit(limit) for limit in limits_ms},
            achieved=result.achieved, latency=p,
            generator_cpu=_cpu_share(result.attack_cpu_s, result.duration_s or seconds, cpus),
            tool="vegeta", processes=result.processes, seconds=time.monotonic() - started,
            extra={"sent_per_s": result.send_rate, "max_late_ms": (result.max_late_s or 0) *
                   1e3, "status_codes": result.status_codes, "errors": list(result.errors)[:5],
                   "cpus": cpus})
    if generator.tool == "oha":
        found = run_oha(generator.node, generator.binary,
                        OhaOptions(url=url, rate=rate, duration=seconds,
                                   connections=generator.connections, cpus=cpus or None,
                                   slo_ms=limits_ms), cpu_ledger=generator.ledger)
        intended = round(round(rate) * seconds)
        return CapacityTrial(
            rate=rate, duration=seconds, ran_s=seconds, intended=intended,
            sent=found.answered, failed=found.failed,
            over={limit: found.over_limit(limit) for limit in limits_ms},
            achieved=(found.answered - found.failed) / seconds,
            latency={name.removeprefix("latency_"): (None if found.percentiles[q] is None
                                                     else found.percentiles[q] * 1e3)
                     for q, name in PERCENTILES},
            generator_cpu=_cpu_share(found.cpu_s, seconds, cpus), tool="oha",
            processes=found.processes, seconds=time.monotonic() - started,
            extra={"cpus": cpus, "note": "oha lists answered requests only: a request that "
                   "was never answered counts as unsent"})
    ran = max(1, math.ceil(seconds - 1e-9))
    threads = max(1, min(len(cpus), generator.connections))
    run = run_wrk(generator.node, generator.binary,
                  WrkOptions(url=url, threads=threads, connections=generator.connections,
                             duration=ran, rate=max(1, round(rate)), latency=True,
                             cpus=cpus or None),
                  flavour="wrk2", env=generator.env, cpu_ledger=generator.ledger,
                  cpu_times=True)
    window = ran - WRK2_STAGGER_S * (math.ceil(generator.connections / threads) - 1) / 2
    percentile = run.percentiles.get
    return CapacityTrial(
        rate=rate, duration=seconds, ran_s=ran,
        intended=round(max(1, round(rate)) * window), sent=run.total_requests,
        failed=run.total_errors, over={limit: run.over(limit / 1e3) for limit in limits_ms},
        achieved=(run.total_requests - run.total_errors) / window,
        latency={name.removeprefix("latency_"):
                 (percentile(q * 100) * 1e3 if percentile(q * 100) is not None else None)
                 for q, name in PERCENTILES},
        generator_cpu=_cpu_share(run.cpu_s, ran, cpus), tool="wrk2", processes=threads,
        seconds=time.monotonic() - started,
        extra={"window_s": window, "cpus": cpus,
               **({"output": _summary(run.raw)} if run.total_requests < DELIVERED * rate * window
                  else {})})


def _summary(raw: str) -> str:
    """wrk2's summary lines (requests, errors, rate), to quote when a trial sent too little."""
    keep = ("requests in", "Socket errors", "Non-2xx", "Requests/sec", "unable", "error")
    return " | ".join(line.strip() for line in raw.splitlines()
                      if any(k in line for k in keep)) or raw.strip()[-300:]


def _cpu_share(cpu_s: float | None, seconds: float, cpus: list[int] | None) -> float | None:
    """The generator's CPU time as a share of the cores it was pinned to over the ``seconds``
    it sent for (vegeta's attack duration: the wait for the last answers, mostly idle, is left
    out of the denominator, so a trial whose answers came late does not read as an idle
    generator; at most 1; None unpinned or unmeasured): near 1, the generator, not the path,
    set the pace."""
    if cpu_s is None or not cpus or seconds <= 0:
        return None
    return min(1.0, cpu_s / (seconds * len(cpus)))


def latency_pass(measurement: Measurement, generator: Generator | None, why: str, url: str,
                 share: float, seconds: int, slo_ms: float) -> CapacityTrial | None:
    """The constant-rate pass at ``share`` of the measured maximum (``rps``): latency
    percentiles as metrics (one value each: judged by value), the run as evidence; or
    ``latency`` unavailable with ``why``. Errors in the pass fail the test."""
    if generator is None:
        measurement.evidence["latency"] = None
        measurement.notes.append(f"latency unavailable: {why}")
        return None
    rate = max(1.0, measurement.value("rps") * share)
    result = constant_rate_trial(generator, url, rate, seconds, (slo_ms,))
    if result.failed:
        raise HostStackError(f"latency pass at {rate:.0f} requests/s ({generator.tool}): "
                             f"{result.failed} requests failed: "
                             f"{result.extra.get('errors') or result.extra}")
    measurement.evidence["latency"] = {
        "tool": generator.tool, "version": generator.version, "rate": result.rate,
        "share_of_max": share, "duration_s": seconds, "achieved_rps": result.achieved,
        "sent": result.sent, "failed": result.failed, "over_slo": result.over[slo_ms],
        "slo_ms": slo_ms, "processes": result.processes}
    for q, name in PERCENTILES:
        value = result.latency[name.removeprefix("latency_")]
        if value is None or not math.isfinite(value):
            raise HostStackError(f"latency pass ({generator.tool}) gave no {name} "
                                 f"(p{q * 100:g})")
        measurement.add(name, [value], "ms", "lower_is_better")
    return result


SETUP_REQUESTS = 200
"""Requests per connection a trial sends at least: the first request on each connection carries
the connection's TCP and TLS set-up (wrk2 counts it from the schedule), so a short trial at a
low rate measures set-ups, not the system (VPP 3node beside two CPU burners: at 100 requests/s
and 20 connections, 10-15 requests per trial over 10 ms, p50 2.7 ms: 5-15 % late, and MLRsearch
found no lower bound). At 200 per connection the set-ups are at most 0.5 % of the requests."""
MAX_STRETCH_S = 10.0
"""Seconds a trial is stretched to at most for :data:`SETUP_REQUESTS`."""


def path_trials(generator: Generator, urls: dict[str, str],
                limits_ms: tuple[float, ...]) -> Measure:
    """``measure(path, seconds, rate)``: one :func:`constant_rate_trial` of ``generator``
    against ``urls[path]``, counting every limit of ``limits_ms``; at a rate where ``seconds``
    would send under :data:`SETUP_REQUESTS` per connection it runs longer (up to
    :data:`MAX_STRETCH_S`), keeping the duration asked (``ran_s`` says what ran, and MLRsearch
    counts that)."""
    def measure(path: str, seconds: float, rate: float) -> CapacityTrial:
        needed = min(MAX_STRETCH_S, SETUP_REQUESTS * generator.connections / max(rate, 1.0))
        if needed <= seconds:
            return constant_rate_trial(generator, urls[path], rate, seconds, limits_ms)
        trial = constant_rate_trial(generator, urls[path], rate, needed, limits_ms)
        return replace(trial, duration=seconds,
                       extra={**trial.extra, "stretched_s": needed,
                              "stretched_for": f"{SETUP_REQUESTS} requests per connection"})

    return measure


def search_paths(generator: Generator, urls: dict[str, str], max_loads: dict[str, float],
                 settings: SearchSettings) -> dict[str, PathCapacity]:
    """MLRsearch over every path in ``urls`` (:func:`libraries.capacity.search.
    search_capacity`: one search per path and latency limit, trials interleaved), each trial a
    :func:`constant_rate_trial` of ``generator``."""
    return search_capacity(path_trials(generator, urls, settings.limits), max_loads, settings)
