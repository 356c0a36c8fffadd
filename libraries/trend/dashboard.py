"""Self-contained plotly HTML dashboard of trend series (works offline: plotly.js is inlined).

Layout, built to stay usable with hundreds of series:

- a navigation bar: filters by case, stack, topology and metric, a test-id search and a
  "changes only" switch (all client-side; the page stays one offline file). The filters live
  in the URL fragment, so a filtered view is a link: ``trend.html#case=ssl_proxy&changes=1``;
- the regressions and progressions in a table at the top (every series in a folded table);
- one section per test, regressions first: the test's metrics as charts side by side, each
  with the samples and their trial range as error bars, jumpavg's group averages as a step
  line and red / green markers where a group starts a regression / progression. Hover shows
  run id, date, value, trial range, versions and project revision; a click on a sample opens
  that run's log.html at the test (when the run's ``tests.jsonl`` named it).

Charts are described as compact JSON and drawn by one small script with the single inlined
plotly.js; past :data:`EAGER_LIMIT` charts each chart is drawn when it scrolls into view.
"""

from __future__ import annotations

import html
import json
import os
from collections import defaultdict
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from plotly.offline import get_plotlyjs

from libraries.trend.analysis import ORDER, SUMMARY_HEADER, SeriesTrend, summary_rows

EAGER_LIMIT = 40
"""Dashboards with more charts draw each chart lazily when it becomes visible."""

FILTERS = ("case", "stack", "topology", "metric")

_STYLE = """
body { font-family: sans-serif; margin: 0 2em 1em 2em; color: #222; }
nav { position: sticky; top: 0; background: #f4f4f4; border-bottom: 1px solid #ccc;
      padding: 6px 8px; z-index: 10; font-size: 13px; }
nav label { margin-right: 1em; }
table.summary { border-collapse: collapse; font-size: 13px; }
table.summary th, table.summary td { border: 1px solid #ccc; padding: 3px 8px; text-align: left; }
table.summary th { background: #eee; }
tr.regression td { background: #f8d0d0; }
tr.progression td { background: #d4f0d4; }
td.regression { color: #a00; font-weight: bold; }
td.progression { color: #070; font-weight: bold; }
section.test { margin-top: 1.2em; border-top: 1px solid #ccc; }
section.test h2 { font-size: 15px; margin: 0.4em 0; }
section.regression h2 { color: #a00; }
section.progression h2 { color: #070; }
span.badge { font-size: 11px; font-weight: normal; background: #e8e8e8; border-radius: 3px;
             padding: 1px 5px; margin-left: 4px; color: #333; }
div.charts { display: flex; flex-wrap: wrap; gap: 8px; }
figure.series { margin: 0; width: 560px; }
figure.series figcaption { font-size: 13px; }
figure.regression figcaption { color: #a00; font-weight: bold; }
figure.progression figcaption { color: #070; font-weight: bold; }
div.chart { height: 320px; }
p.note { font-size: 12px; color: #555; max-width: 60em; }
.hidden { display: none; }
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
  if (s.log[i]) lines.push('<i>click: this run\\'s log</i>');
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
                   customdata: idx, marker: {color: colour, size: 13, symbol: 'circle-open',
                   line: {width: 3}}});
    }
  }
  const layout = {margin: {l: 60, r: 10, t: 10, b: 40}, hovermode: 'closest',
                  xaxis: {type: 'date'}, yaxis: {title: {text: s.unit}},
                  legend: {orientation: 'h', y: -0.25, font: {size: 10}}};
  Plotly.newPlot(div, traces, layout, {responsive: true, displaylogo: false});
  div.on('plotly_click', (event) => {
    const point = event.points[0];
    const i = point.curveNumber === 0 ? point.pointIndex : point.customdata;
    if (i !== undefined && s.log[i]) window.open(s.log[i], '_blank');
  });
}
function applyFilters() {
  const want = {};
  for (const name of FILTERS) want[name] = document.getElementById('f-' + name).value;
  const text = document.getElementById('f-text').value.trim().toLowerCase();
  const changes = document.getElementById('f-changes').checked;
  let shown = 0;
  document.querySelectorAll('section.test').forEach((section) => {
    let visible = 0;
    section.querySelectorAll('figure.series').forEach((fig) => {
      const ok = FILTERS.every(n => !want[n] || fig.dataset[n] === want[n])
        && (!text || section.dataset.test.toLowerCase().includes(text))
        && (!changes || fig.dataset.classification !== 'normal');
      fig.classList.toggle('hidden', !ok);
      visible += ok ? 1 : 0;
    });
    section.classList.toggle('hidden', visible === 0);
    shown += visible;
  });
  document.getElementById('shown').textContent = shown;
  const state = new URLSearchParams();
  for (const name of FILTERS) if (want[name]) state.set(name, want[name]);
  if (text) state.set('test', text);
  if (changes) state.set('changes', '1');
  history.replaceState(null, '', state.toString() ? '#' + state.toString() : ' ');
}
function restoreFilters() {
  const state = new URLSearchParams(location.hash.slice(1));
  for (const name of FILTERS) {
    if (state.has(name)) document.getElementById('f-' + name).value = state.get(name);
  }
  if (state.has('test')) document.getElementById('f-text').value = state.get('test');
  document.getElementById('f-changes').checked = state.get('changes') === '1';
}
function start() {
  for (const id of ['f-case', 'f-stack', 'f-topology', 'f-metric', 'f-text', 'f-changes']) {
    document.getElementById(id).addEventListener('input', applyFilters);
  }
  const observer = EAGER ? null : new IntersectionObserver((entries) => {
    for (const entry of entries) {
      if (entry.isIntersecting) {
        observer.unobserve(entry.target);
        draw(SERIES[Number(entry.target.dataset.index)], entry.target);
      }
    }
  }, {rootMargin: '400px'});
  if (!location.hash.startsWith('#chart-')) restoreFilters();
  applyFilters();
  SERIES.forEach((s, i) => {
    const div = document.getElementById('plot-' + i);
    if (EAGER) { draw(s, div); } else { observer.observe(div); }
  });
}
start();
"""


def _last(trend: SeriesTrend, column: str) -> str:
    if column not in trend.samples.columns or trend.samples.empty:
        return ""
    return str(trend.samples[column].iloc[-1])


def _facets(trend: SeriesTrend) -> dict[str, str]:
    """case / stack / topology / metric of a series (the newest sample's)."""
    return {"case": _last(trend, "case"), "stack": _last(trend, "stack"),
            "topology": _last(trend, "topology") or trend.test_id.split("/")[0],
            "metric": trend.metric}


def _link(target: str, base: Path | None) -> str:
    """A sample's log link relative to the dashboard's folder (absolute file URI otherwise)."""
    if not target:
        return ""
    path, _, anchor = target.partition("#")
    if base is None:
        return Path(path).as_uri() + (f"#{anchor}" if anchor else "")
    return os.path.relpath(path, base) + (f"#{anchor}" if anchor else "")


def _series_json(trend: SeriesTrend, index: int, versions: dict[str, int],
                 base: Path | None) -> dict[str, Any]:
    rows = trend.samples
    level = [0.0] * len(rows)
    for group in trend.groups:
        level[group.start: group.end + 1] = [group.avg] * (group.end - group.start + 1)
    anomalies = [""] * len(rows)
    for position, kind in trend.anomalies.items():
        anomalies[position] = kind
    logs = rows["log"].tolist() if "log" in rows.columns else [""] * len(rows)
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
        "log": [_link(str(target), base) for target in logs],
    }


def _script_json(value: Any) -> str:
    """JSON safe inside a <script> element."""
    return json.dumps(value, separators=(",", ":")).replace("</", "<\\/")


def _summary_table(trends: Sequence[SeriesTrend], anchors: list[str],
                   only_changes: bool) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in SUMMARY_HEADER)
    body = []
    for trend, row, anchor in zip(trends, summary_rows(trends), anchors, strict=True):
        if only_changes and trend.classification == "normal":
            continue
        cells = [f'<a href="#{anchor}">{html.escape(row[0])}</a>']
        cells += [html.escape(c) for c in row[1:]]
        tds = "".join(f"<td>{c}</td>" for c in cells[:-1])
        tds += f'<td class="{trend.classification}">{cells[-1]}</td>'
        body.append(f'<tr class="{trend.classification}">{tds}</tr>')
    if not body:
        return "<p>No regression or progression.</p>" if only_changes else ""
    return f'<table class="summary"><tr>{head}</tr>\n' + "\n".join(body) + "\n</table>"


def _select(name: str, values: set[str]) -> str:
    options = "".join(f'<option value="{html.escape(v)}">{html.escape(v)}</option>'
                      for v in sorted(v for v in values if v))
    return (f'<label>{name} <select id="f-{name}"><option value="">all</option>{options}'
            "</select></label>")


def _sections(trends: Sequence[SeriesTrend], facets: list[dict[str, str]]) -> str:
    by_test: dict[str, list[int]] = defaultdict(list)
    for index, trend in enumerate(trends):
        by_test[trend.test_id].append(index)
    order = sorted(by_test, key=lambda test: (min(ORDER[trends[i].classification]
                                                  for i in by_test[test]), test))
    parts = []
    for test in order:
        indexes = by_test[test]
        worst = min((trends[i].classification for i in indexes), key=ORDER.__getitem__)
        first = facets[indexes[0]]
        badges = "".join(f'<span class="badge">{html.escape(first[k])}</span>'
                         for k in ("case", "stack", "topology") if first[k])
        figures = "".join(
            f'<figure class="series {trends[i].classification}" id="chart-{i}" '
            + " ".join(f'data-{k}="{html.escape(v)}"' for k, v in facets[i].items())
            + f' data-classification="{trends[i].classification}">'
            f"<figcaption>{html.escape(trends[i].metric)} ({html.escape(trends[i].unit)})"
            f"{'' if trends[i].classification == 'normal' else ': ' + trends[i].classification}"
            f'</figcaption><div class="chart" id="plot-{i}" data-index="{i}"></div></figure>'
            for i in indexes)
        parts.append(f'<section class="test {worst}" data-test="{html.escape(test)}">'
                     f"<h2>{html.escape(test)}{badges}</h2>"
                     f'<div class="charts">{figures}</div></section>')
    return "\n".join(parts)


def render_dashboard(trends: Sequence[SeriesTrend], title: str = "Performance trend",
                     base: Path | None = None) -> str:
    """The complete HTML document for ``trends``; ``base`` is the folder the page is written
    to (log links are made relative to it)."""
    versions: dict[str, int] = {}
    series = [_series_json(t, i, versions, base) for i, t in enumerate(trends)]
    facets = [_facets(t) for t in trends]
    counts = {c: sum(t.classification == c for t in trends)
              for c in ("regression", "progression", "normal")}
    runs = {run for t in trends for run in t.samples["run_id"].tolist()}
    anchors = [f"chart-{i}" for i in range(len(trends))]
    selects = "".join(_select(name, {f[name] for f in facets}) for name in FILTERS)
    generated = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>{html.escape(title)}</title><style>{_STYLE}</style>\n"
        f'<script type="text/javascript">{get_plotlyjs()}</script></head>\n<body>\n'
        f"<nav>{selects}<label>test <input id=\"f-text\" type=\"search\" size=\"24\"></label>"
        '<label><input id="f-changes" type="checkbox"> changes only</label>'
        '<span id="shown"></span> charts shown</nav>\n'
        f"<h1>{html.escape(title)}</h1>\n"
        f"<p>{len(trends)} series of {len(set(t.test_id for t in trends))} tests over "
        f"{len(runs)} runs: <b>{counts['regression']} regression(s)</b>, "
        f"{counts['progression']} progression(s), {counts['normal']} normal. "
        f"Generated {generated}.</p>\n"
        '<p class="note">Each series is grouped by jumpavg (minimum description length); the '
        "trend line is the average of each group. The newest sample is a regression or "
        "progression when its group moved against the previous group (direction-aware) "
        "recently. Error bars: min..max of the run's trials. Click a sample to open that "
        "run's log at the test.</p>\n"
        f"{_summary_table(trends, anchors, only_changes=True)}\n"
        f"<details><summary>Every series ({len(trends)})</summary>"
        f"{_summary_table(trends, anchors, only_changes=False)}</details>\n"
        f"{_sections(trends, facets)}\n"
        f"<script>const SERIES = {_script_json(series)};\n"
        f"const VERSIONS = {_script_json(list(versions))};\n"
        f"const FILTERS = {_script_json(list(FILTERS))};\n"
        f"{_SCRIPT % {'eager': EAGER_LIMIT}}</script>\n</body></html>\n"
    )
