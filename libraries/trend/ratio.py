"""The gate on an A/B ratio series: the nightly against a pinned reference (today / reference).

Both sides of a night share the machine, so its drift cancels in the ratio, but the true
ratio itself still moves from night to night (about 1 %: a duet sizes a change under
co-location, testbeds differ). Pooling the rounds of several nights would ignore that, so
here **the night is the unit**: each night gives one log ratio ``y`` (the Hodges-Lehmann
estimate of its rounds) and its own standard error ``se`` (from that estimate's signed-rank
interval, :func:`libraries.history.ab_series.ratio_night`), and a level is the mean of its
nights' ``y``. The spread ``s`` of single nights around a level is:

* from the level's own nights once it has :data:`NOISE_NIGHTS` of them: their sample standard
  deviation (never below the nights' median ``se``), with Student's t quantile at ``B - 1``
  degrees of freedom (``B`` baseline nights), which pays honestly for estimating it;
* before that, a **stated prior**: ``sqrt(se**2 + SCATTER_PRIOR**2)`` (or the nights' own
  spread if larger), with the normal quantile.

A change of a level is judged by :func:`libraries.results.verdict.classify` on the interval
``mean(new) - mean(base) +- q * s * sqrt(1/W + 1/B)`` against the margin (a statistically
clear 1 % is no finding). Three rules, at shares of the series' night level ``alpha``
(:mod:`libraries.results.family`: the night's family-wise level spread over its series):

1. **step** (half of ``alpha``): the newest :data:`NEW_NIGHTS` nights against the level's
   newest :data:`BASELINE` nights before them; each of the new nights must also have moved
   beyond the margin on its own (one wild night beside a normal one is no level). A step
   starting on night k is flagged on night k + 1.
2. **persistent** (three eighths, once it has a window to test): the newest ``W`` nights
   (:data:`PERSISTENT`) against the level as it was pinned, its first :data:`BASELINE`
   nights, once the window lies wholly after them. A step on the level's night
   :data:`BASELINE` or later that the first rule missed is not absorbed: it is flagged once
   ``W`` of its nights stand against the pinned level.
3. **young** (the last eighth, and rule 2's share too while it has no window, split over
   its candidates): a step on a night ``c`` of the level's first :data:`BASELINE` nights (a
   series' first nights, a level just after a flagged step) has no pinned level of its own.
   The level's nights :data:`YOUNG_STARTS` with :data:`YOUNG_NIGHTS` or more after them are
   candidates, and each tests **all** the nights from ``c`` to tonight against the level's
   nights before ``c`` only (nothing after a step enters its baseline). Its scatter is
   pooled from both sides' nights around their own means (a step does not inflate it), so a
   young level borrows its estimate from the nights after the candidate; the window grows
   every night, so a lasting step is flagged eventually wherever it fell, as far as the few
   nights before it allow (with 2 nights before it, at 1 % night-to-night scatter, a 3 %
   step cannot be told from the margin: ``benchmarks/README.md``, issue 60).

Rules 2 and 3 together judge every night of a level as a candidate start: nights
``< BASELINE`` by rule 3, later ones by rule 2's window (rule 1 covers the newest). Once rule 2
has its window, it takes three eighths and rule 3 one: measured on the same simulated nights,
a quarter each cost rule 2 five points by k + 5 and k + 10 (3 % step, 1 % scatter, a 20-night
level: 54 / 76.5 % against 60 / 81 %) for 1.5-5 points of young steps by k + 30.

Why these windows (``benchmarks/night_bench.py``, README "Methodology"): a step from night k
has 2 nights by k + 1 and 6 by k + 5, the horizons the goals name; one window of 6 spends
rule 2's share on the most nights a step has by k + 5 (windows of 5 and 10 flagged fewer;
more windows cost more in quantile than they gained; a window chosen by the data lost the
bound: it favours low nights). The margin is the A/B tests' own: a level is the same
quantity (the build's ratio to the reference) averaged over nights, and a change within it
is no finding here either.

A flagged change restarts the level at its first night (:func:`best_split`: the split that
fits the nights best, near the flagging window's start). A level needs :data:`MIN_BASELINE`
nights before a change from it is judged. Rows that are ``excluded`` (a failed, invalid or
partial night, :mod:`libraries.history.load`) are drawn but never judged nor used as a
baseline. The newest night beyond the margin that no rule confirmed yet is **pending**
(:func:`libraries.trend.newest.pending`): shown with its change and interval, confirmed or
cleared by the next night.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from itertools import pairwise

import numpy as np
import pandas as pd
from scipy.special import stdtr
from scipy.stats import norm
from scipy.stats import t as student

from libraries.results.family import NIGHT_LEVEL
from libraries.results.inference import Change
from libraries.results.trial_settings import AB_MARGIN
from libraries.results.verdict import AbResult, classify
from libraries.trend.detect import Group

NEW_NIGHTS = 2
"""Rule 1: a new level of this many nights (ending tonight) is tested each night."""
PERSISTENT = (6,)
"""Rule 2: the newest this many nights are tested against the pinned level each night."""
YOUNG_NIGHTS = 3
"""Rule 3: a candidate step in a young level is tested once it has this many nights (rule 1
judges two)."""
YOUNG_STARTS = (2, 3, 4, 5, 6, 8, 10, 12, 15, 18)
"""Rule 3's candidate starts, as nights of the level: dense where a baseline is short, sparse
where a night more or less hardly changes it. A step between two of them is tested from the
one before it (its window takes a night or two of the old level in, which the growing window
dilutes) with every night before that as its baseline."""
MIN_BASELINE = 2
"""A level needs this many nights before a change from it is judged."""
BASELINE = 20
"""At most this many nights of a level are its baseline (rule 1: its newest; rule 2: its
first)."""
NOISE_NIGHTS = 10
"""From this many baseline nights on, the nights' scatter is the level's own; before, the
prior :data:`SCATTER_PRIOR`."""
SCATTER_PRIOR = 0.01
"""The night-to-night scatter of the true ratio assumed until :data:`NOISE_NIGHTS` nights
exist (1 %: as measured between nights of this VM's duets and references)."""
RATIO_MARGIN = AB_MARGIN.parse(AB_MARGIN.default) / 100.0
"""A change of an A/B ratio series is flagged when its whole interval lies beyond this: the
A/B tests' own default margin, ``-v AB_MARGIN``'s declared default (a percentage) as a
fraction, as :func:`libraries.ab.ab_settings.ab_settings_from_variables` makes it."""


@dataclass(frozen=True)
class Step:
    """A change of the series at night ``start`` (row index), the verdict that found it,
    the night (row index) whose test ``found`` it and the ``rule`` (``step`` or
    ``persistent``)."""

    start: int
    result: AbResult
    found: int = -1
    rule: str = "step"


@dataclass(frozen=True)
class Nights:
    """A series' nights as arrays: ``y`` (log of each night's ratio), ``se`` (its relative
    standard error) and ``judged`` (False: an excluded night, drawn only)."""

    y: np.ndarray
    se: np.ndarray
    judged: np.ndarray

    @classmethod
    def of(cls, rows: pd.DataFrame) -> Nights:
        """From a ratio series' rows (``value``, ``stdev``: the standard error of the
        night's ratio; ``excluded``: non-empty for a night never judged)."""
        values = rows["value"].to_numpy(float)
        positive = values > 0
        y = np.log(np.where(positive, values, 1.0))
        se = rows["stdev"].to_numpy(float) / np.where(positive, values, 1.0)
        judged = positive & np.isfinite(y)
        if "excluded" in rows.columns:
            judged &= rows["excluded"].fillna("").astype(str).to_numpy() == ""
        return cls(y, np.nan_to_num(se), judged)


@cache
def quantile(alpha: float, df: int | None) -> float:
    """The two-sided quantile at ``alpha``: Student's t at ``df``, normal when None."""
    p = 1.0 - alpha / 2.0
    return float(norm.ppf(p) if df is None else student.ppf(p, df))


def scatter(y: np.ndarray, se: np.ndarray) -> tuple[float, int | None]:
    """The spread of single nights of a level from its nights ``y`` (log ratios) with their
    ``se``, and its degrees of freedom (None: the prior was used, see the module)."""
    floor = float(np.median(se)) if se.size else 0.0
    own = float(np.std(y, ddof=1)) if y.size > 1 else 0.0
    if y.size >= NOISE_NIGHTS:
        return max(own, floor), y.size - 1
    return max(own, math.hypot(floor, SCATTER_PRIOR)), None


def pooled_scatter(base: np.ndarray, new: np.ndarray, se: np.ndarray
                   ) -> tuple[float, int | None]:
    """The spread of single nights from both sides of a candidate step, each side around its
    own mean (a two-sample test's pooled estimate: a step between them does not inflate it),
    with ``B + W - 2`` degrees of freedom; the prior while those are fewer than
    :data:`NOISE_NIGHTS` - 1 (as :func:`scatter`); never below the nights' median ``se``."""
    floor = float(np.median(se)) if se.size else 0.0
    df = base.size + new.size - 2
    squares = float(np.sum((base - base.mean()) ** 2) + np.sum((new - new.mean()) ** 2))
    own = math.sqrt(squares / df) if df > 0 else 0.0
    if df >= NOISE_NIGHTS - 1:
        return max(own, floor), df
    return max(own, math.hypot(floor, SCATTER_PRIOR)), None


def level_change(base: np.ndarray, base_se: np.ndarray, new: np.ndarray, direction: str,
                 alpha: float, margin: float = RATIO_MARGIN, pooled: bool = False,
                 new_se: np.ndarray | None = None) -> AbResult:
    """The verdict on a new level (nights ``new``, log ratios) against a baseline's nights
    (``base`` with their ``base_se``) at two-sided ``alpha`` (see the module); ``pooled``:
    the scatter from both sides (:func:`pooled_scatter`, with ``new_se``), else from the
    baseline alone (:func:`scatter`)."""
    if pooled:
        both = base_se if new_se is None else np.concatenate([base_se, new_se])
        spread, df = pooled_scatter(base, new, both)
    else:
        spread, df = scatter(base, base_se)
    diff = float(np.mean(new) - np.mean(base))
    error = spread * math.sqrt(1.0 / new.size + 1.0 / base.size)
    half = quantile(alpha, df) * error
    low, high = math.exp(diff - half), math.exp(diff + half)
    z = abs(diff) / error if error > 0 else math.inf
    p_value = math.erfc(z / math.sqrt(2)) if df is None else float(2 * stdtr(df, -z))
    verdict = classify(math.exp(diff), low, high, direction, margin)
    own = "both sides' pooled scatter" if pooled else "the level's own scatter"
    basis = (f"{own} {spread:.2%}, t at {df} df" if df is not None else
             f"the prior scatter {SCATTER_PRIOR:.0%} (under {NOISE_NIGHTS} nights): "
             f"{spread:.2%}, normal quantile")
    test = (f"mean of {new.size} night(s) against {base.size} baseline night(s) at "
            f"{1 - alpha:.4%}, {basis}; margin {margin:.0%}")
    return AbResult(Change(math.exp(diff), low, high, 1 - alpha, p_value), low, high,
                    spread, verdict, test)


def _moved(nights: np.ndarray, base_mean: float, change: float, margin: float) -> bool:
    """Whether the nights, each on its own, moved beyond the margin the way the level did:
    all of them, but one in five (one wild night is no level, and cannot carry a window of
    normal nights past the margin either)."""
    moved = np.exp(nights - base_mean)
    beyond = moved < 1.0 - margin if change < 1.0 else moved > 1.0 + margin
    return int(np.count_nonzero(~beyond)) <= nights.size // 5


def _median_moved(nights: np.ndarray, base_mean: float, change: float, margin: float) -> bool:
    """Whether the median of a young candidate's nights moved beyond the margin the way the
    level did (rule 3's window starts up to a few nights before the step it tests, so "each
    night" would refuse it; its median still refuses one wild night carrying a window)."""
    moved = math.exp(float(np.median(nights)) - base_mean)
    return moved < 1.0 - margin if change < 1.0 else moved > 1.0 + margin


@dataclass(frozen=True)
class _Sums:
    """Prefix sums of a series' judged nights ``y``: a screen of each test in constant time
    (a level of thousands of nights is walked in a fraction of a second)."""

    total: np.ndarray
    squares: np.ndarray

    @classmethod
    def of(cls, y: np.ndarray) -> _Sums:
        return cls(np.concatenate([[0.0], np.cumsum(y)]),
                   np.concatenate([[0.0], np.cumsum(y * y)]))

    def mean(self, a: int, b: int) -> float:
        return float(self.total[b] - self.total[a]) / (b - a)

    def deviations(self, a: int, b: int) -> float:
        """The sum of squared deviations of nights ``a..b-1`` from their mean."""
        total = float(self.total[b] - self.total[a])
        return max(0.0, float(self.squares[b] - self.squares[a]) - total * total / (b - a))


def _may_clear(sums: _Sums, base: tuple[int, int], new: tuple[int, int], alpha: float,
               margin: float, pooled: bool) -> bool:
    """Whether :func:`level_change` of the nights ``new`` against ``base`` (index ranges) at
    ``alpha`` could lie beyond the margin: the same interval without the ``se`` floor, so
    never narrower-tested than the real one (a screen: False means the test cannot flag)."""
    n_base, n_new = base[1] - base[0], new[1] - new[0]
    if pooled:
        df: int | None = n_base + n_new - 2
        own = math.sqrt((sums.deviations(*base) + sums.deviations(*new)) / df) if df else 0.0
        if df < NOISE_NIGHTS - 1:
            df, own = None, max(own, SCATTER_PRIOR)
    else:
        own = math.sqrt(sums.deviations(*base) / (n_base - 1)) if n_base > 1 else 0.0
        df = n_base - 1 if n_base >= NOISE_NIGHTS else None
        if df is None:
            own = max(own, SCATTER_PRIOR)
    diff = sums.mean(*new) - sums.mean(*base)
    half = quantile(alpha, df) * own * math.sqrt(1.0 / n_new + 1.0 / n_base)
    return math.exp(diff + half) < 1.0 - margin or math.exp(diff - half) > 1.0 + margin


def find_steps(rows: pd.DataFrame, direction: str, margin: float = RATIO_MARGIN,
               alpha: float = NIGHT_LEVEL) -> list[Step]:
    """The changes of a ratio series' ``rows`` (oldest first), walking the nights in order
    (see the module); ``alpha``: the series' two-sided level per night over both rules."""
    nights = Nights.of(rows.reset_index(drop=True))
    judged = np.flatnonzero(nights.judged)
    y, se = nights.y[judged], nights.se[judged]
    steps: list[Step] = []
    sums = _Sums.of(y)
    level = 0  # index into the judged nights
    for at in range(len(judged)):
        step = _step_at(y, se, sums, level, at, direction, margin, alpha)
        if step is not None:
            first = best_split(y, level, step.start, at)
            steps.append(Step(int(judged[first]), step.result, int(judged[at]), step.rule))
            level = first
    return steps


def best_split(y: np.ndarray, level: int, start: int, at: int) -> int:
    """The first night of a flagged change whose test window starts at ``start``: the split
    of the level's nights ``level..at`` into two means that fits them best (least squares),
    searched within :data:`NEW_NIGHTS` nights either side of ``start`` with at least
    :data:`MIN_BASELINE` nights of the old level kept. A change flagged a night late (its
    window starting one night after the step) would leave the new level a night short, and
    a second step soon after it without the nights before it (``benchmarks/night_bench.py``
    ``--second``)."""
    low = max(level + MIN_BASELINE, start - NEW_NIGHTS)
    high = min(at, start + NEW_NIGHTS)
    if low >= high:
        return start
    nights = y[level:at + 1]
    total, squares, count = np.cumsum(nights), np.cumsum(nights ** 2), np.arange(1, nights.size + 1)

    def cost(split: int) -> float:
        left = split - level
        right_sum, right_n = total[-1] - total[left - 1], nights.size - left
        right_sq = squares[-1] - squares[left - 1]
        return float(squares[left - 1] - total[left - 1] ** 2 / count[left - 1]
                     + right_sq - right_sum ** 2 / right_n)

    return min(range(low, high + 1), key=lambda split: (cost(split), abs(split - start)))


def _step_at(y: np.ndarray, se: np.ndarray, sums: _Sums, level: int, at: int,
             direction: str, margin: float, alpha: float) -> Step | None:
    """The change found on judged night ``at`` of the level starting at ``level``, if any
    (indexes into the judged nights)."""
    found = []
    start = at + 1 - NEW_NIGHTS
    first = max(level, start - BASELINE)
    if start - level >= MIN_BASELINE and _may_clear(sums, (first, start), (start, at + 1),
                                                    alpha / 2, margin, pooled=False):
        base = y[first:start]
        result = level_change(base, se[first:start], y[start:at + 1], direction, alpha / 2,
                              margin)
        if result.verdict in ("regression", "progression") and _moved(
                y[start:at + 1], float(np.mean(base)), result.change.ratio, margin):
            found.append(Step(start, result, at, "step"))
    pinned = False
    for window in PERSISTENT:
        start = at + 1 - window
        if start - level < BASELINE:
            continue  # the window reaches into the level's first nights: rule 3's
        pinned = True
        end = level + BASELINE
        if not _may_clear(sums, (level, end), (start, at + 1), alpha * 3 / 8 / len(PERSISTENT),
                          margin, pooled=False):
            continue
        result = level_change(y[level:end], se[level:end], y[start:at + 1], direction,
                              alpha * 3 / 8 / len(PERSISTENT), margin)
        if result.verdict in ("regression", "progression") and _moved(
                y[start:at + 1], float(np.mean(y[level:end])), result.change.ratio, margin):
            found.append(Step(start, result, at, "persistent"))
    found.extend(_young_steps(y, se, sums, level, at, direction, margin,
                              alpha / 8 if pinned else alpha / 2))
    if not found:
        return None
    return max(found, key=lambda s: abs(math.log(s.result.change.ratio)))


def young_candidates(level: int, at: int) -> list[int]:
    """Rule 3's candidate starts on judged night ``at`` of the level starting at ``level``:
    the level's nights :data:`YOUNG_STARTS` that have :data:`YOUNG_NIGHTS` nights from them
    to tonight."""
    return [level + age for age in YOUNG_STARTS if level + age <= at + 1 - YOUNG_NIGHTS]


def _young_steps(y: np.ndarray, se: np.ndarray, sums: _Sums, level: int, at: int,
                 direction: str, margin: float, alpha: float) -> list[Step]:
    """Rule 3: each candidate start of :func:`young_candidates`, all its nights to tonight
    against the level's nights before it, at ``alpha`` split over the candidates (Bonferroni:
    the bound holds whichever candidate is the true one)."""
    candidates = young_candidates(level, at)
    found = []
    for start in candidates:
        if not _may_clear(sums, (level, start), (start, at + 1), alpha / len(candidates),
                          margin, pooled=True):
            continue
        base, new = y[level:start], y[start:at + 1]
        result = level_change(base, se[level:start], new, direction, alpha / len(candidates),
                              margin, pooled=True, new_se=se[start:at + 1])
        if result.verdict in ("regression", "progression") and _median_moved(
                new, float(np.mean(base)), result.change.ratio, margin):
            found.append(Step(start, result, at, "young"))
    return found


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
