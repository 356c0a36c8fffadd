"""The ``-v`` settings of the trials and the judging, and the helpers every package's settings
are parsed with, in one error style: a bad value is a ``ValueError`` naming the variable, the
value and what was expected. Trials: ``TRIALS``, ``DURATION``, ``WARMUP``, ``MAX_TRIALS``,
``MAX_SECONDS``, ``ALPHA``, the topology's ``budget`` (:func:`parse_settings`); switches such
as ``EXTENDED`` (:func:`parse_switch`); what a run judges: ``JUDGE`` (:func:`parse_judge`).
The shared helpers (:func:`whole`, :func:`number`, :func:`finite_number`, :func:`parse_switch`,
``Lookup``) serve the packages that own their settings: A/B runs in
:mod:`libraries.ab.ab_settings`, capacity searches (``LATENCY_SLO``, ``CAPACITY_*``) in
:mod:`libraries.capacity.search_settings`, profiling trials in
:mod:`libraries.cases.profile_settings`.
Each setting is declared once, where it is owned, as a :class:`Setting` (name, default,
parser, meaning, its typed field in the run's settings): the trials, judging and run settings
here (:data:`DECLARED`), the others in their packages, except the A/B setting
:data:`AB_MARGIN`: declared here, as both ``ab`` and ``trend`` (the nightly's ratio gate) use
its default; :mod:`libraries.cases.registry` collects them, the suite set-up resolves them once
(:func:`libraries.cases.run_settings.resolve_settings`) and the settings reference page is
generated from them. Pure: it reads values it is handed (``lookup(name, default)`` for
Robot's variables), never a node, a file or Robot itself.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from libraries.results.criteria import DEFAULT_CRITERIA
from libraries.results.inference import DEFAULT_ALPHA, check_alpha, minimum_decisive_trials
from libraries.results.plan import Budget, Settings, TrialPlan

Lookup = Callable[[str, Any], Any]
"""``lookup(name, default)``: the value of ``-v NAME`` (Robot's ``${NAME}``), or ``default``."""


@dataclass(frozen=True)
class Setting:
    """One ``-v NAME:value`` setting, declared once in the package that owns it."""

    name: str
    """The Robot variable, e.g. ``TRIALS`` (``-v TRIALS:5``)."""
    default: str | None
    """The default as a user would write it (``5``, ``p99<=10ms``); None: not given, and
    :attr:`default_text` says what holds then."""
    parse: Callable[[object], Any]
    """The given value (or the default) -> its typed value; a ``ValueError`` naming ``-v
    NAME:value`` and what was expected."""
    field: str
    """Its typed field in the run's settings
    (:class:`libraries.cases.run_settings.RunSettings`), dotted: ``plan.trials``."""
    accepted: str
    """What a value may be: ``an integer >= 1``, ``yes/no``."""
    meaning: str
    """One or two sentences."""
    area: str
    """``testbed``, ``trials``, ``judging``, ``run``, ``A/B``, ``profiles``, ``capacity``."""
    checked: str
    """Where it is checked, and when."""
    default_text: str = ""
    """The default in words, where it is not one value (``2 x TRIALS``)."""

    @property
    def shown_default(self) -> str:
        """The default as the reference page states it."""
        return self.default if self.default is not None else self.default_text

    def read(self, lookup: Lookup) -> Any:
        """The typed value of this setting among ``lookup``'s (its default when not given)."""
        return self.parse(lookup(self.name, self.default))

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


SWITCH_TEXT = "yes/no (also true/false, on/off, 1/0; any case)"
"""What an on/off setting accepts, as the reference page says it."""


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


def finite_number(name: str, kind: type) -> Callable[[object], float]:
    """The parser of a number setting such as ``-v AB_MARGIN:1%``: ``kind`` (int or float) of
    the value with a trailing ``%`` dropped, finite (``ValueError`` naming ``-v NAME``)."""
    def parse(given: object) -> float:
        try:
            value = kind(str(given).rstrip("%"))
        except ValueError:
            raise ValueError(f"-v {name}:{given}: expected a {'whole ' if kind is int else ''}"
                             f"number, got {given!r}") from None
        if not math.isfinite(value):
            raise ValueError(f"-v {name}:{given}: expected a finite number")
        return value
    return parse


def parse_plan(trials: object, duration: object, warmup: object) -> TrialPlan:
    """The plan from Robot variables (``-v TRIALS:5 -v DURATION:30 -v WARMUP:5``, strings
    or numbers), strictly: ``1.5`` seconds is refused, not truncated (iperf3 and wrk take
    whole seconds). Errors name the variable."""
    return TrialPlan(TRIALS.parse(trials), DURATION.parse(duration), WARMUP.parse(warmup))


def parse_alpha(value: object) -> float:
    """``-v ALPHA``: a number in (0, 1) (``ValueError`` naming the variable)."""
    given_alpha = number("ALPHA", value)
    try:
        return check_alpha(given_alpha, f"-v ALPHA:{value}")
    except ValueError:
        raise ValueError(f"-v ALPHA:{value}: expected a number between 0 and 1 (exclusive),"
                         " e.g. 0.05") from None


def parse_settings(trials: object, duration: object, warmup: object,
                   max_trials: object = None, max_seconds: object = None,
                   alpha: object = None, topology_budget: dict[str, object] | None = None,
                   ) -> Settings:
    """The settings from Robot variables (None: not given) and the topology's ``budget``."""
    plan = parse_plan(trials, duration, warmup)
    given = topology_budget or {}
    level = DEFAULT_ALPHA if alpha is None else parse_alpha(alpha)
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
        raise ValueError(f"{seconds_from} ({seconds:g}) is below the planned trials' time "
                         f"({plan.trials} x {plan.duration} s = {planned} s per variant)")
    return Settings(plan, Budget(rounds, seconds), level)


def _optional(parse: Callable[[object], Any]) -> Callable[[object], Any]:
    """``parse``, with None (not given) kept as None."""
    return lambda value: None if value is None else parse(value)


def _text(value: object) -> str | None:
    """A free text setting; empty is not given."""
    return str(value) if value not in (None, "") else None


# -- the declarations -------------------------------------------------------------------------

_MEASURE = "suite set-up (Check Measurement Settings): libraries.results.trial_settings"

TRIALS = Setting(
    "TRIALS", "5", lambda v: whole("TRIALS", v, 1, "an integer"), "plan.trials",
    "an integer >= 1", "Measured trials (rounds) per variant before the first judgement; 5 is "
    "the fewest whose interval decides at ALPHA 0.05.", "trials", f"{_MEASURE}.parse_plan")
DURATION = Setting(
    "DURATION", "2", lambda v: whole("DURATION", v, 1, "whole seconds"), "plan.duration",
    "whole seconds >= 1 (1.5 is refused, not truncated)", "Length of each measured trial.",
    "trials", f"{_MEASURE}.parse_plan")
WARMUP = Setting(
    "WARMUP", "1", lambda v: whole("WARMUP", v, 0, "whole seconds"), "plan.warmup",
    "whole seconds >= 0", "Length of the warm-up trial each variant runs before the measured "
    "ones (never counted).", "trials", f"{_MEASURE}.parse_plan")
MAX_TRIALS = Setting(
    "MAX_TRIALS", None, _optional(lambda v: whole("MAX_TRIALS", v, 1, "an integer")),
    "max_trials", "an integer >= TRIALS", "How many rounds a test may run in all while a "
    "criterion stays inconclusive.", "trials", f"{_MEASURE}.parse_settings",
    "the topology's budget.max_trials, else 2 x TRIALS (at least the trials a deciding "
    "interval needs at ALPHA)")
MAX_SECONDS = Setting(
    "MAX_SECONDS", None, _optional(lambda v: number("MAX_SECONDS", v)), "max_seconds",
    "seconds >= TRIALS x DURATION", "How long a test may measure in all while a criterion "
    "stays inconclusive.", "trials", f"{_MEASURE}.parse_settings",
    "the topology's budget.max_seconds, else twice the planned trials' time (never less than "
    "MAX_TRIALS rounds at their pace, plus a quarter)")
ALPHA = Setting(
    "ALPHA", f"{DEFAULT_ALPHA:g}", parse_alpha, "alpha", "a number in (0, 1)",
    "The intervals' confidence is 1 - ALPHA; also the A/B verdict's level unless AB_ALPHA is "
    "given.", "trials", f"{_MEASURE}.parse_alpha")
CRITERIA = Setting(
    "CRITERIA", None, lambda v: DEFAULT_CRITERIA if v is None else Path(str(v)), "criteria",
    "a path to a criteria YAML file", "The pass criteria (floors per testbed, portable "
    "ratios, correctness checks).", "judging", "suite set-up (Check Measurement Settings): "
    "libraries.results.criteria.load_criteria, against libraries.results.catalogue",
    "topologies/criteria.yaml of this repository")
JUDGE = Setting(
    "JUDGE", JUDGE_MODES[0], parse_judge, "correctness_only", " or ".join(JUDGE_MODES),
    "correctness: only correctness criteria (every trial) and per-trial proofs fail a test; "
    "performance bounds and sanity findings are recorded, not failed on (CI's e2e job).",
    "judging", f"{_MEASURE}.parse_judge")
EXTENDED = Setting(
    "EXTENDED", "no", lambda v: parse_switch("EXTENDED", v), "extended", SWITCH_TEXT,
    "Run the rows tagged EXTENDED too (kernel twins of VPP rows, more streams, a counting "
    "tracer); the nightly and CI's e2e job do.", "run",
    f"{_MEASURE}.parse_switch; each row: Skip Extended Row Unless Asked")
RUN_ID = Setting(
    "RUN_ID", None, _text, "run_id", "a run id", "Records go straight into the output dir "
    "under this id, and the run is not stored in the history at its end (its caller does "
    "that: the nightly).", "run", "first suite (the Results library's listener): "
    "libraries.results.run_records.RunRecords.open",
    "(none: the run names itself YYYYmmdd-HHMMSS-xxxx)")
TREND_STORE = Setting(
    "TREND_STORE", None, _text, "trend_store", "a folder, or NONE (not stored)", "The "
    "history a run that named itself is stored in when it ends (a bisection's comparisons "
    "give NONE).", "run", "run end (the Results library's listener): "
    "libraries.report.run_end.finish_run", "<output dir>/history")

DECLARED = (TRIALS, DURATION, WARMUP, MAX_TRIALS, MAX_SECONDS, ALPHA, CRITERIA, JUDGE,
            EXTENDED, RUN_ID, TREND_STORE)
"""The trials, judging and run settings, in the reference page's order."""


# -- an A/B setting whose default the nightly's ratio gate shares -----------------------------

AB_MARGIN = Setting(
    "AB_MARGIN", "1", finite_number("AB_MARGIN", float), "ab.margin", "a percentage in "
    "[0, 100) (1 or 1%)", "The smallest change that is a finding: a regression or progression "
    "needs the whole interval beyond +-AB_MARGIN %, no change needs it wholly within.", "A/B",
    "suite set-up (Check Measurement Settings, then Set Up A/B Comparison), A/B runs only: "
    "libraries.ab.ab_settings.ab_settings_from_variables; its default is also the nightly "
    "ratio gate's margin (libraries.trend.ratio.RATIO_MARGIN)")
"""An A/B setting, listed with the others in :data:`libraries.ab.ab_settings.DECLARED` (not in
this module's :data:`DECLARED`) but declared here, in ``results``: the nightly's ratio gate
(:mod:`libraries.trend.ratio`) judges a change of an A/B ratio series at the A/B tests' own
default margin, and ``trend`` may not import ``ab`` (``utest/test_layers.py``), so the one
declaration stands below both."""
