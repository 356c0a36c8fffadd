"""Self-contained plotly HTML dashboard of trend series (works offline: plotly.js is inlined).

Layout: a summary table (test, metric, last value, trend average, change, classification;
regressions red, progressions green, each row links to its chart), then one chart per series:
the samples with the trial range as error bars, jumpavg's group averages as a step line, red /
green markers where a group starts a regression / progression; hover shows run id, date, value,
trial range, versions and project revision.

Charts are described as compact JSON and drawn by one small script with the single inlined
plotly.js (no per-figure Python objects: hundreds of charts stay fast to write). Past
:data:`EAGER_LIMIT` charts, each chart is drawn when it scrolls into view.
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from plotly.offline import get_plotlyjs

from libraries.trend.analysis import SUMMARY_HEADER, SeriesTrend, summary_rows

EAGER_LIMIT = 40
"""Dashboards with more charts draw each chart lazily when it becomes visible."""

_STYLE = """
body { font-family: sans-serif; margin: 1em 2em; color: #222; }
table.summary { border-collapse: collapse; font-size: 13px; }
table.summary th, table.summary td { border: 1px solid #ccc; padding: 3px 8px; text-align: left; }
table.summary th { background: #eee; }
tr.regression td { background: #f8d0d0; }
tr.progression td { background: #d4f0d4; }
td.regression { color: #a00; font-weight: bold; }
td.progression { color: #070; font-weight: bold; }
section.series { margin-top: 1.5em; }
section.series h2 { font-size: 15px; margin: 0.2em 0; }
section.regression h2 { color: #a00; }
section.progression h2 { color: #070; }
div.chart { height: 340px; }
p.note { font-size: 12px; color: #555; max-width: 60em; }
"""

_SCRIPT = """
const EAGER = SERIES.length <= %(eager)d;
function hover(s, i) {
  const lines = ['run ' + s.run[i], s.x[i] + ' UTC',
                 s.y[i].toPrecision(5) + ' ' + s.unit + '  (trials ' + s.lo[i].toPrecision(5)
                 + ' .. ' + s.hi[i].toPrecision(5) + ')'];
  if (VERSIONS[s.ver[i]]) lines.push(VERSIONS[s.ver[i]]);
  if (s.rev[i]) lines.push('revision ' + s.rev[i]);
  if (s.anom[i]) lines.push('<b>' + s.anom[i] + '</b>');
  return lines.join('<br>');
}
function draw(s, div) {
  const text = s.x.map((_, i) => hover(s, i));
  const traces = [
    {type: 'scatter', mode: 'lines+markers', name: 'samples', x: s.x, y: s.y, text: text,
     hoverinfo: 'text', line: {color: '#1f77b4', width: 1}, marker: {size: 5},
     error_y: {type: 'data', symmetric: false, array: s.y.map((v, i) => s.hi[i] - v),
               arrayminus: s.y.map((v, i) => v - s.lo[i]), color: '#8ab', thickness: 1,
               width: 2}},
    {type: 'scatter', mode: 'lines', name: 'trend (jumpavg groups)', x: s.x, y: s.trend,
     line: {shape: 'hv', color: '#444', width: 2}, hoverinfo: 'skip'}];
  for (const [kind, colour] of [['regression', '#d00'], ['progression', '#0a0']]) {
    const idx = s.x.map((_, i) => i).filter(i => s.anom[i] === kind);
    if (idx.length) {
      traces.push({type: 'scatter', mode: 'markers', name: kind, x: idx.map(i => s.x[i]),
                   y: idx.map(i => s.y[i]), text: idx.map(i => text[i]), hoverinfo: 'text',
                   marker: {color: colour, size: 13, symbol: 'circle-open', line: {width: 3}}});
    }
  }
  const layout = {margin: {l: 70, r: 20, t: 10, b: 40}, hovermode: 'closest',
                  xaxis: {type: 'date'}, yaxis: {title: {text: s.unit}},
                  legend: {orientation: 'h', y: -0.2}};
  Plotly.newPlot(div, traces, layout, {responsive: true, displaylogo: false});
}
function start() {
  const observer = EAGER ? null : new IntersectionObserver((entries) => {
    for (const entry of entries) {
      if (entry.isIntersecting) {
        observer.unobserve(entry.target);
        draw(SERIES[Number(entry.target.dataset.index)], entry.target);
      }
    }
  }, {rootMargin: '400px'});
  SERIES.forEach((s, i) => {
    const div = document.getElementById('plot-' + i);
    if (EAGER) { draw(s, div); } else { observer.observe(div); }
  });
}
start();
"""


def _series_json(trend: SeriesTrend, index: int, versions: dict[str, int]) -> dict[str, Any]:
    rows = trend.samples
    level = [0.0] * len(rows)
    for group in trend.groups:
        level[group.start: group.end + 1] = [group.avg] * (group.end - group.start + 1)
    anomalies = [""] * len(rows)
    for position, kind in trend.anomalies.items():
        anomalies[position] = kind
    return {
        "index": index,
        "unit": trend.unit,
        "x": rows["start_time"].dt.strftime("%Y-%m-%d %H:%M:%S").tolist(),
        "y": rows["value"].tolist(),
        "lo": rows["low"].tolist(),
        "hi": rows["high"].tolist(),
        "run": rows["run_id"].tolist(),
        "ver": [versions.setdefault(v, len(versions)) for v in rows["versions"].tolist()],
        "rev": rows["revision"].tolist(),
        "trend": level,
        "anom": anomalies,
    }


def _script_json(value: Any) -> str:
    """JSON safe inside a <script> element."""
    return json.dumps(value, separators=(",", ":")).replace("</", "<\\/")


def _summary_table(trends: Sequence[SeriesTrend]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in SUMMARY_HEADER)
    body = []
    for index, (trend, row) in enumerate(zip(trends, summary_rows(trends), strict=True)):
        cells = [f'<a href="#chart-{index}">{html.escape(row[0])}</a>']
        cells += [html.escape(c) for c in row[1:]]
        tds = "".join(f"<td>{c}</td>" for c in cells[:-1])
        tds += f'<td class="{trend.classification}">{cells[-1]}</td>'
        body.append(f'<tr class="{trend.classification}">{tds}</tr>')
    return f'<table class="summary"><tr>{head}</tr>\n' + "\n".join(body) + "\n</table>"


def render_dashboard(trends: Sequence[SeriesTrend], title: str = "Performance trend") -> str:
    """The complete HTML document for ``trends`` (in the given order)."""
    versions: dict[str, int] = {}
    series = [_series_json(t, i, versions) for i, t in enumerate(trends)]
    counts = {c: sum(t.classification == c for t in trends)
              for c in ("regression", "progression", "normal")}
    runs = {run for t in trends for run in t.samples["run_id"].tolist()}
    sections = "\n".join(
        f'<section class="series {t.classification}" id="chart-{i}">'
        f"<h2>{html.escape(t.key)} &mdash; {html.escape(t.classification)}</h2>"
        f'<div class="chart" id="plot-{i}" data-index="{i}"></div></section>'
        for i, t in enumerate(trends)
    )
    generated = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>{html.escape(title)}</title><style>{_STYLE}</style>\n"
        f'<script type="text/javascript">{get_plotlyjs()}</script></head>\n<body>\n'
        f"<h1>{html.escape(title)}</h1>\n"
        f"<p>{len(trends)} series over {len(runs)} runs: <b>{counts['regression']} "
        f"regression(s)</b>, {counts['progression']} progression(s), {counts['normal']} normal."
        f" Generated {generated}.</p>\n"
        '<p class="note">Each series is grouped by jumpavg (minimum description length); the '
        "trend line is the average of each group. The newest sample is a regression or "
        "progression when its group moved against the previous group (direction-aware) "
        "recently. Error bars: min..max of the run's trials.</p>\n"
        f"{_summary_table(trends)}\n{sections}\n"
        f"<script>const SERIES = {_script_json(series)};\n"
        f"const VERSIONS = {_script_json(list(versions))};\n"
        f"{_SCRIPT % {'eager': EAGER_LIMIT}}</script>\n</body></html>\n"
    )
