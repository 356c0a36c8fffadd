"""A bisection's result as JSON (``bisect.json``) and as a page (``bisect.html``).

The page, like the run report, is self-contained: the verdict (culprits, each with its direct
A/B change and interval; ranges left undecided; builds skipped, each with why; the stretches
proven clear, each with how in plain words, "the same files", "measured the same" or "no
regression beyond the margin", and whether every build in it was checked or only its ends),
the exit code and what it means for this run (:meth:`Bisection.meaning`), a chart of the
followed metric's ratio at each build against the first (chained through the comparisons made,
with the chained interval where every link has one), and the table of every comparison (sides,
rounds, verdict, minutes)."""

from __future__ import annotations

import html
import json
import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import plotly.graph_objects as go
from plotly.offline import get_plotlyjs

from libraries.bisect.bisect_summary import SUMMARY, bisect_summary, clear_line
from libraries.bisect.bisection import Bisection, Outcome
from libraries.bisect.outcome import SAME, clear_words

STATUS = {0: "no culprit", 3: "culprit found", 4: "could not decide",
          5: "culprit found, ranges undecided"}
"""The status line of each exit code of a search (2 is refused before one runs)."""


def chained_ratios(result: Bisection, count: int) -> dict[int, tuple[float, float, float]]:
    """Per build reachable from build 0 through decided comparisons (each link a ``a -> b``
    comparison with a change, or a range of the same files: ratio 1 to each build in it, or to
    its far end where only its ends are known the same): the ratio to build 0 (product of the
    links' changes), with the interval ends multiplied the same way (a rough chain: each link's
    interval at its own level)."""
    loose = {(a, b) for a, b, _ in result.end_to_end}
    made = [replace(o, b=i) for o in result.clear if o.verdict == SAME
            for i in (range(o.a + 1, o.b + 1) if (o.a, o.b) not in loose else [o.b])]
    made += [c.outcome for c in result.culprits]  # one may be another pair's comparison
    latest = {(o.a, o.b): o for o in [*made, *result.comparisons] if o.change_pct is not None}
    links: dict[int, list[Outcome]] = {}
    for outcome in latest.values():  # a pair's last attempt: the one with the most rounds
        links.setdefault(outcome.a, []).append(outcome)
    known: dict[int, tuple[float, float, float]] = {0: (1.0, 1.0, 1.0)}
    frontier = [0]
    while frontier:
        start = frontier.pop()
        for outcome in links.get(start, []):
            if outcome.b in known or outcome.b >= count:
                continue
            ratio, low, high = known[start]
            lo = outcome.low_pct if outcome.low_pct is not None else outcome.change_pct
            hi = outcome.high_pct if outcome.high_pct is not None else outcome.change_pct
            assert outcome.change_pct is not None
            known[outcome.b] = (ratio * (1 + outcome.change_pct / 100), low * (1 + lo / 100),
                                high * (1 + hi / 100))
            frontier.append(outcome.b)
    return known


def clear_entries(result: Bisection, names: list[str],
                  margin_pct: float | None) -> list[dict[str, Any]]:
    """The stretches proven clear, in order: the comparison (or :data:`~libraries.bisect.
    outcome.SAME`) that proved each, how in plain words, whether every build in it was
    checked, and for one clear only end to end what a look inside found."""
    loose = {(a, b): note for a, b, note in result.end_to_end}
    return [{"from": names[o.a], "to": names[o.b], "verdict": o.verdict,
             "change_pct": o.change_pct, "low_pct": o.low_pct, "high_pct": o.high_pct,
             "how": clear_words(o, margin_pct), "checked": (o.a, o.b) not in loose,
             "inside": loose.get((o.a, o.b), "")} for o in result.clear]


def as_json(result: Bisection, names: list[str], meta: dict[str, Any]) -> dict[str, Any]:
    """The JSON document: the inputs (``meta``), the builds, the status, exit code and what
    it means for this run, the culprits, the undecided ranges, the skipped builds with why,
    the stretches proven clear (:func:`clear_entries`), every comparison, the chained
    ratios."""
    return {
        **meta, "builds": names, "status": STATUS[result.exit_code],
        "exit_code": result.exit_code, "exit_meaning": result.meaning(names),
        "minutes": round(result.minutes, 2),
        "ends": result.ends.as_record(names) if result.ends else None,
        "culprits": [{"last_good": names[c.good], "first_bad": names[c.bad],
                      "direction": c.outcome.verdict, "change_pct": c.outcome.change_pct,
                      "low_pct": c.outcome.low_pct, "high_pct": c.outcome.high_pct,
                      "rounds": c.outcome.rounds,
                      "skipped_between": [names[i] for i in c.skipped]}
                     for c in result.culprits],
        "undecided": [{"from": names[a], "to": names[b], "why": why}
                      for a, b, why in result.undecided],
        "unbuildable": [names[i] for i in result.unbuildable],
        "skipped": [{"build": names[i], "why": why} for i, why in result.skipped.items()],
        "clear": clear_entries(result, names, meta.get("margin_pct")),
        "comparisons": [o.as_record(names) for o in result.comparisons],
        "ratio_to_first": {names[i]: {"ratio": r, "low": lo, "high": hi}
                           for i, (r, lo, hi) in sorted(chained_ratios(
                               result, len(names)).items())},
    }


def _pct(value: float | None) -> str:
    return "" if value is None or not math.isfinite(value) else f"{value:+.1f} %"


def _summary(doc: dict[str, Any]) -> str:
    lines = []
    for c in doc["culprits"]:
        skipped = (f" (somewhere in between: {', '.join(c['skipped_between'])} skipped)"
                   if c["skipped_between"] else "")
        lines.append(f"<li><b>{html.escape(c['direction'])}</b> between last good "
                     f"<code>{html.escape(c['last_good'])}</code> and first bad "
                     f"<code>{html.escape(c['first_bad'])}</code>: {_pct(c['change_pct'])} "
                     f"[{_pct(c['low_pct'])}, {_pct(c['high_pct'])}] after {c['rounds']} "
                     f"rounds{skipped}</li>")
    for u in doc["undecided"]:
        lines.append(f"<li>undecided between <code>{html.escape(u['from'])}</code> and "
                     f"<code>{html.escape(u['to'])}</code>: {html.escape(u['why'])}</li>")
    for s in doc.get("skipped", []):
        lines.append(f"<li>skipped build <code>{html.escape(s['build'])}</code>: "
                     f"{html.escape(s['why'])}</li>")
    for c in doc.get("clear", []) if doc["culprits"] else []:
        lines.append(f"<li>clear: {html.escape(clear_line(c)).replace('`', '')}</li>")
    if not doc["culprits"] and not doc["undecided"]:
        ends = doc["ends"] or {}
        beyond = (f" [{_pct(ends.get('low_pct'))}, {_pct(ends.get('high_pct'))}]: none beyond "
                  f"the {doc.get('margin_pct', '?')} % margin"
                  if ends.get("verdict") == "inconclusive" else "")
        lines.append(f"<li>no regression between the ends: {html.escape(ends.get('verdict', '?'))}"
                     f" {_pct(ends.get('change_pct'))}{beyond}</li>")
    return "<ul>" + "".join(lines) + "</ul>"


def _chart(doc: dict[str, Any]) -> str:
    chain = doc["ratio_to_first"]
    if len(chain) < 2:
        return "<p>No chain of decided comparisons from the first build.</p>"
    names = [n for n in doc["builds"] if n in chain]
    ratio = [chain[n]["ratio"] for n in names]
    figure = go.Figure(go.Scatter(
        x=names, y=ratio, mode="lines+markers", name="ratio to the first build",
        error_y={"type": "data", "symmetric": False,
                 "array": [chain[n]["high"] - chain[n]["ratio"] for n in names],
                 "arrayminus": [chain[n]["ratio"] - chain[n]["low"] for n in names]}))
    figure.update_layout(title=f"{doc['metric'] or 'metric'}: ratio to {doc['builds'][0]}",
                         xaxis_title="build", yaxis_title="ratio", height=360,
                         margin={"l": 60, "r": 20, "t": 50, "b": 60})
    return figure.to_html(full_html=False, include_plotlyjs=False)


def as_html(doc: dict[str, Any]) -> str:
    """The page (see the module docstring)."""
    rows = "".join(
        f"<tr><td>{html.escape(o['a'])}</td><td>{html.escape(o['b'])}</td>"
        f"<td>{html.escape(o['verdict'])}</td><td>{_pct(o['change_pct'])}</td>"
        f"<td>[{_pct(o['low_pct'])}, {_pct(o['high_pct'])}]</td><td>{o['rounds']}</td>"
        f"<td>{o['attempt']}</td><td>{o['minutes']:.1f}</td>"
        f"<td>{html.escape(o['detail'])}</td></tr>" for o in doc["comparisons"])
    return f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>bisect {html.escape(doc['title'])}</title>
<script>{get_plotlyjs()}</script>
<style>body{{font-family:sans-serif;margin:1.5em}} table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:3px 6px;font-size:90%}}</style></head><body>
<h1>Bisect {html.escape(doc['title'])}: {html.escape(doc['status'])}</h1>
<p>Test <code>{html.escape(doc['test'])}</code> on topology
<code>{html.escape(doc['topology'])}</code>, metric <code>{html.escape(str(doc['metric']))}
</code>; {len(doc['builds'])} builds, {len(doc['comparisons'])} comparisons,
{doc['minutes']:.1f} minutes; exit code {doc['exit_code']}:
{html.escape(doc.get('exit_meaning', ''))}.</p>
{_summary(doc)}
{_chart(doc)}
<h2>Comparisons, in the order made</h2>
<table><tr><th>a</th><th>b</th><th>verdict</th><th>change</th><th>interval</th><th>rounds</th>
<th>attempt</th><th>minutes</th><th>detail</th></tr>{rows}</table>
</body></html>
"""


def write_report(out: Path, result: Bisection, names: list[str],
                 meta: dict[str, Any]) -> tuple[Path, Path]:
    """Write ``bisect.json``, ``bisect.html`` and ``summary.md`` (:mod:`.bisect_summary`) into
    ``out``; the first two's paths."""
    doc = as_json(result, names, meta)
    out.mkdir(parents=True, exist_ok=True)
    json_path, html_path = out / "bisect.json", out / "bisect.html"
    json_path.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    html_path.write_text(as_html(doc), encoding="utf-8")
    (out / SUMMARY).write_text(bisect_summary(doc), encoding="utf-8")
    return json_path, html_path
