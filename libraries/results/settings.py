"""The ``-v`` settings of the trials and the judging, and the helpers every package's settings
are parsed with, in one error style: a bad value is a ``ValueError`` naming the variable, the
value and what was expected. Trials: ``TRIALS``, ``DURATION``, ``WARMUP``, ``MAX_TRIALS``,
``MAX_SECONDS``, ``ALPHA``, the topology's ``budget`` (:func:`parse_settings`); switches such
as ``EXTENDED`` (:func:`parse_switch`); what a run judges: ``JUDGE`` (:func:`parse_judge`).
The shared helpers (:func:`whole`, :func:`number`, :func:`parse_switch`, ``Lookup``) serve
the packages that own their settings: A/B runs in :mod:`libraries.ab.settings`, capacity
searches (``LATENCY_SLO``, ``CAPACITY_*``) in :mod:`libraries.capacity.settings`, profiling
trials in :mod:`libraries.cases.profile_settings`.
Every setting is listed in :mod:`libraries.results.registry`. Pure: it reads values it is
handed (``lookup(name, default)`` for Robot's variables), never a node, a file or Robot
itself.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from libraries.results.inference import DEFAULT_ALPHA, check_alpha, minimum_decisive_trials
from libraries.results.plan import Budget, Settings, TrialPlan

Lookup = Callable[[str, Any], Any]
"""``lookup(name, default)``: the value of ``-v NAME`` (Robot's ``${NAME}``), or ``default``."""

# -- trials -----------------------------------------------------------------------------------


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


JUDGE_MODES = ("all", "correctness")


def parse_judge(value: object) -> bool:
    """``-v JUDGE``: True for ``correctness`` (CI's e2e job: only correctness criteria and the
    per-trial proofs fail a test), False for ``all`` (every criterion and sanity check)."""
    if (word := str(value).strip().lower()) not in JUDGE_MODES:
        raise ValueError(f"-v JUDGE:{value}: expected one of {', '.join(JUDGE_MODES)}")
    return word == "correctness"


def number(variable: str, value: object) -> float:
    """``value`` as a float (``ValueError`` naming ``-v VARIABLE:value`` otherwise)."""
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ValueError(f"-v {variable}:{value}: expected a number, got {value!r}") from None
    return number


def parse_plan(trials: object, duration: object, warmup: object) -> TrialPlan:
    """The plan from Robot variables (``-v TRIALS:5 -v DURATION:30 -v WARMUP:5``, strings
    or numbers), strictly: ``1.5`` seconds is refused, not truncated (iperf3 and wrk take
    whole seconds). Errors name the variable."""
    return TrialPlan(whole("TRIALS", trials, 1, "an integer"),
                     whole("DURATION", duration, 1, "whole seconds"),
                     whole("WARMUP", warmup, 0, "whole seconds"))


def parse_settings(trials: object, duration: object, warmup: object,
                   max_trials: object = None, max_seconds: object = None,
                   alpha: object = None, topology_budget: dict[str, object] | None = None,
                   ) -> Settings:
    """The settings from Robot variables (None: not given) and the topology's ``budget``."""
    plan = parse_plan(trials, duration, warmup)
    given = topology_budget or {}
    if alpha is None:
        level = DEFAULT_ALPHA
    else:
        given_alpha = number("ALPHA", alpha)
        try:
            level = check_alpha(given_alpha, f"-v ALPHA:{alpha}")
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
    seconds = None if max_seconds is None else number("MAX_SECONDS", max_seconds)
    planned = plan.trials * plan.duration
    if seconds is not None and seconds < planned:
        raise ValueError(f"{seconds_from} ({max_seconds}) is below the planned trials' time "
                         f"({plan.trials} x {plan.duration} s = {planned} s per variant)")
    return Settings(plan, Budget(rounds, seconds), level)
