"""The trend dashboard's style sheet and script (kept apart from the page builder).

The script draws one chart per series from a compact description (see
:func:`libraries.report.dashboard.series_json`): older samples as downsampled buckets, the newest
ones one by one (hover: run, versions, revision; click: that run's log), jumpavg's groups as a
step line and markers where a regression or progression starts; a failed or inconclusive
run's sample in its own colour, and each criterion judging the series as a dashed line
(``bounds``: :mod:`libraries.report.series_bounds`). Series data is either inline
(``SERIES``) or, for a large history, in side files loaded when a chart scrolls into view
(``CHUNK_OF`` names each series' file; each file calls ``TREND_DATA``).
"""

STYLE = """
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
span.lab { background: #dde8f8; }
span.reference { background: #fde9c4; }
div.charts { display: flex; flex-wrap: wrap; gap: 8px; }
figure.series { margin: 0; width: 560px; }
figure.series figcaption { font-size: 13px; }
figure.regression figcaption { color: #a00; font-weight: bold; }
figure.progression figcaption { color: #070; font-weight: bold; }
div.chart { height: 320px; }
p.note { font-size: 12px; color: #555; max-width: 60em; }
.hidden { display: none; }
"""

SCRIPT = """
const LAZY = SERIES === null || SERIES.length > %(eager)d;
const WAITING = {};
function when(sec) { return new Date(sec * 1000).toISOString().slice(0, 19).replace('T', ' '); }
function hover(s, i) {
  const lines = [];
  const k = i - s.raw;
  if (k < 0) {
    lines.push(s.n[i] + ' samples around ' + when(s.x[i]) + ' UTC');
    lines.push('median ' + s.y[i].toPrecision(5) + ' ' + s.unit + '  (trials '
               + s.lo[i].toPrecision(5) + ' .. ' + s.hi[i].toPrecision(5) + ')');
    return lines.join('<br>');
  }
  lines.push('run ' + s.run[k], when(s.x[i]) + ' UTC',
             s.y[i].toPrecision(5) + ' ' + s.unit + '  (trials ' + s.lo[i].toPrecision(5)
             + ' .. ' + s.hi[i].toPrecision(5) + ')');
  if (VERSIONS[s.ver[k]]) lines.push(VERSIONS[s.ver[k]]);
  if (s.rev[k]) lines.push('revision ' + s.rev[k]);
  if (s.log[k]) lines.push('<i>click: this run\\'s log</i>');
  return lines.join('<br>');
}
const VERDICT_COLOURS = {f: '#d9534f', i: '#f0ad4e'};
function draw(s, div) {
  const x = s.x.map(v => v * 1000);
  const text = s.x.map((_, i) => hover(s, i));
  const verdicts = s.vd || [];
  const colours = s.x.map((_, i) => VERDICT_COLOURS[verdicts[i - s.raw]] || '#1f77b4');
  const traces = [
    {type: 'scatter', mode: 'lines+markers', name: 'samples', x: x, y: s.y, text: text,
     hoverinfo: 'text', line: {color: '#1f77b4', width: 1},
     marker: {size: s.n.map(n => n > 1 ? 3 : 5), color: colours},
     error_y: {type: 'data', symmetric: false, array: s.y.map((v, i) => s.hi[i] - v),
               arrayminus: s.y.map((v, i) => v - s.lo[i]), color: '#8ab', thickness: 1,
               width: 2}},
    {type: 'scatter', mode: 'lines', name: 'trend (jumpavg groups)', x: s.gx.map(v => v * 1000),
     y: s.gy, line: {shape: 'hv', color: '#444', width: 2}, hoverinfo: 'skip'}];
  for (const [kind, colour] of [['regression', '#d00'], ['progression', '#0a0'],
                                ['pending', '#e80'], ['not judged', '#999']]) {
    const idx = s.ak.map((_, i) => i).filter(i => s.ak[i] === kind);
    if (idx.length) {
      traces.push({type: 'scatter', mode: 'markers', name: kind, x: idx.map(i => s.ax[i] * 1000),
                   y: idx.map(i => s.ay[i]), hoverinfo: 'text',
                   text: idx.map(i => kind + (kind === 'not judged' ? ' (failed, invalid or '
                     + 'partial night) ' : kind === 'pending' ? ' (confirmed or cleared by the '
                     + 'next night) ' : ' starts ') + when(s.ax[i]) + ' UTC'),
                   customdata: idx.map(i => s.ai[i]), marker: {color: colour, size: 13,
                   symbol: 'circle-open', line: {width: 3}}});
    }
  }
  const shapes = [];
  for (const bound of s.bounds || []) {  // the criterion judging the series today
    shapes.push({type: 'line', xref: 'paper', x0: 0, x1: 1, yref: 'y', y0: bound.y,
                 y1: bound.y, line: {color: '#7a1f1f', width: 1.5, dash: 'dash'}});
    traces.push({type: 'scatter', mode: 'lines', name: 'criterion ' + bound.text,
                 x: [x[0], x[x.length - 1]], y: [bound.y, bound.y], hoverinfo: 'name',
                 line: {color: '#7a1f1f', width: 1.5, dash: 'dash'}});
  }
  const layout = {shapes: shapes, margin: {l: 60, r: 10, t: 10, b: 40}, hovermode: 'closest',
                  xaxis: {type: 'date'}, yaxis: {title: {text: s.unit}},
                  legend: {orientation: 'h', y: -0.25, font: {size: 10}}};
  Plotly.newPlot(div, traces, layout, {responsive: true, displaylogo: false});
  div.on('plotly_click', (event) => {
    const point = event.points[0];
    const i = point.curveNumber === 0 ? point.pointIndex : point.customdata;
    if (i !== undefined && i >= s.raw && s.log[i - s.raw]) window.open(s.log[i - s.raw], '_blank');
  });
}
function TREND_DATA(list) {
  for (const s of list) {
    LOADED[s.index] = s;
    if (WAITING[s.index]) { draw(s, WAITING[s.index]); delete WAITING[s.index]; }
  }
}
const LOADED = SERIES === null ? {} : SERIES;
const REQUESTED = {};
function show(i, div) {
  if (LOADED[i]) { draw(LOADED[i], div); return; }
  WAITING[i] = div;
  const chunk = CHUNK_OF[i];
  if (REQUESTED[chunk]) return;
  REQUESTED[chunk] = true;
  const script = document.createElement('script');
  script.src = DATA_DIR + '/chunk-' + chunk + '.js';
  document.head.appendChild(script);
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
  if (state.has('topology') && !state.has('lab')) state.set('lab', state.get('topology'));
  for (const name of FILTERS) {
    if (state.has(name)) document.getElementById('f-' + name).value = state.get(name);
  }
  if (state.has('test')) document.getElementById('f-text').value = state.get('test');
  document.getElementById('f-changes').checked = state.get('changes') === '1';
}
function start() {
  for (const id of [...FILTERS.map(n => 'f-' + n), 'f-text', 'f-changes']) {
    document.getElementById(id).addEventListener('input', applyFilters);
  }
  const observer = LAZY ? new IntersectionObserver((entries) => {
    for (const entry of entries) {
      if (entry.isIntersecting) {
        observer.unobserve(entry.target);
        show(Number(entry.target.dataset.index), entry.target);
      }
    }
  }, {rootMargin: '400px'}) : null;
  if (!location.hash.startsWith('#chart-')) restoreFilters();
  applyFilters();
  document.querySelectorAll('div.chart').forEach((div) => {
    if (LAZY) { observer.observe(div); } else { show(Number(div.dataset.index), div); }
  });
}
start();
"""
