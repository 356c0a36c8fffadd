"""A measurement's headline: the one line a reader of report.html sees as the test's message.

CSIT-style: the figures first (median of the trials, unit, spread), the ratios that make them
mean something next, then what is unavailable and why. Examples::

    rps 15.6k req/s (cv 15%; proxy/direct 0.85, direct 18.3k); latency unavailable (wrk)
    throughput 14.2 Gbit/s (receiver, cv 3%)
    ebpf 5.2 Gbit/s, native 6.1, direct 14.0 (ebpf/native 0.85, native/direct 0.44)
    overhead 43.1% (baseline 21.5k -> traced 12.3k req/s; 2.00 events/request)
"""

from __future__ import annotations

import math

from libraries.results.measurement import Measurement, Metric

UNIT_SHORT = {"requests/s": "req/s"}


def figure(value: float) -> str:
    """A figure as people read it: 15.6k, 812, 14.2, 0.853, 1.2M (3 significant digits)."""
    if not math.isfinite(value):
        return str(value)
    magnitude = abs(value)
    for limit, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if magnitude >= limit:
            return f"{value / limit:.3g}{suffix}"
    if magnitude >= 100:
        return f"{value:.0f}"
    return f"{value:.3g}"


def _with_unit(metric: Metric) -> str:
    unit = UNIT_SHORT.get(metric.summary.unit, metric.summary.unit)
    return f"{figure(metric.value)} {unit}"


def _cv(metric: Metric) -> str | None:
    cv = metric.summary.cv
    return None if cv is None else f"cv {cv:.0%}"


def _ratios(measurement: Measurement) -> list[str]:
    """``a_b_ratio`` of two variants reads ``a/b``; longer names (``ebpf_nginx_worker_cpu_ratio``)
    stay as they are."""
    parts = []
    for name, metric in measurement.metrics.items():
        if not name.endswith("_ratio"):
            continue
        stem = name.removesuffix("_ratio")
        label = stem.replace("_", "/") if stem.count("_") == 1 else name
        parts.append(f"{label} {metric.value:.2f}")
    return parts


def _latency(measurement: Measurement) -> str | None:
    metrics = measurement.metrics
    if "latency_p50" in metrics:
        parts = [f"p{name.removeprefix('latency_p').replace('_', '.')} {figure(m.value)} ms"
                 for name, m in metrics.items() if name.startswith("latency_p")]
        return "latency " + " ".join(parts)
    if "latency" in measurement.evidence and measurement.evidence["latency"] is None:
        tool = measurement.parameters.get("tool", "load tool")
        return f"latency unavailable ({tool})"
    return None


def _ssl_proxy(m: Measurement) -> list[str]:
    rps = m.metrics["rps"]
    inside = [x for x in [_cv(rps), *_ratios(m)] if x]
    if "direct_rps" in m.metrics:
        inside.append(f"direct {figure(m.value('direct_rps'))}")
    head = f"rps {_with_unit(rps)}" + (f" ({'; '.join(inside)})" if inside else "")
    parts = [head]
    if "errors" in m.metrics and m.value("errors") > 0:
        parts.append(f"errors {figure(m.value('errors'))}")
    latency = _latency(m)
    if latency:
        parts.append(latency)
    return parts


def _tcp_term(m: Measurement) -> list[str]:
    metric = m.metrics["throughput"]
    inside = ", ".join(x for x in ["receiver", _cv(metric)] if x)
    return [f"throughput {_with_unit(metric)} ({inside})"]


def _ebpf_stream(m: Measurement) -> list[str]:
    order = [v for v in ("ebpf", "native", "direct") if v in m.metrics]
    if not order:
        return []
    first = m.metrics[order[0]]
    figures = [f"{order[0]} {_with_unit(first)}"]
    figures += [f"{v} {figure(m.value(v))}" for v in order[1:]]
    ratios = _ratios(m)
    return [", ".join(figures) + (f" ({', '.join(ratios)})" if ratios else "")]


def _sslsniff(m: Measurement) -> list[str]:
    if "overhead_pct" not in m.metrics:
        return []
    text = (f"overhead {m.value('overhead_pct'):.1f}% (baseline "
            f"{figure(m.value('baseline_rps'))} -> traced {figure(m.value('traced_rps'))} req/s")
    if "events_per_request" in m.metrics:
        text += f"; {m.value('events_per_request'):.2f} events/request"
    return [text + ")"]


_CASES = {"ssl_proxy": _ssl_proxy, "tcp_term": _tcp_term, "ebpf_stream": _ebpf_stream,
          "sslsniff": _sslsniff}


def headline(measurement: Measurement) -> str:
    """The one-line summary of ``measurement`` (its case's figures, else every metric)."""
    builder = _CASES.get(measurement.case)
    parts: list[str] = []
    if builder is not None:
        try:
            parts = builder(measurement)
        except KeyError:
            parts = []
    if not parts:
        parts = [f"{name} {_with_unit(metric)}" for name, metric in measurement.metrics.items()]
    return "; ".join(parts) if parts else "no metric measured"
