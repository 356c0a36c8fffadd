"""The capacity's windows and miss curve on simulated curves (issue 52): how often a test gives
a figure, how often its interval holds the true rate, how wide it is.

    python -m benchmarks.capacity_bench --simulate [--tests 100] [--seed 52]

Each test runs the project's own plan (:class:`libraries.capacity.confirm.WindowPlan`: the
suite's 12 windows a path and its extra windows where the fit is refused), a verification
window at the figure counted in the curve, and :func:`~libraries.capacity.confirm.resume` as
``limits`` runs them, against a known miss curve instead of a testbed: a window at ``rate``
misses with probability ``floor + (1 - floor) / (1 + exp(-slope x ln(rate / half)))``, where
the slope makes it rise from 10 % to 90 % over ``rise`` of rate, and ``floor`` is the share of
windows that miss at any rate (a shared machine's hiccups). MLRsearch's knee is the rate where
half miss times a log-normal scatter (:data:`KNEE_SCATTER`); the windows may run up to
:data:`TOP` times that rate (the suite's top is the closed-loop best's 1.1).

Per curve: the tests with a figure (and why the others had none), the figures whose interval
holds the true rate, the median width (high - low over the figure), the median true miss
probability at the figure, and what 10 held-out windows at the figure would say (the share
that missed drawn from the true probability): inside the curve's share interval (strictly) or
within the binomial noise of 10 windows (as :mod:`benchmarks.capacity_holdout` judges them).
About 0.3 s of one core a test.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import median

import numpy as np

from benchmarks.capacity_holdout import Holdout
from libraries.capacity.confirm import WindowPlan, extend, resume, run_plans
from libraries.capacity.settings import LatencyGoal
from libraries.capacity.trials import CapacityTrial

GOAL = LatencyGoal(0.99, 25.0)
HALF = 20000.0
"""The rate (requests/s) where half the windows miss."""
KNEE_SCATTER = 0.1
"""Standard deviation of ln(knee / rate where half miss)."""
TOP = 1.8
"""The highest rate a window may run at, over the rate where half miss."""
HOLDOUT = 10
"""Held-out windows drawn at each figure."""
CURVES = ((0.15, 0.0), (0.3, 0.0), (0.3, 0.03), (0.6, 0.03))
"""(rise, floor) of the curves simulated."""


@dataclass(frozen=True)
class Curve:
    """A true miss curve: from 10 % to 90 % over ``rise`` of rate (0.3: a factor 1.3) around
    :data:`HALF`, with ``floor`` of the windows missing at any rate."""

    rise: float
    floor: float

    @property
    def slope(self) -> float:
        """Per natural log of rate."""
        return 2.0 * math.log(9.0) / math.log1p(self.rise)

    def miss(self, rate: float) -> float:
        """The chance that a window at ``rate`` misses."""
        return self.floor + (1.0 - self.floor) / (
            1.0 + math.exp(-self.slope * math.log(rate / HALF)))

    def crossing(self, share: float) -> float:
        """The rate where a window misses with probability ``share`` (0.0: no rate misses
        that rarely, ``share`` being at or under the floor)."""
        if share <= self.floor:
            return 0.0
        rise = (share - self.floor) / (1.0 - self.floor)
        return HALF * math.exp(math.log(rise / (1.0 - rise)) / self.slope)


@dataclass(frozen=True)
class Outcome:
    """One simulated test: ``why`` (empty when a figure stood), the windows it ran, and with a
    figure: whether its interval holds the true rate, its width, the true miss probability at
    it, and the held-out windows that missed (of :data:`HOLDOUT`) with both readings."""

    why: str
    windows: int
    covered: bool = False
    width: float = math.nan
    true_share: float = math.nan
    held_out: int = 0
    strict: bool = False
    within_noise: bool = False


def _window(rate: float, missed: bool) -> CapacityTrial:
    count = int(rate * 30)
    return CapacityTrial(rate, 30.0, 30.0, count, count, 0, {GOAL.limit_ms: count // 20 if
                                                             missed else 0}, rate,
                         {"p99": 1.0}, None, "simulated", 1, 30.0)


def one_test(curve: Curve, rng: np.random.Generator, windows: int = 12) -> Outcome:
    """One test of the suite's windows on ``curve``, drawn from ``rng``."""
    knee = HALF * math.exp(rng.normal(0.0, KNEE_SCATTER))

    def measure(_path: str, _seconds: float, rate: float) -> CapacityTrial:
        return _window(rate, bool(rng.random() < curve.miss(rate)))

    plan = WindowPlan("proxy", GOAL, 30.0, knee, 1000.0, HALF * TOP, windows=windows)
    done = run_plans(measure, [plan])["proxy"]
    if done.rate is not None:
        done = resume(extend(done, measure, done.rate, 1, "verification"), measure, plan)
    fit = done.curve
    if fit.rate is None or fit.low is None or fit.high is None:
        return Outcome(fit.why, fit.windows)
    assert fit.share_low is not None and fit.share_high is not None
    true_share = curve.miss(fit.rate)
    held_out = Holdout(fit.rate, fit.low, fit.high, fit.share, fit.share_low, fit.share_high,
                       HOLDOUT, int(rng.binomial(HOLDOUT, true_share)), (0, 0), (0, 0))
    return Outcome("", fit.windows, fit.low <= curve.crossing(fit.share) <= fit.high,
                   (fit.high - fit.low) / fit.rate, true_share, held_out.missed,
                   held_out.covered, held_out.consistent)


def simulate(curve: Curve, tests: int, seed: int) -> list[Outcome]:
    """``tests`` simulated tests on ``curve`` (reproducible from ``seed``)."""
    rng = np.random.default_rng(seed)
    return [one_test(curve, rng) for _test in range(tests)]


def row(curve: Curve, outcomes: Sequence[Outcome]) -> str:
    """The table's row of ``curve``."""
    figures = [o for o in outcomes if not o.why]
    reasons = Counter(o.why.split(":")[0].split(" (")[0] for o in outcomes if o.why)
    n = len(figures)

    def med(values: list[float]) -> str:
        return f"{median(values):.0%}" if values else "-"

    return (f"| {curve.rise:.0%} | {curve.floor:.0%} | {n}/{len(outcomes)} | "
            f"{sum(o.covered for o in figures)}/{n} | {med([o.width for o in figures])} | "
            f"{med([o.true_share for o in figures])} | {sum(o.strict for o in figures)}/{n} | "
            f"{sum(o.within_noise for o in figures)}/{n} | "
            f"{median(o.windows for o in outcomes):g} | "
            f"{'; '.join(f'{k} ({v})' for k, v in reasons.most_common()) or '-'} |")


def table(tests: int, seed: int, curves: Sequence[tuple[float, float]] = CURVES) -> str:
    """The simulation's table (benchmarks/README.md)."""
    lines = ["| rise 10-90 % | floor | a figure | interval holds the true rate | width "
             "(median) | true miss share at the figure (median) | 10 held-out windows: "
             "strictly inside | within binomial noise | windows (median) | no figure: why |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for rise, floor in curves:
        curve = Curve(rise, floor)
        lines.append(row(curve, simulate(curve, tests, seed)))
    return "\n".join(lines) + "\n"
