"""Trials: a warm-up, then N trials per variant, interleaved, summarised per metric.

A *variant* is one way of doing the measured thing (direct path vs through the proxy; no
tracer vs tracer). Relative cases must compare variants measured in the same window, so
:func:`run_interleaved` runs ``A B A B ...`` (rotating the starting variant every round
would be an alternative; plain interleaving is what the seeds' manual procedure does).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from libraries.results.catalogue import case_catalogue
from libraries.results.inference import DEFAULT_ALPHA, Interval, median_interval
from libraries.results.stats import TrialSummary, summarize

LOG = logging.getLogger(__name__)
Direction = Literal["higher_is_better", "lower_is_better"]


@dataclass(frozen=True)
class Metric:
    """One summarised metric of a measurement: ``value`` is the median of the trials,
    ``interval`` its confidence interval at ``1 - alpha`` (order statistics), or the one the
    figure came with (``given``: a capacity's from its miss curve)."""

    name: str
    summary: TrialSummary
    direction: Direction = "higher_is_better"
    alpha: float = DEFAULT_ALPHA
    given: Interval | None = None

    @property
    def value(self) -> float:
        return self.summary.median

    @property
    def interval(self) -> Interval:
        """The ``given`` interval, else the median's (:func:`.inference.median_interval`)."""
        if self.given is not None:
            return self.given
        return median_interval(self.summary.values, self.alpha)

    def as_record(self) -> dict[str, Any]:
        """The record-schema form: unit, value, interval, trials, min, max, mean, stdev, cv,
        direction."""
        s = self.summary
        return {
            "unit": s.unit, "value": s.median, "interval": self.interval.as_record(),
            "trials": list(s.values), "min": s.minimum, "max": s.maximum, "mean": s.mean,
            "stdev": s.stdev, "cv": s.cv, "direction": self.direction,
        }


@dataclass
class Measurement:
    """Everything a measuring test produced: metrics, parameters and evidence.

    ``evidence`` holds the proofs that the path measured is the one intended (request counts
    seen by the server, error counts, engagement counters), ``notes`` human-readable remarks
    (e.g. why latency is unavailable), ``unavailable`` the metrics the test could not give a
    figure for, with the reason (never judged), ``invalid`` the reasons the result must not
    stand (the test fails for them whatever the criteria say), ``untestable`` the reasons the
    testbed cannot measure what the test claims (recorded, then skipped with them, unless
    invalid or a missed criterion fails it first), ``ab`` the comparison of an
    A/B test (:mod:`libraries.ab`: its metrics are per-round ratios), ``sides`` each side's
    own measurement (judged by the criteria per side; not recorded as such) and
    ``trial_runs``, where one side's rounds were measured by two runs (a duet), the run that
    measured each round (``side a's run``, ``side b's run``), named by the per-trial
    correctness checks. ``cost``: how its cost metrics were measured (the record's ``cost``
    block, :mod:`libraries.results.cost`); ``trial_telemetry``: per variant, each trial's
    telemetry of every node, paired with that very trial (a duet merges its rounds' from the
    run that held the side: the record's ``telemetry`` block of an A/B test is built from the
    sides' own).
    """

    case: str
    stack: str
    parameters: dict[str, Any]
    metrics: dict[str, Metric] = field(default_factory=dict)
    evidence: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    trial_seconds: float = 0.0
    telemetry: dict[str, Any] | None = None
    alpha: float = DEFAULT_ALPHA
    rounds: dict[str, Any] | None = None
    environment: dict[str, Any] | None = None
    unavailable: dict[str, str] = field(default_factory=dict)
    invalid: list[str] = field(default_factory=list)
    untestable: list[str] = field(default_factory=list)
    ab: dict[str, Any] | None = None
    sides: dict[str, Measurement] = field(default_factory=dict)
    trial_runs: list[str] | None = None
    cost: dict[str, Any] | None = None
    trial_telemetry: dict[str, list[Any]] | None = None

    def add(self, name: str, values: list[float], unit: str,
            direction: Direction = "higher_is_better",
            interval: Interval | None = None) -> Metric:
        """Summarise ``values`` as metric ``name`` (one of the case's metrics in
        :mod:`libraries.results.catalogue`: ``ValueError`` otherwise); ``interval``: the one
        the figure came with, instead of the median's."""
        if not case_catalogue(self.case).has_metric(name):
            raise ValueError(f"case {self.case}: metric {name!r} is not in its catalogue "
                             "(libraries/results/catalogue.py): add it there")
        metric = Metric(name, summarize(values, unit), direction, self.alpha, interval)
        self.metrics[name] = metric
        return metric

    def value(self, name: str) -> float:
        """Median of metric ``name`` (KeyError naming the metrics present otherwise)."""
        if name not in self.metrics:
            raise KeyError(f"no metric {name!r}; measured: {sorted(self.metrics)}")
        return self.metrics[name].value


@dataclass(frozen=True)
class Trial:
    """One run of a variant, as :func:`run_interleaved` asks for it: ``variant``, ``seconds``
    long, in ``round`` (1-based; 0 is the warm-up). Only a measured trial (not the warm-up)
    may leave evidence: a warm-up as long as a trial is still a warm-up."""

    variant: str
    seconds: int
    round: int

    @property
    def measured(self) -> bool:
        """False for the warm-up."""
        return self.round > 0


Say = Callable[[str], None]
"""Prints one progress line of a long step on the console (a capacity window, an A/B look)."""


def silent(line: str) -> None:
    """A :data:`Say` that says nothing (outside Robot's console)."""


class TrialObserver(Protocol):
    """Told around every measured trial (never around a warm-up), e.g. to read CPU counters
    at its start and end, or to print progress. Its time is not counted as trial time."""

    def trial_started(self, variant: str, round_number: int, total: int) -> None:
        """Trial ``round_number`` of ``total`` of ``variant`` is about to run."""

    def trial_finished(self, variant: str, round_number: int, total: int,
                       result: Any) -> None:
        """Trial ``round_number`` of ``total`` of ``variant`` returned ``result``."""


class AllObservers:
    """Several observers as one: told of a start in the given order and of a finish in the
    reverse order, so the first one given (e.g. console progress) wraps the others (e.g. CPU
    reads, which then sit as close to the trial as possible)."""

    def __init__(self, *observers: TrialObserver) -> None:
        self._observers = observers

    def trial_started(self, variant: str, round_number: int, total: int) -> None:
        """Tell each observer, in order."""
        for observer in self._observers:
            observer.trial_started(variant, round_number, total)

    def trial_finished(self, variant: str, round_number: int, total: int,
                       result: Any) -> None:
        """Tell each observer, in reverse order."""
        for observer in reversed(self._observers):
            observer.trial_finished(variant, round_number, total, result)
