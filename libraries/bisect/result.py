"""What a bisection found (:class:`Bisection`: comparisons, culprits, ranges proven clear, those
clear only end to end, undecided ranges, skipped builds), its exit code and what that means,
in general (:data:`EXIT_CODES`, for ``--help`` and the docs) and for one run
(:meth:`Bisection.meaning`: exit 3 says "every other build checked" only where every range
called clear was checked build by build, else names the ranges clear only end to end). Made by
:func:`libraries.bisect.bisection.bisect`. Pure."""

from __future__ import annotations

from dataclasses import dataclass, field

from libraries.bisect.outcome import Outcome

NO_CULPRIT, BAD_INPUT, CULPRIT, UNDECIDABLE, CULPRIT_AND_UNDECIDED = 0, 252, 3, 4, 5
EXIT_CODES = {
    NO_CULPRIT: "no regression between the ends beyond the margin (or only progressions)",
    BAD_INPUT: "bad input: refused before anything was measured",
    CULPRIT: "culprit found, and every other range proven clear of a regression beyond the "
             "margin: build by build, or only end to end where the result says so (a -/+ pair "
             "of steps could hide inside such a range)",
    UNDECIDABLE: "could not decide: no culprit found, and an end or a range stayed undecided",
    CULPRIT_AND_UNDECIDED: "culprit found, but some ranges stayed undecided (another step may "
                           "hide there: see the undecided ranges)",
}
"""Every exit code of ``python -m libraries.bisect``, and what it means."""


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
    proven clear (by which comparison, or as the same files; they do not overlap), those of
    them proven only end to end (``a``, ``b``, what a look inside found), the ranges left
    undecided (with why), and the builds skipped (index -> why: could not be made, or did not
    run)."""

    ends: Outcome | None = None
    comparisons: list[Outcome] = field(default_factory=list)
    culprits: list[Culprit] = field(default_factory=list)
    clear: list[Outcome] = field(default_factory=list)
    undecided: list[tuple[int, int, str]] = field(default_factory=list)
    skipped: dict[int, str] = field(default_factory=dict)
    end_to_end: list[tuple[int, int, str]] = field(default_factory=list)

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

    def meaning(self, names: list[str]) -> str:
        """What this exit says, exactly: :data:`EXIT_CODES`' meaning, narrowed to what was
        checked. Exit 3 says "every other build checked" only when every range called clear
        is checked (:attr:`end_to_end` empty); else, as exits 4 and 5 do, it names the ranges
        clear only end to end and says a -/+ pair could hide inside them."""
        code = self.exit_code
        if code == NO_CULPRIT:
            return EXIT_CODES[code]
        loose = ", ".join(f"{names[a]} .. {names[b]}" for a, b, _ in self.end_to_end)
        hide = (f"{len(self.end_to_end)} clear only end to end ({loose}: their ends shown "
                "clear, not every build inside; a -/+ pair of steps could hide there)")
        if code == CULPRIT:
            if not self.end_to_end:
                return ("culprit found, and every other build checked: each range beside the "
                        "culprits proven clear of a regression beyond the margin pair by pair "
                        "or shown to be the same files")
            return ("culprit found, and every other range proven clear of a regression beyond "
                    f"the margin, {hide}")
        return EXIT_CODES[code] + (f"; of the ranges proven clear, {hide}"
                                   if self.end_to_end else "")

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
