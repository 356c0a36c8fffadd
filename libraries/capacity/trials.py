"""Capacity under latency goals: what is asked, what one constant-rate trial measured, and what
a search found. The search itself is FD.io CSIT's MLRsearch (:mod:`.search`).

A **latency goal** ``p99 <= 10 ms`` says that at most 1 % of the requests may be *lost*, and a
request is lost when it failed (an error or a non-2xx/3xx answer), was never sent within the
trial, or took longer than 10 ms counted from its *scheduled* send time (so a request the
generator sent late carries its lateness: no coordinated omission). That is MLRsearch's goal
loss ratio 0.01 with this project's definition of loss; the goal's other attributes (exceed
ratio, trial durations, duration sum, relative width) are MLRsearch's own and are set once for
all goals (:class:`~libraries.capacity.search_settings.SearchSettings`). The counts come from the
generator itself: vegeta's per-request results, wrk2's corrected histogram at the limit (never
from interpolated percentiles).

MLRsearch takes one loss count per trial, so goals with different latency limits cannot share
one search: each limit gets its own search (sharing trials where they ask for the same load and
duration), and goals with the same limit (``p99 <= 10 ms`` and ``p99.9 <= 10 ms``) share one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from MLRsearch import MeasurementResult

from libraries.capacity.search_settings import LatencyGoal


@dataclass(frozen=True)
class CapacityTrial:
    """One constant-rate trial: ``rate`` asked (requests/s; the tool offers it rounded to a
    whole request) for ``duration`` s (what was asked; ``ran_s``: what the tool ran),
    ``intended`` requests in the schedule, ``sent``,
    ``failed`` (errors, non-2xx/3xx), ``over`` (limit ms -> answered requests over it from
    their scheduled time), ``achieved`` (successful responses per second of the window the
    tool measured), latency percentiles (ms: ``p50``, ``p90``, ``p99``, ``p99_9``), the
    generator's CPU share of its cores (``generator_cpu``), its ``tool`` and ``processes``,
    the wall ``seconds`` with overheads (SSH, the tool's report, parsing), and ``extra``
    (status codes, error texts, ...)."""

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
        """MLRsearch's view of this trial for the goals of ``limit_ms``: its intended duration
        is what the search asked (that decides a short from a full-length trial); the
        offered duration, and the duration it adds to a goal's duration sum, are the seconds
        the generator sent for (``ran_s``: wrk2 runs whole seconds, so a 0.5 s trial sends
        for 1 s and counts 1 s), never the SSH, report and parsing overheads around it
        (``overhead_s`` in the record); the counts are that whole window's."""
        return MeasurementResult(
            intended_duration=self.duration, intended_load=self.rate,
            offered_count=self.sent, loss_count=self.failed + self.over[limit_ms],
            intended_count=max(self.intended, self.sent), offered_duration=self.ran_s,
            duration_with_overheads=self.ran_s)

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
                "processes": self.processes, "seconds": self.seconds,
                "overhead_s": max(0.0, self.seconds - self.ran_s), **self.extra}


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
