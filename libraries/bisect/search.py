"""Bisection of an ordered range of builds by pairwise A/B comparisons.

The range runs from a build believed good (the first) to one believed bad (the last). The ends
are compared first: no regression between them, nothing to look for. Otherwise the range is
cut at the middle build and its first half compared. No change there: the change is in the
second half, which is cut in turn. A change there: the first half is searched, and the second
half is compared too unless the first half's change matches the whole range's (each point
estimate inside the other's interval), so two separate steps in one range are both found while
one step costs one comparison per halving: at most log2(n) + 2 for n builds (the ends, the
halvings, and a direct A/B of the adjacent pair where the search got there by inference).
Every culprit's size and interval come from a direct comparison of its two builds.

A comparison that cannot decide (``inconclusive``) is run once more with a larger round budget
(``attempt`` 2); still undecided, its half is reported as such. A first half need not be
proven unchanged, only shown not to hold the step (:func:`rules_out`): an inconclusive first
half whose interval holds no change but not the step's size sends the search to the other
half at once (on a noisy 2-core VM two copies of one nginx build measured +2.5 % [-2.0,
+9.1] after 60 rounds: "no change" within a 3 % margin would take hundreds more, while the
-12 % step was plainly not there). With the A/B margin given, a range whose interval lies
above minus the margin holds no regression worth finding (:func:`clear_of_regression`): it is
decided, with no second attempt, as "no change" would be (a two-step bisection spent 14 of its
32 minutes proving two copies of one build equal, +2.7 % [-1.5, +6.8] then -0.3 % [-4.9,
+4.3], where the first attempt had already excluded a 3 % regression). A build that cannot be made
(``available`` says no) is skipped as ``git bisect skip`` does: the nearest build to the middle
is taken instead, and where none is left between two ends the culprit is the whole range,
with the skipped builds named. A step that shows across a range but in neither half (each
half's change within the margin) is reported as spread over the range.

Plain Python, no Robot and no node command: the comparison and the builds are injected
(:mod:`libraries.bisect.runner` runs each comparison as a Robot A/B run).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

DIFFERS = ("regression", "progression")
UNDECIDED = ("inconclusive", "failed")
NO_CULPRIT, CULPRIT, BAD_INPUT, UNDECIDABLE = 0, 3, 2, 4
"""Exit codes: no regression between the ends; a culprit found; bad input (before anything
was measured); the search could not decide."""


@dataclass(frozen=True)
class Outcome:
    """One A/B comparison of builds ``a`` (baseline) and ``b`` (indices in the range).

    ``verdict``: the A/B engine's for the metric followed (``regression``, ``progression``,
    ``no change``, ``inconclusive``), or ``failed`` when the run gave no verdict (``detail``
    says why). Changes are b against a, in percent, with the interval's ends."""

    a: int
    b: int
    verdict: str
    change_pct: float | None = None
    low_pct: float | None = None
    high_pct: float | None = None
    rounds: int = 0
    minutes: float = 0.0
    attempt: int = 1
    detail: str = ""

    def as_record(self, names: list[str]) -> dict[str, Any]:
        """The JSON form, with the builds' names."""
        return {"a": names[self.a], "b": names[self.b], "a_index": self.a, "b_index": self.b,
                "verdict": self.verdict, "change_pct": self.change_pct,
                "low_pct": self.low_pct, "high_pct": self.high_pct, "rounds": self.rounds,
                "minutes": round(self.minutes, 2), "attempt": self.attempt,
                "detail": self.detail}


@dataclass(frozen=True)
class Culprit:
    """The last good and the first bad build of one step, the direct comparison of the pair,
    and the builds between them that could not be made (then the step is somewhere in
    ``good``..``bad``, not necessarily at ``bad``)."""

    good: int
    bad: int
    outcome: Outcome
    skipped: tuple[int, ...] = ()


@dataclass
class Bisection:
    """What the search found: every comparison in the order made, the culprits, the ranges
    left undecided (with why), and the builds that could not be made."""

    ends: Outcome | None = None
    comparisons: list[Outcome] = field(default_factory=list)
    culprits: list[Culprit] = field(default_factory=list)
    undecided: list[tuple[int, int, str]] = field(default_factory=list)
    unbuildable: list[int] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        """:data:`CULPRIT` when a regression's culprit was found, :data:`UNDECIDABLE` when
        the ends or a half could not be decided, else :data:`NO_CULPRIT`."""
        if any(c.outcome.verdict == "regression" for c in self.culprits):
            return CULPRIT
        if self.undecided:
            return UNDECIDABLE
        return NO_CULPRIT

    @property
    def minutes(self) -> float:
        """Minutes spent in comparisons."""
        return sum(o.minutes for o in self.comparisons)


Compare = Callable[[int, int, int], Outcome]
"""``compare(a, b, attempt)``: A/B of build ``a`` against build ``b``; ``attempt`` 2 asks for
more rounds after an inconclusive first attempt."""
Available = Callable[[int], bool]
"""``available(i)``: build ``i`` exists (made now if it can be); False: skip it."""


def bisect(count: int, compare: Compare, available: Available | None = None,
           margin_pct: float | None = None) -> Bisection:
    """Search builds ``0..count-1`` (oldest first) for the steps between the ends (see the
    module docstring; ``margin_pct``: the comparisons' A/B margin, for
    :func:`clear_of_regression`). ``ValueError`` for fewer than two builds or an end that
    cannot be made."""
    if count < 2:
        raise ValueError(f"a bisection needs at least two builds, got {count}")
    result = Bisection()
    made: dict[int, bool] = {}

    def can_use(index: int) -> bool:
        if index not in made:
            made[index] = True if available is None else bool(available(index))
            if not made[index]:
                result.unbuildable.append(index)
        return made[index]

    for end in (0, count - 1):
        if not can_use(end):
            raise ValueError(f"build {end} (an end of the range) could not be made")

    def decide(a: int, b: int, step: Outcome | None = None) -> Outcome:
        outcome = compare(a, b, 1)
        result.comparisons.append(outcome)
        if outcome.verdict == "inconclusive" and not (step and rules_out(outcome, step)) \
                and not clear_of_regression(outcome, margin_pct):
            outcome = compare(a, b, 2)
            result.comparisons.append(outcome)
        return outcome

    def middle(low: int, high: int) -> int | None:
        centre = (low + high) / 2
        for index in sorted(range(low + 1, high), key=lambda i: (abs(i - centre), i)):
            if can_use(index):
                return index
        return None

    def split(low: int, high: int, known: Outcome) -> None:
        # ``known``: a comparison whose change lies across low..high: their own (a direct
        # A/B of low and high) or, inferred, the enclosing range's after a half without change
        mid = middle(low, high)
        if mid is None:
            if (known.a, known.b) != (low, high):
                known = decide(low, high)
                if known.verdict not in DIFFERS:
                    result.undecided.append((low, high, _spread(known, low, high)))
                    return
            result.culprits.append(Culprit(low, high, known, tuple(range(low + 1, high))))
            return
        left = decide(low, mid, known)
        if left.verdict == "no change" or rules_out(left, known) or \
                clear_of_regression(left, margin_pct):
            split(mid, high, known)  # the change is in the other half
            return
        if left.verdict in DIFFERS:
            split(low, mid, left)
            if explains(left, known):
                return
        else:
            result.undecided.append((low, mid, _why(left)))
        right = decide(mid, high)
        if right.verdict in DIFFERS:
            split(mid, high, right)
        elif right.verdict in UNDECIDED and not clear_of_regression(right, margin_pct):
            result.undecided.append((mid, high, _why(right)))

    result.ends = decide(0, count - 1)
    if result.ends.verdict in UNDECIDED and not clear_of_regression(result.ends, margin_pct):
        result.undecided.append((0, count - 1, f"the ends: {_why(result.ends)}"))
    elif result.ends.verdict == "regression":
        split(0, count - 1, result.ends)
    return result


def rules_out(part: Outcome, step: Outcome) -> bool:
    """True when the undecided ``part`` cannot hold ``step``: its interval holds no change
    (0 %) but not the step's point estimate. The step is then in the other half."""
    if part.verdict != "inconclusive":
        return False
    low, high, size = part.low_pct, part.high_pct, step.change_pct
    if low is None or high is None or size is None:
        return False
    return low <= 0.0 <= high and not low <= size <= high


def clear_of_regression(part: Outcome, margin_pct: float | None) -> bool:
    """True when the undecided ``part``'s interval lies above ``-margin_pct``: whatever it
    holds, no regression beyond the margin (a progression may be, which a bisection for a
    regression does not look for). False without a margin."""
    if margin_pct is None or part.verdict != "inconclusive" or part.low_pct is None:
        return False
    return part.low_pct > -margin_pct


def explains(part: Outcome, whole: Outcome) -> bool:
    """True when ``part``'s change matches ``whole``'s: each point estimate inside the other's
    interval. Then the other half holds no second step the comparisons could resolve, and is
    not compared."""
    values = (part.change_pct, part.low_pct, part.high_pct, whole.change_pct, whole.low_pct,
              whole.high_pct)
    if any(v is None for v in values):
        return False
    assert part.change_pct is not None and whole.change_pct is not None  # for the type checker
    return (whole.low_pct <= part.change_pct <= whole.high_pct  # type: ignore[operator]
            and part.low_pct <= whole.change_pct <= part.high_pct)  # type: ignore[operator]


def _why(outcome: Outcome) -> str:
    return f"{outcome.verdict}: {outcome.detail}" if outcome.detail else outcome.verdict


def _spread(outcome: Outcome, low: int, high: int) -> str:
    if outcome.verdict in UNDECIDED:
        return _why(outcome)
    return (f"the range around it changed, but {low} -> {high} measured {outcome.verdict}: the "
            f"step is spread over several builds or within each comparison's margin")
