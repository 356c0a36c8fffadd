"""How a test measures: the planned trials, the budget for more, and the confidence asked.

A test runs ``TRIALS`` rounds of ``DURATION`` s after a ``WARMUP`` s warm-up (:class:`TrialPlan`).
When a criterion is still inconclusive after them (its interval straddles the bound), more
rounds run, one at a time, until every criterion is conclusive or the :class:`Budget` is spent:
at most ``MAX_TRIALS`` rounds in all and ``MAX_SECONDS`` of measuring. Intervals and verdicts
are at confidence ``1 - ALPHA``.

Where the values come from, first found wins: Robot variables (``-v TRIALS:5 -v DURATION:30
-v MAX_TRIALS:12 -v MAX_SECONDS:900 -v ALPHA:0.05``), the topology's ``budget:`` (a lab's own
bounds, ``{max_trials: 12, max_seconds: 900}``), the defaults: twice the planned rounds (at
least the fewest whose interval can decide: 5 at ``ALPHA`` 0.05) and twice their time. Every value is checked where it enters (:func:`parse_settings`, in each
measuring suite's setup); errors name the variable.
"""

from __future__ import annotations

from dataclasses import dataclass

from libraries.results.inference import DEFAULT_ALPHA, check_alpha, minimum_decisive_trials


@dataclass(frozen=True)
class TrialPlan:
    """The planned trials: ``trials`` rounds of ``duration`` s after a ``warmup`` s warm-up."""

    trials: int = 5
    duration: int = 2
    warmup: int = 1

    def __post_init__(self) -> None:
        if not isinstance(self.trials, int) or self.trials < 1:
            raise ValueError(f"trials: expected an integer >= 1, got {self.trials!r}")
        if not isinstance(self.duration, int) or self.duration < 1:
            raise ValueError(f"duration: expected whole seconds >= 1, got {self.duration!r}")
        if not isinstance(self.warmup, int) or self.warmup < 0:
            raise ValueError(f"warmup: expected whole seconds >= 0, got {self.warmup!r}")

    @classmethod
    def parse(cls, trials: object, duration: object, warmup: object) -> TrialPlan:
        """The plan from Robot variables (``-v TRIALS:5 -v DURATION:30 -v WARMUP:5``, strings
        or numbers), strictly: ``1.5`` seconds is refused, not truncated (iperf3 and wrk take
        whole seconds). Errors name the variable."""
        return cls(whole("TRIALS", trials, 1, "an integer"),
                   whole("DURATION", duration, 1, "whole seconds"),
                   whole("WARMUP", warmup, 0, "whole seconds"))


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


def whole(variable: str, value: object, minimum: int, what: str) -> int:
    """``value`` as an int >= ``minimum``: an int, or a string of digits (``ValueError`` naming
    ``-v VARIABLE:value`` otherwise)."""
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str) and value.strip().isdigit():
        number = int(value.strip())
    else:
        raise ValueError(f"-v {variable}:{value}: expected {what} >= {minimum}, got {value!r}")
    if number < minimum:
        raise ValueError(f"-v {variable}:{value}: expected {what} >= {minimum}, got {value!r}")
    return number


SWITCH_WORDS = {"yes": True, "true": True, "on": True, "1": True,
                "no": False, "false": False, "off": False, "0": False}


def parse_switch(variable: str, value: object) -> bool:
    """An on/off setting (``-v EXTENDED:yes``): a bool, or one of yes/no, true/false, on/off,
    1/0 in any case (``ValueError`` naming ``-v VARIABLE:value`` otherwise)."""
    if isinstance(value, bool):
        return value
    word = str(value).strip().lower()
    if word not in SWITCH_WORDS:
        raise ValueError(f"-v {variable}:{value}: expected yes or no (true/false, on/off, "
                         f"1/0), got {value!r}")
    return SWITCH_WORDS[word]


def _number(variable: str, value: object) -> float:
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ValueError(f"-v {variable}:{value}: expected a number, got {value!r}") from None
    return number


def parse_settings(trials: object, duration: object, warmup: object,
                   max_trials: object = None, max_seconds: object = None,
                   alpha: object = None, topology_budget: dict[str, object] | None = None,
                   ) -> Settings:
    """The settings from Robot variables (None: not given) and the topology's ``budget``."""
    plan = TrialPlan.parse(trials, duration, warmup)
    given = topology_budget or {}
    if alpha is None:
        level = DEFAULT_ALPHA
    else:
        number = _number("ALPHA", alpha)
        try:
            level = check_alpha(number, f"-v ALPHA:{alpha}")
        except ValueError:
            raise ValueError(f"-v ALPHA:{alpha}: expected a number between 0 and 1 (exclusive),"
                             " e.g. 0.05") from None
    trials_from, seconds_from = "-v MAX_TRIALS", "-v MAX_SECONDS"
    needed = minimum_decisive_trials(level)
    if max_trials is None:
        trials_from = "the topology's budget.max_trials" if "max_trials" in given else \
            "the default budget"
        max_trials = given.get("max_trials", max(2 * plan.trials, needed))
    rounds = whole("MAX_TRIALS", max_trials, 1, "an integer")
    if rounds < plan.trials:
        raise ValueError(f"{trials_from} ({rounds}) is below -v TRIALS:{plan.trials}: the "
                         "budget must allow the planned trials")
    if rounds < needed:
        raise ValueError(f"{trials_from} ({rounds}) can never reach a verdict at ALPHA "
                         f"{level:g}: an interval that decides needs {needed} trials")
    if max_seconds is None:
        seconds_from = "the topology's budget.max_seconds"
        max_seconds = given.get("max_seconds")
    seconds = None if max_seconds is None else _number("MAX_SECONDS", max_seconds)
    planned = plan.trials * plan.duration
    if seconds is not None and seconds < planned:
        raise ValueError(f"{seconds_from} ({max_seconds}) is below the planned trials' time "
                         f"({plan.trials} x {plan.duration} s = {planned} s per variant)")
    return Settings(plan, Budget(rounds, seconds), level)
