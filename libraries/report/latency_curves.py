"""The run report's latency curves: for each test that searched its capacity under a latency
goal, p50 and p99 latency against the offered rate of every trial, the direct and the proxied
path on one chart, the goal's limit as a line and each path's capacity (MLRsearch's
conditional throughput) marked. Records of wave 3 (a hand-written search's ``probes``, each
with ``passed``) draw the same way."""

from __future__ import annotations

import math
from typing import Any

import plotly.graph_objects as go

from libraries.report.run_charts import title_layout

COLOURS = {"proxy": "#c0504d", "direct": "#4f81bd"}


def _trials(search: dict[str, Any], limit: float | None) -> list[dict[str, Any]]:
    """The search's trials with latency, each with ``passed`` (within the first goal's loss
    ratio at ``limit``) and ``why``, lowest rate first."""
    if "probes" in search:  # wave 3: judged by the search itself
        found = [dict(p) for p in search["probes"]]
    else:
        goal = (search.get("goals") or [{}])[0]
        allowed = goal.get("loss_ratio", 0.01)
        key = f"{limit:g}" if limit is not None else None
        found = []
        for trial in search.get("trials", []):
            loss = (trial.get("loss_ratio") or {}).get(key)
            passed = loss is not None and loss <= allowed
            found.append({**trial, "passed": passed,
                          "why": f"loss {loss:.2%} at {limit:g} ms (goal {goal.get('goal')})"
                          if loss is not None else "no loss count"})
    return sorted((t for t in found if t.get("p99_ms") is not None), key=lambda t: t["rate"])


def capacity_chart(record: dict[str, Any]) -> go.Figure | None:
    """The latency-against-rate chart of ``record``, or None when it searched no capacity."""
    searches = (record.get("evidence") or {}).get("capacity")
    if not isinstance(searches, dict) or not searches:
        return None
    slo = (record.get("parameters") or {}).get("latency_slo_ms")
    traces: list[Any] = []
    for variant, search in sorted(searches.items()):
        trials = _trials(search, slo)
        colour = COLOURS.get(variant, "#666666")
        for key, dash, label in (("p99_ms", "solid", "p99"), ("p50_ms", "dot", "p50")):
            traces.append(go.Scatter(
                x=[t["rate"] for t in trials], y=[t.get(key) for t in trials],
                mode="lines+markers", name=f"{variant} {label}",
                line={"color": colour, "dash": dash},
                marker={"symbol": ["circle" if t["passed"] else "x" for t in trials]},
                text=[t["why"] or "pass" for t in trials],
                hovertemplate="%{x:.0f} req/s offered: %{y:.3g} ms<br>%{text}<extra></extra>"))
    figure = go.Figure(traces)
    values = [y for trace in traces for y in trace.y
              if y is not None and math.isfinite(y) and y > 0]
    if slo:
        # on a log axis plotly places an annotation at 10**y: give it log10 of the limit (the
        # shape itself takes data coordinates), or the axis stretches to 10**limit
        figure.add_hline(y=slo, line={"color": "#333333", "dash": "dash"})
        figure.add_annotation(x=1, xref="paper", xanchor="right", y=math.log10(slo),
                              yref="y", yanchor="bottom", showarrow=False,
                              text=f"limit {slo:g} ms")
        values.append(slo)
    confirmed = (record.get("evidence") or {}).get("capacity_confirmation") or {}
    for variant, search in sorted(searches.items()):
        colour = COLOURS.get(variant, "#666")
        rate = (confirmed.get(variant) or {}).get("rate")
        if search.get("capacity"):  # MLRsearch's knee; the figure where a confirmation held
            label = "knee" if variant in confirmed else "capacity"
            figure.add_vline(x=search["capacity"], line={"color": colour, "width": 1,
                                                         "dash": "dot" if rate else "solid"},
                             annotation_text=f"{variant} {label} {search['capacity']:.0f}")
        if rate:
            seconds, share = confirmed[variant].get("duration_s"), \
                confirmed[variant].get("share")
            claim = (f"<= {share:.0%} of {seconds:g} s windows miss" if share  # issue 52
                     else f"held {seconds:g} s")
            figure.add_vline(x=rate, line={"color": colour, "width": 2},
                             annotation_text=f"{variant} capacity {rate:.0f} ({claim})",
                             annotation_position="bottom right")
    if values:  # the axis spans the data and the limit, a quarter decade beyond each end
        figure.update_yaxes(range=[math.log10(min(values)) - 0.25,
                                   math.log10(max(values)) + 0.25])
    figure.update_layout(
        **title_layout(f"{record['name']}: latency against offered rate "
                       "(o: trial within the goal's loss, x: beyond)", bottom=60),
        yaxis_type="log", xaxis_title="offered rate (requests/s)", yaxis_title="latency (ms)")
    return figure
