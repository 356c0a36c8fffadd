"""Bisections in simulation: the project's own search (:func:`libraries.bisect.search.bisect`)
over ranges with planted steps, each comparison judged by the A/B engine's own looks
(:func:`libraries.ab.rounds.ratio_interval` and :func:`~libraries.ab.rounds.judge` at
:class:`libraries.results.plan.AbSettings`' corrected levels) on simulated rounds.

    python -m benchmarks.bisect_bench --simulate [--searches 1000] [--builds 17] [--seed 52]

A round's ratio (b / a) is the true ratio of the two builds times a log-normal error whose
standard deviation is the per-round spread (2.4, 5.6 and 8.3 %: the spreads measured on this
VM). A first attempt has ``--max-rounds`` (60) rounds, a second twice as many; the margin is
the bisection's (3 %). A build that "does not run" fails every comparison it is in, as a
build whose suite set-up fails does.

Scenarios (the first bad build of each step drawn at random, as is a broken build):

- ``two -8/-4``, ``two -12/-4``: two steps, the second one -4 % (just past the margin);
- ``one -8 + broken``: one -8 % step and one build that does not run, anywhere but the ends.

Per search: each planted step **found** (a culprit whose last good and first bad build hold
it, with only skipped builds between), **undecided** (a range reported undecided holds it),
or **missed silently** (neither); a **wrong culprit** is a regression named where no step is.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from libraries.ab.rounds import judge, ratio_interval
from libraries.bisect.search import Bisection, Outcome, bisect
from libraries.results.plan import AbSettings

SPREADS = (0.024, 0.056, 0.083)
"""Per-round spreads of the ratio (standard deviation of its log)."""
SCENARIOS = {"two -8/-4": ((-8.0, -4.0), False), "two -12/-4": ((-12.0, -4.0), False),
             "one -8 + broken": ((-8.0,), True)}
"""Name -> (the steps' sizes in percent, oldest first; one build does not run)."""


@dataclass(frozen=True)
class Planted:
    """One range: the builds' levels, the first bad build of each step, the broken build."""

    levels: list[float]
    steps: list[int]
    broken: int | None


def plant(sizes: tuple[float, ...], count: int, broken: bool,
          rng: np.random.Generator) -> Planted:
    """Steps of ``sizes`` at distinct random builds in ``1..count-1`` (in order), and a
    broken build in ``1..count-2`` when asked."""
    steps = sorted(int(s) for s in rng.choice(np.arange(1, count), len(sizes), replace=False))
    levels, level = [], 100.0
    for index in range(count):
        for step, size in zip(steps, sizes, strict=True):
            if index == step:
                level *= 1 + size / 100
        levels.append(level)
    return Planted(levels, steps, int(rng.integers(1, count - 1)) if broken else None)


def compare_on(planted: Planted, spread: float, max_rounds: int, margin_pct: float,
               rng: np.random.Generator) -> Callable[[int, int, int], Outcome]:
    """A comparison of two builds as the A/B engine judges it, on simulated rounds."""
    def compare(a: int, b: int, attempt: int) -> Outcome:
        if planted.broken in (a, b):
            return Outcome(a, b, "failed", attempt=attempt,
                           detail="no A/B record: the suite set-up failed")
        settings = AbSettings(margin=margin_pct / 100, max_rounds=max_rounds * attempt)
        truth = math.log(planted.levels[b] / planted.levels[a])
        ratios = np.exp(truth + rng.normal(0.0, spread, settings.max_rounds))
        for look in settings.looks:
            interval = ratio_interval(ratios[:look], settings.alpha_per_look)
            verdict = judge(interval, "higher_is_better", settings.margin)
            if verdict != "inconclusive":
                break

        def pct(ratio: float | None) -> float | None:
            return None if ratio is None else (ratio - 1) * 100
        return Outcome(a, b, verdict, pct(interval.change), pct(interval.low),
                       pct(interval.high), rounds=look, attempt=attempt)
    return compare


@dataclass(frozen=True)
class Tally:
    """One search judged against its truth."""

    found: int
    undecided: int
    missed: int
    wrong: int
    exit_code: int
    comparisons: int
    rounds: int


def tally(result: Bisection, planted: Planted) -> Tally:
    """How the search did (see the module docstring)."""
    regressions = [c for c in result.culprits if c.outcome.verdict == "regression"]
    found = undecided = missed = 0
    for step in planted.steps:
        if any(c.good < step <= c.bad and all(i in result.skipped
                                              for i in range(c.good + 1, c.bad))
               for c in regressions):
            found += 1
        elif any(a < step <= b for a, b, _ in result.undecided):
            undecided += 1
        else:
            missed += 1
    wrong = sum(not any(c.good < s <= c.bad for s in planted.steps) for c in regressions)
    return Tally(found, undecided, missed, wrong, result.exit_code, len(result.comparisons),
                 sum(o.rounds for o in result.comparisons))


def run_cell(sizes: tuple[float, ...], broken: bool, spread: float, searches: int,
             count: int, seed: int, cell: int, max_rounds: int = 60,
             margin_pct: float = 3.0) -> list[Tally]:
    """``searches`` searches of one scenario at one spread (seeded per search)."""
    tallies = []
    for number in range(searches):
        rng = np.random.default_rng([seed, cell, number])
        planted = plant(sizes, count, broken, rng)
        result = bisect(count, compare_on(planted, spread, max_rounds, margin_pct, rng),
                        margin_pct=margin_pct)
        tallies.append(tally(result, planted))
    return tallies


def row(name: str, spread: float, tallies: list[Tally]) -> str:
    """One line of the markdown table."""
    n = len(tallies)
    steps = sum(t.found + t.undecided + t.missed for t in tallies)
    all_found = sum(t.undecided == 0 and t.missed == 0 for t in tallies)
    none_silent = sum(t.missed == 0 for t in tallies)
    named = sum(t.found > 0 for t in tallies)
    counts = {code: sum(t.exit_code == code for t in tallies) for code in (3, 5, 4, 0)}
    comparisons = [t.comparisons for t in tallies]
    rounds = sorted(t.rounds for t in tallies)
    return (f"| {name} | {spread * 100:.1f} % | {n} | {none_silent / n:.1%} | "
            f"{all_found / n:.1%} | {named / n:.1%} | "
            f"{sum(t.undecided for t in tallies)}/{steps} | {sum(t.missed for t in tallies)} | "
            f"{sum(t.wrong for t in tallies)} | "
            + " / ".join(str(counts[c]) for c in (3, 5, 4, 0)) + " | "
            f"{statistics.median(comparisons):g} ({max(comparisons)}) | "
            f"{statistics.median(rounds):g} ({rounds[int(0.9 * (n - 1))]}) |")


HEADER = ("| scenario | spread | searches | no step missed silently | every step found | "
          "a culprit named | steps only in an undecided range | steps missed silently | "
          "wrong culprits | exit 3 / 5 / 4 / 0 | comparisons median (max) | rounds median "
          "(p90) |\n|---|---|---|---|---|---|---|---|---|---|---|---|")


def simulate(searches: int, count: int, seed: int, max_rounds: int = 60,
             margin_pct: float = 3.0) -> str:
    """The table of benchmarks/README.md, one row per scenario and spread."""
    lines = [HEADER]
    started = time.monotonic()
    for cell, ((name, (sizes, broken)), spread) in enumerate(
            (item, spread) for item in SCENARIOS.items() for spread in SPREADS):
        tallies = run_cell(sizes, broken, spread, searches, count, seed, cell, max_rounds,
                           margin_pct)
        lines.append(row(name, spread, tallies))
        print(lines[-1], f"({time.monotonic() - started:.0f} s)", flush=True)
    return "\n".join(lines)
