"""How a test measures: the planned trials, the budget for more, and the confidence asked.

A test runs ``TRIALS`` rounds of ``DURATION`` s after a ``WARMUP`` s warm-up (:class:`TrialPlan`).
When a criterion is still inconclusive after them (its interval straddles the bound), more
rounds run, one at a time, until every criterion is conclusive or the :class:`Budget` is spent:
at most ``MAX_TRIALS`` rounds in all and ``MAX_SECONDS`` of measuring. Intervals and verdicts
are at confidence ``1 - ALPHA``.

Where the values come from, first found wins: Robot variables (``-v TRIALS:5 -v DURATION:30
-v MAX_TRIALS:12 -v MAX_SECONDS:900 -v ALPHA:0.05``), the topology's ``budget:`` (a lab's own
bounds, ``{max_trials: 12, max_seconds: 900}``), the defaults: twice the planned rounds (at
least the fewest whose interval can decide: 5 at ``ALPHA`` 0.05) and twice their time. Every
value is checked where it enters, in each measuring suite's setup, by
:mod:`libraries.results.trial_settings`, the one parser of ``-v`` settings; errors name the
variable.
An A/B run is told its looks, margin and budget (:class:`AbSettings`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from libraries.results.inference import DEFAULT_ALPHA


@dataclass(frozen=True)
class TrialPlan:
    """The planned trials: ``trials`` rounds of ``duration`` s after a ``warmup`` s warm-up
    (a run's defaults: the declarations of ``-v TRIALS``, ``DURATION`` and ``WARMUP`` in
    :mod:`libraries.results.trial_settings`)."""

    trials: int
    duration: int
    warmup: int

    def __post_init__(self) -> None:
        if not isinstance(self.trials, int) or self.trials < 1:
            raise ValueError(f"trials: expected an integer >= 1, got {self.trials!r}")
        if not isinstance(self.duration, int) or self.duration < 1:
            raise ValueError(f"duration: expected whole seconds >= 1, got {self.duration!r}")
        if not isinstance(self.warmup, int) or self.warmup < 0:
            raise ValueError(f"warmup: expected whole seconds >= 0, got {self.warmup!r}")


@dataclass(frozen=True)
class Budget:
    """How far an inconclusive test may go: ``max_trials`` rounds in all, ``max_seconds`` of
    measuring (None: twice the planned rounds' time, known once they ran, and never less
    than ``max_trials`` rounds at their pace with a quarter to spare, so the default time never
    stops a test short of the trials its interval needs)."""

    max_trials: int
    max_seconds: float | None = None

    def allows(self, rounds: int, elapsed: float, per_round: float, planned: float) -> str | None:
        """Why no further round may run after ``rounds`` rounds and ``elapsed`` seconds (the
        planned ones took ``planned`` s, a round ``per_round`` s), or None when one may."""
        if rounds >= self.max_trials:
            return f"trial budget spent ({rounds} of MAX_TRIALS {self.max_trials})"
        limit = self.max_seconds if self.max_seconds is not None else \
            max(2.0 * planned, 1.25 * per_round * self.max_trials)
        if elapsed + per_round > limit:
            return (f"time budget spent ({elapsed:.0f} s measured, another round takes "
                    f"~{per_round:.0f} s, MAX_SECONDS {limit:.0f})")
        return None


@dataclass(frozen=True)
class Settings:
    """Everything a measuring test is told: the ``plan``, the ``budget``, ``alpha``."""

    plan: TrialPlan
    budget: Budget
    alpha: float = DEFAULT_ALPHA


INCONCLUSIVE = ("skip", "pass", "fail")
"""What an A/B test that no look decided becomes (``-v AB_INCONCLUSIVE``)."""
UNUSED = ("skip", "plain")
"""What a test that uses nothing the sides set differently does (``-v AB_UNUSED``): skip
with the reason, or measure it plainly (the nightly against a reference: the reference pins
some components, and a test that uses none of them still gets today's figure)."""


@dataclass(frozen=True)
class AbSettings:
    """``margin`` (a change within it is no finding), ``alpha`` (the chance of a false
    finding over all looks), ``look`` (rounds between looks), ``max_rounds``, ``budget_s``
    (seconds of the whole A/B measurement, switches included), ``inconclusive``: the test's
    status when no look decided (``skip``, ``pass`` or ``fail``), ``unused``: what a test
    that uses none of the sides' differences does (``skip`` or ``plain``), ``scatter``: the
    night-to-night spread of the true ratio the verdict must tolerate (0: judge tonight's
    ratio; the nightly against a reference gives 1 %: the interval is widened by it, see
    :func:`libraries.ab.rounds.widen`).

    Every field is required: the defaults are the ``-v AB_*`` declarations' alone, and
    :func:`libraries.ab.ab_settings.declared_ab_settings` builds them (with any field
    replaced), so a default is never written here a second time."""

    margin: float
    alpha: float
    look: int
    max_rounds: int
    budget_s: float
    inconclusive: str
    unused: str
    scatter: float

    def __post_init__(self) -> None:
        if not 0.0 <= self.margin < 1.0:
            raise ValueError(f"-v AB_MARGIN:{self.margin * 100:g}: expected a percentage in "
                             "[0, 100), e.g. 1")
        if not 0.0 <= self.scatter < 1.0:
            raise ValueError(f"-v AB_SCATTER:{self.scatter * 100:g}: expected a percentage in "
                             "[0, 100), e.g. 1")
        if not 0.0 < self.alpha < 1.0:
            raise ValueError(f"alpha: expected a number in (0, 1), got {self.alpha!r}")
        if not isinstance(self.look, int) or self.look < 1:
            raise ValueError(f"-v AB_LOOK:{self.look}: expected whole rounds >= 1")
        if not isinstance(self.max_rounds, int) or self.max_rounds < self.look:
            raise ValueError(f"-v AB_MAX_ROUNDS:{self.max_rounds}: expected whole rounds >= "
                             f"AB_LOOK ({self.look})")
        if not self.budget_s > 0:
            raise ValueError(f"-v AB_BUDGET:{self.budget_s:g}: expected seconds > 0")
        if self.inconclusive not in INCONCLUSIVE:
            raise ValueError(f"-v AB_INCONCLUSIVE:{self.inconclusive}: expected one of "
                             f"{', '.join(INCONCLUSIVE)}")
        if self.unused not in UNUSED:
            raise ValueError(f"-v AB_UNUSED:{self.unused}: expected one of {', '.join(UNUSED)}")
        if self.look < self.decisive_rounds:
            raise ValueError(
                f"-v AB_LOOK:{self.look}: the first look cannot decide: at ALPHA {self.alpha:g}"
                f" split over {len(self.looks)} looks ({self.alpha_per_look:.3g} each) a "
                f"signed-rank interval needs at least {self.decisive_rounds} rounds")

    @property
    def decisive_rounds(self) -> int:
        """The fewest rounds whose signed-rank interval can decide at :attr:`alpha_per_look`
        (all ``n`` ratios on one side has probability ``2 ** -n`` under no change)."""
        return math.ceil(math.log2(2.0 / self.alpha_per_look))

    @property
    def looks(self) -> tuple[int, ...]:
        """The rounds after which the test is judged: every ``look`` rounds, and at
        ``max_rounds`` (a budget that ends the test between looks makes its last rounds the
        next look, so no more looks than planned are ever made)."""
        return tuple(dict.fromkeys((*range(self.look, self.max_rounds + 1, self.look),
                                    self.max_rounds)))

    @property
    def alpha_per_look(self) -> float:
        """Each look's level: ``alpha`` split evenly over the planned looks."""
        return self.alpha / len(self.looks)
