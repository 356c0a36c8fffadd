"""The false-alarm rate of a whole night (or any run of many A/B tests), not of one test.

One A/B test calls a change within the margin a regression in at most ``alpha / 2`` of tests
(:mod:`libraries.ab.rounds`); a night judges dozens of series, so "at least one false
failure" grows with their number (30 tests at 2.5 % each: up to 53 %). The night is therefore
given one **family-wise level** :data:`NIGHT_LEVEL` (the chance that a night in which nothing
changed fails at least one A/B test on a regression or makes the gate exit 3), spent by
Bonferroni:

* :data:`TEST_SHARE` (a fifth) on the night's A/B tests: each of the ``n`` tests runs at the
  two-sided level ``2 * TEST_SHARE * NIGHT_LEVEL / n`` (so its false regression is at most
  ``TEST_SHARE * NIGHT_LEVEL / n``; the test splits it over its looks as always);
* the rest on the gate: each of the ``n`` ratio series it judges gets
  ``(1 - TEST_SHARE) * NIGHT_LEVEL / n`` for a false regression on that night, split over the
  gate's rules (:mod:`libraries.trend.ratio`).

Why not half and half: a night's A/B test tolerates the night-to-night scatter of the true
ratio (``AB_SCATTER``, 1 %), so alone it catches few steps under about 5 %; the gate, judging a
level of several nights, catches them, and its power is what the night's level buys
(``benchmarks/night_bench.py``: a 3 % step at 2.4 % per-round spread and 0.5 % night-to-night
scatter flagged by night k + 1 in 63 % with half and half, 70 % with a fifth to the tests;
no cell up to a 1 % scatter lost detection, and the nights with a false failure at a 2 %
scatter fell from 11.8 % to 9.1 %, the tests' part).

Why Bonferroni, not Holm or Benjamini-Hochberg: an A/B test here decides at sequential looks
by an interval against a margin and has no single p-value to sort (Holm and BH need them);
Bonferroni needs only each test's own level, holds under any dependence between the tests
(they share a machine and a night), and the bound stays true when the night judges more or
fewer series than planned: the stated level is recomputed from the number actually judged
(:func:`statement`). Its cost is power, measured in ``benchmarks/night_bench.py``.
"""

from __future__ import annotations

from dataclasses import dataclass

NIGHT_LEVEL = 0.05
"""The night's family-wise level: a night with no change fails a test or exits 3 at most this
often."""
TEST_SHARE = 0.2
"""The night's A/B tests' share of :data:`NIGHT_LEVEL`; the gate spends the rest."""
NIGHT_SERIES = 30
"""The night's planned number of A/B series when nothing else says (the nightly's
``--series``)."""


@dataclass(frozen=True)
class NightFamily:
    """A night's budget: ``level`` (family-wise) over ``size`` series."""

    level: float = NIGHT_LEVEL
    size: int = NIGHT_SERIES

    def __post_init__(self) -> None:
        if not 0.0 < self.level < 1.0:
            raise ValueError(f"night level: expected a number in (0, 1), e.g. 0.05; got "
                             f"{self.level!r}")
        if not isinstance(self.size, int) or self.size < 1:
            raise ValueError(f"night series: expected a whole number >= 1, got {self.size!r}")

    @property
    def test_alpha(self) -> float:
        """Each A/B test's two-sided level (``ALPHA`` of its looks): its false regression
        (one side) is the tests' share of the level over the series."""
        return 2.0 * TEST_SHARE * self.level / self.size

    @property
    def gate_alpha(self) -> float:
        """Each ratio series' two-sided level at the gate on one night, over all its rules:
        its false regression (one side) is the gate's share of the level over the series."""
        return gate_alpha(self.level, self.size)

    def as_dict(self) -> dict[str, float | int]:
        """What ``run.json`` keeps."""
        return {"level": self.level, "size": self.size, "test_alpha": self.test_alpha,
                "gate_alpha": self.gate_alpha}


def gate_alpha(level: float, series: int) -> float:
    """A ratio series' two-sided level on one night's gate when ``series`` share it: the
    gate's share ``1 - TEST_SHARE`` of the night's ``level``, as a false regression (one
    side) per series."""
    return 2.0 * (1.0 - TEST_SHARE) * level / max(series, 1)


def family_level(one_sided: list[float]) -> float:
    """The Bonferroni bound on a night's chance of any false regression: the sum of its
    series' one-sided levels (capped at 1)."""
    return min(1.0, float(sum(one_sided)))


def statement(judged: int, level: float, what: str = "series judged",
              scope: str = "night") -> str:
    """``"30 series judged; the night's family-wise level 0.05 (Bonferroni)"``: ``scope``
    ``night`` for a nightly's statement, ``run`` for any other run (a one-off A/B or duet
    run has no night)."""
    return f"{judged} {what}; the {scope}'s family-wise level {level:.3g} (Bonferroni)"


def tests_statement(levels: list[float], family: dict | None, unrecorded: int = 0) -> str:
    """What a run's A/B verdicts spent: ``levels`` are their one-sided false-regression
    levels (each metric's ``ALPHA / 2``). In a nightly (``family``: its ``run.json``
    ``family``, :meth:`NightFamily.as_dict`), the spend against the tests' share of the
    night's level, and where the rest is held; ``unrecorded``: verdicts whose records keep no
    level (counted in none of the figures)."""
    spent = family_level(levels)
    missing = (f"; {unrecorded} more without a recorded level (not counted)"
               if unrecorded else "")
    if not family:
        return statement(len(levels), spent, "A/B series judged", "run") + missing
    level = float(family["level"])
    share = TEST_SHARE * level
    verdict = ("within" if spent <= share * (1 + 1e-9) else
               f"OVER (planned for {family['size']} series)")
    return (f"{len(levels)} A/B series judged by tonight's tests: {spent:.3g} of the night's "
            f"family-wise level {level:g} (Bonferroni), {verdict} the tests' share "
            f"{share:.3g}; the gate holds the other {level - share:.3g} (trend summary)"
            + missing)
