"""The run report's latency curves: for each test that searched its capacity under a latency
SLO, p50 and p99 latency against the offered rate of every probe, the direct and the proxied
path on one chart, the SLO as a line and each path's capacity marked."""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go

COLOURS = {"proxy": "#c0504d", "direct": "#4f81bd"}


def capacity_chart(record: dict[str, Any]) -> go.Figure | None:
    """The latency-against-rate chart of ``record``, or None when it searched no capacity."""
    searches = (record.get("evidence") or {}).get("capacity")
    if not isinstance(searches, dict) or not searches:
        return None
    slo = (record.get("parameters") or {}).get("latency_slo_ms")
    traces: list[Any] = []
    for variant, search in sorted(searches.items()):
        probes = sorted((p for p in search.get("probes", []) if p.get("p99_ms") is not None),
                        key=lambda p: p["rate"])
        colour = COLOURS.get(variant, "#666666")
        for key, dash, label in (("p99_ms", "solid", "p99"), ("p50_ms", "dot", "p50")):
            traces.append(go.Scatter(
                x=[p["rate"] for p in probes], y=[p[key] for p in probes],
                mode="lines+markers", name=f"{variant} {label}",
                line={"color": colour, "dash": dash},
                marker={"symbol": ["circle" if p["passed"] else "x" for p in probes]},
                text=[p["why"] or "pass" for p in probes],
                hovertemplate="%{x:.0f} req/s offered: %{y:.3g} ms<br>%{text}<extra></extra>"))
    figure = go.Figure(traces)
    if slo:
        figure.add_hline(y=slo, line={"color": "#333333", "dash": "dash"},
                         annotation_text=f"SLO p99 {slo:g} ms")
    for variant, search in sorted(searches.items()):
        if search.get("capacity"):
            figure.add_vline(x=search["capacity"], line={"color": COLOURS.get(variant, "#666"),
                                                         "width": 1},
                             annotation_text=f"{variant} capacity {search['capacity']:.0f}")
    figure.update_layout(
        margin={"l": 70, "r": 20, "t": 40, "b": 60}, yaxis_type="log",
        xaxis_title="offered rate (requests/s)", yaxis_title="latency (ms)",
        title={"text": f"{record['name']}: latency against offered rate "
                       "(o: probe passed, x: failed)", "font": {"size": 14}},
        legend={"orientation": "h", "y": 1.12, "x": 0.5})
    return figure
