"""Bisections in simulation: the project's own search (:func:`libraries.bisect.bisection.bisect`)
over ranges with planted steps, each comparison judged by the A/B engine's own looks
(:func:`libraries.ab.rounds.ratio_interval` and :func:`~libraries.ab.rounds.judge` at
:class:`libraries.results.plan.AbSettings`' corrected levels) on simulated rounds.

    python -m benchmarks.bisect_bench --simulate [--searches 1000] [--builds 17] [--seed 52]

A round's ratio (b / a) is the true ratio of the two builds times a log-normal error whose
standard deviation is the per-round spread (2.4, 5.6 and 8.3 %: the spreads measured on this
VM). A first attempt has ``--max-rounds`` (60) rounds, a second twice as many; the margin is
the bisection's (3 %); the search looks inside ranges clear only end to end for
:data:`~libraries.bisect.bisection.INSIDE` comparisons, as the command does. A build that "does
not run" fails every comparison it is in, as a build whose suite set-up fails does. Minutes
are modelled: :data:`MINUTES_PER_COMPARISON` plus :data:`MINUTES_PER_ROUND` a round, fitted to
the real bisections of benchmarks/README.md (10 rounds 0.9 min, 30 rounds 2.4, 60 rounds 4.6).

Scenarios (the first bad build of each step drawn at random, as is a broken build):

- ``two -8/-4``, ``two -12/-4``: two steps, the second one -4 % (just past the margin);
- ``one -8 + broken``: one -8 % step and one build that does not run, anywhere but the ends;
- ``-4/+4/-8`` (issue 60): a -4 % step undone by a later +4 % one, then a -8 % step: the -4 %
  hides in any range compared only end to end;
- ``one -24 copies`` (8 builds, issue 60's real case: five copies of Debian's nginx, three
  with AES-NI off) and ``one -8 copies`` (17 builds): every build before the step a copy of
  one build, every build after it a copy of another. The search knows which builds are the
  same files ``hashed`` (every build hashed before the search, as on a local testbed),
  ``learned`` (a build's files known once a comparison's record names them, as on a lab) or
  not at all (``-``: as before issue 60).

Per search: each planted regression step **found** (a culprit whose last good and first bad
build hold it, with only skipped builds between), **undecided** (a range reported undecided
holds it), **said end to end** (a range the result calls clear only end to end holds it, and
says a -/+ pair could hide there) or **missed silently** (none of these); a **wrong culprit** is
a regression named where no step is. The **claims hold** when every range the result calls
clear is checked (a pair of neighbouring builds, builds all the same files by the truth, or no
build between that runs) or is listed as clear end to end, by name, in the exit's meaning.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from libraries.ab.ab_settings import declared_ab_settings
from libraries.ab.rounds import judge, ratio_interval
from libraries.bisect.bisection import INSIDE, Bisection, Outcome, Same, bisect

SPREADS = (0.024, 0.056, 0.083)
"""Per-round spreads of the ratio (standard deviation of its log)."""
MINUTES_PER_ROUND = 0.075
"""Minutes of one A/B round (two trials and the switches): 4.5 s."""
MINUTES_PER_COMPARISON = 0.1
"""Minutes of one comparison besides its rounds (the testbed built and removed)."""


@dataclass(frozen=True)
class Scenario:
    """The steps' sizes in percent (oldest first); whether one build does not run; whether the
    builds between steps are copies of one build; how the search knows the same files
    (``-``, ``hashed`` or ``learned``: the module docstring); the builds (None: ``--builds``)."""

    sizes: tuple[float, ...]
    broken: bool = False
    copies: bool = False
    known: str = "-"
    count: int | None = None


SCENARIOS = {"two -8/-4": Scenario((-8.0, -4.0)), "two -12/-4": Scenario((-12.0, -4.0)),
             "one -8 + broken": Scenario((-8.0,), broken=True)}
"""The table of issue 52: name -> scenario."""
CLAIMS = {"-4/+4/-8": Scenario((-4.0, 4.0, -8.0)),
          **{f"one -24 copies{'' if known == '-' else ', ' + known}":
             Scenario((-24.0,), copies=True, known=known, count=8)
             for known in ("-", "hashed", "learned")},
          **{f"one -8 copies{'' if known == '-' else ', ' + known}":
             Scenario((-8.0,), copies=True, known=known)
             for known in ("-", "hashed", "learned")}}
"""The table of issue 60: name -> scenario."""


@dataclass(frozen=True)
class Planted:
    """One range: the builds' levels, the first bad build of each step and its size, the broken
    build, and each build's content (builds with one content are the same files)."""

    levels: list[float]
    steps: list[int]
    broken: int | None
    sizes: tuple[float, ...] = ()
    content: tuple[int, ...] = ()


def plant(sizes: tuple[float, ...], count: int, broken: bool, rng: np.random.Generator,
          copies: bool = False) -> Planted:
    """Steps of ``sizes`` at distinct random builds in ``1..count-1`` (in order), and a
    broken build in ``1..count-2`` when asked; with ``copies`` the builds between two steps
    are the same files, else every build is its own."""
    steps = sorted(int(s) for s in rng.choice(np.arange(1, count), len(sizes), replace=False))
    levels, level = [], 100.0
    for index in range(count):
        for step, size in zip(steps, sizes, strict=True):
            if index == step:
                level *= 1 + size / 100
        levels.append(level)
    content = tuple(sum(s <= i for s in steps) if copies else i for i in range(count))
    return Planted(levels, steps, int(rng.integers(1, count - 1)) if broken else None, sizes,
                   content)


def compare_on(planted: Planted, spread: float, max_rounds: int, margin_pct: float,
               rng: np.random.Generator, seen: set[int] | None = None
               ) -> Callable[[int, int, int], Outcome]:
    """A comparison of two builds as the A/B engine judges it, on simulated rounds; ``seen``
    gets the builds of every comparison that ran (its record names their files)."""
    def compare(a: int, b: int, attempt: int) -> Outcome:
        if planted.broken in (a, b):
            return Outcome(a, b, "failed", attempt=attempt,
                           detail="no A/B record: the suite set-up failed")
        if seen is not None:
            seen.update((a, b))
        settings = declared_ab_settings(margin=margin_pct / 100, max_rounds=max_rounds * attempt)
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
                       pct(interval.high), rounds=look,
                       minutes=MINUTES_PER_COMPARISON + MINUTES_PER_ROUND * look,
                       attempt=attempt)
    return compare


def same_on(planted: Planted, known: str, seen: set[int]) -> Same | None:
    """Which builds the search knows to be the same files: every build (``hashed``), the
    builds a comparison has run (``learned``), or none (``-``)."""
    if known == "-":
        return None
    content = planted.content
    if known == "hashed":
        return lambda a, b: content[a] == content[b]
    return lambda a, b: a in seen and b in seen and content[a] == content[b]


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
    said: int = 0
    claims: bool = True
    every_build: bool = False
    minutes: float = 0.0


def checked(result: Bisection, planted: Planted, a: int, b: int) -> bool:
    """By the truth: every build of ``a..b`` that runs is checked (a pair, the same files
    throughout, nothing between that runs)."""
    runs = [i for i in range(a, b + 1) if i not in result.skipped]
    return b - a == 1 or len({planted.content[i] for i in runs}) == 1 or len(runs) == 2


def claims_hold(result: Bisection, planted: Planted) -> bool:
    """Every range the result calls clear is checked by the truth, or named in the exit's
    meaning as clear end to end (the module docstring)."""
    names = [f"b{i}" for i in range(len(planted.levels))]
    meaning = result.meaning(names)
    loose = {(a, b) for a, b, _ in result.end_to_end}
    return all(checked(result, planted, o.a, o.b) or (
        (o.a, o.b) in loose and "end to end" in meaning
        and f"{names[o.a]} .. {names[o.b]}" in meaning) for o in result.clear)


def tally(result: Bisection, planted: Planted) -> Tally:
    """How the search did (see the module docstring); the steps looked for are the
    regressions (a -4 % step's +4 % undoing is not one)."""
    regressions = [c for c in result.culprits if c.outcome.verdict == "regression"]
    sizes = planted.sizes or (-1.0,) * len(planted.steps)
    found = undecided = said = missed = 0
    for step, size in zip(planted.steps, sizes, strict=True):
        if size > 0:
            continue
        if any(c.good < step <= c.bad and all(i in result.skipped
                                              for i in range(c.good + 1, c.bad))
               for c in regressions):
            found += 1
        elif any(a < step <= b for a, b, _ in result.undecided):
            undecided += 1
        elif any(a < step <= b for a, b, _ in result.end_to_end):
            said += 1
        else:
            missed += 1
    wrong = sum(not any(c.good < s <= c.bad for s in planted.steps) for c in regressions)
    return Tally(found, undecided, missed, wrong, result.exit_code, len(result.comparisons),
                 sum(o.rounds for o in result.comparisons), said,
                 claims_hold(result, planted),
                 result.exit_code == 3 and not result.end_to_end, result.minutes)


def run_cell(scenario: Scenario, spread: float, searches: int, count: int, seed: int,
             cell: int, max_rounds: int = 60, margin_pct: float = 3.0,
             inside: int = INSIDE) -> list[Tally]:
    """``searches`` searches of one scenario at one spread (seeded per search)."""
    tallies = []
    for number in range(searches):
        rng = np.random.default_rng([seed, cell, number])
        planted = plant(scenario.sizes, count, scenario.broken, rng, scenario.copies)
        seen: set[int] = set()
        result = bisect(count, compare_on(planted, spread, max_rounds, margin_pct, rng, seen),
                        margin_pct=margin_pct, same=same_on(planted, scenario.known, seen),
                        inside=inside)
        tallies.append(tally(result, planted))
    return tallies


def row(name: str, spread: float, tallies: list[Tally]) -> str:
    """One line of the issue-52 table."""
    n = len(tallies)
    steps = sum(t.found + t.undecided + t.missed + t.said for t in tallies)
    all_found = sum(t.undecided == 0 and t.missed == 0 and t.said == 0 for t in tallies)
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


def claims_row(name: str, count: int, spread: float, tallies: list[Tally]) -> str:
    """One line of the issue-60 table."""
    n = len(tallies)
    counts = {code: sum(t.exit_code == code for t in tallies) for code in (3, 5, 4, 0)}
    exit3 = [t for t in tallies if t.exit_code == 3]
    comparisons = [t.comparisons for t in tallies]
    minutes = sorted(t.minutes for t in tallies)
    return (f"| {name} | {count} | {spread * 100:.1f} % | {n} | {counts[3] / n:.1%} | "
            + " / ".join(str(counts[c]) for c in (3, 5, 4, 0)) + " | "
            f"{sum(t.claims for t in exit3)}/{len(exit3)} | "
            f"{sum(t.every_build for t in exit3)} | "
            + " / ".join(str(sum(getattr(t, k) for t in tallies))
                         for k in ("found", "undecided", "said", "missed")) + " | "
            f"{sum(t.wrong for t in tallies)} | "
            f"{statistics.median(comparisons):g} ({max(comparisons)}) | "
            f"{statistics.median(minutes):.1f} ({minutes[int(0.9 * (n - 1))]:.1f}) |")


CLAIMS_HEADER = ("| scenario | builds | spread | searches | exit 3 | exit 3 / 5 / 4 / 0 | exit 3 "
                 "whose claims hold | exit 3 saying every build checked | regression steps "
                 "found / undecided / said end to end / missed silently | wrong culprits | "
                 "comparisons median (max) | minutes median (p90) |\n"
                 "|---|---|---|---|---|---|---|---|---|---|---|---|")


def simulate(searches: int, count: int, seed: int, max_rounds: int = 60,
             margin_pct: float = 3.0, inside: int = INSIDE) -> str:
    """The tables of benchmarks/README.md: issue 52's, one row per scenario and spread, then
    issue 60's (claims, copies of builds)."""
    lines = [HEADER]
    started = time.monotonic()
    for cell, ((name, scenario), spread) in enumerate(
            (item, spread) for item in SCENARIOS.items() for spread in SPREADS):
        tallies = run_cell(scenario, spread, searches, count, seed, cell, max_rounds,
                           margin_pct, inside)
        lines.append(row(name, spread, tallies))
        print(lines[-1], f"({time.monotonic() - started:.0f} s)", flush=True)
    lines += ["", CLAIMS_HEADER]
    for cell, ((name, scenario), spread) in enumerate(
            ((item, spread) for item in CLAIMS.items() for spread in SPREADS), start=100):
        builds = scenario.count or count
        tallies = run_cell(scenario, spread, searches, builds, seed, cell, max_rounds,
                           margin_pct, inside)
        lines.append(claims_row(name, builds, spread, tallies))
        print(lines[-1], f"({time.monotonic() - started:.0f} s)", flush=True)
    return "\n".join(lines)
