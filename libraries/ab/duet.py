"""Duet A/B: both sides measured at the same time, each on a testbed of its own, so that what
the machine does to one trial (a slow core, a burst of the host's own work) it does to the
other. On a shared machine whose cores slow down in episodes of seconds, a sequential round's
two trials meet different episodes; a duet round's two trials meet the same ones, and the
per-round ratio keeps only the change (benchmarks/README.md: the per-round spread fell 4-8x).

Two Robot runs of the same suites, one per side (``python -m libraries.ab.duet_run`` starts
them), each on its own namespace testbed on the same cores, talk over a socket pair their
launcher made. Side a's run leads (:func:`measure_duet`): every round a coin says which run
holds which side (both switch their own testbeds, as a sequential A/B run switches one), so
whatever differs between the runs themselves cancels; per trial it names the instant both
runs start the same variant for the same seconds, runs its own and takes the other's result;
looks, interval and verdict are the sequential engine's (:mod:`libraries.ab.rounds`). Side
b's run follows (:func:`serve_duet`) and, at each look, sends its own measurement of the
trials it ran as each side (built by its own case, with its own evidence and telemetry:
each trial's telemetry paired with that trial's own result, so its cost per request is its
own). A side's figures, costs and telemetry are then taken round by round from the run that
held it (:func:`combine`): the record's telemetry of side a lists every round's trial of side
a, not the leading run's alone.
Each test starts with a handshake naming it, so the two runs stay on the same test; a test
that one side ended without measuring (a skip, a failed set-up) is told to the other
(:meth:`~libraries.ab.duet_link.DuetLink.test_ended`), which stops waiting.

What a duet verdict means: whether side b differs from side a *under the same load on the
same cores*. A change that moves work between resources the sides share (cores, caches,
memory bandwidth) can read a different size than when each side has the machine alone.
"""

from __future__ import annotations

import copy
import functools
import secrets
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from libraries.ab.duet_link import DuetError, DuetLink
from libraries.ab.rounds import SIDES, AbOutcome, judge_rounds
from libraries.results.catalogue import case_catalogue
from libraries.results.cost import restate_foreign_load
from libraries.results.measurement import Direction, Measurement, Say, Trial, TrialObserver, silent
from libraries.results.plan import AbSettings, TrialPlan
from libraries.results.telemetry_block import telemetry_block

START_LEAD = 0.05
"""Seconds ahead that side a names the instant both sides start a trial: each side's trial
starts at that instant of the machine's monotonic clock (one clock for both runs), not when
the message arrives, so neither side's load starts first by the message's delivery."""
REPLY_SLACK = 120.0
"""Seconds beyond a trial's own that a side waits for the other's result of it."""
COMMAND_TIMEOUT = 600.0
"""Seconds side b waits for side a's next command inside a test (looks are judged in between)."""
DUET_ORDER = "duet, both sides at once; side a's run held"
"""How the record's ``rounds.order`` of a duet test begins (then, per round, where each side
ran: ``a here, b there`` or ``b here, a there``)."""


OTHER = {"a": "b", "b": "a"}
RUNS = ("here", "there")
"""Side a's run (``here``, it leads) and side b's (``there``)."""
RUN_NAMES = {"here": "side a's run", "there": "side b's run"}
"""How a message names each run (a per-trial correctness check names the run of a round)."""


@dataclass
class _Held:
    """Per run and side, the trials' results per variant and their seconds; per side and
    round, the run that held the side (``here`` or ``there``)."""

    variants: tuple[str, ...]
    results: dict[str, dict[str, dict[str, list[Any]]]] = field(init=False)
    seconds: dict[str, dict[str, float]] = field(init=False)
    held_by: dict[str, list[str]] = field(init=False)

    def __post_init__(self) -> None:
        self.results = {r: {s: {v: [] for v in self.variants} for s in SIDES} for r in RUNS}
        self.seconds = {r: dict.fromkeys(SIDES, 0.0) for r in RUNS}
        self.held_by = {s: [] for s in SIDES}

    def ran(self, run: str, side: str) -> bool:
        """True once ``run`` has measured ``side``."""
        return any(self.results[run][side].values())


def measure_duet(variants: Mapping[str, Callable[[Trial], Any]], plan: TrialPlan,
                 build: Callable[[dict[str, list[Any]], float], Measurement],
                 metrics: Mapping[str, Direction], settings: AbSettings, link: DuetLink,
                 switch: Callable[[str], float], observer: TrialObserver | None = None,
                 clock: Callable[[], float] = time.monotonic, seed: int | None = None,
                 optional: frozenset[str] = frozenset(), say: Say = silent) -> AbOutcome:
    """Side a's run's measurement of a duet test (after :meth:`DuetLink.start_test`): each
    run warms up its own side, both at once; then in every round a coin (seeded by ``seed``)
    says which run holds side a and which side b (``switch(side)`` changes this run's testbed
    to ``side``; side b's run changes its own at the same time), and every variant runs on
    both testbeds at once. So whatever differs between the two runs themselves (their
    testbeds, which run leads) falls on side a in half the rounds and on side b in the other
    half, at random, and cancels like any other noise. Judged at the suite's looks as
    :func:`~libraries.ab.rounds.measure_ab` judges, each side's figures per round taken from
    the run that held it. Side b's run's failure fails the test naming it; this run's failure
    tells side b's run to stop."""
    started = clock()
    seed = secrets.randbits(32) if seed is None else seed
    coin = np.random.default_rng(seed)
    held = _Held(tuple(variants))
    holding = {"here": link.side}
    switches: list[float] = []
    orders: list[str] = []

    def hold(side: str) -> None:
        if side == holding["here"]:
            return
        link.send("side", link.test, OTHER[side])
        took = switch(side)
        (theirs,) = _reply(link, "switched", 2 * REPLY_SLACK, f"side b's run to hold {side}")
        switches.append(max(took, theirs))
        holding["here"] = side

    def run_round(number: int) -> None:
        mine = "b" if coin.random() < 0.5 else "a"
        hold(mine)
        orders.append("a here, b there" if mine == "a" else "b here, a there")
        for name, trial in variants.items():
            if observer is not None:
                observer.trial_started(f"{mine} {name}", number, settings.max_rounds)
            (ours, ours_s), (theirs, theirs_s) = _pair(link, trial,
                                                       Trial(name, plan.duration, number))
            for run, side, result, seconds in (("here", mine, ours, ours_s),
                                               ("there", OTHER[mine], theirs, theirs_s)):
                held.results[run][side][name].append(result)
                held.seconds[run][side] += seconds
            if observer is not None:
                observer.trial_finished(f"{mine} {name}", number, settings.max_rounds, ours)
        held.held_by[mine].append("here")
        held.held_by[OTHER[mine]].append("there")

    def built() -> dict[str, Measurement]:
        link.send("build", link.test)
        there = _reply(link, "built", 2 * REPLY_SLACK, "side b's run's measurements")[0]
        here = {side: build(held.results["here"][side], held.seconds["here"][side])
                for side in SIDES if held.ran("here", side)}
        return {side: combine(side, {"here": here.get(side), "there": there.get(side)},
                              held.held_by[side], metrics, optional) for side in SIDES}

    try:
        for name, trial in variants.items():
            if plan.warmup:
                _pair(link, trial, Trial(name, plan.warmup, 0))
        judged = judge_rounds(run_round, built, metrics, settings, started, clock, optional,
                              say)
        link.send("done", link.test, judged.stopped)
        link.finished = True
    finally:
        if not link.finished:
            link.test_ended(link.test, "side a's run stopped measuring it")
    results = {side: {v: in_round_order({run: held.results[run][side][v] for run in RUNS},
                                        held.held_by[side]) for v in variants}
               for side in SIDES}
    return AbOutcome(judged.sides, results, judged.comparisons, judged.rounds, judged.stopped,
                     judged.looks, switches, clock() - started,
                     f"{DUET_ORDER}: " + " | ".join(orders), seed)


def in_round_order(per_run: Mapping[str, Sequence[Any]], held_by: list[str]) -> list[Any]:
    """One side's figures in round order: round ``i``'s from the run that held the side then
    (``held_by[i]``), each run's own figures taken in its order (``KeyError`` for a run that
    has none, ``StopIteration`` for one that has too few)."""
    taken = {run: iter(values) for run, values in per_run.items()}
    return [next(taken[run]) for run in held_by]


def combine(side: str, built: Mapping[str, Measurement | None], held_by: list[str],
            metrics: Mapping[str, Direction], optional: frozenset[str] = frozenset()
            ) -> Measurement:
    """Side ``side``'s measurement from the two runs' own (``built``: each run's measurement of
    the trials it ran as ``side``, None where it never held it): the compared ``metrics``, the
    case's correctness metrics (``errors``: judged in every trial, whichever run measured
    it), every other per-trial metric both runs have (the costs, the CPU figures) and each
    trial's telemetry, per round from the run that held the side in that round (``held_by``,
    kept as ``trial_runs`` so a broken round names its run), the rest of side a's run's
    measurement where it held the side (else side b's run's), the other run's evidence beside
    it, and every reason a result must not stand from either run. An ``optional`` compared
    metric (a cost) that a run could not give is left out of the side, with that run's
    reason in its notes (it is then not judged)."""
    present = {run: m for run, m in built.items() if m is not None}
    if not present:
        raise DuetError(f"duet: no run measured side {side}")
    first = "here" if "here" in present else "there"
    merged = copy.deepcopy(present[first])
    for metric, direction in metrics.items():
        lacking = [run for run, m in present.items() if metric not in m.metrics]
        if metric in optional and lacking:
            merged.metrics.pop(metric, None)
            merged.notes += [f"{metric} not judged: {RUN_NAMES[run]} could not give it"
                             + _why(present[run], metric) for run in lacking]
            continue
        try:
            values = in_round_order({run: m.metrics[metric].summary.values
                                     for run, m in present.items()}, held_by)
        except (KeyError, StopIteration):
            raise DuetError(f"duet: side {side}'s {metric} has fewer figures than the rounds "
                            f"that measured it ({len(held_by)})") from None
        merged.add(metric, values, merged.metrics[metric].summary.unit, direction)
    for metric in _correctness(present.values()):
        _merge_per_round(merged, side, metric, present, held_by)
    _merge_rounds_of_the_rest(merged, present, held_by, {*metrics, *_correctness(
        present.values())})
    merged.trial_runs = [RUN_NAMES[run] for run in held_by]
    for run, other in present.items():
        if run == first:
            continue
        merged.evidence["other_testbed"] = other.evidence
        merged.invalid += [f"on the other testbed: {why}" for why in other.invalid
                           if why not in merged.invalid]
        for metric, why in other.unavailable.items():
            merged.unavailable.setdefault(metric, f"on the other testbed: {why}")
        merged.trial_seconds += other.trial_seconds
    return merged


def _why(measurement: Measurement, metric: str) -> str:
    """``: <the run's note on metric>`` (empty when it left none)."""
    said = next((note for note in measurement.notes if note.startswith(metric)), None)
    return f": {said}" if said else ""


def _merge_rounds_of_the_rest(merged: Measurement, present: Mapping[str, Measurement],
                              held_by: list[str], done: set[str]) -> None:
    """Every other metric with one figure per round each run held the side (the costs, the
    CPU figures of the trials), and each variant's per-trial telemetry, per round from the
    run that held the side (:func:`in_round_order`); the telemetry block rebuilt from them and
    the cost block's foreign load restated. A figure only one run has stays that run's."""
    held = {run: held_by.count(run) for run in present}
    for name, known in list(merged.metrics.items()):
        if name in done or not all(
                name in m.metrics and m.metrics[name].summary.count == held[run]
                for run, m in present.items()):
            continue
        values = in_round_order({run: m.metrics[name].summary.values
                                 for run, m in present.items()}, held_by)
        merged.add(name, values, known.summary.unit, known.direction)
    variants = set(merged.trial_telemetry or {})
    readings = {}
    for variant in sorted(variants):
        per_run = {run: (m.trial_telemetry or {}).get(variant) for run, m in present.items()}
        if all(r is not None and len(r) == held[run] for run, r in per_run.items()):
            readings[variant] = in_round_order(per_run, held_by)  # type: ignore[arg-type]
        else:
            merged.notes.append(f"telemetry of {variant}: one run kept none for some of its "
                                "trials; the side's telemetry is of the other run's alone")
    if variants:
        merged.trial_telemetry = readings
        merged.telemetry = telemetry_block(readings) if readings else merged.telemetry
    restate_foreign_load(merged)


def _correctness(built: Iterable[Measurement]) -> list[str]:
    """The correctness metrics (:attr:`~libraries.results.catalogue.CaseCatalogue.correctness`)
    any of ``built`` has."""
    return sorted({name for m in built for name in m.metrics
                   if case_catalogue(m.case).is_correctness(name)})


def _merge_per_round(merged: Measurement, side: str, metric: str,
                     present: Mapping[str, Measurement], held_by: list[str]) -> None:
    """``metric`` of ``merged`` per round from the run that held ``side`` (see
    :func:`combine`). A run that held the side and lacks it must have said why (its
    ``unavailable``): the metric is then unavailable for the side with that reason (carried
    over by :func:`combine`) and, like any unavailable metric, not judged; without a reason
    the merge is an error naming the run."""
    lacking = [run for run, m in present.items() if metric not in m.metrics]
    for run in lacking:
        if metric not in present[run].unavailable:
            raise DuetError(f"duet: side {side}'s {metric} (a correctness count) is missing "
                            f"from {RUN_NAMES[run]}'s measurement, with no reason given")
    if lacking:
        return
    try:
        values = in_round_order({run: m.metrics[metric].summary.values
                                 for run, m in present.items()}, held_by)
    except StopIteration:
        raise DuetError(f"duet: side {side}'s {metric} has fewer figures than the rounds "
                        f"that measured it ({len(held_by)})") from None
    known = next(iter(present.values())).metrics[metric]
    merged.add(metric, values, known.summary.unit, known.direction)


def _pair(link: DuetLink, trial: Callable[[Trial], Any], given: Trial
          ) -> tuple[tuple[Any, float], tuple[Any, float]]:
    """Run ``given`` in this run and in side b's run at the same instant: this run's result
    and seconds, then the other's."""
    start_at = time.monotonic() + START_LEAD
    link.send("trial", link.test, given.variant, given.seconds, given.round, start_at)
    _sleep_until(start_at)
    started = time.monotonic()
    mine = trial(given)
    seconds = time.monotonic() - started
    what = f"side b's run's {'warm-up' if not given.measured else f'round {given.round}'} " \
           f"of {given.variant}"
    theirs, their_seconds = _reply(link, "result", given.seconds + REPLY_SLACK, what)
    return (mine, seconds), (theirs, their_seconds)


def _sleep_until(moment: float) -> None:
    """Wait for ``moment`` of the machine's monotonic clock (both runs read the same one)."""
    time.sleep(max(0.0, moment - time.monotonic()))


def _reply(link: DuetLink, expected: str, timeout: float, what: str) -> list[Any]:
    """Side b's run's ``expected`` reply in the running test (what follows its kind and
    test); its error or end of the test fails the test naming side b's run."""
    while True:
        kind, named, *rest = link.receive(timeout, what)
        if named != link.test:
            continue
        if kind == expected:
            return rest
        if kind in ("error", "ended"):
            told = str(rest[0]) if rest else "ended the test"
            raise DuetError(told if "on side b's run" in told else f"A/B side b's run: {told}")
        raise DuetError(f"duet: side b's run sent {kind!r} while side a's waited for {what}")


def serve_duet(variants: Mapping[str, Callable[[Trial], Any]],
               build: Callable[[dict[str, list[Any]], float], Any], link: DuetLink,
               switch: Callable[[str], float], observer: TrialObserver | None = None) -> str:
    """Side b's run's part of a duet test (after :meth:`DuetLink.start_test`): hold the side
    side a's run names (``switch``), run each trial it asks for and send the result; at each
    look, send this run's measurement of each side it held (``build``: this run's own
    evidence, e.g. its server's request counts and its telemetry); until side a's run says the
    test is done. Returns why it stopped (side a's words). A trial that fails here is sent to
    side a's run and raised here."""
    results: dict[str, dict[str, list[Any]]] = {s: {v: [] for v in variants} for s in SIDES}
    seconds_in_trials = dict.fromkeys(SIDES, 0.0)
    holding = link.side
    while True:
        kind, named, *rest = link.receive(COMMAND_TIMEOUT, "side a's run's next step")
        if named != link.test:
            continue
        if kind == "done":
            link.finished = True
            return str(rest[0])
        if kind == "ended":
            link.finished = True
            raise DuetError(f"duet: side a's run stopped test {link.test!r}: {rest[0]}")
        if kind == "side":
            _answer(link, "switched", functools.partial(switch, rest[0]))
            holding = rest[0]
            continue
        if kind == "build":
            _answer(link, "built", lambda: {
                side: build(results[side], seconds_in_trials[side]) for side in SIDES
                if any(results[side].values())})
            continue
        if kind != "trial":
            raise DuetError(f"duet: side a's run sent {kind!r} while side b's waited for a "
                            "trial")
        variant, seconds, round_number, start_at = rest
        if variant not in variants:
            link.send("error", link.test, f"side b's run has no variant {variant!r} "
                                          f"(it measures {', '.join(variants)})")
            raise DuetError(f"duet: side a's run asked for variant {variant!r}, which side "
                            f"b's test does not measure ({', '.join(variants)})")
        told = observer is not None and round_number > 0
        if told:
            observer.trial_started(f"{holding} {variant}", round_number, 0)
        _sleep_until(start_at)
        started = time.monotonic()
        result = _answer(link, None, functools.partial(
            variants[variant], Trial(variant, seconds, round_number)))
        took = time.monotonic() - started
        if told:
            observer.trial_finished(f"{holding} {variant}", round_number, 0, result)
        if round_number > 0:
            results[holding][variant].append(result)
            seconds_in_trials[holding] += took
        link.send("result", link.test, result, took)


def _answer(link: DuetLink, kind: str | None, work: Callable[[], Any]) -> Any:
    """Do ``work`` for side a's run and send its value as ``kind`` (None: the caller sends
    it); a failure is sent to side a's run, then raised here."""
    try:
        value = work()
    except Exception as error:
        link.send("error", link.test, str(error))
        raise
    if kind is not None:
        link.send(kind, link.test, value)
    return value
