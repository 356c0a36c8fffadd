"""A bisection's ``summary.md`` (beside ``bisect.json`` and ``bisect.html``): the exit code and
what it means for this run, each culprit with its direct A/B change and interval, the ranges
left undecided and why, the ranges proven clear and how, in plain words ("the same files",
"measured the same", "no regression beyond 3 %"; every build checked, or only end to end,
where a -/+ pair of steps could hide), the builds skipped and why, or the ends' verdict when
nothing was found; short enough for a CI job summary. Rendered from the JSON document
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


def clear_line(entry: dict[str, Any]) -> str:
    """One range proven clear (an entry of the JSON's ``clear``), in plain words."""
    said = f"`{entry['from']}` .. `{entry['to']}`: {entry.get('how') or entry['verdict']}"
    if entry.get("checked", True):
        return f"{said}; every build checked"
    inside = f" ({entry['inside']})" if entry.get("inside") else ""
    return (f"{said}; clear end to end only: its ends shown clear, not every build inside (a -/+ "
            f"pair of steps could hide there){inside}")


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
    if doc["culprits"] and doc.get("clear"):
        lines += [f"## Clear ranges ({len(doc['clear'])})", ""]
        lines += [f"- {clear_line(c)}" for c in doc["clear"]]
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
