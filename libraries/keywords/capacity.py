"""Keywords for capacity under a latency SLO (the SSL proxy case's CAPACITY tests): the
highest offered rate each path sustains with no error, at least 99 % of it achieved, and p99
within the SLO, found by a noise-tolerant search (:mod:`libraries.results.capacity`) of the
direct and proxied paths the last ``Measure HTTPS Load Through Proxy`` measured."""

from __future__ import annotations

from typing import Any

from robot.api import logger
from robot.api.deco import keyword, library
from robot.libraries.BuiltIn import BuiltIn

from libraries.keywords import log_folded
from libraries.keywords.latency import search_paths
from libraries.results.capacity import (
    DEFAULT_RANGE,
    DEFAULT_SLO,
    SearchSettings,
    parse_range,
    parse_slo,
)
from libraries.results.measurement import Measurement
from libraries.testbed.errors import HostStackError

SSL_PROXY_LIBRARY = "libraries.keywords.ssl_proxy.SslProxyKeywords"
START_SHARE = 0.5
"""A search starts at this share of the path's closed-loop maximum (it should pass there)."""
SATURATED = 0.9
"""A failing probe whose generator used this share of its cores or more says nothing of the
path: the capacity found is the generator's, a lower bound of the path's."""


@library(scope="SUITE", auto_keywords=False)
class CapacityKeywords:
    """Search the capacity under a latency SLO of the paths the SSL proxy case measured."""

    @keyword("Search Capacity Under Latency SLO")
    def search_capacity_under_latency_slo(
        self, measurement: Measurement, slo: str = DEFAULT_SLO,
        search_range: str = DEFAULT_RANGE, seconds: str | int = 5,
        precision: str | float = 0.05, budget: str | float = 300,
    ) -> Measurement:
        """Search the capacity of the proxied and the direct path of ``measurement`` (the
        result of ``Measure HTTPS Load Through Proxy``), interleaved probe by probe: probes of
        ``seconds`` s at a constant rate, from half of each path's closed-loop maximum, within
        ``search_range`` (``bottom..top`` requests/s), to the relative ``precision``, each
        search within ``budget`` seconds; the final rate confirmed by two more probes.

        Adds ``capacity`` (proxied), ``direct_capacity`` and ``capacity_ratio`` (requests/s at
        ``slo``, e.g. ``10ms``), every probe as evidence, and checks the result against the
        closed-loop maximum and the 50 % latency pass (evidence ``capacity_sanity``). Fails
        with the reason for a bad SLO or range; skips where the load node has no constant-rate
        generator.
        """
        library = BuiltIn().get_library_instance(SSL_PROXY_LIBRARY)
        paths, generator = library.paths, library.generator
        if not paths:
            raise HostStackError("measure the paths first: Measure HTTPS Load Through Proxy")
        try:
            slo_ms = parse_slo(slo, "slo")
            low, high = parse_range(search_range, "search_range")
            settings = SearchSettings(slo_ms, start=max(low, 1.0), low=low, high=high,
                                      precision=float(precision), max_seconds=float(budget))
            probe_seconds = int(seconds)
        except ValueError as error:
            raise HostStackError(str(error)) from None
        if generator is None:
            BuiltIn().skip(f"no constant-rate generator on the load node: "
                           f"{measurement.notes[-1] if measurement.notes else ''}")
        maxima = {"proxy": measurement.value("rps")}
        if "direct" in paths:
            maxima["direct"] = measurement.value("direct_rps")
        starts = {v: min(max(low, START_SHARE * maxima[v]), high) for v in paths}
        found = search_paths(generator, paths, starts, settings, probe_seconds)
        measurement.parameters["latency_slo_ms"] = slo_ms
        measurement.evidence["capacity"] = {v: r.as_record() for v, r in found.items()}
        for variant, result in found.items():
            log_folded(f"capacity search of the {variant} path ({result.stopped})",
                       "\n".join(_probe_line(p) for p in result.probes))
        names = {"proxy": "capacity", "direct": "direct_capacity"}
        for variant, result in found.items():
            if result.capacity is None:
                raise HostStackError(f"{variant} path: no rate within {search_range} requests/s"
                                     f" meets the SLO p99 <= {slo} ({result.stopped})")
            measurement.add(names[variant], [result.capacity], "requests/s")
        if "direct" in found:
            measurement.add("capacity_ratio", [found["proxy"].capacity /
                                               found["direct"].capacity], "ratio")
        measurement.evidence["capacity_sanity"] = _sanity(measurement, found, maxima)
        _note_generator_bound(measurement, found)
        return measurement


def _note_generator_bound(measurement: Measurement, found: dict[str, Any]) -> None:
    """Mark each path whose failing probes above the capacity all had a saturated generator
    (evidence ``capacity_limited_by``; a note, and a warning in the log)."""
    limited = {}
    for variant, result in found.items():
        above = [p for p in result.probes if not p.passed and p.rate > result.capacity]
        shares = [p.extra.get("generator_cpu") for p in above]
        bound = bool(above) and all(s is not None and s >= SATURATED for s in shares)
        limited[variant] = "load generator" if bound else "path"
        if bound:
            note = (f"{variant} capacity {result.capacity:.0f} requests/s is the load "
                    f"generator's (it used {min(shares):.0%} or more of its cores in every "
                    "failing probe): a lower bound of the path's")
            measurement.notes.append(note)
            logger.warn(note)
    measurement.evidence["capacity_limited_by"] = limited


def _probe_line(probe: Any) -> str:
    p99 = "-" if probe.p99_ms is None else f"{probe.p99_ms:.3g} ms"
    return (f"{probe.rate:10.0f} req/s offered, {probe.achieved:10.0f} achieved, p99 {p99}, "
            f"{probe.errors} errors: {'pass' if probe.passed else probe.why}")


def _sanity(measurement: Measurement, found: dict[str, Any],
            maxima: dict[str, float]) -> dict[str, Any]:
    """Capacity against independent estimates: at most the closed-loop maximum (5 % for that
    maximum's own noise), and on the same side of the 50 % latency pass's rate as that pass's
    own p99 against the SLO (above it when the pass met the SLO, below when it did not).
    Logged as a warning when it fails."""
    latency = measurement.evidence.get("latency") or {}
    half = latency.get("rate")
    slo_ms = measurement.parameters["latency_slo_ms"]
    p99 = measurement.value("latency_p99") if half else None
    checks = {}
    for variant, result in found.items():
        below = result.capacity <= maxima[variant] * 1.05
        checked = half is not None and variant == "proxy"
        met = checked and p99 <= slo_ms
        side = not checked or (result.capacity >= half if met else result.capacity < half * 1.05)
        checks[variant] = {"capacity": result.capacity, "closed_loop_max": maxima[variant],
                           "half_rate_pass": half if checked else None,
                           "half_rate_p99_ms": p99 if checked else None,
                           "holds": below and side}
        if not below:
            logger.warn(f"{variant} capacity {result.capacity:.0f} requests/s is above the "
                        f"closed-loop maximum {maxima[variant]:.0f}")
        if not side:
            logger.warn(f"{variant} capacity {result.capacity:.0f} requests/s disagrees with "
                        f"the latency pass at {half:.0f} requests/s (p99 {p99:.3g} ms against "
                        f"the SLO {slo_ms:g} ms)")
    return checks
