"""The A/B verdict between two runs of one test: regression, progression, no change or
inconclusive, with the change's interval.

The test (stated in every verdict): the change of B against A is the Hodges-Lehmann ratio of
their trials with its exact Mann-Whitney interval at ``1 - alpha``
(:func:`~libraries.results.inference.change_interval`). Trials of one run share that run's
machine state, so the interval covers the noise *within* runs only; runs themselves move from
one to the next (other load on a shared machine, a different process placement: 4-13 %
run-to-run on these VMs). When the series' history gives its run-to-run spread (the robust
CV of at least :data:`MIN_HISTORY` runs' medians), the interval is widened by it, on the log
scale, by ``z(1 - alpha/2) * cv * sqrt(1/runs_a + 1/runs_b)``: two single runs get
``sqrt(2)`` of it, the gate's groups of several runs less. Then:

* **regression** / **progression**: the whole interval lies beyond the ``margin`` (a
  statistically clear 1 % is not a finding, nor is a point estimate beyond the margin whose
  interval reaches inside it);
* **no change**: the interval lies wholly within ``+-margin``;
* **inconclusive**: anything else (too few trials, or an interval wider than the margin that
  still holds no change).

"Regression" is in the metric's terms: down for ``higher_is_better``, up for
``lower_is_better``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy.stats import norm

from libraries.results.inference import DEFAULT_ALPHA, Change, change_interval, check_alpha

MIN_HISTORY = 5
DEFAULT_MARGIN = 0.05
Verdict = Literal["regression", "progression", "no change", "inconclusive"]


@dataclass(frozen=True)
class AbResult:
    """``change`` (B against A, from the trials), the interval used (``low``/``high`` as
    ratios, ``None`` when the trials are too few), ``noise`` (the run-to-run CV it was
    widened by, or None), ``verdict`` and ``test`` (how it was reached, one line)."""

    change: Change
    low: float | None
    high: float | None
    noise: float | None
    verdict: Verdict
    test: str

    @property
    def pct(self) -> float:
        """The change in percent."""
        return self.change.pct

    @property
    def interval_pct(self) -> tuple[float, float] | None:
        """The interval in percent, or None."""
        if self.low is None or self.high is None:
            return None
        return (self.low - 1.0) * 100.0, (self.high - 1.0) * 100.0


def run_to_run_cv(medians: Sequence[float]) -> float | None:
    """The robust run-to-run CV of a series (1.4826 x MAD of the log medians), or None with
    fewer than :data:`MIN_HISTORY` positive runs."""
    values = np.log([v for v in medians if v > 0])
    if len(values) < MIN_HISTORY:
        return None
    return float(1.4826 * np.median(np.abs(values - np.median(values))))


def ab_verdict(a: Sequence[float], b: Sequence[float], direction: str,
               alpha: float = DEFAULT_ALPHA, noise: float | None = None,
               margin: float = DEFAULT_MARGIN, runs: tuple[int, int] = (1, 1)) -> AbResult:
    """The verdict on B against A (see the module docstring); ``runs``: how many runs the
    trials of A and of B come from."""
    alpha = check_alpha(alpha)
    if not 0.0 <= margin < 1.0:
        raise ValueError(f"margin: expected a fraction in [0, 1), e.g. 0.05; got {margin!r}")
    change = change_interval(a, b, alpha)
    test = (f"Hodges-Lehmann ratio, Mann-Whitney interval at {1 - alpha:.0%} over "
            f"{len(a)} and {len(b)} trials")
    if change.low is None or change.high is None:
        return AbResult(change, None, None, noise, "inconclusive",
                        test + ": too few trials for an interval")
    low, high = change.low, change.high
    if noise:
        spread = math.sqrt(1.0 / max(runs[0], 1) + 1.0 / max(runs[1], 1))
        widen = math.exp(float(norm.ppf(1 - alpha / 2)) * spread * noise)
        low, high = low / widen, high * widen
        test += f", widened by the run-to-run CV {noise:.1%}"
    verdict = classify(change.ratio, low, high, direction, margin)
    return AbResult(change, low, high, noise, verdict, test + f"; margin {margin:.0%}")


def classify(change: float, low: float | None, high: float | None, direction: str,
             margin: float) -> Verdict:
    """The four-outcome rule every comparison uses (two runs, the trend gate's second opinion,
    an A/B run): ``change`` is B / A with its interval ``low``..``high`` (None: too few values
    for one). *Regression* / *progression* when the whole interval lies beyond the margin
    (below ``1 - margin``, above ``1 + margin``); *no change* when it lies within
    ``+-margin``; *inconclusive* otherwise. So a true change within the margin is called a
    regression no more often than the interval misses on that side (``alpha / 2``), whatever
    the point estimate. In the metric's terms: down is a regression of a ``higher_is_better``
    metric, up of a ``lower_is_better`` one. ``change`` is kept for the caller's message."""
    if low is None or high is None:
        return "inconclusive"
    bad_down = direction != "lower_is_better"
    if high < 1.0 - margin:
        return "regression" if bad_down else "progression"
    if low > 1.0 + margin:
        return "progression" if bad_down else "regression"
    if 1.0 - margin <= low and high <= 1.0 + margin:
        return "no change"
    return "inconclusive"
