"""Latency at a known offered rate and capacity under a latency SLO, for the HTTP(S) cases:
which constant-rate generator a load node has, one constant-rate run of it as a
:class:`~libraries.results.capacity.Probe`, the latency pass, and interleaved capacity
searches of several paths (direct and proxied).

The generator: vegeta where the topology declares it and it answers (``setup.sh`` installs it
on every machine), else wrk2 (constant rate with ``-R``, where a lab built it); none: latency
is recorded as unavailable with the reason. vegeta is a Go program: it makes its own system
calls, so it cannot run under VPP's ``LD_PRELOAD``; a load node whose client must run in VPP's
host stack (a one-node VPP testbed) uses wrk2 or goes without.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, replace

from libraries.results.capacity import CapacitySearch, Probe, SearchResult, SearchSettings
from libraries.results.measurement import Measurement
from libraries.testbed.errors import HostStackError, ToolMissing
from libraries.testbed.node import Node
from libraries.tools.vegeta import VegetaOptions, run_vegeta, vegeta_version
from libraries.tools.wrk.run import WrkOptions, probe_wrk, run_wrk

LOG = logging.getLogger(__name__)
PERCENTILES = ((0.5, "latency_p50"), (0.9, "latency_p90"), (0.99, "latency_p99"),
               (0.999, "latency_p99_9"))


@dataclass(frozen=True)
class Generator:
    """A constant-rate generator on ``node``: ``tool`` (``vegeta`` or ``wrk2``), its
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


def find_generator(node: Node, tools: dict[str, str], cpus: list[int] | None,
                   env: dict[str, str] | None, ledger: str | None
                   ) -> tuple[Generator | None, str]:
    """The node's constant-rate generator and, when it has none, why (for the record)."""
    reasons = []
    if "vegeta" in tools and env:
        reasons.append("vegeta (Go) cannot run over VPP's LD_PRELOAD host stack")
    elif "vegeta" in tools:
        try:
            version = vegeta_version(node, tools["vegeta"])
            return Generator(node, "vegeta", tools["vegeta"], version, cpus, None, ledger), ""
        except ToolMissing as error:
            reasons.append(str(error))
    else:
        reasons.append(f"no vegeta declared on {node.name} (tools.vegeta)")
    if "wrk2" in tools:
        try:
            if probe_wrk(node, tools["wrk2"]) == "wrk2":
                return Generator(node, "wrk2", tools["wrk2"], "wrk2", cpus, env, ledger), ""
            reasons.append(f"{tools['wrk2']} is plain wrk, not wrk2")
        except ToolMissing as error:
            reasons.append(str(error))
    return None, "; ".join(reasons)


def _workers(rate: float, slo_ms: float) -> int:
    """Concurrency enough to keep a rate on schedule at latencies up to 10 x the SLO (Little's
    law), never the thousands an overloaded target would otherwise attract."""
    return int(min(5000, max(64, math.ceil(rate * slo_ms / 1000.0 * 10))))




def probe(generator: Generator, url: str, rate: float, seconds: int, slo_ms: float) -> Probe:
    """One constant-rate run at ``rate`` requests/s for ``seconds``: achieved rate, latency,
    failed requests."""
    started = time.monotonic()
    if generator.tool == "vegeta":
        result = run_vegeta(generator.node, generator.binary,
                            VegetaOptions(url=url, rate=rate, duration=seconds,
                                          max_workers=_workers(rate, slo_ms),
                                          max_connections=generator.connections,
                                          cpus=generator.cpus),
                            cpu_ledger=generator.ledger)
        return Probe(rate, result.achieved, result.percentiles[0.5] * 1e3,
                     result.percentiles[0.99] * 1e3, result.failed, time.monotonic() - started,
                     extra={"p90_ms": result.percentiles[0.9] * 1e3,
                            "p99_9_ms": result.percentiles[0.999] * 1e3,
                            "sent_per_s": result.send_rate,
                            "status_codes": result.status_codes,
                            "errors": list(result.errors)[:5],
                            "generator_cpu": _cpu_share(result.attack_cpu_s, seconds,
                                                        generator.cpus)})
    run = run_wrk(generator.node, generator.binary,
                  WrkOptions(url=url, threads=1, connections=generator.connections,
                             duration=seconds,
                             rate=max(1, int(rate)), latency=True, cpus=generator.cpus),
                  flavour="wrk2", env=generator.env, cpu_ledger=generator.ledger)
    percentile = run.percentiles.get
    return Probe(rate, run.requests_per_second, (percentile(50.0) or math.nan) * 1e3,
                 (percentile(99.0) or math.nan) * 1e3, run.total_errors,
                 time.monotonic() - started,
                 extra={"p90_ms": (percentile(90.0) or math.nan) * 1e3,
                        "p99_9_ms": (percentile(99.9) or math.nan) * 1e3})


def _cpu_share(cpu_s: float | None, seconds: int, cpus: list[int] | None) -> float | None:
    """The generator's CPU time as a share of the cores it was pinned to (None unpinned or
    unmeasured): near 1, the generator, not the path, set the pace."""
    if cpu_s is None or not cpus:
        return None
    return cpu_s / (seconds * len(cpus))


def latency_pass(measurement: Measurement, generator: Generator | None, why: str, url: str,
                 share: float, seconds: int, slo_ms: float) -> Probe | None:
    """The constant-rate pass at ``share`` of the measured maximum (``rps``): latency
    percentiles as metrics (one value each: judged by value), the run as evidence; or
    ``latency`` unavailable with ``why``. Errors in the pass fail the test."""
    if generator is None:
        measurement.evidence["latency"] = None
        measurement.notes.append(f"latency unavailable: {why}")
        return None
    rate = max(1.0, measurement.value("rps") * share)
    result = probe(generator, url, rate, seconds, slo_ms)
    if result.errors:
        raise HostStackError(f"latency pass at {rate:.0f} requests/s ({generator.tool}): "
                             f"{result.errors} requests failed: "
                             f"{result.extra.get('errors') or result.extra}")
    measurement.evidence["latency"] = {"tool": generator.tool, "version": generator.version,
                                       "rate": rate, "share_of_max": share,
                                       "duration_s": seconds, "achieved_rps": result.achieved}
    values = {"latency_p50": result.p50_ms, "latency_p90": result.extra["p90_ms"],
              "latency_p99": result.p99_ms, "latency_p99_9": result.extra["p99_9_ms"]}
    for name, value in values.items():
        if value is None or not math.isfinite(value):
            raise HostStackError(f"latency pass ({generator.tool}) gave no {name}")
        measurement.add(name, [value], "ms", "lower_is_better")
    return result


def search_paths(generator: Generator, urls: dict[str, str], starts: dict[str, float],
                 settings: SearchSettings, seconds: int) -> dict[str, SearchResult]:
    """Capacity searches of every path in ``urls`` from its ``starts`` rate, interleaved probe
    by probe (each path's next probe in turn, so a slow drift of a shared machine touches them
    alike); ``settings.max_seconds`` is each search's budget."""
    searches = {variant: CapacitySearch(replace(settings, start=starts[variant]))
                for variant in urls}
    while True:
        stepped = False
        for variant, search in searches.items():
            rate = search.next_rate()
            if rate is None:
                continue
            stepped = True
            judged = search.add(probe(generator, urls[variant], rate, seconds,
                                      settings.slo_p99_ms))
            LOG.info("%s: probe at %.0f requests/s: %s", variant, rate,
                     "pass" if judged.passed else judged.why)
        if not stepped:
            return {variant: search.result() for variant, search in searches.items()}
