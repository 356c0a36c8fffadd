"""Capacity under latency goals: what is asked, what one constant-rate trial measured, and what
a search found. The search itself is FD.io CSIT's MLRsearch (:mod:`.mlrsearch`).

A **latency goal** ``p99 <= 10 ms`` says that at most 1 % of the requests may be *lost*, and a
request is lost when it failed (an error or a non-2xx/3xx answer), was never sent within the
trial, or took longer than 10 ms counted from its *scheduled* send time (so a request the
generator sent late carries its lateness: no coordinated omission). That is MLRsearch's goal
loss ratio 0.01 with this project's definition of loss; the goal's other attributes (exceed
ratio, trial durations, duration sum, relative width) are MLRsearch's own and are set once for
all goals (:class:`SearchSettings`). The counts come from the generator itself: vegeta's
per-request results, wrk2's corrected histogram at the limit (never from interpolated
percentiles).

MLRsearch takes one loss count per trial, so goals with different latency limits cannot share
one search: each limit gets its own search (sharing trials where they ask for the same load and
duration), and goals with the same limit (``p99 <= 10 ms`` and ``p99.9 <= 10 ms``) share one.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from MLRsearch import MeasurementResult, SearchGoal

DEFAULT_SLO = "10ms"
DEFAULT_RANGE = "100..1000000"
_DURATION = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(us|µs|ms|s)\s*$")
_GOAL = re.compile(r"^\s*p(\d+(?:\.\d+)?)\s*<=\s*(.+)$")
_UNIT_MS = {"us": 0.001, "µs": 0.001, "ms": 1.0, "s": 1000.0}


def parse_duration_ms(value: object, where: str, given: object = None) -> float:
    """A duration (``10ms``, ``2.5 ms``, ``0.5s``, ``800us``) in milliseconds; ``ValueError``
    naming ``where`` and the ``given`` value (default: ``value``) for anything but a positive
    duration."""
    match = _DURATION.match(str(value)) if isinstance(value, str | int | float) else None
    milliseconds = float(match.group(1)) * _UNIT_MS[match.group(2)] if match else 0.0
    if not match or milliseconds <= 0:
        raise ValueError(f"{where}:{value if given is None else given}: expected a positive "
                         f"duration such as 10ms, 2.5ms or 0.5s, got {value!r}")
    return milliseconds


def parse_slo(value: object, where: str = "-v LATENCY_SLO") -> float:
    """The p99 limit of a plain SLO (``10ms``) in milliseconds (the latency pass's yardstick)."""
    return parse_duration_ms(value, where)


@dataclass(frozen=True)
class LatencyGoal:
    """``quantile`` of the requests within ``limit_ms`` (``p99 <= 10 ms``: 0.99, 10.0)."""

    quantile: float
    limit_ms: float

    @property
    def loss_ratio(self) -> float:
        """MLRsearch's goal loss ratio: the share of requests allowed over the limit."""
        return round(1.0 - self.quantile, 12)

    @property
    def name(self) -> str:
        """``p99<=10ms``: the goal as written, and its key in records."""
        return f"p{self.quantile * 100:g}<={self.limit_ms:g}ms"


def parse_goals(value: object, where: str = "-v LATENCY_SLO") -> tuple[LatencyGoal, ...]:
    """Latency goals from ``p99<=10ms,p50<=1ms`` (a bare duration ``10ms`` is ``p99<=10ms``);
    ``ValueError`` naming ``where`` and the bad part."""
    goals: list[LatencyGoal] = []
    for part in str(value).split(","):
        match = _GOAL.match(part)
        if match is None:
            goals.append(LatencyGoal(0.99, parse_duration_ms(part.strip(), where, value)))
            continue
        percent = float(match.group(1))
        if not 0.0 < percent < 100.0:
            raise ValueError(f"{where}:{value}: percentile p{match.group(1)}: expected above 0 "
                             f"and below 100, e.g. p99")
        goals.append(LatencyGoal(round(percent / 100.0, 12),
                                 parse_duration_ms(match.group(2).strip(), where, value)))
    if len({g.name for g in goals}) != len(goals):
        raise ValueError(f"{where}:{value}: a goal is given twice")
    return tuple(goals)


def parse_range(value: object, where: str = "-v CAPACITY_RANGE") -> tuple[float, float]:
    """A search range ``bottom..top`` in requests/s (``100..500000``); ``ValueError`` naming
    ``where`` when it is not two positive numbers with the top above the bottom."""
    parts = str(value).split("..")
    try:
        low, high = (float(p) for p in parts)
    except ValueError:
        raise ValueError(f"{where}:{value}: expected bottom..top in requests/s, e.g. "
                         f"100..500000, got {value!r}") from None
    if not (math.isfinite(low) and math.isfinite(high)) or low <= 0:
        raise ValueError(f"{where}:{value}: expected positive rates, got {value!r}")
    if high <= low:
        raise ValueError(f"{where}:{value}: the top ({high:g} requests/s) must be above the "
                         f"bottom ({low:g})")
    return low, high


@dataclass(frozen=True)
class SearchSettings:
    """What every search is asked: the ``goals``; the range ``low``..``high`` (requests/s);
    MLRsearch's ``exceed_ratio`` (the share of the trial time that may fail a goal's loss
    ratio at a load still counted as a lower bound), ``initial_duration`` and
    ``final_duration`` of a trial (s), the ``duration_sum`` of final trials that decides a
    load, and the relative ``width`` between the bounds it stops at; ``max_seconds``: each
    search's own budget (the time of its trials, overheads included)."""

    goals: tuple[LatencyGoal, ...]
    low: float = 100.0
    high: float = 1_000_000.0
    exceed_ratio: float = 0.5
    initial_duration: float = 0.5
    final_duration: float = 1.0
    duration_sum: float = 8.0
    width: float = 0.02
    max_seconds: float = 60.0

    def __post_init__(self) -> None:
        if not self.goals:
            raise ValueError("capacity search: expected at least one latency goal")
        for name in ("low", "high", "initial_duration", "final_duration", "duration_sum",
                     "max_seconds"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or \
                    not math.isfinite(value) or value <= 0:
                raise ValueError(f"capacity search {name}: expected a positive number, "
                                 f"got {value!r}")
        if self.high <= self.low:
            raise ValueError(f"capacity search range: the top ({self.high:g} requests/s) must "
                             f"be above the bottom ({self.low:g})")
        if not 0.0 <= self.exceed_ratio < 1.0:
            raise ValueError(f"capacity search exceed_ratio: expected a fraction in [0, 1), "
                             f"e.g. 0.5; got {self.exceed_ratio!r}")
        if not 0.0 < self.width < 1.0:
            raise ValueError(f"capacity search width: expected a fraction in (0, 1), e.g. "
                             f"0.02; got {self.width!r}")
        if self.final_duration < self.initial_duration:
            final, initial = self.final_duration, self.initial_duration
            raise ValueError(f"capacity search trial durations: the final ({final:g} s) must be"
                             f" at least the initial ({initial:g})")
        if self.duration_sum < self.final_duration:
            raise ValueError(f"capacity search duration_sum ({self.duration_sum:g} s): expected"
                             f" at least the final trial duration ({self.final_duration:g})")

    @property
    def limits(self) -> tuple[float, ...]:
        """The distinct latency limits (ms), first goal's first: one search each."""
        return tuple(dict.fromkeys(g.limit_ms for g in self.goals))

    def search_goals(self, limit_ms: float) -> list[tuple[LatencyGoal, SearchGoal]]:
        """MLRsearch's goals for the search of ``limit_ms``."""
        return [(goal, SearchGoal(
            loss_ratio=goal.loss_ratio, exceed_ratio=self.exceed_ratio,
            relative_width=self.width, initial_trial_duration=self.initial_duration,
            final_trial_duration=self.final_duration, duration_sum=self.duration_sum,
            preceding_targets=2, expansion_coefficient=2, fail_fast=False))
            for goal in self.goals if goal.limit_ms == limit_ms]

    def as_record(self) -> dict[str, Any]:
        """The record's form."""
        return {"goals": [g.name for g in self.goals], "range": [self.low, self.high],
                "exceed_ratio": self.exceed_ratio, "initial_duration_s": self.initial_duration,
                "final_duration_s": self.final_duration, "duration_sum_s": self.duration_sum,
                "relative_width": self.width, "max_seconds": self.max_seconds,
                "controller": "MLRsearch 1.2.1 (FD.io CSIT, PyPI)"}


VARIABLES = {"goals": "LATENCY_SLO", "range": "CAPACITY_RANGE",
             "exceed_ratio": "CAPACITY_EXCEED_RATIO", "durations": "CAPACITY_TRIAL_DURATION",
             "duration_sum": "CAPACITY_DURATION_SUM", "width": "CAPACITY_WIDTH",
             "max_seconds": "CAPACITY_BUDGET"}
"""The Robot variable (``-v NAME:value``) behind each setting."""


def _fraction(name: str, value: object) -> float:
    try:
        return float(str(value))
    except ValueError:
        raise ValueError(f"-v {name}:{value}: expected a number, got {value!r}") from None


DEFAULTS: dict[str, object] = {"goals": DEFAULT_SLO, "range": DEFAULT_RANGE,
                               "exceed_ratio": 0.5, "durations": "0.5..1", "duration_sum": 8,
                               "width": 0.02, "max_seconds": 60}


def settings_from_variables(lookup: Callable[[str, object], object]) -> SearchSettings:
    """:func:`parse_settings` of the Robot variables ``lookup(name, default)`` gives."""
    return parse_settings(*(lookup(VARIABLES[key], default) for key, default in DEFAULTS.items()))


def parse_settings(goals: object = DEFAULT_SLO, search_range: object = DEFAULT_RANGE,
                   exceed_ratio: object = 0.5, durations: object = "0.5..1",
                   duration_sum: object = 8, width: object = 0.02,
                   max_seconds: object = 60) -> SearchSettings:
    """The settings from Robot variables (see :data:`VARIABLES`); ``durations`` is
    ``initial..final`` seconds or one duration for both. ``ValueError`` names the variable."""
    low, high = parse_range(search_range, f"-v {VARIABLES['range']}")
    parts = str(durations).split("..")
    if len(parts) > 2:
        raise ValueError(f"-v {VARIABLES['durations']}:{durations}: expected initial..final "
                         "seconds (0.5..1) or one duration (1)")
    initial = _fraction(VARIABLES["durations"], parts[0])
    final = _fraction(VARIABLES["durations"], parts[-1])
    values = {"goals": parse_goals(goals, f"-v {VARIABLES['goals']}"), "low": low,
              "high": high, "initial_duration": initial, "final_duration": final}
    for key in ("exceed_ratio", "duration_sum", "width", "max_seconds"):
        values[key] = _fraction(VARIABLES[key], locals()[key])
    try:
        return SearchSettings(**values)
    except ValueError as error:
        text = str(error)
        key = next((k for k in ("exceed_ratio", "duration_sum", "width", "max_seconds")
                    if f" {k}" in text), "durations" if "duration" in text else "range")
        given = {"exceed_ratio": exceed_ratio, "duration_sum": duration_sum, "width": width,
                 "max_seconds": max_seconds, "durations": durations, "range": search_range}
        raise ValueError(f"-v {VARIABLES[key]}:{given[key]}: {text}") from None


@dataclass(frozen=True)
class CapacityTrial:
    """One constant-rate trial: ``rate`` asked (requests/s; the tool offers it rounded to a
    whole request) for ``duration`` s (what was asked; ``ran_s``: what the tool ran), ``intended`` requests in the schedule, ``sent``,
    ``failed`` (errors, non-2xx/3xx), ``over`` (limit ms -> answered requests over it from
    their scheduled time), ``achieved`` (successful responses per second of the window the
    tool measured), latency percentiles (ms: ``p50``, ``p90``, ``p99``, ``p99_9``), the
    generator's CPU share of its cores (``generator_cpu``), its ``tool`` and ``processes``,
    the wall ``seconds`` with overheads, and ``extra`` (status codes, error texts, ...)."""

    rate: float
    duration: float
    ran_s: float
    intended: int
    sent: int
    failed: int
    over: dict[float, int]
    achieved: float
    latency: dict[str, float | None]
    generator_cpu: float | None
    tool: str
    processes: int
    seconds: float
    extra: dict[str, Any] = field(default_factory=dict)

    def lost(self, limit_ms: float) -> int:
        """Requests lost for ``limit_ms``: failed, unsent, or later than the limit."""
        return self.failed + self.over[limit_ms] + max(0, self.intended - self.sent)

    def result(self, limit_ms: float) -> MeasurementResult:
        """MLRsearch's view of this trial for the goals of ``limit_ms`` (its intended duration
        is what it asked; the counts are the whole window the tool ran)."""
        scale = self.duration / self.ran_s if self.ran_s else 1.0
        intended = max(self.intended, self.sent)
        return MeasurementResult(
            intended_duration=self.duration, intended_load=self.rate,
            offered_count=round(self.sent * scale),
            loss_count=round((self.failed + self.over[limit_ms]) * scale),
            intended_count=round(intended * scale),
            offered_duration=self.duration, duration_with_overheads=self.seconds * scale)

    def loss_ratio(self, limit_ms: float) -> float:
        """The share of the schedule lost for ``limit_ms``."""
        return self.lost(limit_ms) / max(self.intended, self.sent, 1)

    def as_record(self) -> dict[str, Any]:
        """The record's form (limits as text keys: ``"10"`` for 10 ms)."""
        return {"rate": self.rate, "duration_s": self.duration, "ran_s": self.ran_s,
                "intended": self.intended, "sent": self.sent, "failed": self.failed,
                "over": {f"{k:g}": v for k, v in self.over.items()},
                "loss_ratio": {f"{k:g}": self.loss_ratio(k) for k in self.over},
                "achieved": self.achieved, **{f"{k}_ms": v for k, v in self.latency.items()},
                "generator_cpu": self.generator_cpu, "tool": self.tool,
                "processes": self.processes, "seconds": self.seconds, **self.extra}


@dataclass(frozen=True)
class GoalCapacity:
    """MLRsearch's result for one goal: the ``conditional_throughput`` (requests/s; None when
    even the bottom of the range fails the goal) and the relevant ``lower`` and ``upper``
    bounds (None where none was found: no lower bound, or the top of the range passes)."""

    goal: LatencyGoal
    conditional_throughput: float | None
    lower: float | None
    upper: float | None

    def as_record(self) -> dict[str, Any]:
        """The record's form."""
        return {"goal": self.goal.name, "loss_ratio": self.goal.loss_ratio,
                "conditional_throughput": self.conditional_throughput,
                "relevant_lower_bound": self.lower, "relevant_upper_bound": self.upper}


@dataclass
class PathCapacity:
    """Every search of one path: per goal its :class:`GoalCapacity`, every trial measured for
    the path (in order), why each search ``stopped`` (limit -> reason), the ``seconds`` the
    path's trials took, and how many trials one limit's search was ``shared`` from
    another's."""

    path: str
    goals: list[GoalCapacity]
    trials: list[CapacityTrial]
    stopped: dict[float, str]
    seconds: float
    shared: int = 0

    @property
    def capacity(self) -> float | None:
        """The first goal's conditional throughput: the path's headline capacity."""
        return self.goals[0].conditional_throughput

    @property
    def finished(self) -> bool:
        """Every search ended by MLRsearch's own rule (not by the budget or an error)."""
        return all(why == "done" for why in self.stopped.values())

    def as_record(self) -> dict[str, Any]:
        """The record's evidence form."""
        return {"capacity": self.capacity, "goals": [g.as_record() for g in self.goals],
                "stopped": {f"{k:g}": v for k, v in self.stopped.items()},
                "seconds": self.seconds, "shared_trials": self.shared,
                "trials": [t.as_record() for t in self.trials]}
