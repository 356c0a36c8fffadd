"""The capacity's windows and miss curve on simulated curves (issues 52 and 60): how often a test
gives a figure, how often a window at that figure truly misses within the stated share, how
often the interval holds the true crossing, and whether a machine that drifted is seen.

    python -m benchmarks.capacity_bench --simulate [--tests 100] [--seed 52]

Each test runs the project's own plan (:class:`libraries.capacity.confirm.WindowPlan`: the
suite's 12 windows a path and its extra windows where the fit is refused), a verification
window at the figure counted in the curve, and :func:`~libraries.capacity.confirm.resume` as
``limits`` runs them, against a known miss curve instead of a testbed. The curves
(:data:`CURVES`): a window at ``rate`` misses with probability ``floor + (1 - floor) /
(1 + exp(-slope x ln(rate / half)))``, the slope making it rise from 10 % to 90 % over ``rise``
of rate, ``floor`` the share of windows that miss at any rate (a shared machine's hiccups); and
a machine slow part of the time (:class:`Bimodal`: 20 % of its windows see the curve at 0.7 x
the rate). MLRsearch's knee is the rate where half miss times a log-normal scatter
(:data:`KNEE_SCATTER`); the windows may run up to :data:`TOP` times that rate.

Per curve: the tests with a figure (and why the others had none); at the figure, the true miss
share (median, 90th percentile) and the tests where it is within the stated share (the claim,
issue 60 asks for 90 % of the tests with a figure); the figures whose interval holds the true
crossing; the figure over the true crossing (what the claim's confidence costs); the width of
the interval (over the fitted crossing); and the tests whose windows were judged to drift
(:mod:`libraries.capacity.drift`: on a steady machine, each one is a false detection).
:data:`DRIFTS` then runs machines that change during the test (:class:`Drifting`: the curve
moves to a share of its rates at a window drawn at random, or gradually): how often the drift
is stated, and whether the figure holds for the machine as it was at the end. About 0.3 s of
one core a test.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import median
from typing import Protocol

import numpy as np

from libraries.capacity.confirm import WindowPlan, extend, resume, run_plans
from libraries.capacity.search_settings import LatencyGoal
from libraries.capacity.trials import CapacityTrial

GOAL = LatencyGoal(0.99, 25.0)
SHARE = 0.1
"""The share a figure claims (the suite's ``CAPACITY_MISS_SHARE``)."""
HALF = 20000.0
"""The rate (requests/s) where half the windows miss."""
KNEE_SCATTER = 0.1
"""Standard deviation of ln(knee / rate where half miss)."""
TOP = 1.8
"""The highest rate a window may run at, over the rate where half miss."""


class MissShape(Protocol):
    """A true miss curve: its ``label``, the chance a window at a rate misses, and the rate
    where that chance is a share."""

    @property
    def label(self) -> str:
        """The table's name of the curve."""
        ...

    def miss(self, rate: float) -> float:
        """The chance that a window at ``rate`` misses."""
        ...

    def crossing(self, share: float) -> float:
        """The rate where a window misses with probability ``share`` (0.0: none)."""
        ...


@dataclass(frozen=True)
class Curve:
    """From 10 % to 90 % over ``rise`` of rate (0.3: a factor 1.3) around :data:`HALF`, with
    ``floor`` of the windows missing at any rate."""

    rise: float
    floor: float = 0.0

    @property
    def label(self) -> str:
        """The table's name."""
        return f"rise {self.rise:.0%}, floor {self.floor:.0%}"

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
class Bimodal:
    """A machine slow ``slow`` of the time: then a window sees ``curve`` at ``factor`` x its
    rate (a window at 0.7 x the rate misses as one at the full rate would)."""

    curve: Curve
    slow: float = 0.2
    factor: float = 0.7

    @property
    def label(self) -> str:
        """The table's name."""
        return (f"rise {self.curve.rise:.0%}, slow {self.slow:.0%} of the time at "
                f"{self.factor:g} x")

    def miss(self, rate: float) -> float:
        """The chance that a window at ``rate`` misses."""
        return (1.0 - self.slow) * self.curve.miss(rate) + \
            self.slow * self.curve.miss(rate / self.factor)

    def crossing(self, share: float) -> float:
        """The rate where a window misses with probability ``share`` (bisection: the
        mixture rises with rate)."""
        low, high = HALF * 1e-3, HALF * 1e3
        for _step in range(200):
            middle = math.sqrt(low * high)
            low, high = (middle, high) if self.miss(middle) < share else (low, middle)
        return low


@dataclass(frozen=True)
class Drifting:
    """``curve`` on a machine that changes during the test: from window ``at`` on (drawn per
    test) it misses as at ``1 / factor`` x the rate (``factor`` 0.8: the machine's rates fell
    by 20 %); ``gradual``: the factor is reached linearly over :data:`GRADUAL` windows."""

    curve: Curve
    factor: float
    gradual: bool = False

    @property
    def label(self) -> str:
        """The table's name."""
        how = "gradually over 13 windows" if self.gradual else "at a window drawn from 3-10"
        return f"{self.curve.label}: rates to {self.factor:g} x, {how}"

    def scale(self, window: int, at: int) -> float:
        """The machine's factor at ``window`` (0-based) when the step comes at ``at``."""
        if self.gradual:
            return 1.0 - (1.0 - self.factor) * min(1.0, window / GRADUAL)
        return self.factor if window >= at else 1.0


GRADUAL = 13
"""Windows over which a gradual drift reaches its factor (the plan's 12 and a verification)."""
CURVES: tuple[MissShape, ...] = (
    Curve(0.15), Curve(0.3), Curve(0.3, 0.03), Curve(0.6, 0.03), Curve(0.3, 0.05),
    Curve(0.6, 0.05), Curve(0.3, 0.08), Curve(0.6, 0.08), Bimodal(Curve(0.15)),
    Bimodal(Curve(0.3)))
"""The curves simulated (issue 60 added the 5 % and 8 % floors and the bimodal machines)."""
BEYOND: tuple[MissShape, ...] = (Curve(0.3, 0.15),)
"""Curves no rate of which meets the stated share: a figure there is always wrong."""
MORE_WINDOWS = 20
"""``CAPACITY_WINDOWS`` of the rows that ask what more windows do (:data:`WIDER`)."""
WIDER: tuple[MissShape, ...] = (Curve(0.6, 0.05), Bimodal(Curve(0.15)))
"""Curves also run with :data:`MORE_WINDOWS` planned windows: a narrower interval about a
curve the logistic does not describe."""
DRIFTS = (Drifting(Curve(0.3), 0.8), Drifting(Curve(0.3), 0.65),
          Drifting(Curve(0.3), 0.7, gradual=True))
"""The machines that drift during the test."""


@dataclass(frozen=True)
class Outcome:
    """One simulated test: ``why`` (empty when a figure stood), the windows it ran, whether a
    drift was stated, and with a figure: whether its interval holds the true crossing, its
    width, the figure over the true crossing, the true miss share at it (``end_share``: for
    the machine as it was after the last window) and at the fitted crossing
    (``crossing_share``: the figure before issue 60)."""

    why: str
    windows: int
    drifted: bool
    covered: bool = False
    width: float = math.nan
    ratio: float = math.nan
    true_share: float = math.nan
    end_share: float = math.nan
    crossing_share: float = math.nan


def _window(rate: float, missed: bool) -> CapacityTrial:
    count = int(rate * 30)
    return CapacityTrial(rate, 30.0, 30.0, count, count, 0, {GOAL.limit_ms: count // 20 if
                                                             missed else 0}, rate,
                         {"p99": 1.0}, None, "simulated", 1, 30.0)


def one_test(curve: MissShape, rng: np.random.Generator, windows: int = 12,
             drift: Drifting | None = None) -> Outcome:
    """One test of the suite's windows on ``curve`` (on a machine that ``drift`` changes, when
    given), drawn from ``rng``."""
    knee = HALF * math.exp(rng.normal(0.0, KNEE_SCATTER))
    at, ran = int(rng.integers(3, 11)), [0]

    def scale() -> float:
        return 1.0 if drift is None else drift.scale(ran[0], at)

    def measure(_path: str, _seconds: float, rate: float) -> CapacityTrial:
        chance = curve.miss(rate / scale())
        ran[0] += 1
        return _window(rate, bool(rng.random() < chance))

    plan = WindowPlan("proxy", GOAL, 30.0, knee, 1000.0, HALF * TOP, SHARE, windows=windows)
    done = run_plans(measure, [plan])["proxy"]
    if done.rate is not None:
        done = resume(extend(done, measure, done.rate, 1, "verification"), measure, plan)
    fit, drifted = done.curve, done.drift.detected
    if fit.figure is None or fit.low is None or fit.high is None:
        return Outcome(fit.why, fit.windows, drifted)
    truth = curve.crossing(SHARE)
    return Outcome("", fit.windows, drifted, fit.low <= truth <= fit.high,
                   (fit.high - fit.low) / (fit.rate or fit.figure),
                   fit.figure / truth if truth else math.inf,
                   curve.miss(fit.figure), curve.miss(fit.figure / scale()),
                   curve.miss(fit.rate or fit.figure))


def simulate(curve: MissShape, tests: int, seed: int, drift: Drifting | None = None,
             windows: int = 12) -> list[Outcome]:
    """``tests`` simulated tests on ``curve`` of ``windows`` planned windows each
    (reproducible from ``seed``)."""
    rng = np.random.default_rng(seed)
    return [one_test(curve, rng, windows, drift) for _test in range(tests)]


def _share(value: float) -> str:
    return f"{value:.1%}" if 0.0 < value < 0.01 else f"{value:.0%}"


def reason(why: str) -> str:
    """A refusal in a few words: its last clause ("unbounded", "an extrapolation"), else its
    opening."""
    if why.startswith("no rate from"):
        return "no rate from the figure up meets the share"
    if ": " in why:
        return why.rsplit(": ", 1)[-1]
    return why.split(" over the ", maxsplit=1)[0].split(" (", maxsplit=1)[0]


def _why(outcomes: Sequence[Outcome]) -> str:
    reasons = Counter(reason(o.why) for o in outcomes if o.why)
    return "; ".join(f"{k} ({v})" for k, v in reasons.most_common()) or "-"


def _spread(shares: list[float]) -> str:
    if not shares:
        return "-"
    within = sum(s <= SHARE for s in shares)
    return (f"{_share(median(shares))}, {_share(float(np.quantile(shares, 0.9)))}; "
            f"{within}/{len(shares)} ({within / len(shares):.0%})")


def row(curve: MissShape, outcomes: Sequence[Outcome], windows: int = 12) -> str:
    """The table's row of ``curve``: see :func:`table`."""
    figures = [o for o in outcomes if not o.why]
    n = len(figures)
    label = curve.label + ("" if windows == 12 else f", {windows} windows")
    return (f"| {label} | {n}/{len(outcomes)} | {_spread([o.true_share for o in figures])} | "
            f"{_spread([o.crossing_share for o in figures])} | "
            f"{sum(o.covered for o in figures)}/{n} | "
            f"{median(o.ratio for o in figures) if n else math.nan:.2f} | "
            f"{median(o.width for o in figures) if n else math.nan:.0%} | "
            f"{median(o.windows for o in outcomes):g} | "
            f"{sum(o.drifted for o in outcomes)}/{len(outcomes)} | {_why(outcomes)} |")


def drift_row(drift: Drifting, outcomes: Sequence[Outcome]) -> str:
    """The drift table's row: see :func:`table`."""
    figures = [o for o in outcomes if not o.why]
    n = len(figures)
    return (f"| {drift.label} | {sum(o.drifted for o in outcomes)}/{len(outcomes)} | "
            f"{n}/{len(outcomes)} | {sum(o.end_share <= SHARE for o in figures)}/{n} | "
            f"{sum(o.drifted for o in figures)}/{n} |")


def table(tests: int, seed: int, curves: Sequence[MissShape] = CURVES + BEYOND,
          drifts: Sequence[Drifting] = DRIFTS, wider: Sequence[MissShape] = WIDER) -> str:
    """The simulation's tables (benchmarks/README.md): per curve, and per drifting machine."""
    lines = ["| curve | a figure | true miss share at the figure: median, 90th percentile; "
             "within the stated 10 % | at the fitted crossing (the figure before issue 60) | "
             "interval holds the true crossing | figure / true crossing (median) | width "
             "(median) | windows (median) | drift stated | no figure: why |",
             "|" + "---|" * 10]
    steady = flagged = 0
    for curve, windows in [*((c, 12) for c in curves), *((c, MORE_WINDOWS) for c in wider)]:
        outcomes = simulate(curve, tests, seed, windows=windows)
        steady, flagged = steady + len(outcomes), flagged + sum(o.drifted for o in outcomes)
        lines.append(row(curve, outcomes, windows))
    lines.append(f"\nsteady machines: a drift stated in {flagged} of {steady} tests "
                 f"({flagged / steady if steady else math.nan:.1%})\n")
    lines += ["| drifting machine | drift stated | a figure | figure within 10 % for the "
              "machine at the end | figures with the drift stated |", "|" + "---|" * 5]
    lines += [drift_row(drift, simulate(drift.curve, tests, seed, drift)) for drift in drifts]
    return "\n".join(lines) + "\n"
