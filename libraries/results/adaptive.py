"""Measuring in rounds: a warm-up, interleaved rounds of every variant (each variant's trial
function called in turn), and, until the verdict is conclusive, one more round at a time while
a criterion's interval straddles its bound, within the budget. A correctness check
(``errors max: 0``, judged per trial) is never inconclusive, and one already broken ends the
rounds: no further round can mend it.

Each extra round runs every variant once more, interleaved as before, and the measurement is
rebuilt from all trials (so per-round ratios stay pairs measured back to back). Peeking after
every round raises the chance that noise alone ends on one side; the verification benchmark
(``benchmarks/verdict_bench.py``) measures the false-alarm rate of this whole procedure, not
of one fixed-size test.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from libraries.results.criteria import CriteriaFile, CriterionResult, evaluate, side_outcomes
from libraries.results.measurement import Measurement, Trial, TrialObserver
from libraries.results.plan import Settings, TrialPlan
from libraries.testbed.errors import HostStackError

LOG = logging.getLogger(__name__)
Build = Callable[[dict[str, list[Any]], float], Measurement]


@dataclass(frozen=True)
class Judge:
    """The criteria of one test's topology, with the settings they are judged at."""

    criteria: CriteriaFile
    source: str
    topology: str
    settings: Settings
    correctness_only: bool = False
    """``-v JUDGE:correctness``: only correctness criteria (judged in every trial: the
    catalogue's correctness metrics, e.g. ``errors``) are judged."""

    def evaluate(self, measurement: Measurement,
                 measured_only: bool = False) -> list[CriterionResult]:
        """Every applicable criterion's outcome (``measured_only``: only on metrics it has)."""
        results = evaluate(self.criteria, measurement, self.topology, source=self.source,
                           measured_only=measured_only)
        if self.correctness_only:
            return [r for r in results if r.per_trial]
        return results

    def judge_sides(self, measurement: Measurement) -> list[str]:
        """Judge each side of an A/B ``measurement`` by its own figures (on the metrics it
        has): the outcomes go to the record's ``ab.sides.<side>.criteria``, and a
        correctness check broken in any trial of either side
        (:func:`~libraries.results.criteria.side_outcomes`) to ``invalid``, naming the side,
        so that the test fails and its record's verdict is ``fail``. Floors are reported,
        not failed on (the comparison decides). Returns one line per outcome for the log."""
        found = {side: self.evaluate(built, measured_only=True)
                 for side, built in measurement.sides.items()}
        block = (measurement.ab or {}).get("sides", {})
        for side, results in found.items():
            if side in block:
                block[side]["criteria"] = [r.as_record() for r in results]
        lines, failed = side_outcomes(found, {side: entry.get("name", side)
                                              for side, entry in block.items()})
        measurement.invalid += [why for why in failed if why not in measurement.invalid]
        return lines


def trial_name(given: Trial) -> str:
    """``round 3 of proxy`` (``warm-up of proxy`` for round 0): how a failure names its
    trial."""
    return (f"round {given.round} of {given.variant}" if given.measured
            else f"warm-up of {given.variant}")


def naming_round(trial: Callable[[Trial], Any]) -> Callable[[Trial], Any]:
    """``trial``, whose failure (a proof missing, non-2xx answers, a dead process) names the
    round and variant it happened in."""
    def run(given: Trial) -> Any:
        try:
            return trial(given)
        except HostStackError as error:
            raise HostStackError(f"{trial_name(given)}: {error}") from error
    return run


def warm_up(variants: Mapping[str, Callable[[Trial], Any]], plan: TrialPlan) -> None:
    """Run each variant once for ``plan.warmup`` s (round 0: nothing of it is kept)."""
    if plan.warmup:
        for name, trial in variants.items():
            LOG.info("warm-up: %s for %d s", name, plan.warmup)
            trial(Trial(name, plan.warmup, 0))


def run_rounds(variants: Mapping[str, Callable[[Trial], Any]], duration: int,
               rounds: range, total: int, results: dict[str, list[Any]],
               observer: TrialObserver | None = None) -> float:
    """Run ``rounds`` (round numbers) of every variant in turn, ``duration`` s each, appending
    to ``results``; ``total`` is what observers are told the rounds count up to. Returns the
    seconds spent inside the trials."""
    measured = 0.0
    for round_number in rounds:
        for name, trial in variants.items():
            if observer is not None:
                observer.trial_started(name, round_number, total)
            started = time.monotonic()
            result = trial(Trial(name, duration, round_number))
            measured += time.monotonic() - started
            results.setdefault(name, []).append(result)
            if observer is not None:
                observer.trial_finished(name, round_number, total, result)
            LOG.info("trial %d/%d of %s done", round_number, total, name)
    return measured


def run_interleaved(
    variants: Mapping[str, Callable[[Trial], Any]], plan: TrialPlan,
    observer: TrialObserver | None = None,
) -> tuple[dict[str, list[Any]], float]:
    """Warm each variant up once, then run ``plan.trials`` rounds of every variant in turn.

    Each callable takes a :class:`Trial` (duration, round, warm-up or measured) and returns its
    trial result; ``observer`` hears of each measured trial's start and end. Returns the
    results per variant (in trial order) and the seconds spent inside measured trials.
    """
    results: dict[str, list[Any]] = {name: [] for name in variants}
    warm_up(variants, plan)
    measured = run_rounds(variants, plan.duration, range(1, plan.trials + 1), plan.trials,
                          results, observer)
    return results, measured


def measure(variants: Mapping[str, Callable[[Trial], Any]], plan: TrialPlan, build: Build,
            judge: Judge | None = None, observer: TrialObserver | None = None,
            ) -> tuple[Measurement, dict[str, list[Any]]]:
    """Warm up, run the planned rounds, and more while ``judge`` finds a criterion
    inconclusive and its budget allows; ``build`` turns the results so far (per variant, in
    round order) and the seconds inside trials into the measurement. Returns the last
    measurement, whose ``rounds`` says how many ran and why no further one did, and every
    trial's result per variant. A trial's failure names its round
    (:func:`naming_round`)."""
    results: dict[str, list[Any]] = {name: [] for name in variants}
    variants = {name: naming_round(trial) for name, trial in variants.items()}
    warm_up(variants, plan)
    started = time.monotonic()
    budget = judge.settings.budget if judge else None
    total = max(budget.max_trials, plan.trials) if budget else plan.trials
    seconds = run_rounds(variants, plan.duration, range(1, plan.trials + 1), plan.trials,
                         results, observer)
    # the planned rounds' time: as measured, at least their nominal trial time
    planned = max(time.monotonic() - started, plan.trials * plan.duration * len(variants))
    measurement = build(results, seconds)
    rounds = plan.trials
    stopped = "no criteria judged here"
    while judge is not None and budget is not None:
        outcomes = judge.evaluate(measurement)
        pending = [r for r in outcomes if r.outcome == "inconclusive"]
        broken = [r for r in outcomes if r.per_trial and r.outcome == "fail"]
        if not outcomes:
            stopped = "no criterion applies"
            break
        if broken:  # the test fails whatever more rounds would say
            stopped = f"a correctness check failed ({broken[0].metric})"
            break
        if not pending:
            stopped = "conclusive"
            break
        elapsed = time.monotonic() - started
        why = budget.allows(rounds, elapsed, elapsed / rounds, planned)
        if why is not None:
            stopped = why
            break
        rounds += 1
        LOG.info("round %d: still inconclusive: %s", rounds,
                 "; ".join(r.describe() for r in pending))
        seconds += run_rounds(variants, plan.duration, range(rounds, rounds + 1), total, results,
                              observer)
        measurement = build(results, seconds)
    measurement.rounds = {
        "planned": plan.trials, "run": rounds, "max_trials": total,
        "max_seconds": budget.max_seconds if budget else None,
        "alpha": measurement.alpha, "stopped": stopped,
    }
    return measurement, results
