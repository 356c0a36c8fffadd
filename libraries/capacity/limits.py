"""The limits of a capacity search and the figures that stand on it: each path's conditional
throughput under every goal (``p99 <= 10 ms``: at most 1 % of the requests failed, unsent or
later than 10 ms from their scheduled time), searched by FD.io CSIT's MLRsearch
(:mod:`libraries.capacity.search`) on the direct and proxied paths a closed-loop measurement
measured, each search's highest load a little over the path's closed-loop maximum; which of
them the load generator, not the path, set (generator-bound: a lower bound, and then no
ratio); each figure's sanity against independent estimates (the closed-loop maximum, the 50 %
latency pass); each figure confirmed over a whole trial (:mod:`libraries.capacity.confirm`);
and ``capacity_ratio`` where both figures stand.

Pure of Robot Framework: warnings and notes go to the standard :mod:`logging` (Robot shows a
Python ``WARNING`` as a warning), folded logs to the ``log_folded(title, text)`` the caller
passes in.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from libraries.capacity.confirm import goal_record, goal_trial
from libraries.capacity.floor import judge_unconfirmed
from libraries.capacity.generators import (
    Generator,
    confirm_paths,
    path_trials,
    search_paths,
)
from libraries.capacity.search import delivered_trial
from libraries.capacity.trials import CapacityTrial, PathCapacity
from libraries.results.measurement import Measurement
from libraries.results.settings import LatencyGoal, SearchSettings

LOG = logging.getLogger(__name__)
LogFolded = Callable[[str, str], None]
"""``log_folded(title, text)``: attach ``text`` to the log under ``title``, folded."""

OVERLOAD = 1.1
"""Each search's highest load: this much above the path's closed-loop maximum (MLRsearch's
first trial; the capacity under a latency goal cannot be above that maximum)."""
SATURATED = 0.9
"""A failing trial whose generator used this share of its cores or more says nothing of the
path: the capacity found is the generator's, a lower bound of the path's."""
BEHIND = (0.98, 0.75)
"""...and so does one whose generator sent less than 98 % of its schedule while using 75 % of
its cores or more: it could not keep its own pace (vegeta's pacer falls behind before its CPU
share reads 100 %, the share counting the wait for the last answers too)."""
NAMES = {"proxy": "capacity", "direct": "direct_capacity"}
FAR_BELOW = 0.25
"""A capacity under this share of the path's closed-loop maximum needs a latency pass that
missed the goal to explain it, or it is not recorded (real VPP gave 2,836 requests/s where
the closed-loop maximum was 26,700, a search fed with trials the generator never sent)."""
PASS_SHARE = 0.5
"""Where no latency pass of the search's own generator exists for a path whose knee is under
:data:`FAR_BELOW` of its closed-loop maximum, one is run at this share of that maximum..."""
PASS_SECONDS = 3.0
"""...for this many seconds (the suite's latency pass runs vegeta where it can, the search
wrk2, and the direct path has none: on a VM whose vCPUs stall for tens of milliseconds the
direct path's knee was 2,959 against a closed-loop 19,248 and was refused with no evidence
either way)."""


def search_paths_capacity(measurement: Measurement, generator: Generator,
                          paths: dict[str, str], settings: SearchSettings,
                          search_range_text: str, log_folded: LogFolded) -> Measurement:
    """Search the capacity of the paths of ``measurement`` (the result of the closed-loop
    measurement: ``rps``, and ``direct_rps`` when ``paths`` has ``direct``) with MLRsearch,
    the paths' trials interleaved, each a constant-rate trial of ``generator`` against
    ``paths`` (``proxy``/``direct`` -> URL): the goals and MLRsearch's attributes of
    ``settings``, each search's highest load :data:`OVERLOAD` over the path's closed-loop
    maximum (at most the top of the range); ``search_range_text``: the range as the user gave
    it (for messages).

    Adds ``capacity`` (proxied) and ``direct_capacity``, the rate at which a whole
    ``confirm_seconds`` trial kept the first goal, going down from MLRsearch's knee (its
    conditional throughput; :mod:`libraries.capacity.confirm`), and ``capacity_ratio``;
    MLRsearch's result per goal (with the relevant bounds), the confirmations and every trial
    (offered and achieved rate, loss per limit, latency percentiles, the generator's CPU
    share) as evidence. A path whose failing trials all had a
    saturated generator is marked generator-bound (a lower bound), and then no ratio is
    recorded (unavailable, with the reason). A capacity above the closed-loop maximum, or
    below the 50 % latency pass that met the goal, or from a search that did not finish, is
    never recorded: it is unavailable and the measurement invalid, saying why; nor is a knee
    no confirmation held (:mod:`libraries.capacity.floor`: the direct path's only makes it and
    the ratio unavailable; the proxied path's is invalid where the direct path keeps the goal
    at its lowest rate, untestable, the goal under the testbed's latency floor, where it does
    not). Each path's trials go to ``log_folded``. Returns ``measurement``."""
    closed = {p: {"proxy": "rps", "direct": "direct_rps"}[p] for p in paths}
    maxima = {p: measurement.value(name) for p, name in closed.items()}
    # the best closed-loop trial: on real VPP (1node) one of five direct trials read 11.0k
    # against 21.1-24.1k, and the median put the ceiling under rates the path held
    best = {p: max(measurement.metrics[name].summary.values) for p, name in closed.items()}
    tops = {p: min(settings.high, OVERLOAD * best[p]) for p in paths}
    found = search_paths(generator, paths, tops, settings)
    goal = settings.goals[0]
    measurement.parameters["latency_slo_ms"] = goal.limit_ms
    measurement.parameters["latency_goals"] = [g.name for g in settings.goals]
    measurement.evidence["capacity_search"] = {
        **settings.as_record(), "max_loads": tops, "tool": generator.tool,
        "version": generator.version, "cpus": list(generator.cpus or []),
        "connections": generator.connections}
    measurement.evidence["capacity"] = {v: r.as_record() for v, r in found.items()}
    for variant, result in found.items():
        log_folded(f"capacity search of the {variant} path: "
                   f"{', '.join(f'{k:g} ms {v}' for k, v in result.stopped.items())}",
                   "\n".join(_trial_line(t, goal.limit_ms) for t in result.trials))
    limited = _limited_by(found, goal.limit_ms, goal.loss_ratio)
    measurement.evidence["capacity_limited_by"] = limited
    passes = _own_passes(generator, paths, found, maxima, limited, settings)
    if passes:
        measurement.evidence["capacity_pass"] = {v: goal_record(t, goal)
                                                 for v, t in passes.items()}
    checks = _sanity(measurement, found, maxima, goal, limited, best, passes)
    measurement.evidence["capacity_sanity"] = checks
    knees = {}
    for variant, result in found.items():
        problem = _problem(variant, result, checks[variant], search_range_text)
        if problem:
            measurement.unavailable[NAMES[variant]] = problem
            measurement.invalid.append(problem)
        else:
            knees[variant] = checks[variant].get("confirm_from") or result.capacity
    confirmed = _confirm(measurement, generator, paths, knees, settings, log_folded)
    for variant, rate in confirmed.items():
        result = found[variant]
        if rate is None:
            continue
        measurement.add(NAMES[variant], [rate], "requests/s")
        if not result.finished:
            bounds = result.goals[0]
            note = (f"{variant} capacity {rate:.0f} requests/s: the search's budget ended it "
                    f"before its width (relevant bounds {bounds.lower:.0f}"
                    f"..{bounds.upper or float('nan'):.0f}): a conservative figure")
            measurement.notes.append(note)
            LOG.warning(note)
        if limited[variant] == "load generator":
            note = (f"{variant} capacity {rate:.0f} requests/s is the load "
                    f"generator's ({generator.tool} was saturated in every failing trial:"
                    f" {SATURATED:.0%} of its cores, or behind its schedule at "
                    f"{BEHIND[1]:.0%}): a lower bound of the path's")
            measurement.notes.append(note)
            LOG.warning(note)
    _ratio(measurement, limited)
    _verify(measurement, generator, paths, settings)
    return measurement


def _verify(measurement: Measurement, generator: Generator, paths: dict[str, str],
            settings: SearchSettings) -> None:
    """With ``verify_seconds``: one more constant-rate trial of that length at each reported
    capacity, judged over all its requests against the first goal, kept as evidence
    (``capacity_verification``) and never changing the figure; one that missed is a note. A
    run short of its schedule by the generator alone (wrk2's late start) is run again as a
    confirmation is, the runs set aside kept (``retried``)."""
    if not settings.verify_seconds:
        return
    goal, measure = settings.goals[0], path_trials(generator, paths, settings.limits)
    verified = {}
    for variant in paths:
        if NAMES[variant] not in measurement.metrics:
            continue
        rate = measurement.value(NAMES[variant])
        retried: list[CapacityTrial] = []
        record = goal_record(goal_trial(measure, variant, settings.verify_seconds, rate, goal,
                                        retried), goal)
        record["retried"] = [goal_record(t, goal) for t in retried]
        verified[variant] = record
        if not record["held"]:
            note = (f"{variant} capacity {rate:.0f} requests/s: a {settings.verify_seconds:g} "
                    f"s verification run lost {record['loss_ratio']:.2%} of its requests for "
                    f"{goal.name} (allowed {goal.loss_ratio:.2%})")
            measurement.notes.append(note)
            LOG.warning(note)
    measurement.evidence["capacity_verification"] = verified


def _own_passes(generator: Generator, paths: dict[str, str], found: dict[str, PathCapacity],
                maxima: dict[str, float], limited: dict[str, str],
                settings: SearchSettings) -> dict[str, CapacityTrial]:
    """A :data:`PASS_SECONDS` trial of the search's generator at :data:`PASS_SHARE` of the
    closed-loop maximum on each path whose knee is under :data:`FAR_BELOW` of it and not the
    generator's: the evidence :func:`_sanity` weighs where the suite's latency pass is another
    instrument's or absent (path -> trial)."""
    low = [v for v, r in found.items() if r.capacity is not None
           and r.capacity < FAR_BELOW * maxima[v] and limited.get(v) != "load generator"]
    if not low:
        return {}
    measure = path_trials(generator, {v: paths[v] for v in low}, settings.limits)
    return {v: delivered_trial(measure, v, PASS_SECONDS, PASS_SHARE * maxima[v]) for v in low}


def _confirm(measurement: Measurement, generator: Generator, paths: dict[str, str],
             knees: dict[str, float], settings: SearchSettings,
             log_folded: LogFolded) -> dict[str, float | None]:
    """Each standing knee confirmed over all the requests of a ``confirm_seconds`` trial
    (:mod:`libraries.capacity.confirm`): path -> the rate that held (None: none did). With
    ``confirm_seconds`` 0 the knees are the figures, and the record and a note say so."""
    goal = settings.goals[0]
    measurement.parameters["capacity_confirm_s"] = settings.confirm_seconds
    if not knees:
        return {}
    if not settings.confirm_seconds:
        measurement.evidence["capacity_confirmation"] = None
        note = (f"capacity: MLRsearch's knee for {goal.name} (exceed ratio "
                f"{settings.exceed_ratio:g}: up to that share of its trial time may miss the "
                "goal), not confirmed over a whole run (-v CAPACITY_CONFIRM:0)")
        measurement.notes.append(note)
        return dict(knees)
    done = confirm_paths(generator, {v: paths[v] for v in knees}, knees, goal, settings)
    measurement.evidence["capacity_confirmation"] = {v: c.as_record() for v, c in done.items()}
    for variant, confirmation in done.items():
        log_folded(f"confirmation of the {variant} path: {confirmation.semantics}",
                   "\n".join(_trial_line(t, goal.limit_ms) for t in confirmation.trials))
        measurement.notes.append(f"{variant} capacity: {confirmation.semantics} (MLRsearch's "
                                 f"knee {confirmation.knee:.0f})")
    judged = judge_unconfirmed(done, path_trials(generator, paths, settings.limits))
    for variant, why in judged.unavailable.items():
        measurement.unavailable[NAMES[variant]] = why
    measurement.invalid.extend(judged.invalid)
    measurement.untestable.extend(judged.untestable)
    if judged.evidence is not None:
        measurement.evidence["capacity_floor"] = judged.evidence
    for why in [*judged.untestable, *([judged.unavailable["direct"]]
                                      if "direct" in judged.unavailable else [])]:
        LOG.warning(why)
    return {v: c.rate for v, c in done.items()}


def _ratio(measurement: Measurement, limited: dict[str, str]) -> None:
    """``capacity_ratio`` where both capacities stand and neither is the generator's."""
    if "direct" not in limited:
        measurement.unavailable["capacity_ratio"] = "direct path not measured (mTLS variant)"
        return
    missing = [NAMES[v] for v in ("proxy", "direct") if NAMES[v] not in measurement.metrics]
    bound = [v for v in ("proxy", "direct") if limited[v] == "load generator"]
    if missing:
        measurement.unavailable["capacity_ratio"] = f"no figure for {', '.join(missing)}"
    elif bound:
        measurement.unavailable["capacity_ratio"] = (
            f"the {' and '.join(bound)} path's capacity is the load generator's (a lower "
            "bound): a ratio would misstate the proxy's share")
    else:
        ratio = measurement.value("capacity") / measurement.value("direct_capacity")
        measurement.add("capacity_ratio", [ratio], "ratio")
        if ratio > 1.05:  # the proxy adds work to every request: it cannot serve more
            note = (f"capacity_ratio {ratio:.2f} > 1: the proxied path kept the goal at a "
                    "higher rate than the direct path it adds work to: check both searches "
                    "(a generator that did not deliver, a noisy direct search)")
            measurement.evidence["capacity_ratio_above_one"] = True
            measurement.notes.append(note)
            LOG.warning(note)


def _failing(result: PathCapacity, limit_ms: float, loss_ratio: float) -> list[CapacityTrial]:
    """The trials above the capacity that lost more than the goal allows: the ones that put the
    bound where it is (a bad trial below the capacity is one MLRsearch's exceed ratio
    tolerated, and says nothing of what limits the path)."""
    capacity = result.capacity
    return [t for t in result.trials if t.loss_ratio(limit_ms) > loss_ratio
            and (capacity is None or t.rate > capacity)]


def saturated(trial: CapacityTrial) -> bool:
    """The generator, not the path, set this trial's pace (:data:`SATURATED`, :data:`BEHIND`)."""
    share = trial.generator_cpu
    if share is None:
        return False
    behind = trial.sent < BEHIND[0] * trial.intended
    return share >= SATURATED or (behind and share >= BEHIND[1])


def _limited_by(found: dict[str, PathCapacity], limit_ms: float,
                loss_ratio: float) -> dict[str, str]:
    """Per path, ``load generator`` when every trial above the capacity that failed the first
    goal had a :func:`saturated` generator, else ``path``."""
    limited = {}
    for variant, result in found.items():
        failing = _failing(result, limit_ms, loss_ratio)
        bound = bool(failing) and all(saturated(t) for t in failing)
        limited[variant] = "load generator" if bound else "path"
    return limited


def _problem(variant: str, result: PathCapacity, check: dict[str, Any],
             search_range: str) -> str | None:
    """Why ``variant``'s capacity must not be recorded (None: it stands). A search its budget
    stopped stands when MLRsearch had already found the first goal's relevant lower bound (a
    conservative figure, its bounds wider than asked: the caller notes it); an error, or no
    lower bound, does not."""
    stopped = "; ".join(f"{k:g} ms: {v}" for k, v in result.stopped.items() if v != "done")
    budget_only = all(v == "done" or v.startswith("budget spent")
                      for v in result.stopped.values())
    if not result.finished and (not budget_only or result.goals[0].lower is None):
        return f"{variant} path: the capacity search did not finish ({stopped})"
    if result.capacity is None:
        return (f"{variant} path: no rate within {search_range} requests/s meets "
                f"{result.goals[0].goal.name} (MLRsearch found no lower bound)")
    if not check["holds"]:
        return f"{variant} path: capacity {result.capacity:.0f} requests/s {check['why']}"
    return None


def _trial_line(trial: CapacityTrial, limit_ms: float) -> str:
    p99 = trial.latency.get("p99")
    cpu = "-" if trial.generator_cpu is None else f"{trial.generator_cpu:.0%}"
    return (f"{trial.rate:10.0f} req/s x {trial.duration:g} s: achieved {trial.achieved:10.0f},"
            f" sent {trial.sent}/{trial.intended}, failed {trial.failed}, over {limit_ms:g} ms "
            f"{trial.over[limit_ms]}, loss {trial.loss_ratio(limit_ms):.2%}, p99 "
            f"{'-' if p99 is None else f'{p99:.3g} ms'}, generator CPU {cpu}")


def _far_below(check: dict[str, Any], maximum: float, goal: LatencyGoal,
               own: CapacityTrial | None) -> None:
    """Refuse ``check``'s capacity under :data:`FAR_BELOW` of the closed-loop ``maximum``
    when there is no ``own`` pass of the search's generator (no evidence either way). A pass
    that missed ``goal`` explains the figure; one that met it (tox e2e on a VM with vCPU
    stalls: knee 3,257, a 3 s pass at 10,126 lost 0.07 %) says the search met stalls the pass
    did not: the confirmation's whole-window trials start from the pass's rate
    (``confirm_from``) and decide."""
    if check["capacity"] >= FAR_BELOW * maximum:
        return
    far = f"is below {FAR_BELOW:.0%} of the closed-loop maximum {maximum:.0f}"
    if own is None:
        check.update(holds=False, why=(
            f"{far} with no latency pass to explain it (no evidence that the path, not the "
            "generator, set it)"))
        return
    share = own.loss_ratio(goal.limit_ms)
    check.update(half_rate_pass=own.rate, half_rate_met_goal=share <= goal.loss_ratio,
                 half_rate_pass_tool=own.tool)
    if share <= goal.loss_ratio:  # the search met stalls the pass did not: 30 s trials decide
        check["confirm_from"] = own.rate
        LOG.warning(f"capacity {check['capacity']:.0f} requests/s {far}, while a "
                    f"{own.duration:g} s {own.tool} pass at {own.rate:.0f} requests/s met "
                    f"{goal.name} ({share:.2%} lost): the confirmation starts at the pass")


def _sanity(measurement: Measurement, found: dict[str, PathCapacity],
            maxima: dict[str, float], goal: LatencyGoal,
            limited: dict[str, str] | None = None,
            best: dict[str, float] | None = None,
            passes: dict[str, CapacityTrial] | None = None) -> dict[str, dict[str, Any]]:
    """Each capacity against independent estimates: at most the closed-loop maximum (its best
    trial where ``best`` gives it, else the median; 5 % for its own noise), and for the proxied
    path at least the rate of the 50 % latency pass when that pass met the first goal (counted
    as the search counts). A pass that missed
    the goal is one 3 s trial against a whole search: a capacity above it is logged as a
    warning, not refused. A capacity under :data:`FAR_BELOW` of the closed-loop maximum with
    no latency pass to explain it is refused, unless the generator is known to have bounded it
    (``limited``: then it stands as the generator's lower bound, marked). The latency pass is
    an estimate only where the same generator ran it as the search (wrk2's latencies count its
    millisecond timer: its p50 read 8x vegeta's at the same rate); otherwise it is left out,
    and the check record says why, and the search generator's own pass of ``passes`` (path ->
    trial, :func:`_own_passes`) is the evidence: one that missed the goal explains a figure far
    below the maximum; from one that met it the confirmation starts (:func:`_far_below`)."""
    latency = measurement.evidence.get("latency") or {}
    half, over, sent = latency.get("rate"), latency.get("over_slo"), latency.get("sent")
    if latency.get("slo_ms") != goal.limit_ms:  # the pass counted another limit: no estimate
        half = None
    checks: dict[str, dict[str, Any]] = {}
    for variant, result in found.items():
        capacity = result.capacity
        check: dict[str, Any] = {"capacity": capacity, "closed_loop_max": maxima[variant],
                                 "half_rate_pass": None, "half_rate_met_goal": None,
                                 "holds": True, "why": ""}
        checks[variant] = check
        tools = {latency.get("tool"), *(t.tool for t in result.trials)} - {None}
        if half is not None and len(tools) > 1:
            check["half_rate_pass_left_out"] = (
                f"the latency pass ran {latency.get('tool')}, the search "
                f"{', '.join(sorted(tools - {latency.get('tool')}))}: not the same instrument")
        if capacity is None:
            continue
        ceiling = (best or maxima)[variant]
        check["closed_loop_best"] = ceiling
        if capacity > ceiling * 1.05:
            check.update(holds=False, why=f"is above the closed-loop maximum {ceiling:.0f}")
            continue
        if variant != "proxy" or half is None or over is None or not sent or \
                "half_rate_pass_left_out" in check:
            if (limited or {}).get(variant) != "load generator":
                _far_below(check, maxima[variant], goal, (passes or {}).get(variant))
            continue
        share = (over + latency.get("failed", 0)) / sent
        met = share <= goal.loss_ratio
        check.update(half_rate_pass=half, half_rate_met_goal=met)
        if met and capacity < half * 0.95:
            check.update(holds=False, why=f"is below the latency pass at {half:.0f} requests/s"
                                          f", which met the goal ({share:.2%} over the limit)")
        elif not met and capacity > half * 1.05:  # one 3 s pass against a whole search
            LOG.warning(f"{variant} capacity {capacity:.0f} requests/s is above the latency "
                        f"pass at {half:.0f} requests/s, which missed the goal ({share:.2%} "
                        "over): that single pass met a hiccup, or the search is wrong")
    for variant, check in checks.items():
        if not check["holds"]:
            LOG.warning(f"{variant} capacity {check['capacity']:.0f} requests/s {check['why']}")
    return checks
