"""The gate on an A/B ratio series: the nightly against a pinned reference (today / reference).

Both sides of a night share the machine, so its drift cancels in the ratio and a night's
rounds estimate the ratio as closely as their own spread says. jumpavg alone, grouping the
nights by their medians, cannot see a 3 % step on its first night: a new group costs ~13 bits
of description, which a few nights' tighter fit does not repay. So the nights are walked in
order and at every night the step is tested directly: a level starting at that night, or at the
one before (:data:`WINDOW` candidates, the interval level split between them), against the
level before it (up to :data:`BASELINE` nights since the previous step). A candidate is a step
when :func:`libraries.results.verdict.ab_verdict` on the pooled per-round ratios
(Hodges-Lehmann change, Mann-Whitney interval, widened by the night-to-night scatter the
nights' own intervals do not explain, :func:`libraries.trend.confirm.ratio_noise`) puts the
whole interval beyond the margin (of two, the larger change); the level then restarts there.
The newest night is a regression (progression) while a step in the metric's wrong (right)
direction started within the newest :data:`WINDOW` nights: on the night it starts and the
next.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

import numpy as np
import pandas as pd

from libraries.results.inference import DEFAULT_ALPHA
from libraries.results.verdict import AbResult, ab_verdict
from libraries.trend.confirm import RATIO_MARGIN, ratio_noise, trials_of
from libraries.trend.detect import Group

WINDOW = 2
"""A step is looked for starting at the newest night and at the one before; it is flagged on
both."""
LEVEL_NIGHTS = 2
"""A level needs this many nights before a step from it is tested."""
BASELINE = 10
"""At most this many nights of the level (its newest) are the baseline."""


@dataclass(frozen=True)
class Step:
    """A step of the series at night ``start`` (row index) and the verdict that found it."""

    start: int
    result: AbResult


def find_steps(rows: pd.DataFrame, direction: str, margin: float = RATIO_MARGIN,
               alpha: float = DEFAULT_ALPHA) -> list[Step]:
    """The steps of a ratio series' ``rows`` (oldest first), walking the nights in order (see
    the module)."""
    trials = [trials_of(rows.iloc[i: i + 1]) for i in range(len(rows))]
    steps: list[Step] = []
    level = 0
    for night in range(len(rows)):
        found = []
        for start in range(night - WINDOW + 1, night + 1):
            if start - level < LEVEL_NIGHTS:
                continue
            first = max(level, start - BASELINE)
            base = [v for part in trials[first:start] for v in part]
            new = [v for part in trials[start: night + 1] for v in part]
            try:
                result = ab_verdict(base, new, direction, alpha=alpha / WINDOW,
                                    noise=ratio_noise(rows.iloc[first:start]), margin=margin,
                                    runs=(start - first, night + 1 - start))
            except ValueError:  # a zero or negative ratio: no change as a ratio
                continue
            if result.verdict in ("regression", "progression"):
                found.append(Step(start, result))
        if found:  # where the level moved most: a step's own night, not one before it
            steps.append(max(found, key=lambda s: abs(math.log(s.result.change.ratio))))
            level = steps[-1].start
    return steps


def newest_step(steps: Sequence[Step], nights: int) -> Step | None:
    """The step that makes the newest of ``nights`` a regression or progression: the last
    one, when it started within the newest :data:`WINDOW` nights; else None."""
    return steps[-1] if steps and steps[-1].start >= nights - WINDOW else None


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
