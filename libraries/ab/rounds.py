"""A/B in one run: the candidate (side ``b``) against the baseline (side ``a``) of the system
under test, measured side by side, judged per round.

**Rounds in random order.** Round ``i`` measures both sides back to back, in an order drawn
per round by a seeded coin (``A B`` or ``B A``; seed and sequence recorded); each side is
warmed up once first, A then B. Per round and metric the ratio ``b / a``. Why a coin and not
the alternation ``B A | A B | B A ...``: under no change the coin makes the sign of each
round's log ratio a fair coin whatever the machine does between the trials (drift, bursts,
periodic interference), so the signed-rank test below is then an exact randomization test. A
fixed alternation cancels a linear drift but aliases with a disturbance whose period is near
four trials (each side holds two adjacent slots of every four): simulated with a square-wave
interference of 30 % on 2 s slots, the alternation called 53 % of A/A tests a change at a
period of 4 or 12 slots, the coin at most 2.3 % at every period from 2 to 20. Cost: 1.5
switches of side per round on average instead of 1.

**The interval: Hodges-Lehmann on the log ratios**, with the exact Wilcoxon signed-rank
interval (the ``k``-th smallest and largest of the Walsh averages, ``k`` from the exact null
distribution of the signed-rank statistic). Why not the project's order-statistic interval of
the median ratio: the rounds are *pairs*, and under no change the random order makes each
pair's log ratio symmetric around zero (which side came first is a coin), which is exactly what
the signed-rank interval needs; it is then ~1.5x as efficient as the sign-test (order
statistic) interval on normal-like noise, i.e. the same width from two thirds of the rounds.

**Looks at corrected levels.** A test adds rounds while the verdict is inconclusive, so it is
judged more than once. It is judged only at fixed looks, every ``look`` rounds up to
``max_rounds`` (``K`` looks), each at level ``alpha / K`` (Bonferroni: the chance that *any* look
calls a change that is not there stays at most ``alpha``). A look that is conclusive ends the
test.

**Verdict** per metric, in its terms (``regression``: slower for a higher-is-better metric):
*regression* / *progression* when the whole interval lies beyond the ``margin``; *no change*
when it lies within ``+-margin``; *inconclusive* otherwise
(:func:`libraries.results.verdict.classify`, the rule ``--compare`` and the trend gate use
too). A true change within the margin is therefore called a regression in at most
``alpha / 2`` of tests over all looks.

**Several metrics, one level.** A test judges its rate and, beside it, its cost per unit of
work (:mod:`libraries.results.cost`: CPU per request, lower is better) at the same looks,
each with its own interval and verdict; the look's level is split between them
(:func:`metric_alpha`, Bonferroni), so a test calls a false change on any of them in at most
``alpha / 2`` of tests, as one judging a rate alone did, and a night planned by its tests
keeps its family-wise level. A cost a side could not give (its telemetry unreadable) is not
judged (``optional``), and the rate decides alone; the split stays as planned.
"""

from __future__ import annotations

import math
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import numpy as np
from scipy.stats import norm
from scipy.stats import t as student

from libraries.results.adaptive import run_rounds, warm_up
from libraries.results.measurement import Direction, Measurement, Say, Trial, TrialObserver, silent
from libraries.results.plan import AbSettings, TrialPlan
from libraries.results.verdict import Verdict, classify

EXACT_LIMIT = 80
"""Up to this many rounds the signed-rank distribution is computed exactly."""
SIDES = ("a", "b")


@cache
def _signed_rank_cdf(n: int) -> np.ndarray:
    """P(W+ <= w) for w = 0..n(n+1)/2 under no change (every sign equally likely)."""
    counts = np.zeros(n * (n + 1) // 2 + 1)
    counts[0] = 1.0
    for rank in range(1, n + 1):
        counts[rank:] = counts[rank:] + counts[:-rank].copy()
    return np.cumsum(counts) / 2.0 ** n


def _rank_k(n: int, alpha: float) -> int:
    """The largest ``k`` with ``P(W+ <= k - 1) <= alpha / 2`` (0: no interval decides)."""
    if n > EXACT_LIMIT:
        mean, sd = n * (n + 1) / 4, math.sqrt(n * (n + 1) * (2 * n + 1) / 24)
        return max(0, math.floor(mean - float(norm.ppf(1 - alpha / 2)) * sd))
    cdf = _signed_rank_cdf(n)
    below = np.nonzero(cdf <= alpha / 2)[0]
    return int(below[-1]) + 1 if below.size else 0


@cache
def _pairs(n: int) -> tuple[np.ndarray, np.ndarray]:
    """The indexes of the Walsh averages of ``n`` values (every pair ``i <= j``)."""
    return np.triu_indices(n)


@cache
def _z(level: float) -> float:
    """The normal quantile of a two-sided interval at ``level``."""
    return float(norm.ppf(1 - (1 - level) / 2))


SCATTER_DF = 5
"""The degrees of freedom of the night-to-night scatter's assumed tails (Student's t scaled
to ``AB_SCATTER``'s standard deviation): nights of shared machines are not normal, and at a
night's small levels the tails decide. Measured (``benchmarks/night_bench.py --tails t3
--series 60``): with scatter drawn from t at 3 degrees of freedom, a normal quantile let the
A/B tests fail far more nights than their share; see benchmarks/README.md, issue 60."""


@cache
def scatter_quantile(level: float, df: int | None = SCATTER_DF) -> float:
    """The two-sided quantile at ``level`` of the night-to-night scatter in units of its
    standard deviation: Student's t at ``df`` scaled to unit variance (normal when None)."""
    if df is None:
        return _z(level)
    return float(student.ppf(1 - (1 - level) / 2, df) * math.sqrt((df - 2) / df))


@dataclass(frozen=True)
class RatioInterval:
    """The Hodges-Lehmann ratio (``change``) of ``n`` per-round ratios, with its signed-rank
    interval ``low``..``high`` at ``level`` (None when the rounds are too few for it)."""

    change: float
    low: float | None
    high: float | None
    level: float
    n: int


def ratio_interval(ratios: Sequence[float], alpha: float) -> RatioInterval:
    """:class:`RatioInterval` of per-round ratios at ``1 - alpha`` (see the module)."""
    logs = np.log(np.asarray(ratios, dtype=float))
    if logs.size == 0 or not np.all(np.isfinite(logs)):
        raise ValueError(f"ratios must be positive and finite, got {list(ratios)}")
    walsh = np.sort((logs[:, None] + logs[None, :])[_pairs(logs.size)] / 2.0)
    middle = walsh.size // 2  # sorted: the median without sorting again
    change = float(np.exp((walsh[(walsh.size - 1) // 2] + walsh[middle]) / 2.0))
    k = _rank_k(logs.size, alpha)
    if k == 0:
        return RatioInterval(change, None, None, 1 - alpha, logs.size)
    return RatioInterval(change, float(np.exp(walsh[k - 1])), float(np.exp(walsh[-k])),
                         1 - alpha, logs.size)


def widen(interval: RatioInterval, scatter: float) -> RatioInterval:
    """The interval of the change a build makes when the true ratio itself moves from night
    to night by ``scatter`` (a spread of the log ratio): both ends moved out by
    ``exp(q * scatter)``, ``q`` the scatter's heavy-tailed quantile at the interval's own
    level (:func:`scatter_quantile`; added to the rounds' own uncertainty, not combined in
    quadrature: a bound that holds whatever the rounds' spread). ``scatter`` 0 leaves it as
    it is."""
    if not scatter or interval.low is None or interval.high is None:
        return interval
    factor = math.exp(scatter_quantile(interval.level) * scatter)
    return RatioInterval(interval.change, interval.low / factor, interval.high * factor,
                         interval.level, interval.n)


def judge(interval: RatioInterval, direction: Direction, margin: float) -> Verdict:
    """The verdict of one metric: the four-outcome rule of
    :func:`libraries.results.verdict.classify` on the interval of its per-round ratios."""
    return classify(interval.change, interval.low, interval.high, direction, margin)


def metric_alpha(settings: AbSettings, metrics: int) -> float:
    """The level of one of a test's ``metrics`` judged metrics at one look: ``alpha_per_look``
    split between them (Bonferroni), so that a test judging throughput and cost calls a
    false change on either in at most ``ALPHA / 2`` of tests, as one judging throughput alone
    did, and a night planned by its tests (:mod:`libraries.results.family`) stays within its
    level."""
    return settings.alpha_per_look / max(1, metrics)


def judge_at_looks(ratios: Sequence[float], settings: AbSettings,
                   direction: Direction = "higher_is_better", metrics: int = 1
                   ) -> tuple[Verdict, int]:
    """The verdict the suite's looks reach on per-round ``ratios`` (b / a, at least
    ``settings.max_rounds`` of them) and the rounds it took: judged after every look's rounds
    at ``alpha_per_look`` (split over the test's ``metrics``: :func:`metric_alpha`) until one
    is conclusive, as :func:`measure_ab` judges (the benchmarks and tests replay rounds
    through it)."""
    verdict: Verdict = "inconclusive"
    for look in settings.looks:
        verdict = judge(widen(ratio_interval(ratios[:look], metric_alpha(settings, metrics)),
                              settings.scatter), direction, settings.margin)
        if verdict != "inconclusive":
            return verdict, look
    return verdict, settings.looks[-1]


@dataclass(frozen=True)
class Resolution:
    """What an undecided metric's rounds can tell at their own scatter, projected from its
    interval (whose width shrinks as one over the square root of the rounds, the looks'
    level kept): ``smallest_change``, the relative change these rounds call only beyond (its
    interval would just clear the margin), and ``rounds_for_margin``, about how many rounds
    would narrow the interval to the margin's width (what a "no change" needs)."""

    smallest_change: float
    rounds_for_margin: int

    def as_record(self) -> dict[str, Any]:
        """The record's form (the change in percent)."""
        return {"smallest_change_pct": self.smallest_change * 100,
                "rounds_for_margin": self.rounds_for_margin}


def resolution(interval: RatioInterval, margin: float) -> Resolution | None:
    """:class:`Resolution` of ``interval`` against ``margin``; None without an interval."""
    if interval.low is None or interval.high is None or not 0 < interval.low < interval.high:
        return None
    half = (math.log(interval.high) - math.log(interval.low)) / 2
    return Resolution(math.exp(math.log1p(margin) + half) - 1,
                      math.ceil(interval.n * (half / math.log1p(margin)) ** 2))


@dataclass(frozen=True)
class MetricComparison:
    """One metric: its ``direction``, the per-round ``ratios`` (b / a), the interval and the
    verdict at the last look."""

    metric: str
    direction: Direction
    ratios: tuple[float, ...]
    interval: RatioInterval
    verdict: Verdict

    def describe(self) -> str:
        """``-4.1 % [-5.9, -2.2]``: the change and its interval in percent."""
        shown = f"{(self.interval.change - 1) * 100:+.1f} %"
        if self.interval.low is not None and self.interval.high is not None:
            shown += (f" [{(self.interval.low - 1) * 100:+.1f}, "
                      f"{(self.interval.high - 1) * 100:+.1f}]")
        return shown

    def as_record(self) -> dict[str, Any]:
        """The record's form (ratios and interval as ratios, the change in percent)."""
        i = self.interval
        return {"direction": self.direction, "ratios": list(self.ratios),
                "change": i.change, "change_pct": (i.change - 1) * 100, "low": i.low,
                "high": i.high, "level": i.level, "verdict": self.verdict,
                "method": "Hodges-Lehmann of per-round log ratios, exact Wilcoxon signed-rank "
                          "interval"}


@dataclass
class AbOutcome:
    """What :func:`measure_ab` measured: per side the measurement built from its trials and
    the raw results, per metric the comparison, the rounds run and why it stopped, the looks
    made, the seconds each switch of side took, the order each round ran in (``B A | A B |
    ...``) and the seed of the coin that drew it."""

    sides: dict[str, Measurement]
    results: dict[str, dict[str, list[Any]]]
    comparisons: dict[str, MetricComparison]
    rounds: int
    stopped: str
    looks: list[int]
    switches: list[float] = field(default_factory=list)
    seconds: float = 0.0
    order: str = ""
    seed: int = 0


Build = Callable[[dict[str, list[Any]], float], Measurement]


@dataclass(frozen=True)
class _SideObserver:
    """Tells ``observer`` of side ``side``'s trials as ``<side> <variant>`` (``b proxy``)."""

    observer: TrialObserver
    side: str

    def trial_started(self, variant: str, round_number: int, total: int) -> None:
        self.observer.trial_started(f"{self.side} {variant}", round_number, total)

    def trial_finished(self, variant: str, round_number: int, total: int,
                       result: Any) -> None:
        self.observer.trial_finished(f"{self.side} {variant}", round_number, total, result)


def compare(sides: Mapping[str, Measurement], metrics: Mapping[str, Direction],
            settings: AbSettings, optional: frozenset[str] = frozenset()
            ) -> dict[str, MetricComparison]:
    """Per metric the per-round ratios b / a of the two sides' trials and their verdict, each
    at its share of the look's level (:func:`metric_alpha`: split over every metric asked
    for, judged or not); an ``optional`` metric (a cost) that a side lacks is not judged."""
    found = {}
    level = metric_alpha(settings, len(metrics))
    for metric, direction in metrics.items():
        if metric in optional and any(metric not in sides[s].metrics for s in SIDES):
            continue
        a = sides["a"].metrics[metric].summary.values
        b = sides["b"].metrics[metric].summary.values
        ratios = tuple(y / x for x, y in zip(a, b, strict=True))
        interval = widen(ratio_interval(ratios, level), settings.scatter)
        found[metric] = MetricComparison(metric, direction, ratios, interval,
                                         judge(interval, direction, settings.margin))
    return found


def measure_ab(variants: Mapping[str, Callable[[Trial], Any]], plan: TrialPlan, build: Build,
               metrics: Mapping[str, Direction], settings: AbSettings,
               switch: Callable[[str], float], observer: TrialObserver | None = None,
               clock: Callable[[], float] = time.monotonic, seed: int | None = None,
               optional: frozenset[str] = frozenset(), say: Say = silent) -> AbOutcome:
    """Warm each side up, then run rounds in random order (a coin per round, seeded by
    ``seed``, else by a fresh random one) until a look is conclusive for every metric, or
    ``max_rounds`` or the budget is reached. ``switch(side)`` makes ``side`` the one under
    test and returns the seconds it took (called only when the side changes); ``build`` turns
    one side's results into its measurement; ``optional`` metrics (costs) are judged where
    both sides have them; ``say`` gets each look's line (:func:`look_line`)."""
    started = clock()
    seed = secrets.randbits(32) if seed is None else seed
    coin = np.random.default_rng(seed)
    orders: list[str] = []
    results: dict[str, dict[str, list[Any]]] = {s: {v: [] for v in variants} for s in SIDES}
    current: str | None = None
    switches: list[float] = []

    def use(side: str) -> None:
        nonlocal current
        if side != current:
            switches.append(switch(side))
            current = side

    for side in SIDES:
        use(side)
        warm_up(variants, plan)
    trial_seconds = {s: 0.0 for s in SIDES}

    def run_round(number: int) -> None:
        order = ("a", "b") if coin.random() < 0.5 else ("b", "a")
        orders.append(" ".join(order).upper())
        for side in order:
            use(side)
            told = _SideObserver(observer, side) if observer is not None else None
            trial_seconds[side] += run_rounds(variants, plan.duration,
                                              range(number, number + 1),
                                              settings.max_rounds, results[side], told)

    judged = judge_rounds(run_round, lambda: {s: build(results[s], trial_seconds[s])
                                              for s in SIDES},
                          metrics, settings, started, clock, optional, say)
    return AbOutcome(judged.sides, results, judged.comparisons, judged.rounds, judged.stopped,
                     judged.looks, switches, clock() - started, " | ".join(orders), seed)


@dataclass
class Judged:
    """What :func:`judge_rounds` ran and found: the rounds, why it stopped, the looks made,
    each side's measurement and the comparison at the last look."""

    rounds: int
    stopped: str
    looks: list[int]
    sides: dict[str, Measurement]
    comparisons: dict[str, MetricComparison]


def judge_rounds(run_round: Callable[[int], None], built: Callable[[], dict[str, Measurement]],
                 metrics: Mapping[str, Direction], settings: AbSettings, started: float,
                 clock: Callable[[], float] = time.monotonic,
                 optional: frozenset[str] = frozenset(), say: Say = silent) -> Judged:
    """Run rounds (``run_round(number)`` measures both sides once) until a look is
    conclusive for every metric, or ``max_rounds`` or the budget (counted from ``started``,
    the warm-ups included) is reached; judged at the looks (``built()``: each side's
    measurement of the rounds so far). A budget that ends the test between looks makes its
    last rounds the next look (never more looks than planned, so each keeps its level).
    Each look's line goes to ``say`` (:func:`look_line`)."""
    rounds, looks, stopped = 0, [], "round limit"
    comparisons: dict[str, MetricComparison] = {}
    sides: dict[str, Measurement] = {}
    while rounds < settings.max_rounds:
        first = clock()
        rounds += 1
        run_round(rounds)
        if rounds in settings.looks:
            looks.append(rounds)
            sides = built()
            comparisons = compare(sides, metrics, settings, optional)
            say(look_line(rounds, comparisons, settings))
            if all(c.verdict != "inconclusive" for c in comparisons.values()):
                stopped = f"conclusive at the look after {rounds} rounds"
                break
        per_round = clock() - first
        if clock() - started + per_round > settings.budget_s and rounds < settings.max_rounds:
            stopped = f"budget spent ({clock() - started:.0f} s of AB_BUDGET " \
                      f"{settings.budget_s:g} s)"
            break
    if rounds and (not looks or looks[-1] != rounds):
        looks.append(rounds)
        sides = built()
        comparisons = compare(sides, metrics, settings, optional)
        say(look_line(rounds, comparisons, settings))
    return Judged(rounds, stopped, looks, sides, comparisons)


def look_line(rounds: int, comparisons: Mapping[str, MetricComparison],
              settings: AbSettings) -> str:
    """A look's console line: the rounds so far of the most, each metric's change, interval
    and verdict so far (``A/B look after 10 of 60 rounds: rps -15.7 % [-22.5, -7.5]
    regression``)."""
    shown = "; ".join(f"{metric} {c.describe()} {c.verdict}" for metric, c in comparisons.items())
    return f"A/B look after {rounds} of {settings.max_rounds} rounds: {shown}"
