"""A whole night's false alarms and the nights a step takes to be flagged, simulated through the
project's own decision functions.

Each simulated series is a nightly against a pinned reference: every night its A/B test runs
``ROUNDS`` rounds whose per-round ratios today / reference are log-normal around the night's
true ratio with the per-round ``spread``; the true ratio itself moves from night to night by
``scatter`` (independently per series and night) around the build's effect (1, or the planted
step from night ``STEP_NIGHT`` on). A night judges ``SERIES`` series at once. Per night and
series:

* the night's A/B verdict: :func:`libraries.ab.rounds.judge_at_looks` with the nightly's
  settings (each test at its share of the night's family-wise level,
  :class:`libraries.results.family.NightFamily`; ``AB_SCATTER`` 1 %, ``AB_LOOK`` 20: what
  :func:`libraries.nightly.reference.robot_variables` gives a night); a regression fails it;
* the gate: :func:`libraries.trend.ratio.find_steps` over the series' nights (value = the
  Hodges-Lehmann ratio of the rounds the test ran, stdev = its standard error, as the
  history stores a ratio night: :func:`libraries.history.ab_series.ratio_night`), at each
  series' share of the gate's part of the night level
  (:func:`libraries.trend.analysis.ratio_alpha`). Its walk over the nights is causal, so the
  night a step was ``found`` is the night the gate would have exited 3.

Per cell: the share of all-A/A nights (every night of every simulated history, from the
reference's first) with at least one false failure or exit 3, the share flagged by the
second rule (persistent) alone, and the share of step series flagged (a failed test or the
gate) by night k+1, k+5 and k+10 (k: the step's first night; flags before k do not count).

With ``--ages`` the step cells are drawn instead at a level's given ages (a step on night
k = age of a series, the level starting on night 0; age 20 is the cells above) and by
k+1/5/10/30; with ``--second`` a -5 % first step on night 20 is followed ``g`` nights later
(2-5) by the planted step, which counts only when a flag of a step starting after the first
one's night is found on the second's night or later. The young-level cells (issue 60):

    python -m benchmarks.night_bench --ages 2 4 10 20 --second 2 3 4 5 --spreads 0.024

With ``--null-step 0.01`` every all-A/A series takes a true step of -1 % (the margin) on night
k as well: a change within the margin, so every flag on any night is still false. That is the
gate's worst case (``--base`` moves both sides of a level alike, which the gate never sees).

    python -m benchmarks.night_bench [--histories 40] [--steps 200] [--seed 1] [--base 0.99]
                                     [--null-step 0.01]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from libraries.ab.ab_settings import declared_ab_settings
from libraries.ab.rounds import judge_at_looks
from libraries.history.ab_series import ratio_night
from libraries.nightly.reference import NIGHT_LOOK, SCATTER_PCT
from libraries.results.family import NIGHT_LEVEL, NightFamily
from libraries.results.plan import AbSettings
from libraries.trend.analysis import ratio_alpha
from libraries.trend.ratio import find_steps

SPREADS = (0.024, 0.056, 0.083)
"""Per-round spreads of the ratio: ssl_proxy's, tcp_term's, and a noisy test's."""
SCATTERS = (0.0, 0.005, 0.01, 0.02)
"""Night-to-night spreads of the true ratio."""
STEPS = {0.024: 0.03, 0.056: 0.05, 0.083: 0.05}
"""The planted step (a slowdown) per spread: 3 % at ssl_proxy's, 5 % at tcp_term's."""
SERIES = 30
ROUNDS = 60
STEP_NIGHT = 20
"""k: nights 0..k-1 are the reference's level, the step starts on night k."""
AFTER = 11
"""Nights simulated from k on (k..k+10)."""
BY = (1, 5, 10)
AGED_BY = (1, 5, 10, 30)
"""The horizons of the young-level and second-step cells."""
FIRST_STEP = 0.05
"""The first step of the second-step cells (flagged by k+1 in nearly every series)."""


@dataclass(frozen=True)
class Cell:
    """One cell's figures (shares in [0, 1])."""

    spread: float
    scatter: float
    step: float
    nights: int
    false_night: float
    false_test: float
    false_gate: float
    false_persistent: float
    detected: dict[int, float]
    step_series: int


def night_settings(series: int = SERIES) -> AbSettings:
    """A night's A/B settings, as the nightly gives them."""
    family = NightFamily(NIGHT_LEVEL, series)
    return declared_ab_settings(alpha=family.test_alpha, scatter=SCATTER_PCT / 100.0,
                                look=NIGHT_LOOK, max_rounds=ROUNDS, inconclusive="pass",
                                unused="plain")


def simulate_series(truth: np.ndarray, spread: float, rng: np.random.Generator,
                    settings: AbSettings) -> tuple[pd.DataFrame, np.ndarray]:
    """One series' nights (``truth``: each night's true ratio): the rows the gate reads and
    whether each night's A/B test failed on a regression."""
    logs = np.log(truth)[:, None] + rng.normal(0.0, spread, (truth.size, ROUNDS))
    ratios = np.exp(logs)
    values, errors, failed = [], [], []
    for night in ratios:
        verdict, used = judge_at_looks(night, settings)
        taken = night[:used]
        value, error = ratio_night(taken, 0.0, 0.0)  # as the history stores the night
        values.append(value)
        errors.append(error)
        failed.append(verdict == "regression")
    rows = pd.DataFrame({"value": values, "stdev": errors, "direction": "higher_is_better"})
    return rows, np.asarray(failed)


def gate_flags(rows: pd.DataFrame, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """Per night: whether the gate exited 3 on it (a regression found that night), and
    whether the second or third rule (persistent, young) found it."""
    flagged = np.zeros(len(rows), bool)
    persistent = np.zeros(len(rows), bool)
    for step in find_steps(rows, "higher_is_better", alpha=alpha):
        if step.result.verdict == "regression":
            flagged[step.found] = True
            persistent[step.found] |= step.rule != "step"
    return flagged, persistent


def run_cell(spread: float, scatter: float, histories: int, steps: int,
             rng: np.random.Generator, base: float = 1.0, null_step: float = 0.0,
             series: int = SERIES, tails: str = "normal") -> Cell:
    """One cell: ``histories`` all-A/A histories of SERIES series, ``steps`` step series;
    ``base``: the build's true ratio before any step (1: no change; 0.99: a true -1 % in every
    series, at the A/B tests' margin, the worst case their level bounds); ``null_step``: a
    true step within the margin on night k in every all-A/A series (0.01: at the margin, the
    gate's worst case); ``series`` a night, their scatter's ``tails`` (:func:`draw_scatter`)."""
    settings = night_settings(series)
    nights = STEP_NIGHT + AFTER
    frame = pd.DataFrame({"start_time": [0], "run_id": ["tonight"]})
    alpha, _ = ratio_alpha([("ab_rps_ratio", "ratio", frame)] * series)
    any_false = np.zeros((histories, nights), bool)
    test_false = np.zeros((histories, nights), bool)
    gate_false = np.zeros((histories, nights), bool)
    rule2_false = np.zeros((histories, nights), bool)
    for history in range(histories):
        for _ in range(series):
            truth = base * np.exp(draw_scatter(rng, scatter, nights, tails))
            truth[STEP_NIGHT:] *= 1.0 - null_step
            rows, failed = simulate_series(truth, spread, rng, settings)
            flagged, persistent = gate_flags(rows, alpha)
            test_false[history] |= failed
            gate_false[history] |= flagged
            rule2_false[history] |= persistent
        any_false[history] = test_false[history] | gate_false[history]
    step = STEPS[spread]
    first = {by: 0 for by in BY}
    for _ in range(steps):
        truth = base * np.exp(draw_scatter(rng, scatter, nights, tails))
        truth[STEP_NIGHT:] *= 1.0 - step
        rows, failed = simulate_series(truth, spread, rng, settings)
        flagged, _ = gate_flags(rows, alpha)
        hits = np.flatnonzero((flagged | failed)[STEP_NIGHT:])
        for by in BY:
            first[by] += bool(hits.size and hits[0] <= by)
    return Cell(spread, scatter, step, histories * nights, float(any_false.mean()),
                float(test_false.mean()), float(gate_false.mean()), float(rule2_false.mean()),
                {by: first[by] / steps for by in BY}, steps)


@dataclass(frozen=True)
class AgedCell:
    """A step at a level's ``age`` (or ``gap`` nights after a first step): the share flagged
    by each of :data:`AGED_BY` nights after it."""

    spread: float
    scatter: float
    step: float
    age: int
    second: bool
    detected: dict[int, float]
    series: int
    tails: str = "normal"


def draw_scatter(rng: np.random.Generator, scatter: float, size: int, tails: str) -> np.ndarray:
    """Night-to-night log-ratio moves of standard deviation ``scatter``: ``normal`` or ``t3``
    (Student's t with 3 degrees of freedom, scaled to the same standard deviation)."""
    if tails == "t3":
        return rng.standard_t(3, size) * scatter / np.sqrt(3.0)
    return rng.normal(0.0, scatter, size)


def run_aged(spread: float, scatter: float, age: int, steps: int, rng: np.random.Generator,
             second: bool = False, tails: str = "normal") -> AgedCell:
    """``steps`` series whose planted step falls on night ``age`` of a level starting on
    night 0 (``second``: ``age`` nights after a -5 % first step on night 20, the level being
    the first step's), each judged by its A/B test and the gate until 30 nights after it."""
    settings = night_settings()
    frame = pd.DataFrame({"start_time": [0], "run_id": ["tonight"]})
    alpha, _ = ratio_alpha([("ab_rps_ratio", "ratio", frame)] * SERIES)
    first = STEP_NIGHT if second else None
    k = STEP_NIGHT + age if second else age
    nights = k + AGED_BY[-1] + 1
    step = STEPS[spread]
    hits = {by: 0 for by in AGED_BY}
    for _ in range(steps):
        truth = np.exp(draw_scatter(rng, scatter, nights, tails))
        if first is not None:
            truth[first:] *= 1.0 - FIRST_STEP
        truth[k:] *= 1.0 - step
        rows, failed = simulate_series(truth, spread, rng, settings)
        flagged = np.zeros(nights, bool)
        for found in find_steps(rows, "higher_is_better", alpha=alpha):
            if found.result.verdict == "regression" and (first is None or found.start > first):
                flagged[found.found] = True
        # a failed A/B test counts for a step in a young series; after a first step every
        # night's test fails on the first one, so there only the gate can tell the second
        seen = np.flatnonzero((flagged if second else flagged | failed)[k:])
        for by in AGED_BY:
            hits[by] += bool(seen.size and seen[0] <= by)
    return AgedCell(spread, scatter, step, age, second, {by: hits[by] / steps for by in AGED_BY},
                    steps, tails)


def aged_table(cells: Sequence[AgedCell]) -> str:
    """The markdown table of the young-level and second-step cells."""
    lines = ["| per-round spread | night-to-night spread | planted step | falls on | "
             + " | ".join(f"flagged by k+{by}" for by in AGED_BY) + " |",
             "|---|---|---|---|" + "---|" * len(AGED_BY)]
    for c in cells:
        where = (f"{c.age} nights after a flagged -{FIRST_STEP:.0%}" if c.second else
                 f"night {c.age} of a level")
        tails = "" if c.tails == "normal" else f" ({c.tails})"
        lines.append(f"| {c.spread:.1%} | {c.scatter:.1%}{tails} | -{c.step:.0%} | {where} | "
                     + " | ".join(f"{c.detected[by]:.1%}" for by in AGED_BY) + " |")
    return "\n".join(lines) + "\n"


def walk_seconds(nights: int, repeat: int, rng: np.random.Generator) -> list[float]:
    """Seconds the gate takes to walk one A/B ratio series of ``nights`` nights (1 % scatter,
    a -4 % step in the middle), ``repeat`` times: what one series costs the gate at that
    history (the gate walks every night of every ratio series)."""
    times = []
    for _ in range(repeat):
        values = np.exp(rng.normal(0.0, 0.01, nights))
        values[nights // 2:] *= 0.96
        rows = pd.DataFrame({"value": values, "stdev": np.full(nights, 0.003)})
        started = time.perf_counter()
        find_steps(rows, "higher_is_better", alpha=2 * 0.8 * NIGHT_LEVEL / SERIES)
        times.append(time.perf_counter() - started)
    return times


def table(cells: Sequence[Cell]) -> str:
    """The markdown table of the cells."""
    lines = ["| per-round spread | night-to-night spread | nights with a false failure or "
             "exit 3 | of which A/B test / gate / rule 2 or 3 | planted step | flagged by k+1 | "
             "by k+5 | by k+10 |", "|---|---|---|---|---|---|---|---|"]
    for c in cells:
        lines.append(
            f"| {c.spread:.1%} | {c.scatter:.1%} | {c.false_night:.1%} | "
            f"{c.false_test:.1%} / {c.false_gate:.1%} / {c.false_persistent:.1%} | "
            f"-{c.step:.0%} | {c.detected[1]:.1%} | {c.detected[5]:.1%} | "
            f"{c.detected[10]:.1%} |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Run every cell and print the table."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.night_bench",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--histories", type=int, default=40,
                        help=f"all-A/A histories of {SERIES} series per cell")
    parser.add_argument("--steps", type=int, default=200, help="step series per cell")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--spreads", type=float, nargs="+", default=list(SPREADS))
    parser.add_argument("--scatters", type=float, nargs="+", default=list(SCATTERS))
    parser.add_argument("--base", type=float, default=1.0,
                        help="the build's true ratio before the step (0.99: a true -1 %% in "
                        "every series, the margin)")
    parser.add_argument("--null-step", type=float, default=0.0,
                        help="a true step within the margin on night k in every all-A/A "
                        "series (0.01: -1 %%, the margin: the gate's worst case)")
    parser.add_argument("--ages", type=int, nargs="+", default=[],
                        help="instead of the cells above: a step on night AGE of a level "
                        "(young-level cells), flagged by k+1/5/10/30")
    parser.add_argument("--second", type=int, nargs="+", default=[],
                        help="with --ages or alone: a step GAP nights after a flagged -5 %% "
                        "first step")
    parser.add_argument("--series", type=int, default=SERIES,
                        help="A/B series a night (each test's and each series' share of the "
                        "night's level is split over them)")
    parser.add_argument("--tails", choices=("normal", "t3"), default="normal",
                        help="the night-to-night scatter's distribution (t3: Student's t "
                        "with 3 degrees of freedom, same standard deviation)")
    parser.add_argument("--walk", type=int, default=0, metavar="NIGHTS",
                        help="only time the gate's walk over one series of NIGHTS nights "
                        "(5 times)")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    started = time.monotonic()
    if args.walk:
        times = walk_seconds(args.walk, 5, rng)
        sys.stdout.write(f"one series of {args.walk} nights: median "
                         f"{sorted(times)[2]:.2f} s (min {min(times):.2f}, max "
                         f"{max(times):.2f})\n")
        return 0
    if args.ages or args.second:
        aged = [run_aged(spread, scatter, age, args.steps, rng, second, args.tails)
                for spread in args.spreads for scatter in args.scatters
                for second, ages in ((False, args.ages), (True, args.second)) for age in ages]
        sys.stdout.write(aged_table(aged))
        sys.stdout.write(f"\n{args.steps} series per cell, {ROUNDS} rounds a night, seed "
                         f"{args.seed}: {time.monotonic() - started:.0f} s\n")
        return 0
    cells = [run_cell(spread, scatter, args.histories, args.steps, rng, args.base,
                      args.null_step, args.series, args.tails)
             for spread in args.spreads for scatter in args.scatters]
    sys.stdout.write(table(cells))
    sys.stdout.write(f"\n{args.histories} histories x {args.series} series x "
                     f"{STEP_NIGHT + AFTER} nights (A/A) and {args.steps} step series per "
                     f"cell, {ROUNDS} rounds a night, {args.tails} scatter, true ratio "
                     f"{args.base:g} before the "
                     f"step, a step of -{args.null_step:g} in the A/A series, seed {args.seed}: "
                     f"{time.monotonic() - started:.0f} s\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
