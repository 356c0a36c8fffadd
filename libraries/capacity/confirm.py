"""The capacity a test reports keeps its goal over **all** the requests at that rate.

MLRsearch's figure (the conditional throughput at exceed ratio 0.5 over 1 s trials) is the
knee where half of the trial time meets the goal. Near that knee a proxy is bistable (a trial
either passes clean or tips into a queue that does not drain: p99 over 100 ms, most requests
late), so at the knee itself a long run is late far more often than the goal allows. The
confirmation runs one constant-rate trial of ``seconds`` (30 s by default) at the knee and
counts its whole window against the goal: it holds when the failed, unsent and late requests
are at most :data:`HOLD` of the goal's loss ratio (a margin: a rate that held at just under
the goal tipped in the next run). Where it misses, the rate goes down, first by
:data:`FIRST_STEP` (where the kernel stack's figures held), then by :data:`STEP` each time,
until a trial holds; then the rate between the highest that held and the lowest that missed is
tried, until the two are within :data:`RESOLUTION` of each other, in at most :data:`TRIES`
trials and never under the search's lowest rate. The highest rate that held is the capacity a
test reports: "p99 <= 10 ms over a 30 s confirmation at N requests/s"; the knee is kept beside
it.

Why 30 s and the margin (kernel 3node, wrk2): a 10 s confirmation held at 18,044 requests/s
with 0.94 % late, and a 30 s run at that rate then lost 3.75 %; on the direct path a 10 s
trial with 0.01 % late was followed by a 30 s one with 5.65 % (a tip within the longer window).

A trial that missed only by requests its generator never sent, with the ones it sent answered
in time (:func:`short_of_schedule`: wrk2 over TLS starting its connections about 1 s late), is
the generator's, so it is run again, up to :data:`REPEATS` times; one that stays short counts
as missed (a system that stalls connections looks the same, and a lower figure is the safe
side). The runs set aside are kept in the record (``retried``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from libraries.capacity.search import Measure, delivered_trial
from libraries.capacity.trials import CapacityTrial
from libraries.results.settings import LatencyGoal

LOG = logging.getLogger(__name__)

FIRST_STEP = 0.9
"""The rate after a miss at the knee, as a share of it (kernel 3node: the figures that held were
within 3-9 % of the knee)."""
STEP = 0.75
"""The rate after every further miss, as a share of the last (halving, before 2026-11-26, let
one stray miss halve a figure: a quiet CI run's proxy confirmed 8,640 against its knee of
19,819, and one beside a short test run 3,340 against 15,834, failing the capacity ratio
floor; a quarter down bounds what one stray miss costs)."""
TRIES = 8
"""Confirmation trials per path at most (4 minutes at 30 s): from the knee, 0.9, then a quarter
down each time, reaches 16 % of the knee with none held (a path whose figure is further down
fails the sanity check's 25 % of its closed-loop maximum anyway; kernel 3node beside two CPU
burners: the direct path's knee was 20,980, and a 30 s run lost 5-9 % as low as half of it)."""
RESOLUTION = 0.05
"""The confirmation stops once the highest rate that held is within this share of the lowest
that missed."""
HOLD = 0.5
"""A confirmation holds when it lost at most this share of the goal's loss ratio (0.5 % of the
requests for p99)."""
REPEATS = 2
"""A trial short of its schedule by the generator (:func:`short_of_schedule`) is run again at
most this many times (kernel 3node, quiet: a 30 s wrk2 trial at 8,919 requests/s sent 258,643
of 267,369, none late or failed, p99 3.15 ms: 1 s of the schedule never sent, a miss of 3.3 %
that halved the proxy's figure; wrk2 starts late in 13-20 % of its runs, three in a row in
about 0.5 %)."""
SHORT_SECONDS = 0.5
"""...when the requests never sent make at least this many seconds of the schedule (a late
start leaves out about a whole second)."""


@dataclass(frozen=True)
class Confirmation:
    """The confirmation of one path: its ``knee`` (MLRsearch's figure), the trials run (each
    ``seconds`` long, in order), and the highest ``rate`` whose whole window kept ``goal``
    (None: none did); ``retried``: the trials set aside as short of their schedule by the
    generator and run again."""

    path: str
    goal: LatencyGoal
    seconds: float
    knee: float
    trials: tuple[CapacityTrial, ...]
    rate: float | None
    retried: tuple[CapacityTrial, ...] = ()

    @property
    def semantics(self) -> str:
        """What the reported figure claims, in words."""
        if self.rate is None:
            lowest = min(t.rate for t in self.trials)
            return (f"no rate from {self.knee:.0f} down to {lowest:.0f} "
                    f"requests/s kept {self.goal.name} over a {self.seconds:g} s confirmation "
                    f"(at most {HOLD * self.goal.loss_ratio:.1%} lost)")
        return (f"{self.goal.name} over a {self.seconds:g} s confirmation at "
                f"{self.rate:.0f} requests/s (at most {HOLD * self.goal.loss_ratio:.1%} lost)")

    def as_record(self) -> dict[str, Any]:
        """The record's form (each trial's whole-window loss for the goal's limit)."""
        return {"goal": self.goal.name, "duration_s": self.seconds, "knee": self.knee,
                "rate": self.rate, "held": self.rate is not None,
                "semantics": self.semantics,
                "rule": {"first_step": FIRST_STEP, "step": STEP,
                         "then": f"x{STEP:g} until one holds, then between the highest "
                         "held and the lowest missed",
                         "resolution": RESOLUTION, "tries": TRIES, "hold_share": HOLD},
                "trials": [goal_record(t, self.goal, HOLD) for t in self.trials],
                "retried": [goal_record(t, self.goal, HOLD) for t in self.retried]}


def holds(trial: CapacityTrial, goal: LatencyGoal, share: float = 1.0) -> bool:
    """``trial`` lost at most ``share`` of ``goal``'s loss ratio over its whole window."""
    return trial.loss_ratio(goal.limit_ms) <= share * goal.loss_ratio


def short_of_schedule(trial: CapacityTrial, goal: LatencyGoal) -> str:
    """Why ``trial`` missed ``goal`` only by its generator ('' when it did not): it lost more
    than :data:`HOLD` allows, the requests it sent were answered within that share (late or
    failed), and the ones never sent make at least :data:`SHORT_SECONDS` of its schedule."""
    answered = trial.failed + trial.over[goal.limit_ms]
    unsent = max(0, trial.intended - trial.sent)
    allowed = HOLD * goal.loss_ratio * max(trial.intended, trial.sent, 1)
    if holds(trial, goal, HOLD) or answered > allowed or unsent < SHORT_SECONDS * trial.rate:
        return ""
    return (f"{trial.tool} sent {trial.sent} of {trial.intended} scheduled requests "
            f"({unsent / trial.rate:.1f} s of the schedule never sent) with {answered} late or "
            f"failed, p99 {trial.latency.get('p99')} ms")


def goal_record(trial: CapacityTrial, goal: LatencyGoal, share: float = 1.0) -> dict[str, Any]:
    """One trial judged over its whole window against ``goal`` (held: it lost at most
    ``share`` of the goal's loss ratio), in the record's form."""
    limit = goal.limit_ms
    return {"rate": trial.rate, "duration_s": trial.duration,
            "loss_ratio": trial.loss_ratio(limit),
            "held": holds(trial, goal, share), "sent": trial.sent,
            "intended": trial.intended, "failed": trial.failed, "over": trial.over[limit],
            "p99_ms": trial.latency.get("p99"), "generator_cpu": trial.generator_cpu,
            "seconds": trial.seconds}


def confirm_capacity(measure: Measure, path: str, knee: float, goal: LatencyGoal,
                     seconds: float, low: float) -> Confirmation:
    """Confirm ``path``'s ``knee`` (requests/s) for ``goal`` with trials of ``seconds``
    (``measure(path, seconds, rate)``; a trial the generator did not deliver is run again and
    then raises, as in the search; one short of its schedule by the generator is run again),
    as the module says, never under ``low``."""
    trials: list[CapacityTrial] = []
    held: float | None = None
    missed: float | None = None
    rate = knee
    retried: list[CapacityTrial] = []
    while len(trials) < TRIES:
        trial = goal_trial(measure, path, seconds, rate, goal, retried)
        trials.append(trial)
        if holds(trial, goal, HOLD):
            held = rate
        else:
            missed = rate
        if missed is None or (held is not None and missed - held <= RESOLUTION * missed):
            break
        if held is None:
            if rate <= low:
                break
            rate = max(low, rate * (FIRST_STEP if rate == knee else STEP))
        else:
            rate = (held + missed) / 2
    return Confirmation(path, goal, seconds, knee, tuple(trials), held, tuple(retried))


def goal_trial(measure: Measure, path: str, seconds: float, rate: float, goal: LatencyGoal,
               retried: list[CapacityTrial]) -> CapacityTrial:
    """One trial of ``seconds`` at ``rate`` judged for ``goal``: a trial the generator did not
    deliver is run again and then raises (as in the search); one short of its schedule by the
    generator (:func:`short_of_schedule`) is run again up to :data:`REPEATS` times, each run
    set aside appended to ``retried``."""
    trial = delivered_trial(measure, path, seconds, rate)
    for _repeat in range(REPEATS):
        why = short_of_schedule(trial, goal)
        if not why:
            break
        LOG.warning("%s: %s: the generator's shortfall, not the system's: running the %g s "
                    "confirmation at %.0f requests/s again", path, why, seconds, rate)
        retried.append(trial)
        trial = delivered_trial(measure, path, seconds, rate)
    return trial
