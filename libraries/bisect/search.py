"""Bisection of an ordered range of builds by pairwise A/B comparisons.

The range runs from a build believed good (the first) to one believed bad (the last). The ends
are compared first: no regression between them, nothing to look for. Otherwise the range is
cut at the middle build and its first half compared: proven clear (below), the change is in
the second half, cut in turn; a change, the first half is searched; undecided, the half is
reported so, and where its interval holds no change but not the step's size
(:func:`~libraries.bisect.outcome.rules_out`) the step is looked for in the second half.
Every culprit's size and interval come from a direct comparison of its two builds.

No stretch is passed over. Every stretch that holds no culprit and was neither proven clear
nor reported undecided (the builds after a culprit, a second half beside a first half with a
change) is then compared end to end (the last pass): a change, it is searched like the whole
range; undecided, it is reported so; proven clear, it is confirmed by a second, independent
comparison of the pair, and two that disagree leave it undecided. These stretches are where a
second step hides, and an A/B run may stop at an early look with a wrong "no change": without
the confirmation one of 6,000 simulated two-step searches passed a -4 % step over (-0.4 %
[-2.9, +2.3] after 20 rounds at a 5.6 % spread), with it none, for about one comparison more
(``python -m benchmarks.bisect_bench --simulate``). The result covers every pair of
neighbouring builds with a culprit, a range proven clear or an undecided range
(:meth:`Bisection.coverage`).

Proven clear (:func:`~libraries.bisect.outcome.proven_clear`): ``no change``, or with the A/B
margin an interval above minus the margin
(:func:`~libraries.bisect.outcome.clear_of_regression`: a two-step bisection on the VM spent
14 of its 32 minutes proving two copies of one build equal where the first attempt had
already excluded a 3 % regression). An inconclusive comparison not proven clear runs once more with
twice the rounds (``attempt`` 2); two attempts that disagree (the first showed b slower, its
interval below zero, the second clears the range) leave the range undecided. A change seen
across a range that no part of it shows leaves that whole range undecided (spread over
several builds, or missed by one comparison). Last, the culprits must account for the ends'
change (chained, each estimate inside the other's interval or the other way round), else a
step may hide in a stretch wrongly judged clear and the whole range is reported undecided.

A build that cannot be made (``available`` says no) or does not run (its comparison with a
build that ran fails: it did not start, or its suite set-up failed) is skipped as ``git bisect
skip`` does, with the reason: the nearest build to the middle is taken instead; where none is
left between two ends the culprit is the whole range, with the skipped builds named.

Plain Python, no Robot and no node command: the comparison and the builds are injected
(:mod:`libraries.bisect.runner` runs each comparison as a Robot A/B run).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from libraries.bisect.outcome import (
    Outcome,
    agree,
    chain,
    proven_clear,
    rules_out,
    show,
    slower,
    spread_text,
    why_text,
)

DIFFERS = ("regression", "progression")
UNDECIDED = ("inconclusive", "failed")
NO_CULPRIT, BAD_INPUT, CULPRIT, UNDECIDABLE, CULPRIT_AND_UNDECIDED = 0, 2, 3, 4, 5
EXIT_CODES = {
    NO_CULPRIT: "no regression between the ends beyond the margin (or only progressions)",
    BAD_INPUT: "bad input: refused before anything was measured",
    CULPRIT: "culprit found, and every other range proven clear of a regression beyond the "
             "margin",
    UNDECIDABLE: "could not decide: no culprit found, and an end or a range stayed undecided",
    CULPRIT_AND_UNDECIDED: "culprit found, but some ranges stayed undecided (another step may "
                           "hide there: see the undecided ranges)",
}
"""Every exit code of ``python -m libraries.bisect``, and what it means."""
MAX_COMPARISONS_PER_BUILD = 8
"""A guard: the search never makes more comparisons than this many per build."""


@dataclass(frozen=True)
class Culprit:
    """The last good and the first bad build of one step, the direct comparison of the pair,
    and the builds between them that were skipped (then the step is somewhere in
    ``good``..``bad``, not necessarily at ``bad``)."""

    good: int
    bad: int
    outcome: Outcome
    skipped: tuple[int, ...] = ()


@dataclass
class Bisection:
    """What the search found: every comparison in the order made, the culprits, the ranges
    proven clear (by which comparison), the ranges left undecided (with why), and the builds
    skipped (index -> why: could not be made, or did not run)."""

    ends: Outcome | None = None
    comparisons: list[Outcome] = field(default_factory=list)
    culprits: list[Culprit] = field(default_factory=list)
    clear: list[Outcome] = field(default_factory=list)
    undecided: list[tuple[int, int, str]] = field(default_factory=list)
    skipped: dict[int, str] = field(default_factory=dict)

    @property
    def unbuildable(self) -> list[int]:
        """The skipped builds, in the order skipped."""
        return list(self.skipped)

    @property
    def exit_code(self) -> int:
        """:data:`CULPRIT` when a regression's culprit was found and nothing stayed undecided,
        :data:`CULPRIT_AND_UNDECIDED` when a range stayed undecided beside it,
        :data:`UNDECIDABLE` when the ends or a range could not be decided and no regression's
        culprit was found, else :data:`NO_CULPRIT` (see :data:`EXIT_CODES`)."""
        found = any(c.outcome.verdict == "regression" for c in self.culprits)
        if found:
            return CULPRIT_AND_UNDECIDED if self.undecided else CULPRIT
        return UNDECIDABLE if self.undecided else NO_CULPRIT

    @property
    def minutes(self) -> float:
        """Minutes spent in comparisons."""
        return sum(o.minutes for o in self.comparisons)

    def coverage(self) -> list[tuple[int, int, str]]:
        """``(a, b, how)`` for the stretches the result accounts for, in order: ``culprit``,
        ``clear`` (a comparison proved no regression beyond the margin) or ``undecided``.
        After a search that got past the ends, they join up from the first to the last
        build."""
        spans = [(c.good, c.bad, "culprit") for c in self.culprits]
        spans += [(o.a, o.b, "clear") for o in self.clear]
        spans += [(a, b, "undecided") for a, b, _ in self.undecided]
        return sorted(spans)


Compare = Callable[[int, int, int], Outcome]
"""``compare(a, b, attempt)``: A/B of build ``a`` against build ``b``; ``attempt`` 2 asks for
more rounds after an inconclusive first attempt."""
Available = Callable[[int], "bool | str"]
"""``available(i)``: True when build ``i`` exists (made now if it can be); False, or a string
saying why, when it cannot be made: then it is skipped."""


def _uncovered(count: int, spans: list[tuple[int, int, str]]) -> list[tuple[int, int]]:
    """The maximal stretches of ``0..count-1`` that no span covers (a span ``a..b`` covers
    the neighbouring pairs ``a, a+1`` .. ``b-1, b``)."""
    covered = [False] * (count - 1)
    for a, b, _ in spans:
        for unit in range(a, b):
            covered[unit] = True
    gaps: list[tuple[int, int]] = []
    start: int | None = None
    for unit, done in enumerate([*covered, True]):
        if not done and start is None:
            start = unit
        elif done and start is not None:
            gaps.append((start, unit))
            start = None
    return gaps


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
    runs: set[int] = set()  # builds a comparison that did not fail has run
    done: dict[tuple[int, int], Outcome] = {}
    doubts: dict[tuple[int, int], str] = {}  # clear by a second attempt, slower by the first

    def can_use(index: int) -> bool:
        if index not in made:
            said = True if available is None else available(index)
            made[index] = said is True
            if not made[index]:
                result.skipped[index] = (f"could not be made: {said}" if isinstance(said, str)
                                         and said else "could not be made")
        return made[index]

    for end in (0, count - 1):
        if not can_use(end):
            raise ValueError(f"build {end} (an end of the range) could not be made")

    def decide(a: int, b: int) -> Outcome:
        if (a, b) in done:
            return done[(a, b)]
        outcome = measure(a, b)
        done[(a, b)] = outcome
        if is_clear(outcome):
            result.clear.append(outcome)
        return outcome

    def measure(a: int, b: int) -> Outcome:
        # one comparison: a first attempt, and a second where the first could not decide
        if len(result.comparisons) >= MAX_COMPARISONS_PER_BUILD * count:
            return Outcome(a, b, "failed", detail="not compared: the search's limit of "
                           f"{MAX_COMPARISONS_PER_BUILD * count} comparisons was reached")
        outcome = first = compare(a, b, 1)
        result.comparisons.append(outcome)
        if outcome.verdict == "inconclusive" and not proven_clear(outcome, margin_pct):
            outcome = compare(a, b, 2)
            result.comparisons.append(outcome)
            if proven_clear(outcome, margin_pct) and slower(first):
                doubts[(a, b)] = (f"the attempts disagree: the first showed b slower "
                                  f"({why_text(first)}), the second {why_text(outcome)}")
        if outcome.verdict != "failed":
            runs.update((a, b))
        return outcome

    def is_clear(outcome: Outcome) -> bool:
        return proven_clear(outcome, margin_pct) and (outcome.a, outcome.b) not in doubts

    def why(outcome: Outcome) -> str:
        return doubts.get((outcome.a, outcome.b)) or why_text(outcome)

    def skipped_for_not_running(outcome: Outcome, known_good: int, new: int) -> bool:
        """A failed comparison of a build that runs with one not yet seen to run: the new one
        does not run; skip it."""
        if outcome.verdict != "failed" or new in runs or known_good not in runs:
            return False
        made[new] = False
        result.skipped[new] = f"did not run: {why_text(outcome)}"
        return True

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
                pair = decide(low, high)
                if pair.verdict not in DIFFERS:
                    # the change seen across known.a..known.b is in no part of it: the whole
                    # of that range stays undecided, not only this pair
                    result.undecided.append((known.a, known.b, spread_text(
                        pair, known, why(pair), is_clear(pair))))
                    return
                known = pair
            result.culprits.append(Culprit(low, high, known,
                                           tuple(i for i in range(low + 1, high))))
            return
        left = decide(low, mid)
        if skipped_for_not_running(left, low, mid):
            split(low, high, known)  # another build in the middle
            return
        if is_clear(left):
            split(mid, high, known)  # the change is in the other half
        elif left.verdict in DIFFERS:
            split(low, mid, left)  # the other half: the last pass compares it
        else:
            result.undecided.append((low, mid, why(left)))
            if rules_out(left, known):
                split(mid, high, known)  # the step is not in this half

    def cover() -> None:
        # every stretch not yet accounted for, compared end to end
        for _ in range(count * MAX_COMPARISONS_PER_BUILD):
            gaps = _uncovered(count, result.coverage())
            if not gaps:
                return
            low, high = gaps[0]
            outcome = decide(low, high)
            if is_clear(outcome):
                again = measure(low, high)  # the confirmation: another, independent look
                if is_clear(again):
                    continue
                result.clear.remove(outcome)
                if again.verdict not in DIFFERS:
                    result.undecided.append((low, high, (
                        f"not proven clear: the confirmation did not clear it ({why(again)}) "
                        f"where the first comparison did ({why_text(outcome)})")))
                    continue
                outcome = again
            if outcome.verdict in DIFFERS:
                split(low, high, outcome)
            else:
                result.undecided.append((low, high, f"not proven clear: {why(outcome)}"))

    def audit() -> None:
        # the culprits must account for the ends' change: where they do not, a step may
        # hide in a stretch a comparison wrongly judged clear
        if result.undecided or not result.culprits or result.ends is None:
            return
        found = chain([c.outcome for c in result.culprits])
        if found is not None and not agree(found, result.ends):
            result.undecided.append((0, count - 1, (
                f"the culprits found ({show(found)} together) do not account for the ends' "
                f"{show(result.ends)}: another step may be in a stretch judged clear")))

    result.ends = decide(0, count - 1)
    if result.ends.verdict not in DIFFERS and not is_clear(result.ends):
        result.undecided.append((0, count - 1, f"the ends: {why(result.ends)}"))
    elif result.ends.verdict == "regression":
        split(0, count - 1, result.ends)
        cover()
        audit()
    return result
