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

A range proven clear by comparing its ends is clear **end to end**, not build by build: a
step undone by a later one (-4 % then +4 %) hides inside it. So the search then looks inside
such ranges, widest first, while ``inside`` comparisons last and nothing is left undecided (an
exit 5 already says another step may hide); looks that need no measuring (below) always go on.
A look compares each half of the range: two clear halves replace it (and are looked inside in
turn), a half with a change is searched like the whole range (its culprit named, the stretches
beside it compared: a -4 % step undone inside a -8 % range is found so), and an undecided half
leaves the range clear end to end (the half named). A range is **checked** when it is a pair of
neighbouring builds, when every build in it that runs is the same files, or when no build
between its ends runs; every other range still called clear is listed in
:attr:`Bisection.end_to_end`, and the exit's meaning says so (:meth:`Bisection.meaning`:
"clear only end to end ... a -/+ pair of steps could hide there"), never "every build
checked". Simulated with -4/+4/-8 steps, the search before this said exit 3 ("every other
range proven clear") in 34-81 % of searches, and left the -4 % step in a range it called
clear in 44-53 % (benchmarks/README.md).

Builds that are the same files (``same``: by content, :mod:`libraries.bisect.identity`) need
no measuring: a range whose ends are the same files is clear at once (:data:`SAME`), a pair
whose files are those of a pair already compared takes that comparison, and a comparison whose
record shows its two builds the same files ends after its first attempt. Eight installs, five
copies of one nginx then three with AES-NI off, took 10 comparisons (50.1 min) and ended exit 5
on the identical ranges' intervals (-0.5 % [-3.4, +2.4]); by content they are one comparison.

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
(:mod:`libraries.bisect.comparison_run` runs each comparison as a Robot A/B run).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from libraries.bisect.outcome import (
    SAME,
    Outcome,
    agree,
    chain,
    proven_clear,
    rules_out,
    same_files,
    show,
    slower,
    spread_text,
    why_text,
)
from libraries.bisect.result import (
    BAD_INPUT,
    CULPRIT,
    CULPRIT_AND_UNDECIDED,
    EXIT_CODES,
    NO_CULPRIT,
    UNDECIDABLE,
    Bisection,
    Culprit,
)

__all__ = ["BAD_INPUT", "CULPRIT", "CULPRIT_AND_UNDECIDED", "EXIT_CODES", "INSIDE",
           "NO_CULPRIT", "UNDECIDABLE", "Bisection", "Culprit", "Outcome", "Same", "bisect"]

DIFFERS = ("regression", "progression")
UNDECIDED = ("inconclusive", "failed")
MAX_COMPARISONS_PER_BUILD = 8
"""A guard: the search never makes more comparisons than this many per build."""
INSIDE = 2
"""Comparisons (attempts counted) the search may spend looking inside ranges proven clear only
end to end, once the culprits are found and nothing is undecided (``--inside``): a look starts
while fewer were spent, and is finished (a change found inside is searched to its culprit).
Simulated (benchmarks/README.md), 2 found the -4 % of -4/+4/-8 steps in 677 of 1,000
searches instead of 456 at a 2.4 % spread (about as rarely as before at 5.6 and 8.3 %, where a
-4 % step is seldom decided), and cost a one-step search 2-3 comparisons (+35-40 % minutes)."""


Compare = Callable[[int, int, int], Outcome]
"""``compare(a, b, attempt)``: A/B of build ``a`` against build ``b``; ``attempt`` 2 asks for
more rounds after an inconclusive first attempt."""
Available = Callable[[int], "bool | str"]
"""``available(i)``: True when build ``i`` exists (made now if it can be); False, or a string
saying why, when it cannot be made: then it is skipped."""
Same = Callable[[int, int], bool]
"""``same(a, b)``: True when builds ``a`` and ``b`` are known to be the same files (by
content); False when they differ or it is not known (yet: a comparison's record may tell)."""


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
           margin_pct: float | None = None, same: Same | None = None,
           inside: int = INSIDE) -> Bisection:
    """Search builds ``0..count-1`` (oldest first) for the steps between the ends (see the
    module docstring; ``margin_pct``: the comparisons' A/B margin, for
    :func:`clear_of_regression`; ``same``: which builds are the same files; ``inside``: the
    comparisons to spend looking inside ranges clear only end to end). ``ValueError`` for
    fewer than two builds or an end that cannot be made."""
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

    def identical(a: int, b: int) -> bool:
        return a == b or (same is not None and same(a, b))

    def by_content(a: int, b: int) -> Outcome | None:
        # the same files at both ends, or the files of a pair already compared: no measuring
        if same is None:
            return None
        if identical(a, b):
            return same_files(a, b)
        for (x, y), seen in done.items():
            if seen.verdict not in (SAME, "failed") and identical(x, a) and identical(y, b):
                if (x, y) in doubts:
                    doubts[(a, b)] = doubts[(x, y)]
                return replace(seen, a=a, b=b, minutes=0.0, detail=(
                    f"not measured: the files of {x} -> {y}, compared there; {seen.detail}"
                    ).rstrip("; "))
        return None

    def decide(a: int, b: int) -> Outcome:
        if (a, b) in done:
            return done[(a, b)]
        outcome = by_content(a, b) or measure(a, b)
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
        if outcome.verdict != "failed":
            runs.update((a, b))
        if identical(a, b):  # its record showed the two builds to be the same files
            return same_files(a, b)
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
                if outcome.verdict == SAME:
                    continue  # the same files: nothing to confirm
                again = measure(low, high)  # the confirmation: another, independent look
                if is_clear(again):
                    continue
                result.clear.remove(outcome)
                doubts[(low, high)] = (f"not proven clear: the confirmation did not clear it "
                                       f"({why(again)}) where the first comparison did "
                                       f"({why_text(outcome)})")
                if again.verdict not in DIFFERS:
                    result.undecided.append((low, high, doubts[(low, high)]))
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

    def checked(low: int, high: int) -> bool:
        # every build of low..high that runs checked: a pair, or all the same files
        inner = [i for i in range(low + 1, high) if i not in result.skipped]
        return not inner or all(identical(low, i) for i in [*inner, high])

    def look_inside(budget: int, spent: str) -> dict[tuple[int, int], str]:
        # the ranges clear only end to end, widest first: each half compared; the notes of
        # those left clear end to end (``spent``: why one was not looked inside)
        start, notes = len(result.comparisons), {}
        while True:
            loose = [o for o in result.clear if (o.a, o.b) not in notes and not
                     checked(o.a, o.b)]
            if not loose:
                return notes
            whole = max(loose, key=lambda o: (o.b - o.a, -o.a))
            mid = middle(whole.a, whole.b)
            if mid is None:
                continue  # every build between was found not to be made: checked now
            halves = [(whole.a, mid), (mid, whole.b)]
            free = all(h in done or by_content(*h) for h in halves)
            if not free and len(result.comparisons) - start >= budget:
                notes.update({(o.a, o.b): f"not looked inside: {spent}" for o in loose
                              if (o.a, o.b) not in notes})
                return notes
            parts = [decide(*halves[0])]
            if skipped_for_not_running(parts[0], whole.a, mid):
                continue  # another build in the middle
            parts.append(decide(*halves[1]))
            if all(is_clear(p) for p in parts) or any(p.verdict in DIFFERS for p in parts):
                result.clear.remove(whole)  # its halves say more
                result.clear.extend(p for p in parts if is_clear(p) and p not in result.clear)
                for part in parts:
                    if part.verdict in DIFFERS:
                        split(part.a, part.b, part)
                cover()
            else:  # a half undecided: the range stays clear end to end, the half named
                for part in parts:
                    if part in result.clear:
                        result.clear.remove(part)
                notes[(whole.a, whole.b)] = "looked inside: " + "; ".join(
                    f"{p.a} -> {p.b} {'clear' if is_clear(p) else why(p)}" for p in parts)

    result.ends = decide(0, count - 1)
    notes: dict[tuple[int, int], str] = {}
    if result.ends.verdict not in DIFFERS and not is_clear(result.ends):
        result.undecided.append((0, count - 1, f"the ends: {why(result.ends)}"))
    elif result.ends.verdict == "regression":
        split(0, count - 1, result.ends)
        cover()
        notes = (look_inside(0, "other ranges stayed undecided") if result.undecided else
                 look_inside(inside, f"the --inside budget of {inside} comparisons was spent"
                             if inside else "--inside 0"))
        audit()
    result.clear.sort(key=lambda o: o.a)
    result.end_to_end = [(o.a, o.b, notes.get((o.a, o.b), "")) for o in result.clear
                         if not checked(o.a, o.b)]
    return result
