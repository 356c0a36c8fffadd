"""What the gate says of a ratio series' newest nights besides a flagged step: a newest
night beyond the margin that no rule confirmed yet (**pending**), and a newest level younger
than the gate's baseline, with the smallest step it flags yet (**young**). Both read the
series' nights and steps as :mod:`libraries.trend.ratio` found them, at its rules' levels.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from libraries.results.family import NIGHT_LEVEL
from libraries.results.verdict import AbResult
from libraries.trend.ratio import (
    BASELINE,
    MIN_BASELINE,
    NEW_NIGHTS,
    RATIO_MARGIN,
    Nights,
    Step,
    level_change,
    newest_step,
    quantile,
    scatter,
)


def pending(rows: pd.DataFrame, steps: Sequence[Step], direction: str,
            margin: float = RATIO_MARGIN, alpha: float = NIGHT_LEVEL) -> AbResult | None:
    """The newest night's change against its level when its interval (rule 1's, for a
    one-night level) lies wholly beyond the margin and no rule flagged it: the gate cannot
    confirm it yet (the next night confirms or clears it). None otherwise, and for an
    excluded newest night (never judged) or one with no judged night before it."""
    nights = Nights.of(rows.reset_index(drop=True))
    last = len(rows) - 1
    if last < 1 or not nights.judged[last] or newest_step(steps, len(rows)) is not None:
        return None
    level = steps[-1].start if steps else 0
    before = [i for i in range(max(level, 0), last) if nights.judged[i]][-BASELINE:]
    if not before:
        return None
    result = level_change(nights.y[before], nights.se[before], nights.y[last:], direction,
                          alpha / 2, margin)
    return result if result.verdict in ("regression", "progression") else None


@dataclass(frozen=True)
class Youth:
    """A level younger than :data:`BASELINE` nights: its ``nights`` and the smallest step
    (relative, e.g. 0.046) rule 1 flags on the step's second night ``now`` and ``grown``,
    once the level has :data:`BASELINE` nights at the same scatter."""

    nights: int
    now: float
    grown: float

    def text(self) -> str:
        """``young level (3 nights): a step beyond 4.6 % is flagged on its second night
        (beyond 3.1 % once it has 20 nights; smaller ones beyond the 1 % margin as their
        nights accumulate)``."""
        return (f"young level ({self.nights} night{'s' * (self.nights != 1)}): a step beyond "
                f"{self.now:.1%} is flagged on its second night (beyond {self.grown:.1%} once "
                f"it has {BASELINE} nights; smaller ones beyond the {RATIO_MARGIN:.0%} margin "
                "as their nights accumulate)")


def youth(rows: pd.DataFrame, steps: Sequence[Step], alpha: float = NIGHT_LEVEL,
          margin: float = RATIO_MARGIN) -> Youth | None:
    """The newest level's youth (None once it has :data:`BASELINE` judged nights): what
    rule 1 can flag now from it, at its scatter (the prior while it is young)."""
    nights = Nights.of(rows.reset_index(drop=True))
    level = steps[-1].start if steps else 0
    judged = np.flatnonzero(nights.judged[level:]) + level
    if judged.size >= BASELINE or judged.size == 0:
        return None
    spread, df = scatter(nights.y[judged], nights.se[judged])
    size = max(judged.size, MIN_BASELINE)
    now = margin + quantile(alpha / 2, df) * spread * math.sqrt(1 / NEW_NIGHTS + 1 / size)
    grown = margin + quantile(alpha / 2, BASELINE - 1) * spread * math.sqrt(
        1 / NEW_NIGHTS + 1 / BASELINE)
    return Youth(int(judged.size), math.expm1(now), math.expm1(grown))
