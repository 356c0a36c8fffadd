"""The run's settings, resolved once per suite: every ``-v`` setting of the registry
(:data:`libraries.cases.registry.SETTINGS`) read from the values a suite was given into one
frozen, typed :class:`RunSettings`, which the suite keeps on its case context; nothing else
reads a Robot variable.

:func:`resolve_settings` parses each setting with its declaration's parser (a bad value is a
``ValueError`` naming ``-v NAME:value`` and what was expected) in the order the suite set-up
always checked them: the trials, the switches, the profiling, the A/B settings (an A/B run
only), the capacity searches'. What needs more than the values (the topology's budget, the
A/B plan against the trials, the criteria file) is checked by :func:`check_measurement`.
Pure: it reads the values it is handed, a topology and a criteria file, never a node.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from libraries.ab.ab_settings import AB, AB_DUET, ab_settings_from_variables, check_ab_plan
from libraries.capacity.search_settings import (
    CAPACITY_RANGE,
    CAPACITY_SHARED_CORES,
    SearchSettings,
    capacity_settings_from_variables,
)
from libraries.cases.profile_settings import ProfileSettings, profile_settings_from_variables
from libraries.cases.registry import SETTINGS
from libraries.cases.testbed_settings import LAB_POOL, POOL_LOG, TOPOLOGY
from libraries.results import trial_settings as trial
from libraries.results.criteria import CriteriaFile, load_criteria
from libraries.results.plan import AbSettings, Settings, TrialPlan
from libraries.testbed.topology import Topology


@dataclass(frozen=True)
class RunSettings:
    """Every setting in force in a suite, typed (each setting's ``field`` names its place):
    the testbed's (``topology``, ``lab_pool``, ``pool_log``), the trials' (``plan``,
    ``max_trials``, ``max_seconds``, ``alpha``), the judging's (``criteria``,
    ``correctness_only``), the run's (``extended``, ``run_id``, ``trend_store``), the A/B
    ones (``ab_file``, ``ab_duet``, ``ab``: None outside an A/B run), ``profile``,
    ``capacity`` and ``shared_cores``; ``values``: every setting's value as given or its
    default, as text (None: not given, no default value); ``given``: the names given on the
    command line."""

    topology: str
    lab_pool: str | None
    pool_log: Path | None
    plan: TrialPlan
    max_trials: int | None
    max_seconds: float | None
    alpha: float
    criteria: Path
    correctness_only: bool
    extended: bool
    run_id: str | None
    trend_store: str | None
    ab_file: str | None
    ab_duet: str | None
    ab: AbSettings | None
    profile: ProfileSettings
    capacity: SearchSettings
    shared_cores: bool
    values: Mapping[str, str | None]
    given: frozenset[str]

    def trial_settings(self, topology: Topology | None = None) -> Settings:
        """The plan, budget and alpha a test is judged at on ``topology`` (its ``budget``
        where no ``-v MAX_TRIALS`` / ``MAX_SECONDS`` is given); ``ValueError`` naming the
        variable or the topology's key when the budget cannot hold the planned trials."""
        budget = topology.budget if topology is not None else None
        return trial.parse_settings(
            self.plan.trials, self.plan.duration, self.plan.warmup, self.max_trials,
            self.max_seconds, self.alpha if trial.ALPHA.name in self.given else None,
            budget.model_dump(exclude_none=True) if budget is not None else None)

    @property
    def capacity_range(self) -> str:
        """``-v CAPACITY_RANGE`` as given (or its default), for messages."""
        return str(self.values[CAPACITY_RANGE.name])

    def table(self) -> str:
        """Every setting in force, one per line: ``NAME value`` and ``(given)`` for those
        given on the command line, ``(default)`` for the others."""
        width = max(len(s.name) for s in SETTINGS)
        return "\n".join(
            f"{s.name:<{width}}  {self._shown(s.name, s.shown_default)}  "
            f"({'given' if s.name in self.given else 'default'})" for s in SETTINGS)

    def _shown(self, name: str, default: str) -> str:
        value = self.values.get(name)
        return default if value is None else value


Lookup = Callable[[str, Any], Any]


def resolve_settings(lookup: Lookup, given: Collection[str] = ()) -> RunSettings:
    """The run's settings from ``lookup(name, default)`` (Robot's variables in a suite),
    ``given`` the names given on the command line; ``ValueError`` naming the first bad
    ``-v`` value and what was expected."""
    plan = trial.parse_plan(*(s.read(lookup) for s in (trial.TRIALS, trial.DURATION,
                                                       trial.WARMUP)))
    alpha = trial.ALPHA.read(lookup)
    max_trials, max_seconds = trial.MAX_TRIALS.read(lookup), trial.MAX_SECONDS.read(lookup)
    extended, correctness_only = trial.EXTENDED.read(lookup), trial.JUDGE.read(lookup)
    profile = profile_settings_from_variables(lookup)
    ab_file = AB.read(lookup)
    ab = ab_settings_from_variables(lookup) if ab_file else None
    capacity = capacity_settings_from_variables(lookup)
    values = {s.name: _text(lookup(s.name, s.default)) for s in SETTINGS}
    return RunSettings(
        topology=TOPOLOGY.read(lookup), lab_pool=LAB_POOL.read(lookup),
        pool_log=POOL_LOG.read(lookup), plan=plan, max_trials=max_trials,
        max_seconds=max_seconds, alpha=alpha, criteria=trial.CRITERIA.read(lookup),
        correctness_only=correctness_only, extended=extended, run_id=trial.RUN_ID.read(lookup),
        trend_store=trial.TREND_STORE.read(lookup), ab_file=ab_file,
        ab_duet=AB_DUET.read(lookup), ab=ab, profile=profile, capacity=capacity,
        shared_cores=CAPACITY_SHARED_CORES.read(lookup), values=MappingProxyType(values),
        given=frozenset(given))


def _text(value: object) -> str | None:
    return None if value is None or value == "" else str(value)


def default_settings() -> RunSettings:
    """The settings of a run given nothing (a unit test's context)."""
    return resolve_settings(lambda name, default: default)


@dataclass(frozen=True)
class MeasurementCheck:
    """What the suite set-up found: the trial ``settings`` on the run's topology, the
    ``criteria`` file read and checked, and the lines it logs."""

    settings: Settings
    criteria: CriteriaFile
    lines: tuple[str, ...]


def check_measurement(settings: RunSettings, topology: Topology) -> MeasurementCheck:
    """Check what the values alone cannot: the budget on ``topology`` allows the planned
    trials and a conclusive interval, an A/B run's budget reaches a deciding look, the
    criteria file is valid and names metrics and parameters its cases have
    (``ValueError`` naming the variable; the criteria's own error naming file and key)."""
    trials = settings.trial_settings(topology)
    if settings.ab is not None:
        check_ab_plan(settings.ab, trials.plan)
    lines = []
    if settings.correctness_only:
        lines.append("-v JUDGE:correctness: only correctness criteria (every trial) and the "
                     "per-trial proofs are judged; performance bounds and sanity findings are "
                     "recorded, not failed on")
    plan = trials.plan
    lines.append(f"{plan.trials} trials of {plan.duration} s after {plan.warmup} s warm-up; up "
                 f"to {trials.budget.max_trials} while a criterion is inconclusive; confidence "
                 f"{1 - trials.alpha:.0%}")
    capacity = settings.capacity
    lines.append(f"capacity: {', '.join(g.name for g in capacity.goals)}, MLRsearch "
                 f"{capacity.as_record()}")
    criteria = load_criteria(settings.criteria)
    lines.append(f"{settings.criteria}: {len(criteria.criteria)} criteria, all on metrics and "
                 "parameters their cases have")
    return MeasurementCheck(trials, criteria, tuple(lines))
