"""The bisection simulation's own parts (benchmarks.bisect_sim): copies of builds, what the
search knows of them, and the check that a result claims only what it proved."""

from __future__ import annotations

import numpy as np

from benchmarks.bisect_sim import (
    CLAIMS,
    Planted,
    claims_hold,
    claims_row,
    plant,
    run_cell,
    same_on,
)
from libraries.bisect.bisection import Bisection, Culprit
from libraries.bisect.outcome import Outcome


def test_copies_share_their_content_between_steps_and_other_builds_do_not():
    rng = np.random.default_rng(3)
    planted = plant((-24.0,), 8, False, rng, copies=True)
    (step,) = planted.steps
    assert planted.content == tuple(int(i >= step) for i in range(8))
    assert plant((-24.0,), 8, False, rng).content == tuple(range(8))


def test_what_the_search_knows_of_copies_hashed_or_learned():
    planted = Planted([100.0] * 3, [], None, (), (0, 0, 0))
    seen: set[int] = set()
    assert same_on(planted, "-", seen) is None
    assert same_on(planted, "hashed", seen)(0, 2)
    learned = same_on(planted, "learned", seen)
    assert not learned(0, 2)
    seen.update((0, 2))
    assert learned(0, 2) and not learned(0, 1)


def _result(end_to_end: list[tuple[int, int, str]]) -> Bisection:
    result = Bisection(culprits=[Culprit(6, 7, Outcome(6, 7, "regression", -8.0, -9.0, -7.0))])
    result.clear = [Outcome(0, 4, "no change", 0.0, -1.0, 1.0),
                    Outcome(4, 6, "no change", 0.0, -1.0, 1.0),
                    Outcome(7, 8, "no change", 0.0, -1.0, 1.0)]
    result.end_to_end = end_to_end
    return result


def test_a_claim_holds_only_where_every_clear_range_is_checked_or_said_end_to_end():
    planted = Planted([100.0] * 9, [2, 4, 7], None, (-4.0, 4.0, -8.0), tuple(range(9)))
    assert claims_hold(_result([(0, 4, ""), (4, 6, "")]), planted)
    assert not claims_hold(_result([(0, 4, "")]), planted)  # 4 .. 6 called checked: it is not
    copies = Planted([100.0] * 9, [7], None, (-8.0,), (0,) * 7 + (1,) * 2)
    assert claims_hold(_result([]), copies)  # 0 .. 6 are the same files: checked


def test_copies_known_up_front_end_exit_3_after_one_comparison():
    tallies = run_cell(CLAIMS["one -24 copies, hashed"], 0.083, 20, 8, seed=1, cell=0)
    assert all(t.exit_code == 3 and t.comparisons == 1 and t.every_build and t.claims
               for t in tallies)
    line = claims_row("one -24 copies, hashed", 8, 0.083, tallies)
    assert line.startswith("| one -24 copies, hashed | 8 | 8.3 % | 20 | 100.0% | 20 / 0 / 0 / 0 "
                           "| 20/20 | 20 | 20 / 0 / 0 / 0 | 0 | 1 (1) | ")
