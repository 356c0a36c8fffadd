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
stands. When every window of the proxied path missed, the direct path runs one more window of
the same length at the lowest rate the proxied path tried: where it keeps the goal the miss is
the proxy's (invalid); where it misses too the goal is under the testbed's floor
(untestable). A proxied path with no direct path to compare (the mTLS variant), or whose
curve could not be fitted for another reason (every window held, too few around the crossing),
is invalid with the fit's reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from libraries.capacity.confirm import Confirmation, goal_record, goal_trial, holds
from libraries.capacity.search import Measure
from libraries.capacity.trials import CapacityTrial


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
    retried: list[CapacityTrial] = []
    trial = goal_trial(measure, "direct", proxy.seconds, lowest.rate, proxy.goal, retried)
    kept = holds(trial, proxy.goal)
    record = {"rate": lowest.rate, "direct": goal_record(trial, proxy.goal),
              "proxy": goal_record(lowest, proxy.goal),
              "retried": [goal_record(t, proxy.goal) for t in retried],
              "verdict": "the proxy's miss" if kept else "under the testbed's latency floor"}
    out.evidence = record
    both = (f"at {lowest.rate:.0f} requests/s over {proxy.seconds:g} s the direct path (no "
            f"proxy) lost {trial.loss_ratio(proxy.goal.limit_ms):.2%} (p99 "
            f"{_ms(trial)}), the proxied path {lowest.loss_ratio(proxy.goal.limit_ms):.2%} "
            f"(p99 {_ms(lowest)})")
    if kept:
        out.invalid.append(f"{out.unavailable['proxy']}, where the direct path kept it: {both}")
        return out
    why = (f"{proxy.goal.name} is under this testbed's latency floor: {both}; the goal allows "
           f"{proxy.goal.loss_ratio:.1%}: no capacity under it can be measured here "
           "(a larger -v LATENCY_SLO can)")
    out.unavailable["proxy"] = why
    out.untestable.append(why)
    return out


def _ms(trial: CapacityTrial) -> str:
    p99 = trial.latency.get("p99")
    return "-" if p99 is None else f"{p99:.3g} ms"
