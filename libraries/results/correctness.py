"""Correctness judged per trial: a bound on a count of what must not happen (the SSL proxy's
``errors max: 0``) holds in every measured trial, or the test fails naming the rounds that
broke it, their figures and, where a side's trials came from two runs (a duet), the run.

A correctness check is not a statistic: a side with errors in 36 of 60 rounds has a median
of errors whose interval straddles 0, yet it served errors 36 times. So such a bound has two
outcomes (never *inconclusive*, never a reason for more rounds) and is judged on each trial's
figure. Which metrics are counts of that kind is the case catalogue's word
(:attr:`libraries.results.catalogue.CaseCatalogue.correctness`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

SHOWN = 8
"""How many of the offending rounds a message lists (all are in the record)."""


@dataclass(frozen=True)
class TrialViolation:
    """One measured trial over a correctness bound: its ``round`` (1-based), its figure and,
    for a side whose rounds two runs measured (a duet), the ``run`` that measured it."""

    round: int
    value: float
    run: str | None = None

    def describe(self) -> str:
        """``round 7: 250`` or ``round 7 on side b's run: 250``."""
        where = f" on {self.run}" if self.run else ""
        return f"round {self.round}{where}: {self.value:g}"

    def as_record(self) -> dict[str, Any]:
        """The record's form."""
        found: dict[str, Any] = {"round": self.round, "value": self.value}
        if self.run:
            found["run"] = self.run
        return found


def holds(value: float, op: str, bound: float) -> bool:
    """``value op bound`` for ``op`` ``>=`` or ``<=``."""
    return value >= bound if op == ">=" else value <= bound


def trial_violations(values: Sequence[float], op: str, bound: float,
                     runs: Sequence[str] | None = None) -> tuple[TrialViolation, ...]:
    """Every trial of ``values`` (one per round, in round order) whose figure breaks
    ``op bound``; ``runs``, when given, names the run that measured each round."""
    if runs is not None and len(runs) != len(values):
        raise ValueError(f"{len(values)} trials but {len(runs)} runs named for them")
    return tuple(TrialViolation(index + 1, float(value), runs[index] if runs else None)
                 for index, value in enumerate(values) if not holds(value, op, bound))


def worst(values: Sequence[float], op: str) -> float:
    """The figure furthest on the wrong side of an ``op`` bound: the largest under a ceiling
    (``<=``), the smallest under a floor."""
    return float(max(values) if op == "<=" else min(values))


def describe_violations(violations: Sequence[TrialViolation], trials: int) -> str:
    """``in 3 of 60 trials (round 4: 250; round 9 on side b's run: 12; round 17: 1)``."""
    shown = "; ".join(v.describe() for v in violations[:SHOWN])
    more = len(violations) - SHOWN
    if more > 0:
        shown += f"; and {more} more"
    return f"in {len(violations)} of {trials} trials ({shown})"
