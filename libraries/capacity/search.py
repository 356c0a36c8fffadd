"""The capacity search's controller: FD.io CSIT's MLRsearch (``MLRsearch`` 1.2.1, PyPI), one
search per path and latency limit, their trials interleaved.

The project supplies the measurer (one constant-rate trial: ``measure(path, seconds, rate)``)
and the goals (:mod:`.trials`). Each search's controller (``MultipleLossRatioSearch.search``)
runs in a thread of its own and only *asks* for trials; every trial runs in the caller's
thread, one at a time, the searches served in turn (round robin over those still running, each
served once it has asked), so the proxied and the direct path take turns trial by trial and a
slow drift of a shared machine touches them alike, and every command the trials run is logged
where Robot can log it. Searches of the same path with
different latency limits share trials: the k-th trial a search asks for at a given load and
duration is the k-th one measured there for the path, whichever search asked first (each
trial carries the counts for every limit).

A search ends by MLRsearch's own rule (every goal's bounds within the relative width); by
its budget (its own trials' time over ``max_seconds``: the bounds found so far are kept and
it says so); or by an error of a trial, which stops every search and is raised.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from importlib import metadata

from MLRsearch import (
    AbstractMeasurer,
    Config,
    GoalResult,
    MeasurementResult,
    MultipleLossRatioSearch,
    SearchGoal,
)

from libraries.capacity.search_settings import LatencyGoal, SearchSettings
from libraries.capacity.trials import CapacityTrial, GoalCapacity, PathCapacity

LOG = logging.getLogger(__name__)
Measure = Callable[[str, float, float], CapacityTrial]


class BudgetSpent(Exception):
    """A search's own trials took its whole budget."""


class _Stopped(Exception):
    """Another search's trial failed: every search stops."""


@dataclass
class _Request:
    search: _Search
    duration: float
    load: float
    answer: queue.Queue[CapacityTrial | BaseException] = field(
        default_factory=lambda: queue.Queue(maxsize=1))


@dataclass(frozen=True)
class _Finished:
    search: _Search


class _Search(AbstractMeasurer):
    """One MLRsearch over one path for the goals of one latency limit."""

    def __init__(self, path: str, limit_ms: float, settings: SearchSettings, max_load: float,
                 requests: queue.Queue[_Request | _Finished]):
        self.path, self.limit_ms, self.settings = path, limit_ms, settings
        self.requests = requests
        self.pairs = search_goals(settings, limit_ms)
        self.config = Config()
        self.config.goals = [goal for _, goal in self.pairs]
        self.config.min_load = settings.low
        self.config.max_load = min(max(max_load, settings.low * 1.01), settings.high)
        self.config.search_duration_max = 86400.0  # the budget is this project's (own time)
        self.config.warmup_duration = None  # the case warmed its paths up already
        self.controller = MultipleLossRatioSearch(self.config)
        self.spent = 0.0
        self.used: dict[tuple[float, float], int] = defaultdict(int)
        self.goals: list[GoalCapacity] = []
        self.stopped = "running"
        self.error: BaseException | None = None

    def measure(self, intended_duration: float, intended_load: float) -> MeasurementResult:
        """Ask the caller's thread for the trial and wait for it (MLRsearch's measurer)."""
        if self.spent >= self.settings.max_seconds:
            raise BudgetSpent(f"{self.spent:.0f} s of trials, budget {self.settings.max_seconds:g}")
        request = _Request(self, float(intended_duration), float(intended_load))
        self.requests.put(request)
        answer = request.answer.get()
        if isinstance(answer, BaseException):
            raise answer
        self.spent += answer.seconds
        return answer.result(self.limit_ms)

    def run(self) -> None:
        """The controller's thread: search, then keep the goal results (or why it stopped)."""
        try:
            try:
                found = self.controller.search(self, debug=LOG.debug)
            except BudgetSpent as why:
                self.goals = self._so_far()
                self.stopped = f"budget spent ({why})"
            else:
                self.goals = [self._goal(goal, found[search_goal])
                              for goal, search_goal in self.pairs]
                self.stopped = "done"
        except _Stopped:
            self.stopped = "stopped: a trial of another search failed"
        except Exception as error:  # kept, raised in the caller's thread
            self.stopped = f"error: {error}"
            self.error = error
        finally:
            self.requests.put(_Finished(self))

    def _goal(self, goal: LatencyGoal, result: object) -> GoalCapacity:
        """MLRsearch's :class:`GoalResult` for ``goal``, read through its public fields (a
        result without them is an error naming MLRsearch's version, never "no rate")."""
        if not isinstance(result, GoalResult):
            raise RuntimeError(f"MLRsearch {_version()} returned {type(result).__name__} for "
                               f"the goal {goal.name}: expected a GoalResult (relevant_lower_"
                               "bound, relevant_upper_bound, conditional_throughput)")
        throughput = result.conditional_throughput
        lower, upper = result.relevant_lower_bound, result.relevant_upper_bound
        return GoalCapacity(goal, None if throughput is None else float(throughput),
                            None if lower is None else float(lower),
                            None if upper is None else float(upper))

    def _so_far(self) -> list[GoalCapacity]:
        """Each goal's result from the trials measured so far, for a search its budget ended:
        the relevant bounds of the goal's final target in MLRsearch's own database, made a
        :class:`GoalResult` as MLRsearch makes its final ones (``GoalResult.from_bounds``).
        MLRsearch keeps these two (``database``, ``scaling.goal_to_final_target``) as fields
        of its controller; were they gone, that is an error naming its version."""
        try:
            database = self.controller.database
            targets = self.controller.scaling.goal_to_final_target
        except AttributeError as error:
            raise RuntimeError(f"MLRsearch {_version()}: the search's budget ended it and its "
                               f"controller has no {error.name!r} to read the bounds found "
                               "so far from") from None
        return [self._goal(goal, GoalResult.from_bounds(
            database.get_relevant_bounds(target=targets[search_goal])))
            for goal, search_goal in self.pairs]


def _version() -> str:
    try:
        return metadata.version("MLRsearch")
    except metadata.PackageNotFoundError:
        return "(version unknown)"


def search_capacity(measure: Measure, max_loads: dict[str, float],
                    settings: SearchSettings) -> dict[str, PathCapacity]:
    """Search every path of ``max_loads`` (path -> the highest load to try, e.g. a little over
    its closed-loop maximum) for every goal of ``settings``, interleaved as the module says;
    ``measure(path, seconds, rate)`` runs one trial. Returns per path what was found."""
    requests: queue.Queue[_Request | _Finished] = queue.Queue()
    searches = [_Search(path, limit, settings, max_loads[path], requests)
                for path in max_loads for limit in settings.limits]
    pool = _Pool(measure)
    for search in searches:
        threading.Thread(target=search.run, daemon=True,
                         name=f"mlrsearch-{search.path}-{search.limit_ms:g}ms").start()
    running, pending = list(searches), {}
    turn = 0
    while running:
        while any(s not in pending for s in running):  # every running search has asked
            item = requests.get()
            if isinstance(item, _Finished):
                running.remove(item.search)
            else:
                pending[item.search] = item
        if not running:
            break
        turn %= len(running)
        request = pending.pop(running[turn])
        turn += 1
        request.answer.put(pool.serve(request))
    if pool.failure is not None:
        raise pool.failure
    for search in searches:
        if search.error is not None:
            raise search.error
    return {path: PathCapacity(
        path, sorted((g for s in searches if s.path == path for g in s.goals),
                     key=lambda g: settings.goals.index(g.goal)),
        pool.trials[path], {s.limit_ms: s.stopped for s in searches if s.path == path},
        pool.seconds[path], pool.shared[path])
        for path in max_loads}


class _Pool:
    """The trials measured per path, served to the searches that ask for them."""

    def __init__(self, measure: Measure):
        self.measure = measure
        self.trials: dict[str, list[CapacityTrial]] = defaultdict(list)
        self.at: dict[tuple[str, float, float], list[CapacityTrial]] = defaultdict(list)
        self.seconds: dict[str, float] = defaultdict(float)
        self.shared: dict[str, int] = defaultdict(int)
        self.failure: BaseException | None = None

    def serve(self, request: _Request) -> CapacityTrial | BaseException:
        """The search's next trial at the asked load and duration: one measured for the path
        already (by a search of another limit) that this search has not had, else a new one."""
        if self.failure is not None:
            return _Stopped()
        search = request.search
        key = (search.path, request.duration, request.load)
        index = search.used[key[1:]]
        search.used[key[1:]] += 1
        if index < len(self.at[key]):
            self.shared[search.path] += 1
            return self.at[key][index]
        started = time.monotonic()
        try:
            trial = delivered_trial(self.measure, search.path, request.duration,
                                    request.load)
        except Exception as error:  # raised once every search stopped
            self.failure = error
            return _Stopped()
        self.seconds[search.path] += time.monotonic() - started
        self.at[key].append(trial)
        self.trials[search.path].append(trial)
        LOG.info("%s: %.0f requests/s for %g s: %s", search.path, request.load,
                 request.duration, ", ".join(f"loss {trial.loss_ratio(limit):.2%} at {limit:g} "
                                             f"ms" for limit in search.settings.limits))
        return trial


RETRIES = 4
"""A trial the generator did not deliver is run again this many times before the search stops
(wrk2 over TLS starts about 1 s late in 13-20 % of its runs here: three failed tries in a
row come once in 125-450 trials, about once in five tests of ~80; five, once in 3,000+)."""
RETRY_SECONDS = 2.0
"""...each time at least this long: on real VPP (3node, af_packet) wrk2's 1 s trials against
the proxy sent 1-5 of ~3,400 scheduled requests three times in a row, while its 2 s trials at
the same rates sent their whole schedule."""
DELIVERED = 0.9
"""The generator sent less than this share of its schedule while the answers to what it sent
were (nearly) all in time (:data:`ANSWERED`): it did not deliver its load. On real VPP wrk2
under LD_PRELOAD sent 1-20 of ~800 requests at every rate; wrk2 4.0.0 over TLS, against a
local nginx that answers in microseconds, sent 1-9 requests in 4 of 30 1 s runs and exactly
half the schedule in 3 of 20 2 s runs (its connections started 1 s late; Debian's wrk: none
of 20), and each such trial was taken as the system missing its goal."""
ANSWERED = 0.1
"""...at most this share of the requests it sent came late or failed. A system that cannot
keep up makes the requests it gets late from their schedule (every generator here counts
lateness from the schedule), and one that refuses them fails them: either shows here."""


class GeneratorFailed(RuntimeError):
    """The load generator did not deliver its load (the message quotes what it said)."""


def delivered_trial(measure: Measure, path: str, duration: float, load: float) -> CapacityTrial:
    """A trial of ``path`` in which the generator delivered its load: one that did not (see
    :func:`undelivered`) is no measurement of the system, so it is run again, up to
    :data:`RETRIES` times, each again at least :data:`RETRY_SECONDS` long (the trial keeps the
    duration asked; ``ran_s`` says what ran), and then stops with :class:`GeneratorFailed`
    quoting what the generator said; it never reaches a search or a confirmation as loss."""
    why, seconds = "", duration
    for _attempt in range(1 + RETRIES):
        trial = measure(path, seconds, load)
        why = undelivered(trial)
        if not why:
            return replace(trial, duration=duration) if seconds != duration else trial
        seconds = max(seconds, RETRY_SECONDS)
        LOG.warning("%s: %s: trying the trial again for %g s", path, why, seconds)
    raise GeneratorFailed(f"{path} path at {load:.0f} requests/s: {why}, in {1 + RETRIES} "
                          "tries: the load generator did not deliver its load (a trial of the "
                          "generator, not of the system: not counted as loss)")


def undelivered(trial: CapacityTrial) -> str:
    """Why ``trial`` is a failed trial of the generator ('' when it delivered): it sent under
    :data:`DELIVERED` of its schedule while at most :data:`ANSWERED` of what it sent came late
    or failed (a system that cannot keep up shows late or failed requests; a generator that
    never got going, or whose connections started late, shows neither)."""
    if trial.intended <= 0 or trial.sent >= DELIVERED * trial.intended:
        return ""
    bad = trial.failed + max(trial.over.values(), default=0)
    if bad > ANSWERED * trial.sent:
        return ""
    said = trial.extra.get("errors") or trial.extra.get("output") or trial.extra
    answers = "no late or failed answer" if not bad else f"{bad} late or failed answers"
    return (f"{trial.tool} sent {trial.sent} of {trial.intended} scheduled requests with "
            f"{answers} (it said: {str(said)[:300]!r})")


def search_goals(settings: SearchSettings, limit_ms: float) -> list[tuple[LatencyGoal, SearchGoal]]:
    """MLRsearch's goals for the search of ``limit_ms`` (every goal of that limit, with the
    settings' exceed ratio, trial durations, duration sum and width)."""
    return [(goal, SearchGoal(
        loss_ratio=goal.loss_ratio, exceed_ratio=settings.exceed_ratio,
        relative_width=settings.width, initial_trial_duration=settings.initial_duration,
        final_trial_duration=settings.final_duration, duration_sum=settings.duration_sum,
        preceding_targets=2, expansion_coefficient=2, fail_fast=False))
        for goal in settings.goals if goal.limit_ms == limit_ms]
