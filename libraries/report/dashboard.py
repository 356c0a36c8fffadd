"""Offline plotly HTML dashboard of trend series (plotly.js is inlined; no network needed).

Layout, built to stay usable with thousands of series and years of history:

- a navigation bar: filters by case, stack, lab and metric, a test-id search and a
  "changes only" switch (all client-side). The filters live in the URL fragment, so a
  filtered view is a link: ``trend.html#case=ssl_proxy&changes=1``;
- the regressions and progressions in a table at the top (every series in a folded table);
- one section per test, regressions first: the test's metrics as charts side by side, each
  with the samples and their trial range as error bars (a failed run's sample red, an
  inconclusive one amber), jumpavg's group averages as a step line, the criterion judging the
  series today as a dashed line (:mod:`libraries.report.series_bounds`), and red / green
  markers where a group starts a regression / progression. Hover shows
  run id, date, value, trial range, versions and project revision; a click on a sample opens
  that run's log.html at the test (when the run's ``tests.jsonl`` named it).

Each series shows its newest :data:`RAW_POINTS` samples one by one and older ones as at most
:data:`BUCKETS` buckets (median and trial range of consecutive samples), with the groups drawn
from their exact boundaries, and each section names the lab. Charts are described as compact
JSON and drawn by one small script (:mod:`libraries.report.dashboard_assets`); past
:data:`EAGER_LIMIT` charts each chart is drawn when it scrolls into view. Up to
:data:`INLINE_BYTES` of series data the page is one self-contained file; beyond, the data goes
to side files in ``<page>-data/`` loaded on demand, so the page's size depends on the number
of series, not on the length of the history.
"""

from __future__ import annotations

import html
import json
import os
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from plotly.offline import get_plotlyjs

from libraries.report.dashboard_assets import SCRIPT, STYLE
from libraries.report.series_bounds import series_bounds, verdict_codes
from libraries.report.series_notes import comparison_changes
from libraries.results.criteria import CriteriaFile
from libraries.trend.analysis import (
    ORDER,
    SUMMARY_HEADER,
    SeriesTrend,
    family_statement,
    summary_rows,
)

EAGER_LIMIT = 40
"""Dashboards with more charts draw each chart lazily when it becomes visible."""
RAW_POINTS = 60
"""The newest samples of a series are drawn one by one (run, versions, log link)..."""
BUCKETS = 120
"""...older ones as at most this many buckets of consecutive samples (median, trial range)."""
INLINE_BYTES = 3_000_000
"""Series data up to this size is inlined (one self-contained file); beyond, it goes to side
files beside the page, loaded when a chart scrolls into view: the page stays small at any
history size."""
CHUNK_SERIES = 20
"""Series per side file."""

FILTERS = ("case", "stack", "lab", "metric")


def _last(trend: SeriesTrend, column: str) -> str:
    if column not in trend.samples.columns or trend.samples.empty:
        return ""
    value = trend.samples[column].iat[-1]
    return "" if pd.isna(value) else str(value)


def _facets(trend: SeriesTrend) -> dict[str, str]:
    """case / stack / lab / metric / test key of a series (the newest sample's)."""
    rows = trend.samples
    last = rows.iloc[-1].to_dict() if not rows.empty else {}

    def text(name: str) -> str:
        value = last.get(name)
        return "" if value is None or pd.isna(value) else str(value)
    return {"case": text("case"), "stack": text("stack"),
            "lab": text("lab") or text("topology") or trend.test_id.split("/")[0],
            "metric": trend.metric, "key": text("test_key") or trend.test_id}


def _link(target: str, base: Path | None) -> str:
    """A sample's log link relative to the dashboard's folder (absolute file URI otherwise)."""
    if not target:
        return ""
    path, _, anchor = target.partition("#")
    if base is None:
        return Path(path).as_uri() + (f"#{anchor}" if anchor else "")
    return os.path.relpath(path, base) + (f"#{anchor}" if anchor else "")


def _cached_link(target: str, base: Path | None, links: dict[str, str]) -> str:
    """:func:`_link`, computed once per log file (the anchor varies per test)."""
    path, _, anchor = target.partition("#")
    if path not in links:
        links[path] = _link(path, base)
    return links[path] + (f"#{anchor}" if anchor and links[path] else "")


def _rounded(values: np.ndarray) -> list[float]:
    """Values with 6 significant digits (of the series' largest): a shorter page."""
    finite = np.abs(values[np.isfinite(values)])
    top = float(finite.max()) if finite.size else 0.0
    digits = 5 - int(np.floor(np.log10(top))) if top > 0 else 6
    return np.round(values, digits).tolist()


def _arrays(trend: SeriesTrend) -> tuple[np.ndarray, ...]:
    """(seconds, value, low, high) of every sample of the series, oldest first."""
    if trend.history is not None:
        h = trend.history
        return (np.asarray(h.t) // 1_000_000, np.asarray(h.value), np.asarray(h.low),
                np.asarray(h.high))
    rows = trend.samples
    seconds = rows["start_time"].astype("datetime64[us, UTC]").astype("int64") // 1_000_000
    return (seconds.to_numpy(), rows["value"].to_numpy(float), rows["low"].to_numpy(float),
            rows["high"].to_numpy(float))


def _with_intervals(rows: Any, low: np.ndarray, high: np.ndarray,
                    first: int) -> tuple[np.ndarray, np.ndarray]:
    """The error bars of the samples drawn one by one (``rows``, from index ``first``): the
    median's confidence interval where the record has one (version 3), else the trials'
    range."""
    if "ci_low" not in rows.columns or not len(rows):
        return low, high
    ci_low = pd.to_numeric(rows["ci_low"], errors="coerce").to_numpy(float)
    ci_high = pd.to_numeric(rows["ci_high"], errors="coerce").to_numpy(float)
    low, high = low.copy(), high.copy()
    known = np.isfinite(ci_low) & np.isfinite(ci_high)
    low[first:][known] = ci_low[known]
    high[first:][known] = ci_high[known]
    return low, high


def _buckets(seconds: np.ndarray, value: np.ndarray, low: np.ndarray, high: np.ndarray,
             count: int) -> tuple[list[int], np.ndarray, np.ndarray, np.ndarray, list[int]]:
    """Samples ``0..count-1`` in at most :data:`BUCKETS` runs of consecutive samples: the
    middle sample's time, the median value, the smallest and largest trial, the count."""
    if count == 0:
        return [], np.empty(0), np.empty(0), np.empty(0), []
    edges = np.unique(np.linspace(0, count, min(BUCKETS, count) + 1).astype(int))
    starts, sizes = edges[:-1], np.diff(edges)
    grid = starts[:, None] + np.arange(sizes.max())[None, :]  # buckets differ by <= 1 sample
    inside = grid < edges[1:, None]
    grid = np.where(inside, grid, starts[:, None])
    ordered = np.sort(np.where(inside, value[grid], np.inf), axis=1)
    rows = np.arange(len(sizes))
    medians = (ordered[rows, (sizes - 1) // 2] + ordered[rows, sizes // 2]) / 2
    return (seconds[starts + (sizes - 1) // 2].tolist(), medians,
            np.minimum.reduceat(low[:count], starts), np.maximum.reduceat(high[:count], starts),
            sizes.tolist())


def series_json(trend: SeriesTrend, index: int, versions: dict[str, int],
                base: Path | None, links: dict[str, str] | None = None) -> dict[str, Any]:
    """A series as the page's script draws it: points ``x`` (seconds), ``y``, ``lo``, ``hi``
    and ``n`` (samples per point); the first ``raw`` points are buckets of older samples, the
    others one sample each with ``run``, ``ver``, ``rev`` and ``log``; the group line ``gx``/
    ``gy``; anomaly markers ``ax``/``ay``/``ak`` (``ai``: the marked point, -1 in a bucket)."""
    seconds, value, low, high = _arrays(trend)
    size = len(seconds)
    rows = trend.samples
    if len(rows) > RAW_POINTS:
        rows = rows.iloc[len(rows) - RAW_POINTS:]
    first_raw = size - len(rows)
    bx, by, blo, bhi, bn = _buckets(seconds, value, low, high, first_raw)
    low, high = _with_intervals(rows, low.astype(float), high.astype(float), first_raw)
    logs = rows["log"].fillna("").tolist() if "log" in rows.columns else [""] * len(rows)
    links = {} if links is None else links
    gx, gy = [], []
    for group in trend.groups:
        gx += [int(seconds[group.start]), int(seconds[group.end])]
        gy += [group.avg, group.avg]
    marks = sorted(trend.anomalies.items())
    if "excluded" in rows.columns:  # failed, invalid or partial nights: drawn, never judged
        excluded = rows["excluded"].fillna("").astype(str).to_numpy() != ""
        marks += [(first_raw + int(i), "not judged") for i in np.flatnonzero(excluded)]
    if trend.classification == "pending":
        marks.append((size - 1, "pending"))
    return {
        "index": index, "unit": trend.unit, "raw": len(bx),
        "x": bx + seconds[first_raw:].tolist(),
        "y": _rounded(np.concatenate([by, value[first_raw:]])),
        "lo": _rounded(np.concatenate([blo, low[first_raw:]])),
        "hi": _rounded(np.concatenate([bhi, high[first_raw:]])),
        "n": bn + [1] * len(rows),
        "run": rows["run_id"].astype(str).tolist(),
        "ver": [versions.setdefault(str(v), len(versions)) for v in rows["versions"].tolist()],
        "rev": rows["revision"].fillna("").astype(str).tolist(),
        "log": [_cached_link(str(target), base, links) for target in logs],
        "gx": gx, "gy": _rounded(np.array(gy)),
        "ax": [int(seconds[p]) for p, _ in marks], "ay": [float(value[p]) for p, _ in marks],
        "ak": [kind for _, kind in marks],
        "ai": [len(bx) + p - first_raw if p >= first_raw else -1 for p, _ in marks],
        "vd": verdict_codes(rows),
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


def _sections(trends: Sequence[SeriesTrend], facets: list[dict[str, str]]) -> tuple[str,
                                                                                  list[int]]:
    """The test sections (worst first; the same test on several labs side by side) and the
    series indexes in page order."""
    by_test: dict[str, list[int]] = defaultdict(list)
    for index, trend in enumerate(trends):
        by_test[trend.test_id].append(index)
    order = sorted(by_test, key=lambda test: (
        min(ORDER[trends[i].classification] for i in by_test[test]),
        facets[by_test[test][0]]["key"], test))
    changed = comparison_changes(trends)
    parts = []
    for test in order:
        indexes = by_test[test]
        worst = min((trends[i].classification for i in indexes), key=ORDER.__getitem__)
        first = facets[indexes[0]]
        badges = "".join(f'<span class="badge {k}">{html.escape(first[k])}</span>'
                         for k in ("case", "stack", "lab") if first[k])
        if test in changed:
            badges += f'<span class="badge reference">{html.escape(changed[test])}</span>'
        figures = "".join(
            f'<figure class="series {trends[i].classification}" id="chart-{i}" '
            + " ".join(f'data-{k}="{html.escape(v)}"' for k, v in facets[i].items()
                       if k in FILTERS)
            + f' data-classification="{trends[i].classification}">'
            f"<figcaption>{html.escape(trends[i].metric)} ({html.escape(trends[i].unit)})"
            f"{'' if trends[i].classification == 'normal' else ': ' + trends[i].classification}"
            f'</figcaption><div class="chart" id="plot-{i}" data-index="{i}"></div></figure>'
            for i in indexes)
        parts.append(f'<section class="test {worst}" data-test="{html.escape(test)}">'
                     f"<h2>{html.escape(test)}{badges}</h2>"
                     f'<div class="charts">{figures}</div></section>')
    return "\n".join(parts), [i for test in order for i in by_test[test]]


@dataclass(frozen=True)
class Dashboard:
    """A rendered dashboard: the ``page`` and its side ``files`` (name -> text; empty when
    the series data is inline) that go into the folder ``data_dir`` beside the page."""

    page: str
    files: dict[str, str]
    data_dir: str


def build_dashboard(trends: Sequence[SeriesTrend], title: str = "Performance trend",
                    base: Path | None = None, data_dir: str = "trend-data",
                    runs: int | None = None, inline_bytes: int = INLINE_BYTES,
                    criteria: CriteriaFile | None = None) -> Dashboard:
    """The page for ``trends``; ``base`` is the folder it is written to (log links are made
    relative to it); ``runs``: how many runs the history holds (default: those named by the
    samples). Series data beyond ``inline_bytes`` goes to side files in ``data_dir``.
    ``criteria``: the file whose bounds are drawn over each series they judge
    (:mod:`libraries.report.series_bounds`; None: no criterion line)."""
    versions: dict[str, int] = {}
    links: dict[str, str] = {}
    series = [{**series_json(t, i, versions, base, links),
               "bounds": series_bounds(t, criteria)} for i, t in enumerate(trends)]
    facets = [_facets(t) for t in trends]
    counts = {c: sum(t.classification == c for t in trends) for c in ORDER}
    family = family_statement(trends)
    if runs is None:
        runs = len({run for t in trends for run in t.samples["run_id"].tolist()})
    anchors = [f"chart-{i}" for i in range(len(trends))]
    selects = "".join(_select(name, {f[name] for f in facets}) for name in FILTERS)
    sections, page_order = _sections(trends, facets)
    data = _script_json(series)
    files: dict[str, str] = {}
    chunk_of = [0] * len(series)
    if len(data) > inline_bytes:
        for chunk, first in enumerate(range(0, len(page_order), CHUNK_SERIES)):
            members = page_order[first: first + CHUNK_SERIES]
            for index in members:
                chunk_of[index] = chunk
            files[f"chunk-{chunk}.js"] = (
                f"TREND_DATA({_script_json([series[i] for i in members])});\n")
        data = "null"
    generated = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    labs = sorted({f["lab"] for f in facets if f["lab"]})
    page = (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>{html.escape(title)}</title><style>{STYLE}</style>\n"
        f'<script type="text/javascript">{get_plotlyjs()}</script></head>\n<body>\n'
        f"<nav>{selects}<label>test <input id=\"f-text\" type=\"search\" size=\"24\"></label>"
        '<label><input id="f-changes" type="checkbox"> changes only</label>'
        '<span id="shown"></span> charts shown</nav>\n'
        f"<h1>{html.escape(title)}</h1>\n"
        f"<p>{len(trends)} series of {len(set(t.test_id for t in trends))} tests over "
        f"{runs} runs on {len(labs)} lab(s) ({html.escape(', '.join(labs))}): "
        f"<b>{counts['regression']} regression(s)</b>, <b>{counts['pending']} pending</b> "
        "(beyond the margin on the newest night; confirmed or cleared by the next night), "
        f"{counts['progression']} progression(s), {counts['normal']} normal. "
        f"Generated {generated}.</p>\n"
        + (f"<p>{html.escape(family)}.</p>\n" if family else "") +
        '<p class="note">Each series is grouped by jumpavg (minimum description length) over '
        "its whole history; the trend line is the average of each group. The newest sample is "
        "a regression or progression when its group moved against the previous group "
        "(direction-aware) recently and the interval of the change agrees (the summary's "
        "interval check). The newest samples are drawn one by one (error bars: the median's "
        "confidence interval, or min..max of the run's trials for records without one; click "
        "one to open that run's log at the test); older ones as buckets of consecutive samples "
        "(median, smallest and largest trial).</p>\n"
        f"{_summary_table(trends, anchors, only_changes=True)}\n"
        f"<details><summary>Every series ({len(trends)})</summary>"
        f"{_summary_table(trends, anchors, only_changes=False)}</details>\n"
        f"{sections}\n"
        f"<script>const SERIES = {data};\n"
        f"const CHUNK_OF = {_script_json(chunk_of if files else [])};\n"
        f"const DATA_DIR = {_script_json(data_dir)};\n"
        f"const VERSIONS = {_script_json(list(versions))};\n"
        f"const FILTERS = {_script_json(list(FILTERS))};\n"
        f"{SCRIPT % {'eager': EAGER_LIMIT}}</script>\n</body></html>\n"
    )
    return Dashboard(page, files, data_dir)


def render_dashboard(trends: Sequence[SeriesTrend], title: str = "Performance trend",
                     base: Path | None = None) -> str:
    """The self-contained page for ``trends`` (every series inline, whatever its size)."""
    return build_dashboard(trends, title, base, inline_bytes=2**62).page


def write_dashboard(trends: Sequence[SeriesTrend], path: Path, title: str = "Performance trend",
                    runs: int | None = None, criteria: CriteriaFile | None = None
                    ) -> Dashboard:
    """Write the page to ``path`` and, for a large history, its data files to
    ``<page name>-data/`` beside it (stale ones removed); ``criteria``: as
    :func:`build_dashboard`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    folder = path.parent / f"{path.stem}-data"
    dashboard = build_dashboard(trends, title, path.resolve().parent, folder.name, runs,
                                criteria=criteria)
    if folder.is_dir():
        for stale in folder.glob("chunk-*.js"):
            if stale.name not in dashboard.files:
                stale.unlink()
    if dashboard.files:
        folder.mkdir(exist_ok=True)
        for name, text in dashboard.files.items():
            (folder / name).write_text(text, encoding="utf-8")
    path.write_text(dashboard.page, encoding="utf-8")
    return dashboard
