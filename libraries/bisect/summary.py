"""A bisection's ``summary.md`` (beside ``bisect.json`` and ``bisect.html``): the exit code and
what it means, each culprit with its direct A/B change and interval, the ranges left
undecided and why, the builds skipped and why, or the ends' verdict when nothing was found;
short enough for a CI job summary. Rendered from the JSON document
(:func:`libraries.bisect.report.as_json`), nothing else.
"""

from __future__ import annotations

import math
from typing import Any

SUMMARY = "summary.md"


def _pct(value: float | None) -> str:
    return "?" if value is None or not math.isfinite(value) else f"{value:+.1f} %"


def _interval(entry: dict[str, Any]) -> str:
    if entry.get("low_pct") is None or entry.get("high_pct") is None:
        return _pct(entry.get("change_pct"))
    return (f"{_pct(entry.get('change_pct'))} [{_pct(entry['low_pct'])}, "
            f"{_pct(entry['high_pct'])}]")


def bisect_summary(doc: dict[str, Any]) -> str:
    """The Markdown summary of a bisection's JSON document ``doc``."""
    builds = doc.get("builds", [])
    span = f"{builds[0]} .. {builds[-1]}, " if builds else ""
    lines = [f"# Bisect {doc.get('title', '')}: {doc['status']} (exit {doc['exit_code']})", "",
             f"Test `{doc.get('test', '?')}` on `{doc.get('topology', '?')}`, metric "
             f"{doc.get('metric') or '(the first)'}: {len(builds)} builds ({span}"
             f"{len(doc.get('comparisons', []))} comparisons, {doc.get('minutes', 0):.1f} "
             "min) · [bisect.html](bisect.html) · [bisect.json](bisect.json)", "",
             f"Exit {doc['exit_code']}: {doc.get('exit_meaning', '')}.", ""]
    if doc["culprits"]:
        lines += [f"## Culprits ({len(doc['culprits'])})", ""]
        for c in doc["culprits"]:
            between = (f" (skipped in between: {', '.join(c['skipped_between'])})"
                       if c.get("skipped_between") else "")
            lines.append(f"- **{c['direction']}**: last good `{c['last_good']}`, first bad "
                         f"`{c['first_bad']}`: {_interval(c)} after {c['rounds']} rounds"
                         f"{between}")
        lines.append("")
    if doc["undecided"]:
        lines += [f"## Undecided ranges ({len(doc['undecided'])})", ""]
        lines += [f"- `{u['from']}` .. `{u['to']}`: {u['why']}" for u in doc["undecided"]]
        lines.append("")
    if doc.get("skipped"):
        lines += [f"## Skipped builds ({len(doc['skipped'])})", ""]
        lines += [f"- `{s['build']}`: {s['why']}" for s in doc["skipped"]]
        lines.append("")
    if not doc["culprits"] and not doc["undecided"]:
        ends = doc.get("ends") or {}
        lines += [f"No regression between the ends: {ends.get('verdict', 'not compared')} "
                  f"{_interval(ends) if ends else ''}".rstrip() + ".", ""]
    return "\n".join(lines).rstrip() + "\n"
