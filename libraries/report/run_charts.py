"""The run report's variant bars, and what every chart of the report's pages shares.

One chart per case and rate unit: a group of bars per test, one bar per variant (metric) at
its median, with

* **whiskers**: the median's confidence interval (the record's ``interval``; none for a single
  value or a record written before intervals);
* **pass and fail apart**: a bar judged by a criterion is filled by its outcome (green pass,
  red fail, amber inconclusive); a bar no criterion judges keeps a pale colour of its variant,
  and every variant its own hatching, so variants stay told apart when outcomes colour them;
* **the criterion**: each bound on a charted metric (its floor ``>=`` or ceiling ``<=``) a
  dashed line across that metric's bar, named in the legend (``criterion rps ≥ 1k``: no text
  on the chart to cover a label), and the axis reaching it;
* **labels that do not collide**: the median's label sits in its bar's own slot, inside the
  bar at the first of its middle, lower or upper part clear of the bar's trial points,
  whisker ends and criterion line, else above all of them (upright where many bars share the
  width);
* every trial a point on its bar.

:data:`CONFIG` and :func:`title_layout` are every chart's of the run report and the A/B
section: Plotly's toolbar hidden (it covered the charts' titles; dragging still zooms and a
double click resets), the title at the top left, the legend under it, above the plot.
"""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go

from libraries.results.headline import figure as figure_text

CONFIG = {"responsive": True, "displaylogo": False, "displayModeBar": False}
"""Plotly's configuration of every chart of the run report (no toolbar over the title)."""
OUTCOME_COLOURS = {"pass": "#5cb85c", "fail": "#d9534f", "inconclusive": "#f0ad4e"}
"""A judged bar's fill by its criterion's outcome."""
PALE = ["#c6d4e3", "#d9d9d9", "#d4e6d0", "#e6d4e0", "#e3dcc0", "#d0d4e6"]
"""Unjudged bars: pale, so that a judged bar's outcome stands out."""
HATCHING = ["", "/", ".", "x", "\\", "+"]
"""Each variant's hatching (its bars told apart whatever their fill)."""
_WORST = ("fail", "inconclusive", "pass")
BAR_SPAN = 0.8
"""The share of a group's width its bars take (Plotly's ``bargap`` 0.2, set explicitly)."""
CRITERION = "#7a1f1f"


def title_layout(title: str, top: int = 90, bottom: int = 80) -> dict[str, Any]:
    """Layout keys every run report chart shares: ``title`` top left, the legend in a row
    under it (above the plot), margins that hold both."""
    return {"title": {"text": title, "font": {"size": 14}, "x": 0, "xref": "paper",
                      "xanchor": "left", "y": 0.98, "yref": "container", "yanchor": "top"},
            "margin": {"l": 70, "r": 20, "t": top, "b": bottom},
            "legend": {"orientation": "h", "x": 0, "xanchor": "left", "y": 1.02,
                       "yanchor": "bottom"}}


def metric_outcome(record: dict[str, Any], metric: str) -> str | None:
    """The worst outcome of the criteria judging ``metric`` of ``record`` on its median
    (correctness checks, judged per trial, are not the bar's), None when none judges it."""
    found = [c.get("outcome") or ("pass" if c.get("passed") else "fail")
             for c in record.get("criteria") or []
             if c.get("metric") == metric and not c.get("per_trial")]
    return next((o for o in _WORST if o in found), None)


def _whiskers(metrics: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Plotly's asymmetric ``error_y`` of the medians' intervals (None when none has one)."""
    ups, downs = [], []
    for metric in metrics:
        interval = metric.get("interval") or {}
        known = interval.get("level") is not None
        ups.append(interval["high"] - metric["value"] if known else 0.0)
        downs.append(metric["value"] - interval["low"] if known else 0.0)
    if not any(ups) and not any(downs):
        return None
    return {"type": "data", "symmetric": False, "array": ups, "arrayminus": downs,
            "color": "#333", "thickness": 1.5, "width": 6}


def _criterion_lines(tests: list[str], records: dict[str, dict[str, Any]],
                     variants: list[str]) -> tuple[list[dict], list[str], list[tuple]]:
    """Shapes, legend names and (test, metric, bound) of every criterion on a charted metric:
    a dashed line across its own bar's slot in its test's group (each variant has a slot of
    ``BAR_SPAN / len(variants)`` in every group), named in the legend (``rps ≥ 1k``), not
    written on the chart, where it would cover a bar's label."""
    shapes, names, points = [], [], []
    width = BAR_SPAN / len(variants)
    for index, test in enumerate(tests):
        for c in records[test].get("criteria") or []:
            if c.get("metric") not in variants or c.get("per_trial") or \
                    c.get("required") is None:
                continue
            bound = float(c["required"])
            left = index - BAR_SPAN / 2 + variants.index(c["metric"]) * width
            shapes.append({"type": "line", "xref": "x", "yref": "y", "x0": left,
                           "x1": left + width, "y0": bound, "y1": bound,
                           "line": {"color": CRITERION, "width": 2, "dash": "dash"}})
            sign = "≥" if c.get("op") == ">=" else "≤"
            name = f"{c['metric']} {sign} {figure_text(bound)}"
            if name not in names:
                names.append(name)
            points.append((test, c["metric"], bound))
    return shapes, names, points


def _label_y(value: float, obstacles: list[float], band: float) -> tuple[float, str]:
    """Where a bar's label goes: inside the bar at the first of its middle, lower, upper,
    bottom or top part that is ``band`` clear of every ``obstacle`` (its trials, whisker ends,
    criterion bound), else above all of them; with its vertical anchor."""
    for share in (0.5, 0.3, 0.7, 0.12, 0.88):
        y = value * share
        if y - band >= 0 and y + band <= value and \
                all(abs(y - other) > band for other in obstacles):
            return y, "middle"
    return max([value, *obstacles]) + band / 3, "bottom"


def _labels(tests: list[str], variants: dict[str, dict[str, dict[str, Any]]],
            bounds: dict[tuple[str, str], list[float]]) -> list[dict[str, Any]]:
    """Each bar's median as a label in its own slot, clear of its trial points, whiskers and
    criterion line (:func:`_label_y`); written upright where many bars share the width."""
    tall: list[float] = [b for found in bounds.values() for b in found]
    for per_test in variants.values():
        for metric in per_test.values():
            tall += [metric["value"], *metric["trials"],
                     (metric.get("interval") or {}).get("high") or 0.0]
    top = max([abs(v) for v in tall] or [1.0]) or 1.0
    upright = len(tests) * len(variants) > 16
    band = top * (0.12 if upright else 0.06)  # half a label and a point, in a 190 px plot
    width = BAR_SPAN / len(variants)
    labels = []
    for number, (name, per_test) in enumerate(variants.items()):
        for test, metric in per_test.items():
            interval = metric.get("interval") or {}
            ends = [interval[k] for k in ("low", "high") if interval.get("level") is not None]
            y, anchor = _label_y(metric["value"], [*metric["trials"], *ends,
                                                   *bounds.get((test, name), [])], band)
            labels.append({"x": tests.index(test) - BAR_SPAN / 2 + (number + 0.5) * width,
                           "xref": "x", "y": y, "yref": "y", "yanchor": anchor,
                           "showarrow": False, "text": figure_text(metric["value"]),
                           "textangle": -90 if upright else 0, "font": {"size": 11}})
    return labels


def bar_chart(case: str, unit: str, records: list[dict[str, Any]]) -> go.Figure | None:
    """The bars of ``case``'s tests in ``unit`` (see the module), or None when no metric of
    theirs has that unit."""
    variants: dict[str, dict[str, dict[str, Any]]] = {}
    by_test: dict[str, dict[str, Any]] = {}
    for record in records:
        for name, metric in record["metrics"].items():
            if metric["unit"] == unit:
                variants.setdefault(name, {})[record["name"]] = metric
                by_test[record["name"]] = record
    if not variants:
        return None
    tests = list(by_test)
    traces: list[Any] = []
    for number, (name, per_test) in enumerate(sorted(variants.items())):
        names, metrics = list(per_test), list(per_test.values())
        outcomes = [metric_outcome(by_test[test], name) for test in names]
        traces.append(go.Bar(
            x=names, y=[m["value"] for m in metrics], name=name, offsetgroup=name,
            error_y=_whiskers(metrics),
            customdata=[outcome or "not judged" for outcome in outcomes],
            hovertemplate="%{x}: %{y:.3s} (%{customdata})<extra>" + name + "</extra>",
            marker={"color": [OUTCOME_COLOURS.get(o or "", PALE[number % len(PALE)])
                              for o in outcomes],
                    "line": {"color": "#555", "width": 1},
                    "pattern": {"shape": HATCHING[number % len(HATCHING)],
                                "fillmode": "overlay", "bgcolor": "rgba(0,0,0,0)",
                                "fgcolor": "#777", "size": 6}}))
        traces.append(go.Scatter(
            x=[test for test, m in per_test.items() for _ in m["trials"]],
            y=[value for m in metrics for value in m["trials"]],
            mode="markers", name=f"{name} trials", offsetgroup=name, showlegend=False,
            marker={"color": "#1f3f66", "size": 7, "symbol": "circle-open"}))
    shapes, names, points = _criterion_lines(tests, by_test, sorted(variants))
    if points:  # the axis reaches every bound, though no bar does
        traces.append(go.Scatter(x=[t for t, _, _ in points], y=[b for _, _, b in points],
                                 mode="markers", marker={"opacity": 0}, showlegend=False,
                                 hoverinfo="skip"))
    traces += [go.Scatter(x=[None], y=[None], mode="lines", name=f"criterion {name}",
                          line={"color": CRITERION, "width": 2, "dash": "dash"})
               for name in names]
    figure = go.Figure(traces)
    bounds: dict[tuple[str, str], list[float]] = {}
    for test, metric, bound in points:
        bounds.setdefault((test, metric), []).append(bound)
    figure.update_layout(
        annotations=_labels(tests, {n: variants[n] for n in sorted(variants)}, bounds),
        **title_layout(f"{case}: {unit} (bars: median with its interval, filled by the "
                       "criterion's outcome; points: trials; dashed: the criterion)"),
        yaxis_title=unit, barmode="group", scattermode="group", shapes=shapes,
        bargap=1 - BAR_SPAN, bargroupgap=0,
        xaxis={"categoryorder": "array", "categoryarray": tests})
    return figure
