"""A measurement's headline: the one line a reader of report.html sees as the test's message.

CSIT-style: the figures first (median of the trials, unit, and its confidence interval in
brackets), the ratios that make them mean something next (each computed per round, with its
own interval), then what is unavailable and why. Examples::

    rps 13.0k req/s [11.8k, 14.1k] (proxy/direct 0.85 [0.80, 0.91]; direct 18.3k); latency ...
    throughput 14.2 Gbit/s [13.8, 14.6] (receiver)
    ebpf 5.2 Gbit/s [5.0, 5.3], native 6.1, direct 14.0 (ebpf/native 0.85 [0.81, 0.88], ...)
    overhead 43.1% [40.2, 45.0] (baseline 21.5k -> traced 12.3k req/s; 2.00 events/request)
"""

from __future__ import annotations

import math

from libraries.results.cost import foreign_message
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


def interval_text(metric: Metric, digits: str | None = None) -> str:
    """`` [low, high]`` of the metric's median (empty for a single value); ``digits`` a format
    spec for both ends (default: :func:`figure`)."""
    interval = metric.interval
    if interval.level is None:
        return ""
    if digits is None:
        return f" [{figure(interval.low)}, {figure(interval.high)}]"
    return f" [{interval.low:{digits}}, {interval.high:{digits}}]"


def _with_unit(metric: Metric) -> str:
    unit = UNIT_SHORT.get(metric.summary.unit, metric.summary.unit)
    return f"{figure(metric.value)} {unit}{interval_text(metric)}"


def _ratios(measurement: Measurement) -> list[str]:
    """``a_b_ratio`` of two variants reads ``a/b``; longer names (``ebpf_nginx_worker_cpu_ratio``)
    stay as they are. Written as every other figure (:func:`figure`, 3 significant digits: a
    ratio reads the same in the message, the run report's table and its criteria; two decimals
    wrote ``0.43 [0.43, 0.44]``, the median on its own interval's end)."""
    parts = []
    for name, metric in measurement.metrics.items():
        if not name.endswith("_ratio") or name == "capacity_ratio":  # with the capacity
            continue
        stem = name.removesuffix("_ratio")
        label = stem.replace("_", "/") if stem.count("_") == 1 else name
        parts.append(f"{label} {figure(metric.value)}{interval_text(metric)}")
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


def _capacity(m: Measurement, goal: str) -> str:
    """The proxied path's capacity as its windows proved it (issue 60: the claim the miss
    curve's record states), else as the record's parameters describe it."""
    share, seconds = (m.parameters.get("capacity_miss_share"),
                      m.parameters.get("capacity_confirm_s"))
    claim = ((m.evidence.get("capacity_confirmation") or {}).get("proxy") or {}).get("semantics")
    if share and seconds and claim:
        return f"capacity: {claim}"
    if share and seconds:  # the miss curve's figure (issue 52)
        return (f"capacity: {goal} missed in <= {share:.0%} of {seconds:g} s windows at "
                f"{figure(m.value('capacity'))} req/s{interval_text(m.metrics['capacity'])}")
    text = f"capacity {figure(m.value('capacity'))} req/s" + (f" at {goal}" if goal else "")
    if seconds:
        text += f" over {seconds:g} s"
    elif "capacity_confirm_s" in m.parameters:
        text += " (MLRsearch knee, unconfirmed)"
    return text


def _ssl_proxy(m: Measurement) -> list[str]:
    rps = m.metrics["rps"]
    inside = _ratios(m)
    if "direct_rps" in m.metrics:
        inside.append(f"direct {figure(m.value('direct_rps'))}")
    head = f"rps {_with_unit(rps)}" + (f" ({'; '.join(inside)})" if inside else "")
    parts = [head]
    if "errors" in m.metrics and m.value("errors") > 0:
        parts.append(f"errors {figure(m.value('errors'))}")
    latency = _latency(m)
    if latency:
        parts.append(latency)
    if "capacity" in m.metrics:
        goals = m.parameters.get("latency_goals") or []
        slo = m.parameters.get("latency_slo_ms")
        goal = goals[0] if goals else (f"p99<={slo:g}ms" if slo else "")
        text = _capacity(m, goal)
        inside = []
        if "capacity_ratio" in m.metrics:
            inside.append(f"proxy/direct {figure(m.value('capacity_ratio'))}")
        elif "capacity_ratio" in m.unavailable:
            inside.append("proxy/direct unavailable")
        if "direct_capacity" in m.metrics:
            limited = (m.evidence.get("capacity_limited_by") or {}).get("direct")
            bound = " (generator-bound)" if limited == "load generator" else ""
            inside.append(f"direct {figure(m.value('direct_capacity'))}"
                          f"{interval_text(m.metrics['direct_capacity'])}{bound}")
        text += f" ({'; '.join(inside)})" if inside else ""
        parts.append(text)
    elif "capacity" in m.unavailable:
        parts.append("capacity unavailable")
    return parts


def _tcp_term(m: Measurement) -> list[str]:
    metric = m.metrics["throughput"]
    return [f"throughput {_with_unit(metric)} (receiver)"]


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
    overhead = m.metrics["overhead_pct"]
    text = (f"overhead {overhead.value:.1f}%{interval_text(overhead, '.1f')} (baseline "
            f"{figure(m.value('baseline_rps'))} -> traced {figure(m.value('traced_rps'))} req/s")
    if "events_per_request" in m.metrics:
        text += f"; {m.value('events_per_request'):.2f} events/request"
    return [text + ")"]


def _cost(m: Measurement) -> list[str]:
    """The judged cost with its interval (``cost 52.1 CPU µs/request [51.0, 53.3]``), and who
    else took the DUT's cores when that was much (:data:`~libraries.results.cost.
    LARGE_FOREIGN`)."""
    block = m.cost or {}
    name = block.get("metric")
    found = [f"{name} {_with_unit(m.metrics[name])}"] if name in m.metrics else []
    told = foreign_message({"plain": block.get("foreign_load") or {}})
    return found + ([told] if told else [])


_CASES = {"ssl_proxy": _ssl_proxy, "tcp_term": _tcp_term, "ebpf_stream": _ebpf_stream,
          "sslsniff": _sslsniff}


def headline(measurement: Measurement) -> str:
    """The one-line summary of ``measurement`` (its case's figures, else every metric, then
    its cost per unit of work; an A/B test: its comparison, ``A/B nginx-1.26 4.1 % slower
    than debian-nginx on rps ...``)."""
    if measurement.ab and measurement.notes:
        return measurement.notes[-1]
    builder = _CASES.get(measurement.case)
    parts: list[str] = []
    if builder is not None:
        try:
            parts = builder(measurement)
        except KeyError:
            parts = []
    if not parts:
        parts = [f"{name} {_with_unit(metric)}" for name, metric in measurement.metrics.items()]
    parts += _cost(measurement)
    if measurement.evidence.get("ab_unused"):  # -v AB_UNUSED:plain: why it ran plainly
        parts.append(str(measurement.evidence["ab_unused"]))
    return "; ".join(parts) if parts else "no metric measured"
