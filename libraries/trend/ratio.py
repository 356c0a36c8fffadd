"""The gate on an A/B ratio series: the nightly against a pinned reference (today / reference).

Both sides of a night share the machine, so its drift cancels in the ratio and a night's
rounds estimate the ratio as closely as their own spread says. jumpavg alone, grouping the
nights by their medians, cannot see a 3 % step within two nights: a new group costs ~13 bits
of description, which a few nights' tighter fit does not repay. So the nights are walked in
order and at every night a new level is tested directly: the newest :data:`LENGTHS` nights
(two: one wild night alone, e.g. a disturbance that hit one side for minutes, is no step)
against the level before them (up to :data:`BASELINE` nights since the previous step, at least
:data:`LEVEL_NIGHTS`). It is a step when :func:`libraries.results.verdict.ab_verdict` on the
pooled per-round ratios (Hodges-Lehmann change, Mann-Whitney interval, widened by the
night-to-night scatter the nights' own intervals do not explain,
:func:`ratio_noise`) puts the whole interval beyond the margin and each
night of the new level, on its own, moved beyond the margin the same way (a window that
straddles a step is no level); the level then restarts there. The newest night is a
regression (progression) when its test found a step in the metric's wrong (right) direction:
a step starting on night k is flagged once, on night k + 1.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

import numpy as np
import pandas as pd

from libraries.results.inference import DEFAULT_ALPHA, change_interval
from libraries.results.plan import AbSettings
from libraries.results.verdict import AbResult, ab_verdict, run_to_run_cv
from libraries.trend.confirm import trials_of
from libraries.trend.detect import Group

LENGTHS = (2,)
"""At each night a new level of this many nights (ending that night) is tested. Measured by
benchmarks/nightly_bench.py on this VM's recorded nights (200 resampled sequences each):
(2,) detected the planted ssl_proxy slowdown within two nights in 53 % with 2.0 % false
alarms per A/A night; (1, 2) in 38 % with 8.8 % (a single wild A/A night, +35 %, was flagged);
(2, 3) in 41 % with 1.8 %; tcp_term 72 %, 68 %, 60 %, no false alarm in any."""
LEVEL_NIGHTS = 2
"""A level needs this many nights before a step from it is tested."""
BASELINE = 10
"""At most this many nights of the level (its newest) are the baseline."""
RATIO_MARGIN = AbSettings().margin
"""A step of an A/B ratio series is flagged when its whole interval lies beyond this (the A/B
tests' own default margin, 1 %)."""


@dataclass(frozen=True)
class Step:
    """A step of the series at night ``start`` (row index) and the verdict that found it."""

    start: int
    result: AbResult
    found: int = -1
    """The night (row index) whose test found it."""


def ratio_noise(before: pd.DataFrame) -> float | None:
    """The night-to-night scatter of an A/B ratio series that the nights' own intervals do
    not explain: ``sqrt(cv**2 - se**2)`` with ``cv`` the robust run-to-run CV of the nights'
    ratios and ``se`` their median relative standard error (the ``stdev`` column of a ratio
    row); None with too few nights for a CV, 0 when the nights agree within their errors.
    Both sides of a night share the machine's state, so this is usually near 0: widening by
    the whole CV, as for a plain series, would count the rounds' noise twice."""
    cv = run_to_run_cv([float(v) for v in before["value"]])
    if cv is None:
        return None
    values = before["value"].to_numpy(float)
    errors = before["stdev"].to_numpy(float) / np.where(values != 0, np.abs(values), 1.0)
    return math.sqrt(max(0.0, cv * cv - float(np.median(errors)) ** 2))


def find_steps(rows: pd.DataFrame, direction: str, margin: float = RATIO_MARGIN,
               alpha: float = DEFAULT_ALPHA, lengths: Sequence[int] | None = None
               ) -> list[Step]:
    """The steps of a ratio series' ``rows`` (oldest first), walking the nights in order (see
    the module); ``lengths``: the new level's lengths in nights tested at each night
    (default :data:`LENGTHS`)."""
    lengths = tuple(lengths or LENGTHS)
    trials = [trials_of(rows.iloc[i: i + 1]) for i in range(len(rows))]
    steps: list[Step] = []
    level = 0
    for night in range(len(rows)):
        found = []
        for length in lengths:
            start = night + 1 - length
            if start - level < LEVEL_NIGHTS:
                continue
            first = max(level, start - BASELINE)
            base = [v for part in trials[first:start] for v in part]
            new = [v for part in trials[start: night + 1] for v in part]
            try:
                result = ab_verdict(base, new, direction, alpha=alpha / len(lengths),
                                    noise=ratio_noise(rows.iloc[first:start]), margin=margin,
                                    runs=(start - first, night + 1 - start))
            except ValueError:  # a zero or negative ratio: no change as a ratio
                continue
            if result.verdict in ("regression", "progression") and _every_night_moved(
                    base, trials[start: night + 1], result.change.ratio, margin):
                found.append(Step(start, result, night))
        if found:  # where the level moved most: a step's own night, not one before it
            steps.append(max(found, key=lambda s: abs(math.log(s.result.change.ratio))))
            level = steps[-1].start
    return steps


def _every_night_moved(base: list[float], nights: Sequence[list[float]], change: float,
                       margin: float) -> bool:
    """Whether each night of a new level, on its own, moved beyond the margin the way the
    pooled change did (its Hodges-Lehmann point estimate against the baseline): a window that
    straddles a step, or one wild night beside a normal one, is not a new level."""
    down = change < 1.0
    for trials in nights:
        ratio = change_interval(base, trials).ratio
        if (ratio >= 1.0 - margin) if down else (ratio <= 1.0 + margin):
            return False
    return True


def newest_step(steps: Sequence[Step], nights: int) -> Step | None:
    """The step that makes the newest of ``nights`` a regression or progression: the last
    one, when the newest night's test found it; else None."""
    return steps[-1] if steps and steps[-1].found == nights - 1 else None


def segments(values: Sequence[float], steps: Sequence[Step], offset: int,
             direction: str) -> list[Group]:
    """The levels between ``steps`` as groups (the median of their nights; indexes shifted
    by ``offset``), labelled in value terms like jumpavg's (``regression`` = went down) for
    the chart's step line."""
    bounds = [0, *(s.start for s in steps), len(values)]
    groups = []
    for index, (start, end) in enumerate(pairwise(bounds)):
        label = "normal"
        if index:
            verdict = steps[index - 1].result.verdict
            down = (verdict == "regression") == (direction != "lower_is_better")
            label = "regression" if down else "progression"
        groups.append(Group(start + offset, end - 1 + offset,
                            float(np.median(values[start:end])), label))
    return groups
