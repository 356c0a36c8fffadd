"""One comparison of a bisection and what it proves: its :class:`Outcome`, whether it proves a
range clear of a regression beyond the margin (:func:`proven_clear`), whether an undecided
half cannot hold the step looked for (:func:`rules_out`), and the texts that say why, in plain
words (:func:`clear_words`: "the same files", "measured the same within +-3 %", "no
regression beyond 3 %"). A range whose ends are the same files (:data:`SAME`) is clear without
a comparison: its outcome is made, not measured. Pure."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

SAME = "same files"
"""The verdict of a range whose two ends run the same files (by content: every file they name
and load has the same sha256, and they set the same things): clear without measuring."""


@dataclass(frozen=True)
class Outcome:
    """One A/B comparison of builds ``a`` (baseline) and ``b`` (indices in the range).

    ``verdict``: the A/B engine's for the metric followed (``regression``, ``progression``,
    ``no change``, ``inconclusive``), ``failed`` when the run gave no verdict (``detail``
    says why), or :data:`SAME` when the two builds are the same files (not measured: no
    change, rounds or minutes). Changes are b against a, in percent, with the interval's
    ends."""

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

    def describe(self) -> str:
        """The comparison's console line after its builds' names: ``regression -4.1 % [-5.9,
        -2.2] after 20 rounds, 1.6 min`` (a failed run: why)."""
        shown = self.verdict
        if self.change_pct is not None:
            shown += f" {self.change_pct:+.1f} %"
            if self.low_pct is not None and self.high_pct is not None:
                shown += f" [{self.low_pct:+.1f}, {self.high_pct:+.1f}]"
        if self.rounds:
            shown += f" after {self.rounds} rounds"
        shown += f", {self.minutes:.1f} min"
        return shown + (f": {self.detail}" if self.detail and self.verdict == "failed" else "")

    def as_record(self, names: list[str]) -> dict[str, Any]:
        """The JSON form, with the builds' names."""
        return {"a": names[self.a], "b": names[self.b], "a_index": self.a, "b_index": self.b,
                "verdict": self.verdict, "change_pct": self.change_pct,
                "low_pct": self.low_pct, "high_pct": self.high_pct, "rounds": self.rounds,
                "minutes": round(self.minutes, 2), "attempt": self.attempt,
                "detail": self.detail}


def slower(outcome: Outcome) -> bool:
    """The interval lies wholly below no change: b measured slower, if not beyond the
    margin."""
    return outcome.high_pct is not None and outcome.high_pct < 0.0


def chain(outcomes: list[Outcome]) -> tuple[float, float, float] | None:
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


def agree(found: tuple[float, float, float], ends: Outcome) -> bool:
    """True unless each estimate lies outside the other's interval."""
    if ends.change_pct is None or ends.low_pct is None or ends.high_pct is None:
        return True
    return (ends.low_pct <= found[0] <= ends.high_pct) or (found[1] <= ends.change_pct
                                                           <= found[2])


def show(change: Outcome | tuple[float, float, float]) -> str:
    if isinstance(change, Outcome):
        change = (change.change_pct or 0.0, change.low_pct or 0.0, change.high_pct or 0.0)
    return f"{change[0]:+.1f} % [{change[1]:+.1f}, {change[2]:+.1f}]"


def proven_clear(outcome: Outcome, margin_pct: float | None) -> bool:
    """True when ``outcome`` proves its range holds no regression beyond the margin: the same
    files at both ends (:data:`SAME`); with the margin given, :func:`clear_of_regression`;
    without it, a ``no change`` verdict."""
    if outcome.verdict == SAME:
        return True
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


def why_text(outcome: Outcome) -> str:
    interval = (f" {outcome.change_pct:+.1f} % [{outcome.low_pct:+.1f}, {outcome.high_pct:+.1f}]"
                if None not in (outcome.change_pct, outcome.low_pct, outcome.high_pct) else "")
    said = f"{outcome.verdict}{interval}"
    return f"{said}: {outcome.detail}" if outcome.detail else said


def spread_text(pair: Outcome, known: Outcome, why: str, clear: bool) -> str:
    if not clear:
        return f"{known.a} -> {known.b} changed, {pair.a} -> {pair.b} undecided: {why}"
    return (f"{known.a} -> {known.b} changed ({show(known)}), but no part of it shows the "
            f"change ({pair.a} -> {pair.b}: {why}): the step is spread over several builds, "
            "within each comparison's margin, or missed by one of them")


def same_files(a: int, b: int) -> Outcome:
    """The outcome of builds ``a`` and ``b`` found to be the same files: not measured."""
    return Outcome(a, b, SAME, 0.0, 0.0, 0.0, detail="not measured: every file the A/B "
                   "fingerprint hashes for the two builds (what they name, and what it finds "
                   "they load) has the same sha256, and they set the same things")


def clear_words(outcome: Outcome, margin_pct: float | None) -> str:
    """How ``outcome`` proved its range clear, in plain words: the same files (not measured),
    measured the same (``no change``: the interval inside +-the margin), or no regression
    beyond the margin (an interval above minus the margin that reaches past plus it: b may be
    faster)."""
    if outcome.verdict == SAME:
        return "the same files (not measured)"
    interval = show(outcome) if outcome.low_pct is not None else ""
    if outcome.verdict == "no change":
        within = f"+-{margin_pct:g} %" if margin_pct is not None else "the A/B margin"
        return f"measured the same: {interval}, within {within}".replace(": ,", ",")
    return (f"no regression beyond {margin_pct:g} %: {interval} (above -{margin_pct:g} %; it "
            "may be faster)" if margin_pct is not None else f"{outcome.verdict} {interval}")
