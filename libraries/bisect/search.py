"""Bisection of an ordered range of builds by pairwise A/B comparisons.

The range runs from a build believed good (the first) to one believed bad (the last). The ends
are compared first: no regression between them, nothing to look for. Otherwise the range is
cut at the middle build and its first half compared. No change there (proven clear: see
below): the change is in the second half, which is cut in turn. A change there: the first half
is searched. Undecided there: the half is reported undecided, and where its interval holds no
change but not the step's size (:func:`rules_out`) the step is looked for in the second half.
Every culprit's size and interval come from a direct comparison of its two builds.

No range is left unexamined. Every stretch of the range that neither holds a culprit nor was
proven clear nor reported undecided (the second half beside a first half with a change, the
builds after a culprit) is then compared as a whole, end to end (:func:`bisect`'s last pass):
proven clear, it is done; a change, it is searched like the whole range; undecided, it is
reported so. So a second step is found or its stretch named undecided, never passed over: the
result covers every pair of neighbouring builds with a culprit, a comparison that proved it
clear, or an undecided range (:meth:`Bisection.coverage`).

"Proven clear" (:func:`proven_clear`): the comparison's verdict is ``no change`` (its interval
inside the margin), or, with the A/B margin given, an inconclusive interval that lies above
minus the margin (:func:`clear_of_regression`: no regression worth finding; a two-step
bisection on the VM spent 14 of its 32 minutes proving two copies of one build equal, +2.7 %
[-1.5, +6.8] then -0.3 % [-4.9, +4.3], where the first attempt had already excluded a 3 %
regression).

A comparison that cannot decide (``inconclusive``) and is not proven clear is run once more
with a larger round budget (``attempt`` 2); still undecided, its range is reported as such.
Two attempts that disagree (the first showed b slower, its interval wholly below zero, the
second clears the range) leave the range undecided, not clear. Last, the culprits must
account for the ends' change (their changes chained; each estimate inside the other's
interval, or the other way round): where they do not, a step may hide in a stretch some
comparison wrongly judged clear, and the whole range is reported undecided with both figures.
A change seen across a range whose every part then measures clear is reported undecided
over that whole range (spread over several builds, or missed by one comparison), not over
the last pair looked at.
A build that cannot be made (``available`` says no) or does not run (a comparison with a build
proven to run fails: the other build failed to start or its suite set-up failed) is skipped as
``git bisect skip`` does, with the reason: the nearest build to the middle is taken instead,
and where none is left between two ends the culprit is the whole range, with the skipped
builds named.

What remains is the A/B engine's own error: a comparison that decides "no change" at an
early look on a pair with a step just past the margin (-4 % with a 3 % margin, judged -0.4 %
[-2.9, +2.3] after 20 rounds at a 5.6 % per-round spread, once in 6,000 simulated two-step
searches: ``python -m benchmarks.bisect_bench --simulate``).

Plain Python, no Robot and no node command: the comparison and the builds are injected
(:mod:`libraries.bisect.runner` runs each comparison as a Robot A/B run).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

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
        if len(result.comparisons) >= MAX_COMPARISONS_PER_BUILD * count:
            return Outcome(a, b, "failed", detail="not compared: the search's limit of "
                           f"{MAX_COMPARISONS_PER_BUILD * count} comparisons was reached")
        outcome = first = compare(a, b, 1)
        result.comparisons.append(outcome)
        if outcome.verdict == "inconclusive" and not proven_clear(outcome, margin_pct):
            outcome = compare(a, b, 2)
            result.comparisons.append(outcome)
            if proven_clear(outcome, margin_pct) and _slower(first):
                doubts[(a, b)] = (f"the attempts disagree: the first showed b slower "
                                  f"({_why(first)}), the second {_why(outcome)}")
        if outcome.verdict != "failed":
            runs.update((a, b))
        done[(a, b)] = outcome
        if is_clear(outcome):
            result.clear.append(outcome)
        return outcome

    def is_clear(outcome: Outcome) -> bool:
        return proven_clear(outcome, margin_pct) and (outcome.a, outcome.b) not in doubts

    def why(outcome: Outcome) -> str:
        return doubts.get((outcome.a, outcome.b)) or _why(outcome)

    def skipped_for_not_running(outcome: Outcome, known_good: int, new: int) -> bool:
        """A failed comparison of a build that runs with one not yet seen to run: the new one
        does not run; skip it."""
        if outcome.verdict != "failed" or new in runs or known_good not in runs:
            return False
        made[new] = False
        result.skipped[new] = f"did not run: {_why(outcome)}"
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
                    result.undecided.append((known.a, known.b, _spread(
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
                continue
            if outcome.verdict in DIFFERS:
                split(low, high, outcome)
            else:
                result.undecided.append((low, high, f"not proven clear: {why(outcome)}"))

    def audit() -> None:
        # the culprits must account for the ends' change: where they do not, a step may
        # hide in a stretch a comparison wrongly judged clear
        if result.undecided or not result.culprits or result.ends is None:
            return
        found = _chain([c.outcome for c in result.culprits])
        if found is not None and not _agree(found, result.ends):
            result.undecided.append((0, count - 1, (
                f"the culprits found ({_show(found)} together) do not account for the ends' "
                f"{_show(result.ends)}: another step may be in a stretch judged clear")))

    result.ends = decide(0, count - 1)
    if result.ends.verdict not in DIFFERS and not is_clear(result.ends):
        result.undecided.append((0, count - 1, f"the ends: {why(result.ends)}"))
    elif result.ends.verdict == "regression":
        split(0, count - 1, result.ends)
        cover()
        audit()
    return result


def _slower(outcome: Outcome) -> bool:
    """The interval lies wholly below no change: b measured slower, if not beyond the
    margin."""
    return outcome.high_pct is not None and outcome.high_pct < 0.0


def _chain(outcomes: list[Outcome]) -> tuple[float, float, float] | None:
    """The changes of consecutive steps combined (ratios multiplied, the interval ends
    too: a rough, wide chain), in percent; None when one lacks an interval."""
    ratio = low = high = 1.0
    for o in outcomes:
        if o.change_pct is None or o.low_pct is None or o.high_pct is None:
            return None
        ratio *= 1 + o.change_pct / 100
        low *= 1 + o.low_pct / 100
        high *= 1 + o.high_pct / 100
    return (ratio - 1) * 100, (low - 1) * 100, (high - 1) * 100


def _agree(found: tuple[float, float, float], ends: Outcome) -> bool:
    """True unless each estimate lies outside the other's interval."""
    if ends.change_pct is None or ends.low_pct is None or ends.high_pct is None:
        return True
    return (ends.low_pct <= found[0] <= ends.high_pct) or (found[1] <= ends.change_pct
                                                           <= found[2])


def _show(change: Outcome | tuple[float, float, float]) -> str:
    if isinstance(change, Outcome):
        change = (change.change_pct or 0.0, change.low_pct or 0.0, change.high_pct or 0.0)
    return f"{change[0]:+.1f} % [{change[1]:+.1f}, {change[2]:+.1f}]"


def proven_clear(outcome: Outcome, margin_pct: float | None) -> bool:
    """True when ``outcome`` proves its range holds no regression beyond the margin: with the
    margin given, :func:`clear_of_regression`; without it, a ``no change`` verdict."""
    if margin_pct is None:
        return outcome.verdict == "no change"
    return clear_of_regression(outcome, margin_pct)


def rules_out(part: Outcome, step: Outcome) -> bool:
    """True when the undecided ``part`` cannot hold ``step``: its interval holds no change
    (0 %) but not the step's point estimate. The step is then in the other half (``part``
    itself is not proven clear: it is reported undecided unless a second attempt clears
    it)."""
    if part.verdict != "inconclusive":
        return False
    low, high, size = part.low_pct, part.high_pct, step.change_pct
    if low is None or high is None or size is None:
        return False
    return low <= 0.0 <= high and not low <= size <= high


def clear_of_regression(part: Outcome, margin_pct: float | None) -> bool:
    """True when ``part`` (``no change`` or inconclusive) has its interval above
    ``-margin_pct``: whatever it holds, no regression beyond the margin (a progression may
    be, which a bisection for a regression does not look for). False without a margin."""
    if margin_pct is None or part.verdict not in ("no change", "inconclusive") \
            or part.low_pct is None:
        return False
    return part.low_pct > -margin_pct


def _why(outcome: Outcome) -> str:
    interval = (f" {outcome.change_pct:+.1f} % [{outcome.low_pct:+.1f}, {outcome.high_pct:+.1f}]"
                if None not in (outcome.change_pct, outcome.low_pct, outcome.high_pct) else "")
    said = f"{outcome.verdict}{interval}"
    return f"{said}: {outcome.detail}" if outcome.detail else said


def _spread(pair: Outcome, known: Outcome, why: str, clear: bool) -> str:
    if not clear:
        return f"{known.a} -> {known.b} changed, {pair.a} -> {pair.b} undecided: {why}"
    return (f"{known.a} -> {known.b} changed ({_show(known)}), but no part of it shows the "
            f"change ({pair.a} -> {pair.b}: {why}): the step is spread over several builds, "
            "within each comparison's margin, or missed by one of them")
