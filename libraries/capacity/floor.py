"""A path whose windows gave no figure: the system's miss, a goal under the testbed's latency
floor, or too little evidence.

The windows (:mod:`libraries.capacity.confirm`) go down from MLRsearch's knee while none holds.
A path every window of which missed the goal is one of two things:

- a goal the system misses at every load: the proxy's defect, and the test fails;
- a goal under what the testbed itself resolves: a VM whose vCPUs stall for 10-30 ms puts
  about 1 % of the requests over 10 ms at any rate, with or without the proxy (this 2-core VM,
  2026-11-27, wrk2 pinned, 30 s at 3,000 requests/s: the direct path lost 0.6-1.9 % over
  10 ms in 6 runs, the proxied path 0.8-1.9 % in 3, the slowest request 18-27 ms; the suite's
  capacity test then failed with "direct path: no rate from 17908 down to 2869 requests/s kept
  p99<=10ms" while the proxied path held at 6,518). No capacity under that goal can be
  measured there, and none is reported: the test is skipped saying so.

The direct path (the server without the proxy) tells them apart. Its own figure is only the
ratio's reference: when it has none, it and the ratio are unavailable and the proxied figure
stands. When every window of the proxied path missed, the direct path's whole evidence at the
lowest rate the proxied path tried decides: its own windows at or below that rate (each misses
at most as often as one at it) and up to :data:`FLOOR_WINDOWS` more of the same length run
there, one at a time until the answer is settled. The goal is under the testbed's floor
(untestable) only when they prove that a direct window misses there more often than the stated
share (an exact binomial test at :data:`FLOOR_ALPHA`: 2 of 2 or 3 windows at a 10 % share);
otherwise the miss is the proxy's (invalid). Before issue 60 one direct window decided, and a
proxy's defect was skipped as often as that one window missed (a testbed missing 30 % of its
direct windows there: 30 % of the defects; now 22 %, and 3 % at 10 %). A proxied path with no
direct path to compare (the mTLS row), or whose curve could not be fitted for another reason
(every window held, too few around the crossing, a floor of misses from the figure up), is
invalid with the fit's reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from scipy.stats import binom

from libraries.capacity.confirm import Confirmation, goal_record, goal_trial, missed
from libraries.capacity.search import Measure
from libraries.capacity.search_settings import LatencyGoal
from libraries.capacity.trials import CapacityTrial

FLOOR_WINDOWS = 3
"""Direct windows run at most at the proxied path's lowest rate to tell its miss from the
testbed's floor."""
FLOOR_ALPHA = 0.05
"""The floor is proven when ``Binomial(n, share)`` makes the direct windows' misses at most this
likely."""


@dataclass
class Unconfirmed:
    """What the paths no confirmation held come to: ``unavailable`` (path -> why: no figure),
    ``invalid`` (the reasons the result must not stand), ``untestable`` (the reasons the test
    cannot measure its goal on this testbed), ``evidence`` (the direct path's floor trial, or
    None when none ran)."""

    unavailable: dict[str, str] = field(default_factory=dict)
    invalid: list[str] = field(default_factory=list)
    untestable: list[str] = field(default_factory=list)
    evidence: dict[str, Any] | None = None


def _lowest(confirmation: Confirmation) -> CapacityTrial:
    return min(confirmation.trials, key=lambda t: t.rate)


def judge_unconfirmed(done: dict[str, Confirmation], measure: Measure) -> Unconfirmed:
    """Judge every path of ``done`` (path -> its windows) whose curve gave no figure,
    as the module says, running the direct path's floor trial through ``measure(path,
    seconds, rate)`` where the proxied path held none."""
    out = Unconfirmed()
    for path, confirmation in done.items():
        if confirmation.rate is None:
            out.unavailable[path] = (f"{path} path: {confirmation.semantics} (MLRsearch's "
                                     f"knee: {confirmation.knee:.0f})")
    proxy = done.get("proxy")
    if "direct" in out.unavailable:
        out.unavailable["direct"] += (
            "; the direct path is the ratio's reference: no figure and no ratio"
            + ("" if proxy is None or proxy.rate is None
               else f", the proxied path's {proxy.rate:.0f} requests/s stands"))
    if proxy is None or proxy.rate is not None:
        return out
    if "direct" not in done or not proxy.all_missed:
        out.invalid.append(out.unavailable["proxy"])
        return out
    lowest = _lowest(proxy)
    share, goal = proxy.curve.share, proxy.goal
    counted = [t for t in done["direct"].trials if t.rate <= lowest.rate * (1.0 + 1e-9)]
    retried: list[CapacityTrial] = []
    ran = 0
    while not _floor(counted, goal, share) and ran < FLOOR_WINDOWS and \
            _floor(counted, goal, share, FLOOR_WINDOWS - ran):
        counted.append(goal_trial(measure, "direct", proxy.seconds, lowest.rate, goal, retried))
        ran += 1
    proven, p_value = _floor(counted, goal, share), _p_value(counted, goal, share)
    at_lowest = [t for t in proxy.trials if t.rate <= lowest.rate * (1.0 + 1e-9)]
    out.evidence = {
        "rate": lowest.rate, "share": share, "alpha": FLOOR_ALPHA, "ran": ran,
        "direct": [goal_record(t, goal) for t in counted],
        "proxy": [goal_record(t, goal) for t in at_lowest],
        "retried": [goal_record(t, goal) for t in retried], "p_value": p_value,
        "verdict": "under the testbed's latency floor" if proven else "the proxy's miss"}
    both = (f"at or below {lowest.rate:.0f} requests/s over {proxy.seconds:g} s the direct "
            f"path (no proxy) missed {_tally(counted, goal)}, the proxied path "
            f"{_tally(at_lowest, goal)}")
    if not proven:
        out.invalid.append(f"{out.unavailable['proxy']}, where the direct path kept it: {both}; "
                           f"no floor over {share:.0%} shown (exact binomial p = "
                           f"{p_value:.2g})")
        return out
    why = (f"{goal.name} is under this testbed's latency floor: {both}: a direct window misses "
           f"there in more than {share:.0%} (exact binomial p = {p_value:.2g}); the goal allows "
           f"{goal.loss_ratio:.1%}: no capacity under it can be measured here (a larger "
           "-v LATENCY_SLO can)")
    out.unavailable["proxy"] = why
    out.untestable.append(why)
    return out


def _p_value(trials: list[CapacityTrial], goal: LatencyGoal, share: float,
             more: int = 0) -> float:
    """How likely ``Binomial(n, share)`` makes the misses of ``trials`` (and ``more`` windows
    that all missed)."""
    k = sum(missed(t, goal) for t in trials) + more
    return float(binom.sf(k - 1, len(trials) + more, share)) if k else 1.0


def _floor(trials: list[CapacityTrial], goal: LatencyGoal, share: float,
           more: int = 0) -> bool:
    """The misses of ``trials`` (and ``more`` windows that all missed) prove a floor."""
    return _p_value(trials, goal, share, more) <= FLOOR_ALPHA


def _tally(trials: list[CapacityTrial], goal: LatencyGoal) -> str:
    losses = ", ".join(f"{t.loss_ratio(goal.limit_ms):.2%} (p99 {_ms(t)})" for t in trials)
    return (f"{sum(missed(t, goal) for t in trials)} of {len(trials)} windows"
            + (f" (lost {losses})" if losses else ""))


def _ms(trial: CapacityTrial) -> str:
    p99 = trial.latency.get("p99")
    return "-" if p99 is None else f"{p99:.3g} ms"
