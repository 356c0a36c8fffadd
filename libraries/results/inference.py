"""Distribution-free intervals: of one metric's median, and of the change between two samples.

Why distribution-free: trial values of a network benchmark are not normal (a noisy neighbour
makes a long lower tail; throughput has a ceiling), and a run has few trials (3 to 30), too
few to check a distribution or for the bootstrap, which is known to under-cover the median at
such sizes. Order statistics give an exact coverage for any continuous distribution.

* :func:`median_interval`: ``[x(k), x(n+1-k)]`` of the sorted trials, each end a one-sided
  confidence bound of the median at ``1 - alpha``: ``P(median < x(k)) = P(B <= k-1)`` with
  ``B ~ Binomial(n, 1/2)``, ``k`` the largest with that at most ``alpha``. Its two-sided
  coverage (``level``) is exact: ``1 - 2 P(B <= k-1)``. Below the size that allows it
  (``0.5**n > alpha``: 5 trials at ``alpha = 0.05``) the interval is ``[min, max]`` with its
  own, lower coverage, and :attr:`Interval.decisive` is False: a bound judged with it is
  inconclusive.
* :func:`change_interval`: the change from sample A to sample B as a ratio, estimated by the
  Hodges-Lehmann shift of the logarithms (the median of all ``log b - log a``), with the exact
  distribution-free interval that inverts the Mann-Whitney test (the ``k``-th smallest and
  largest pairwise differences), and the test's two-sided p-value. On the log scale a change
  is a percentage, so one rule serves requests/s and Gbit/s alike.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

import numpy as np
from scipy.stats import binom, mannwhitneyu, norm

DEFAULT_ALPHA = 0.05
EXACT_LIMIT = 60
"""Samples up to this size (each) get the exact Mann-Whitney distribution; larger ones the
normal approximation (with the tie-free variance)."""


def check_alpha(alpha: float, what: str = "alpha") -> float:
    """``alpha`` as a float in (0, 1) (``ValueError`` naming ``what`` otherwise)."""
    if isinstance(alpha, bool) or not isinstance(alpha, int | float) or \
            not 0.0 < float(alpha) < 1.0:
        raise ValueError(f"{what}: expected a number between 0 and 1 (exclusive), e.g. 0.05; "
                         f"got {alpha!r}")
    return float(alpha)


@dataclass(frozen=True)
class Interval:
    """A confidence interval: ``low``..``high`` covering the quantity with probability
    ``level`` (None for a single value: no interval exists), found by ``method``.
    ``decisive``: each end is a one-sided bound at the asked confidence (else too few
    values for that confidence: a criterion judged with it is inconclusive)."""

    low: float
    high: float
    level: float | None
    method: str
    decisive: bool

    def as_record(self) -> dict[str, object]:
        """The record-schema form."""
        return {"low": self.low, "high": self.high, "level": self.level, "method": self.method}


@cache
def _rank_for(n: int, alpha: float) -> int:
    """The largest ``k`` (1-based) with ``P(B <= k-1) <= alpha``, ``B ~ Bin(n, 1/2)``; 0 when
    even ``k = 1`` is not (``0.5**n > alpha``)."""
    k = 0
    while k < n // 2 and binom.cdf(k, n, 0.5) <= alpha:
        k += 1
    return k


def median_interval(values: Sequence[float], alpha: float = DEFAULT_ALPHA) -> Interval:
    """The order-statistic interval of the median of ``values`` (see the module docstring)."""
    alpha = check_alpha(alpha)
    ordered = sorted(float(v) for v in values)
    n = len(ordered)
    if n == 0:
        raise ValueError("no values: a median needs at least one")
    if n == 1:
        return Interval(ordered[0], ordered[0], None, "single value", decisive=False)
    k = _rank_for(n, alpha)
    decisive = k >= 1
    k = max(k, 1)
    return Interval(ordered[k - 1], ordered[n - k], _level(n, k), "order statistics", decisive)


@cache
def _level(n: int, k: int) -> float:
    """Two-sided coverage of ``[x(k), x(n+1-k)]`` for the median of ``n`` values."""
    return 1.0 - 2.0 * float(binom.cdf(k - 1, n, 0.5))


def minimum_decisive_trials(alpha: float = DEFAULT_ALPHA) -> int:
    """Fewest trials whose order-statistic interval is decisive at ``alpha``."""
    alpha = check_alpha(alpha)
    return max(2, math.ceil(math.log(alpha) / math.log(0.5)))


# -- two samples ------------------------------------------------------------------------------


@cache
def _u_distribution(m: int, n: int) -> np.ndarray:
    """``P(U = u)`` for ``u = 0..m*n``: Mann-Whitney's U of samples of sizes ``m`` and ``n``
    under the null hypothesis (no ties), by the recursion
    ``p(m, n, u) = m/(m+n) p(m-1, n, u-n) + n/(m+n) p(m, n-1, u)``."""
    if m == 0 or n == 0:
        return np.ones(1)
    left = _u_distribution(m - 1, n)  # the largest value is one of A's: it beats all n of B
    right = _u_distribution(m, n - 1)
    result = np.zeros(m * n + 1)
    result[n: n + len(left)] += m / (m + n) * left
    result[: len(right)] += n / (m + n) * right
    return result


def _u_rank(m: int, n: int, alpha: float) -> tuple[int, float]:
    """``(k, level)``: the ``k``-th smallest and largest of the ``m*n`` pairwise differences
    bound the shift with two-sided coverage ``level >= 1 - alpha`` (largest such ``k``; 0 when
    the samples are too small for it)."""
    if max(m, n) <= EXACT_LIMIT:
        cdf = np.cumsum(_u_distribution(m, n))
        k = int(np.searchsorted(cdf, alpha / 2.0, side="right"))  # P(U <= k-1) <= alpha/2
        k = min(k, (m * n) // 2)
        level = 1.0 - 2.0 * float(cdf[k - 1]) if k >= 1 else 0.0
        return k, level
    mean = m * n / 2.0
    sd = math.sqrt(m * n * (m + n + 1) / 12.0)
    k = max(0, math.floor(mean + float(norm.ppf(alpha / 2.0)) * sd))
    return k, 1.0 - alpha


@dataclass(frozen=True)
class Change:
    """The change from sample A to B: ``ratio`` (B over A, Hodges-Lehmann), its interval
    ``low``..``high`` at coverage ``level`` (None: samples too small for ``1 - alpha``) and the
    Mann-Whitney two-sided ``p_value``. ``pct`` and friends are the same in percent."""

    ratio: float
    low: float | None
    high: float | None
    level: float | None
    p_value: float

    @property
    def pct(self) -> float:
        """The change in percent (``-20.0``: B is 20 % below A)."""
        return (self.ratio - 1.0) * 100.0

    @property
    def low_pct(self) -> float | None:
        """The interval's lower end in percent."""
        return None if self.low is None else (self.low - 1.0) * 100.0

    @property
    def high_pct(self) -> float | None:
        """The interval's upper end in percent."""
        return None if self.high is None else (self.high - 1.0) * 100.0


def change_interval(a: Sequence[float], b: Sequence[float],
                    alpha: float = DEFAULT_ALPHA) -> Change:
    """Change from ``a`` to ``b`` (positive values, e.g. two runs' trials of a metric)."""
    alpha = check_alpha(alpha)
    first = np.asarray([float(v) for v in a])
    second = np.asarray([float(v) for v in b])
    if len(first) == 0 or len(second) == 0:
        raise ValueError("change_interval: both samples need at least one value")
    if (first <= 0).any() or (second <= 0).any():
        raise ValueError("change_interval: a change as a ratio needs positive values; got "
                         f"{sorted(first.tolist())} and {sorted(second.tolist())}")
    differences = np.sort((np.log(second)[None, :] - np.log(first)[:, None]).ravel())
    estimate = float(np.exp(np.median(differences)))
    if len(first) < 2 or len(second) < 2:
        p_value = 1.0
    else:
        p_value = float(mannwhitneyu(second, first, alternative="two-sided",
                                     method="auto").pvalue)
    k, level = _u_rank(len(first), len(second), alpha)
    if k < 1:
        return Change(estimate, None, None, None, p_value)
    low = float(np.exp(differences[k - 1]))
    high = float(np.exp(differences[len(differences) - k]))
    return Change(estimate, low, high, level, p_value)
