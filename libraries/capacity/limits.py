"""The limits of a capacity search and the figures that stand on it: each path's capacity under
the first goal (``p99 <= 10 ms``: at most 1 % of the requests failed, unsent or later than
10 ms from their scheduled time), a rate at which a whole window misses it with probability
at most the stated share at a stated confidence (the safe end of the interval of the miss
curve's crossing, from every window of the reported length:
:mod:`libraries.capacity.confirm`), whether the machine drifted while they ran, MLRsearch
(:mod:`libraries.capacity.search`) giving the knee the windows start from, each search's
highest load a little over the path's closed-loop maximum; the checks of the curve's crossing
(:mod:`libraries.capacity.sanity`: the closed-loop maximum, the 50 % latency pass, far below
the maximum, the generator's limit), with more windows where evidence disagrees;
``capacity_ratio`` where both figures stand; and the held-out windows a benchmark asks for
(``holdout``: never counted).

Pure of Robot Framework: warnings and notes go to the standard :mod:`logging` (Robot shows a
Python ``WARNING`` as a warning), folded logs to the ``log_folded(title, text)`` the caller
passes in.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from libraries.capacity.confirm import (
    Confirmation,
    WindowPlan,
    goal_record,
    goal_trial,
    resume,
    run_plans,
    with_windows,
)
from libraries.capacity.floor import judge_unconfirmed
from libraries.capacity.generators import Generator, path_trials, search_paths
from libraries.capacity.news import announced, search_lines
from libraries.capacity.sanity import Evidence, challenge, check_figure, generator_bound
from libraries.capacity.search import Measure
from libraries.capacity.search_settings import SearchSettings
from libraries.capacity.trials import CapacityTrial, PathCapacity
from libraries.results.inference import Interval
from libraries.results.measurement import Measurement, Say, silent

LOG = logging.getLogger(__name__)
LogFolded = Callable[[str, str], None]
"""``log_folded(title, text)``: attach ``text`` to the log under ``title``, folded."""

OVERLOAD = 1.1
"""Each search's highest load: this much above the path's closed-loop maximum (MLRsearch's
first trial; the capacity under a latency goal cannot be above that maximum)."""
NAMES = {"proxy": "capacity", "direct": "direct_capacity"}


def search_paths_capacity(measurement: Measurement, generator: Generator,
                          paths: dict[str, str], settings: SearchSettings,
                          search_range_text: str, log_folded: LogFolded,
                          say: Say = silent) -> Measurement:
    """Search the capacity of the paths of ``measurement`` (the result of the closed-loop
    measurement: ``rps``, and ``direct_rps`` when ``paths`` has ``direct``) with MLRsearch,
    the paths' trials interleaved, each a constant-rate trial of ``generator`` against
    ``paths`` (``proxy``/``direct`` -> URL): the goals and MLRsearch's attributes of
    ``settings``, each search's highest load :data:`OVERLOAD` over the path's closed-loop
    maximum (at most the top of the range); ``search_range_text``: the range as the user gave
    it (for messages).

    Then each path's windows of ``confirm_seconds`` from its knee, the paths taking turns
    (:mod:`libraries.capacity.confirm`), the verification window (``verify_seconds``, counted
    when as long), and the checks of each figure with more windows where evidence disagrees
    (:mod:`libraries.capacity.sanity`); ``say`` gets a line as each search ends and as each
    window does (:mod:`libraries.capacity.news`). Adds ``capacity`` (proxied) and
    ``direct_capacity``, each with its interval from the miss curve, and ``capacity_ratio``;
    MLRsearch's result per goal, the windows, their model and every trial as evidence. A figure
    a check still refuses after its windows, or from a search that did not finish, is never
    recorded: it is unavailable and the measurement invalid, saying why; nor is one whose curve
    cannot be fitted (:mod:`libraries.capacity.floor`: the direct path's only makes it and the
    ratio unavailable; the proxied path's is invalid, or untestable where every window missed on
    both paths). Each path's trials go to ``log_folded``. Returns ``measurement``."""
    closed = {p: {"proxy": "rps", "direct": "direct_rps"}[p] for p in paths}
    maxima = {p: measurement.value(name) for p, name in closed.items()}
    # the best closed-loop trial: on real VPP (1node) one of five direct trials read 11.0k
    # against 21.1-24.1k, and the median put the ceiling under rates the path held
    best = {p: max(measurement.metrics[name].summary.values) for p, name in closed.items()}
    tops = {p: min(settings.high, OVERLOAD * best[p]) for p in paths}
    found = search_paths(generator, paths, tops, settings)
    for line in search_lines(found):
        say(line)
    goal = settings.goals[0]
    measurement.parameters.update(latency_slo_ms=goal.limit_ms,
                                  latency_goals=[g.name for g in settings.goals],
                                  capacity_confirm_s=settings.confirm_seconds,
                                  capacity_miss_share=settings.miss_share)
    measurement.evidence["capacity_search"] = {
        **settings.as_record(), "max_loads": tops, "tool": generator.tool,
        "version": generator.version, "cpus": list(generator.cpus or []),
        "connections": generator.connections}
    measurement.evidence["capacity"] = {v: r.as_record() for v, r in found.items()}
    for variant, result in found.items():
        log_folded(f"capacity search of the {variant} path: "
                   f"{', '.join(f'{k:g} ms {v}' for k, v in result.stopped.items())}",
                   "\n".join(_trial_line(t, goal.limit_ms) for t in result.trials))
    knees = {}
    for variant, result in found.items():
        problem = _problem(variant, result, search_range_text)
        if problem:
            measurement.unavailable[NAMES[variant]] = problem
            measurement.invalid.append(problem)
        else:
            knees[variant] = result.capacity
    evidence = {v: Evidence(v, maxima[v], best[v], measurement.evidence.get("latency"),
                            frozenset(t.tool for t in found[v].trials), goal) for v in paths}
    measure = announced(path_trials(generator, paths, settings.limits), goal, say)
    if not settings.confirm_seconds:
        figures = _knees(measurement, found, knees, evidence, settings)
    else:
        figures = _windows(measurement, measure, found, knees, tops, evidence, settings,
                           log_folded)
    for variant, (rate, interval) in figures.items():
        measurement.add(NAMES[variant], [rate], "requests/s", interval=interval)
        _notes(measurement, variant, rate, found[variant], generator)
    _ratio(measurement, figures, paths)
    _holdout(measurement, measure, settings)
    return measurement


Figures = dict[str, tuple[float, Interval | None]]
"""path -> the recorded figure and its interval (None: the knee's, a single value)."""


def _knees(measurement: Measurement, found: dict[str, PathCapacity], knees: dict[str, float],
           evidence: dict[str, Evidence], settings: SearchSettings) -> Figures:
    """``-v CAPACITY_CONFIRM:0``: the knees are the figures, checked with no windows to run
    (a check that disagrees refuses the figure), and the record and a note say so."""
    goal = settings.goals[0]
    measurement.evidence["capacity_confirmation"] = None
    checks, figures = {}, {}
    for variant, knee in knees.items():
        bound = generator_bound(found[variant].trials, knee, goal)
        checks[variant], disagree = check_figure(knee, evidence[variant], bound)
        if disagree:
            why = f"{variant} path: capacity {knee:.0f} requests/s {checks[variant]['why']}"
            measurement.unavailable[NAMES[variant]] = why
            measurement.invalid.append(why)
            LOG.warning(why)
        else:
            figures[variant] = (knee, None)
    measurement.evidence["capacity_sanity"] = checks
    if knees:
        measurement.notes.append(
            f"capacity: MLRsearch's knee for {goal.name} (exceed ratio {settings.exceed_ratio:g}"
            ": up to that share of its trial time may miss the goal), not confirmed over a "
            "whole run (-v CAPACITY_CONFIRM:0)")
    return figures


def _windows(measurement: Measurement, measure: Measure, found: dict[str, PathCapacity],
             knees: dict[str, float], tops: dict[str, float], evidence: dict[str, Evidence],
             settings: SearchSettings, log_folded: LogFolded) -> Figures:
    """Each standing knee's windows and miss curve, the verification window, the checks of
    the figure with their windows, and the paths whose curve gave no figure
    (:mod:`libraries.capacity.floor`): path -> the figure and its interval."""
    goal = settings.goals[0]
    level = 1.0 - 2.0 * measurement.alpha  # each end a one-sided bound at 1 - alpha
    plans = [WindowPlan(v, goal, settings.confirm_seconds, knee, settings.low, tops[v],
                        settings.miss_share, level, settings.windows)
             for v, knee in knees.items()]
    done = run_plans(measure, plans)
    fitted = {v for v, confirmation in done.items() if confirmation.curve.fitted}
    done = _verify(measurement, measure, done, settings)
    for plan in plans:
        if plan.path in fitted:  # a verification that undid the fit earns the plan's extras
            done[plan.path] = resume(done[plan.path], measure, plan)
    checks = {}
    for variant in list(done):
        done[variant], checks[variant], notes = challenge(
            done[variant], evidence[variant], found[variant].trials, measure)
        for note in notes:
            measurement.notes.append(note)
            LOG.warning(note)
    measurement.evidence["capacity_sanity"] = checks
    measurement.evidence["capacity_confirmation"] = {v: c.as_record() for v, c in done.items()}
    figures: Figures = {}
    for variant, confirmation in done.items():
        log_folded(f"windows of the {variant} path: {confirmation.semantics}",
                   "\n".join(f"{kind:<24} {_trial_line(t, goal.limit_ms)}" for t, kind in
                             zip(confirmation.trials, confirmation.kinds, strict=True)))
        curve, check = confirmation.curve, checks[variant]
        if curve.rate is None and not check.get("challenged"):
            continue  # no figure from the windows planned: judged below (floor)
        if not check["holds"]:  # evidence still disagrees after its windows
            why = (f"{variant} path: capacity {confirmation.semantics} {check['why']}"
                   if curve.rate is not None else f"{variant} path: {check['why']}")
            measurement.unavailable[NAMES[variant]] = why
            if curve.rate is not None or variant == "proxy":  # else only the ratio's reference
                measurement.invalid.append(why)
            LOG.warning(why)
            continue
        assert curve.low is not None and curve.high is not None
        measurement.notes.append(f"{variant} capacity: {confirmation.semantics} "
                                 f"({confirmation.detail})")
        # the figure is the safe end of the crossing's interval (a lower confidence bound)
        figures[variant] = (curve.low, Interval(curve.low, curve.high, curve.level,
                                                "profile likelihood of the miss curve",
                                                decisive=True))
    _drifted(measurement, done)
    judged = judge_unconfirmed({v: c for v, c in done.items()
                                if not checks[v].get("challenged")}, measure)
    for variant, why in judged.unavailable.items():
        measurement.unavailable[NAMES[variant]] = why
    measurement.invalid.extend(judged.invalid)
    measurement.untestable.extend(judged.untestable)
    if judged.evidence is not None:
        measurement.evidence["capacity_floor"] = judged.evidence
    for why in [*judged.untestable, *([judged.unavailable["direct"]]
                                      if "direct" in judged.unavailable else [])]:
        LOG.warning(why)
    return figures


def _drifted(measurement: Measurement, done: dict[str, Confirmation]) -> None:
    """A note and a warning for each path whose windows' halves judged the same rate
    differently (:mod:`libraries.capacity.drift`; its claim says so too)."""
    for variant, confirmation in done.items():
        drifted = confirmation.drift.statement
        if drifted:
            LOG.warning("%s path: %s", variant, drifted)
            measurement.notes.append(f"{variant} path: {drifted}")


def _verify(measurement: Measurement, measure: Measure, done: dict[str, Confirmation],
            settings: SearchSettings) -> dict[str, Confirmation]:
    """With ``verify_seconds``: one more window of that length at each figure, judged over all
    its requests against the first goal (``capacity_verification``) and counted in the path's
    miss curve when as long as its windows (refitted); one that missed is a note. A run short
    of its schedule by the generator alone (wrk2's late start) is run again, the runs set aside
    kept (``retried``)."""
    if not settings.verify_seconds:
        return done
    goal, verified = settings.goals[0], {}
    for variant, confirmation in done.items():
        rate = confirmation.rate
        if rate is None:
            continue
        retried: list[CapacityTrial] = []
        trial = goal_trial(measure, variant, settings.verify_seconds, rate, goal, retried)
        record = goal_record(trial, goal)
        record["retried"] = [goal_record(t, goal) for t in retried]
        record["counted"] = abs(settings.verify_seconds - confirmation.seconds) < 1e-6
        verified[variant] = record
        done[variant] = with_windows(confirmation, [trial], "verification", retried)
        if not record["held"]:
            note = (f"{variant} capacity {rate:.0f} requests/s: a {settings.verify_seconds:g} "
                    f"s verification run lost {record['loss_ratio']:.2%} of its requests for "
                    f"{goal.name} (allowed {goal.loss_ratio:.2%})")
            measurement.notes.append(note)
            LOG.warning(note)
    measurement.evidence["capacity_verification"] = verified
    return done


HOLDOUT_PATHS = ("proxy",)
"""The paths whose figure the held-out windows check (the benchmark's question is the
proxy's)."""


def _holdout(measurement: Measurement, measure: Measure, settings: SearchSettings) -> None:
    """With ``holdout`` N: N windows at each recorded figure of :data:`HOLDOUT_PATHS`,
    after every second one a window at an end of its interval (low and high in turn), never
    counted in the curve and never moving the figure (``capacity_holdout``): how often a
    window at the figure misses, against the interval the curve gives for that share."""
    if not settings.holdout or not settings.confirm_seconds:
        return
    goal, kept = settings.goals[0], {}
    for variant in HOLDOUT_PATHS:
        metric = measurement.metrics.get(NAMES[variant])
        record = (measurement.evidence.get("capacity_confirmation") or {}).get(variant)
        if metric is None or not record:
            continue
        rate, interval = metric.value, metric.interval
        order = []
        for index in range(settings.holdout):
            order.append(("figure", rate))
            if index % 2:
                order.append(("low", interval.low) if index % 4 == 1 else
                             ("high", interval.high))
        windows = []
        for kind, at in order:
            retried: list[CapacityTrial] = []
            trial = goal_trial(measure, variant, settings.confirm_seconds, at, goal, retried)
            windows.append({**goal_record(trial, goal), "kind": kind,
                            "retried": [goal_record(t, goal) for t in retried]})
        at_figure = [w for w in windows if w["kind"] == "figure"]
        kept[variant] = {
            "rate": rate, "interval": [interval.low, interval.high],
            "share": settings.miss_share, "share_interval": record["model"]["share_at_figure"],
            "windows": windows, "at_figure": len(at_figure),
            "missed_at_figure": sum(not w["held"] for w in at_figure),
            "counted": False}
    measurement.evidence["capacity_holdout"] = kept


def _notes(measurement: Measurement, variant: str, rate: float, result: PathCapacity,
           generator: Generator) -> None:
    """The notes of a recorded figure: a search its budget ended, a generator-bound path."""
    notes = []
    if not result.finished:
        bounds = result.goals[0]
        notes.append(f"{variant} capacity {rate:.0f} requests/s: the search's budget ended it "
                     f"before its width (relevant bounds {bounds.lower:.0f}"
                     f"..{bounds.upper or float('nan'):.0f}): a conservative knee")
    checks = measurement.evidence.get("capacity_sanity") or {}
    if (checks.get(variant) or {}).get("generator_bound"):
        notes.append(f"{variant} capacity {rate:.0f} requests/s is the load "
                     f"generator's ({generator.tool} was saturated in every window and trial "
                     "above it that missed: 90% of its cores, or behind its schedule at "
                     "75%): a lower bound of the path's")
    limited = measurement.evidence.setdefault("capacity_limited_by", {})
    limited[variant] = "load generator" if (checks.get(variant) or {}).get(
        "generator_bound") else "path"
    for note in notes:
        measurement.notes.append(note)
        LOG.warning(note)


def _ratio(measurement: Measurement, figures: Figures, paths: dict[str, str]) -> None:
    """``capacity_ratio`` of the recorded figures where both stand and neither is the
    generator's."""
    limited = measurement.evidence.get("capacity_limited_by") or {}
    if "direct" not in paths:
        measurement.unavailable["capacity_ratio"] = "direct path not measured (mTLS row)"
        return
    missing = [NAMES[v] for v in ("proxy", "direct") if v not in figures]
    bound = [v for v in ("proxy", "direct") if limited.get(v) == "load generator"]
    if missing:
        measurement.unavailable["capacity_ratio"] = f"no figure for {', '.join(missing)}"
    elif bound:
        measurement.unavailable["capacity_ratio"] = (
            f"the {' and '.join(bound)} path's capacity is the load generator's (a lower "
            "bound): a ratio would misstate the proxy's share")
    else:
        ratio = figures["proxy"][0] / figures["direct"][0]
        measurement.add("capacity_ratio", [ratio], "ratio")
        if ratio > 1.05:  # the proxy adds work to every request: it cannot serve more
            note = (f"capacity_ratio {ratio:.2f} > 1: the proxied path kept the goal at a "
                    "higher rate than the direct path it adds work to: check both searches "
                    "(a generator that did not deliver, a noisy direct search)")
            measurement.evidence["capacity_ratio_above_one"] = True
            measurement.notes.append(note)
            LOG.warning(note)


def _problem(variant: str, result: PathCapacity, search_range: str) -> str | None:
    """Why ``variant``'s knee gives no figure (None: the windows start from it). A search its
    budget stopped stands when MLRsearch had already found the first goal's relevant lower
    bound (a conservative knee, its bounds wider than asked: the caller notes it); an error,
    or no lower bound, does not."""
    stopped = "; ".join(f"{k:g} ms: {v}" for k, v in result.stopped.items() if v != "done")
    budget_only = all(v == "done" or v.startswith("budget spent")
                      for v in result.stopped.values())
    if not result.finished and (not budget_only or result.goals[0].lower is None):
        return f"{variant} path: the capacity search did not finish ({stopped})"
    if result.capacity is None:
        return (f"{variant} path: no rate within {search_range} requests/s meets "
                f"{result.goals[0].goal.name} (MLRsearch found no lower bound)")
    return None


def _trial_line(trial: CapacityTrial, limit_ms: float) -> str:
    p99 = trial.latency.get("p99")
    cpu = "-" if trial.generator_cpu is None else f"{trial.generator_cpu:.0%}"
    return (f"{trial.rate:10.0f} req/s x {trial.duration:g} s: achieved {trial.achieved:10.0f},"
            f" sent {trial.sent}/{trial.intended}, failed {trial.failed}, over {limit_ms:g} ms "
            f"{trial.over[limit_ms]}, loss {trial.loss_ratio(limit_ms):.2%}, p99 "
            f"{'-' if p99 is None else f'{p99:.3g} ms'}, generator CPU {cpu}")
