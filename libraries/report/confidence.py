"""Why one page shows intervals at several confidence levels (93, 94, 98 %...), in one line.

Two reasons, each stated only where the page has figures it applies to:

* **a median's interval** (:func:`libraries.results.inference.median_interval`) is two of the
  test's own trials (order statistics), each end a one-sided bound at ``1 - ALPHA``; its exact
  two-sided confidence is that of the ranks the number of trials allows, so it moves with the
  number of trials (5 trials: 94 %, 10: 98 % at ALPHA 0.05), and a test that added trials
  until its verdict was conclusive states another level than one that did not;
* **an A/B change** (:mod:`libraries.ab.rounds`) is judged at each look at ``ALPHA`` split
  over the test's looks and metrics (Bonferroni: any look's false call stays within ALPHA), so
  its interval stands at a higher confidence than one test's median.
"""

from __future__ import annotations

from typing import Any


def _level(entry: dict[str, Any] | None) -> float | None:
    interval = (entry or {}).get("interval") or {}
    level = interval.get("level")
    return float(level) if isinstance(level, int | float) else None


def page_levels(records: list[dict[str, Any]]) -> tuple[set[int], set[int]]:
    """The confidence levels (whole per cent) a run report shows: of medians (metrics and
    criteria of plain records, each A/B side's figures) and of A/B changes."""
    medians: set[float | None] = set()
    changes: set[float | None] = set()
    for record in records:
        block = record.get("ab")
        if block:
            changes.update(c.get("level") for c in block.get("metrics", {}).values()
                           if c.get("low") is not None)  # an interval the page shows
            for side in (record.get("evidence") or {}).get("sides", {}).values():
                medians.update(_level(m) for m in side.get("metrics", {}).values())
            continue
        medians.update(_level(m) for m in record.get("metrics", {}).values())
        medians.update(_level(c) for c in record.get("criteria") or [])
    return ({round(level * 100) for level in medians if level is not None},
            {round(level * 100) for level in changes if level is not None})


def confidence_note(records: list[dict[str, Any]]) -> str:
    """One line saying why the levels on the page differ; empty when they do not."""
    medians, changes = page_levels(records)
    if len(medians | changes) < 2:
        return ""
    shown = ", ".join(f"{level} %" for level in sorted(medians | changes))
    reasons = []
    if medians:
        reasons.append("a median's interval is two of its own trials (order statistics, "
                       "each end a one-sided bound at 1 - ALPHA), so its exact confidence "
                       "follows the number of trials the test ran (at ALPHA 0.05: 5 trials "
                       "94 %, 10 trials 98 %)")
    if changes:
        reasons.append("an A/B change is judged at each look at ALPHA split over the test's "
                       "looks and metrics (Bonferroni, so that no look calls a false change "
                       "beyond ALPHA), hence its higher confidence")
    return f"Confidence levels differ on this page ({shown}): " + "; ".join(reasons) + "."
