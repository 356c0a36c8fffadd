"""The checks of a capacity figure against independent evidence, and what evidence that
disagrees earns before the result is refused.

The figure checked is the miss curve's estimate the record holds beside its figure (the rate
where the curve crosses the stated share, after every window: :mod:`libraries.capacity.confirm`;
the figure recorded is that crossing's safe end, a lower confidence bound, which sits below a
latency pass that met the goal by design), never MLRsearch's knee (issue 52: a knee at 70 % of
the closed-loop maximum passed every check, then the step-down recorded 22 %). The checks:

- **closed-loop maximum**: the figure at most :data:`CEILING` of the path's best closed-loop
  trial (the capacity under a latency goal cannot be above what the path served at all);
- **latency pass** (the proxied path, where the suite's 50 % pass ran the search's generator
  and counted the same limit): a pass that met the goal puts the figure at least
  :data:`PASS_MARGIN` of its rate;
- **far below**: a figure under :data:`FAR_BELOW` of the closed-loop maximum needs evidence:
  a latency pass of the same instrument that missed the goal explains it; otherwise whole
  windows at :data:`PASS_SHARE` of the maximum decide (real VPP recorded 2,836 requests/s where
  the maximum was 26,700, from trials the generator never sent);
- **generator-bound**: every window or trial above the figure that missed had a saturated
  generator (:func:`saturated`): the figure is the generator's, a lower bound (no far-below
  refusal, and no ratio);
- the proxied/direct ratio of the recorded figures (``libraries.capacity.limits``).

Where a check disagrees, :data:`CHALLENGE` more windows run where it disagrees (at the pass's
rate, at half the maximum, or at the figure itself for the ceiling), once per check and path,
counted in the miss curve and refitted; then every check runs again on the new figure. Evidence
of a single window (a pass that held) is refuted when more than the stated share of the
windows run at its own rate missed: the figure stands and a note quotes both. A check that
still disagrees makes the result invalid, quoting the figure, the evidence and the figure
before the extra windows. At most 3 x :data:`CHALLENGE` windows per path come from here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from libraries.capacity.confirm import Confirmation, extend
from libraries.capacity.search import Measure
from libraries.capacity.search_settings import LatencyGoal
from libraries.capacity.trials import CapacityTrial

CEILING = 1.05
"""A figure above this share of the best closed-loop trial is above the maximum (5 % for the
closed-loop figure's own noise)."""
PASS_MARGIN = 0.95
"""A figure under this share of a latency pass that met the goal disagrees with it."""
FAR_BELOW = 0.25
"""A figure under this share of the path's closed-loop maximum needs evidence to stand."""
PASS_SHARE = 0.5
"""...the windows that decide it run at this share of that maximum."""
CHALLENGE = 3
"""Windows run where a check disagrees (each check once per path)."""
SATURATED = 0.9
"""A missing trial whose generator used this share of its cores or more says nothing of the
path: the capacity found is the generator's, a lower bound of the path's."""
BEHIND = (0.98, 0.75)
"""...and so does one whose generator sent less than 98 % of its schedule while using 75 % of
its cores or more: it could not keep its own pace (vegeta's pacer falls behind before its CPU
share reads 100 %, the share counting the wait for the last answers too)."""


def saturated(trial: CapacityTrial) -> bool:
    """The generator, not the path, set this trial's pace (:data:`SATURATED`, :data:`BEHIND`)."""
    share = trial.generator_cpu
    if share is None:
        return False
    behind = trial.sent < BEHIND[0] * trial.intended
    return share >= SATURATED or (behind and share >= BEHIND[1])


def generator_bound(trials: Sequence[CapacityTrial], figure: float | None,
                    goal: LatencyGoal) -> bool:
    """Every trial above ``figure`` (all of them when None) that lost more than ``goal``
    allows had a :func:`saturated` generator (a bad trial below the figure says nothing of what
    limits the path)."""
    failing = [t for t in trials if t.loss_ratio(goal.limit_ms) > goal.loss_ratio
               and (figure is None or t.rate > figure)]
    return bool(failing) and all(saturated(t) for t in failing)


@dataclass(frozen=True)
class Evidence:
    """What one path's figure is checked against: the closed-loop ``maximum`` (median) and
    ``best`` trial, the suite's latency pass record (``latency``, the proxied path's; None:
    none) and the ``tools`` the search and windows ran, for ``goal``."""

    variant: str
    maximum: float
    best: float
    latency: dict[str, Any] | None
    tools: frozenset[str]
    goal: LatencyGoal


@dataclass(frozen=True)
class Disagreement:
    """A check the figure failed: its name, the ``rate`` where more windows go, ``why`` (after
    "capacity N requests/s"), and whether windows at that rate that miss refute the evidence
    (``refutable``: the evidence is one window that held)."""

    check: str
    rate: float
    why: str
    refutable: bool


def _pass(evidence: Evidence, record: dict[str, Any]) -> tuple[float, float] | None:
    """The latency pass as an estimate of the search's figure: (rate, share lost) or None
    (no pass, another limit, another instrument: said in ``record``)."""
    latency = evidence.latency or {}
    if evidence.variant != "proxy" or latency.get("slo_ms") != evidence.goal.limit_ms or \
            latency.get("rate") is None or not latency.get("sent"):
        return None
    if evidence.tools - {latency.get("tool")}:
        record["half_rate_pass_left_out"] = (
            f"the latency pass ran {latency.get('tool')}, the search "
            f"{', '.join(sorted(evidence.tools - {latency.get('tool')}))}: not the same "
            "instrument")
        return None
    share = (latency.get("over_slo", 0) + latency.get("failed", 0)) / latency["sent"]
    record.update(half_rate_pass=latency["rate"], half_rate_met_goal=share <=
                  evidence.goal.loss_ratio)
    return float(latency["rate"]), share


def check_figure(figure: float, evidence: Evidence, bound: bool) -> tuple[dict[str, Any],
                                                                         list[Disagreement]]:
    """The checks of ``figure`` (``bound``: generator-bound): the record's form and the checks
    it failed."""
    record: dict[str, Any] = {"capacity": figure, "closed_loop_max": evidence.maximum,
                              "closed_loop_best": evidence.best, "half_rate_pass": None,
                              "half_rate_met_goal": None, "generator_bound": bound}
    found: list[Disagreement] = []
    if figure > CEILING * evidence.best:
        found.append(Disagreement("closed-loop maximum", figure, f"is above the closed-loop "
                                  f"maximum {evidence.best:.0f}", refutable=False))
    estimate = _pass(evidence, record)
    goal = evidence.goal
    if estimate is not None and estimate[1] <= goal.loss_ratio and \
            figure < PASS_MARGIN * estimate[0]:
        found.append(Disagreement(
            "latency pass", estimate[0], f"is below the latency pass at {estimate[0]:.0f} "
            f"requests/s, which met the goal ({estimate[1]:.2%} over the limit)",
            refutable=True))
    explained = estimate is not None and estimate[1] > goal.loss_ratio
    if figure < FAR_BELOW * evidence.maximum and not bound and not explained:
        found.append(Disagreement(
            "far below", PASS_SHARE * evidence.maximum, f"is below {FAR_BELOW:.0%} of the "
            f"closed-loop maximum {evidence.maximum:.0f} with no evidence that the path, not "
            "the generator, set it", refutable=True))
    record.update(holds=not found, why="; ".join(d.why for d in found))
    return record, found


def challenge(confirmation: Confirmation, evidence: Evidence,
              search: Sequence[CapacityTrial],
              measure: Measure) -> tuple[Confirmation, dict[str, Any], list[str]]:
    """Check ``confirmation``'s figure; where a check disagrees, :data:`CHALLENGE` windows
    where it does (once per check), refit, check again (module docstring). Returns the
    confirmation with every window, the check record (``challenged``: what ran and what it
    did) and the notes for evidence the windows refuted."""
    goal, asked, refuted = evidence.goal, set(), set()
    challenged: list[dict[str, Any]] = []
    notes: list[str] = []
    record: dict[str, Any] = {}
    while confirmation.crossing is not None:
        figure = confirmation.crossing
        bound = generator_bound([*search, *confirmation.trials], figure, goal)
        record, found = check_figure(figure, evidence, bound)
        found = [d for d in found if d.check not in refuted]
        record.update(holds=not found, why="; ".join(d.why for d in found))
        todo = [d for d in found if d.check not in asked]
        if not todo:
            break
        done = todo[0]
        asked.add(done.check)
        before = confirmation
        confirmation = extend(confirmation, measure, done.rate, CHALLENGE,
                              f"challenge: {done.check}")
        missed = sum(t.loss_ratio(goal.limit_ms) > goal.loss_ratio
                     for t in confirmation.trials[len(before.trials):])
        challenged.append({"check": done.check, "rate": done.rate, "why": done.why,
                           "figure": figure, "windows": CHALLENGE, "missed": missed,
                           "before": before.semantics, "after": confirmation.semantics})
        if done.refutable and missed > confirmation.curve.share * CHALLENGE:
            refuted.add(done.check)
            notes.append(f"{evidence.variant} capacity {figure:.0f} requests/s {done.why}; "
                         f"{missed} of {CHALLENGE} {confirmation.seconds:g} s windows at "
                         f"{done.rate:.0f} requests/s missed it: the figure stands "
                         f"({confirmation.semantics})")
    history = "".join(f"; after {c['windows']} more {confirmation.seconds:g} s windows at "
                      f"{c['rate']:.0f} requests/s ({c['missed']} missed; before them: "
                      f"{c['before']})" for c in challenged)
    if confirmation.crossing is None:  # the windows the evidence earned left no curve to fit
        record = {"capacity": None, "holds": False, "why": confirmation.semantics + "".join(
            f"; the figure before, {c['figure']:.0f} requests/s, {c['why']}"
            for c in challenged) + history}
    elif not record["holds"] and challenged:
        record["why"] += history
    record["knee"] = confirmation.knee
    record["challenged"] = challenged
    return confirmation, record, notes
