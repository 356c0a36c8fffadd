"""The gate's second opinion: a change jumpavg finds is flagged only when the interval of the
change agrees.

jumpavg groups a series by run medians: it sees a step, not the trials behind it, and a shared
machine's one slow night can look like a step. So when the newest group moved the wrong (or
right) way, the trials since the established level (the last group that started before the
recent window: jumpavg may cut one step into several short groups) are compared with that
level's by the same verdict as ``--compare`` (:func:`libraries.results.verdict.ab_verdict`):
the Hodges-Lehmann change with its Mann-Whitney interval, widened by the run-to-run CV of the
runs before the change (for groups of several runs). The change stands only when that
verdict is the same regression (progression); otherwise the series stays ``normal`` and says
why.

An A/B ratio series (a nightly against a pinned reference) is judged by
:mod:`libraries.trend.ratio` instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from libraries.results.verdict import AbResult, ab_verdict, run_to_run_cv
from libraries.trend.detect import Group

BASELINE_RUNS = 10
"""At most this many runs of the previous group (its newest) are the baseline."""
NOISE_RUNS = 20
"""The run-to-run CV comes from at most this many runs before the newest group (whatever their
group: a previous group of one or two runs says nothing of the noise)."""


def trials_of(rows: pd.DataFrame) -> list[float]:
    """Every trial of ``rows`` (a row without its trials counts its value once)."""
    if "trial_values" not in rows.columns:
        return [float(v) for v in rows["value"]]
    values: list[float] = []
    for trials, value in zip(rows["trial_values"], rows["value"], strict=True):
        values.extend(float(v) for v in trials) if _has(trials) else values.append(float(value))
    return values


def _has(trials: Any) -> bool:
    return trials is not None and len(trials) > 0


def _judged(rows: pd.DataFrame) -> pd.DataFrame:
    """``rows`` without excluded ones (failed, invalid or partial nights: never a baseline)."""
    if "excluded" not in rows.columns:
        return rows
    return rows[rows["excluded"].fillna("").astype(str) == ""]


def confirm_change(rows: pd.DataFrame, size: int, groups: Sequence[Group], recent: int,
                   direction: str) -> AbResult | None:
    """The verdict on the samples since the established level against it; ``rows`` are the
    series' newest samples (``size`` in all, so row ``i`` is sample ``size - len(rows) + i``).
    None when the rows hold no sample of the level or none after it."""
    window = size - recent
    established = next((g for g in reversed(groups[:-1]) if g.start < window), groups[-2])
    offset = size - len(rows)
    first = max(established.start, established.end + 1 - BASELINE_RUNS, offset)
    base = rows.iloc[max(first - offset, 0): established.end + 1 - offset]
    new = rows.iloc[established.end + 1 - offset:]
    before = rows.iloc[max(0, established.end + 1 - offset - NOISE_RUNS):
                       established.end + 1 - offset]
    base, new, before = (_judged(part) for part in (base, new, before))
    if base.empty or new.empty:
        return None
    try:
        return ab_verdict(trials_of(base), trials_of(new), direction,
                          noise=run_to_run_cv([float(v) for v in before["value"]]),
                          runs=(len(base), len(new)))
    except ValueError:  # a zero or negative trial: no change as a ratio
        return None
