"""The capacity benchmark's whole-window analysis: the windows read from records as shares of
their knee, the misses counted per share, and the suite's confirmation rule run on windows
drawn from them."""

from __future__ import annotations

import pytest

from benchmarks.capacity_windows import Window, resample, table, windows
from libraries.capacity.search_settings import LatencyGoal

GOAL = LatencyGoal(0.99, 25.0)


def _record(knee: float, trials: list[tuple[float, float]], verified: tuple[float, float]):
    def trial(rate: float, lost: float) -> dict:
        return {"rate": rate, "duration_s": 30.0, "loss_ratio": lost}
    return {"evidence": {
        "capacity_confirmation": {"proxy": {"goal": "p99<=25ms", "knee": knee,
                                            "trials": [trial(*t) for t in trials]}},
        "capacity_verification": {"proxy": trial(*verified)}}}


def test_windows_are_the_confirmation_trials_and_the_verification_as_shares_of_the_knee():
    records = [_record(8000, [(8000, 0.2), (7200, 0.001)], (7200, 0.02)),
               {"evidence": {"capacity_confirmation": {}}}]
    found = windows(records)
    assert [(w.share, w.lost, w.kind) for w in found] == [
        (1.0, 0.2, "confirmation"), (0.9, 0.001, "confirmation"), (0.9, 0.02, "verification")]
    assert {w.goal for w in found} == {GOAL} and {w.bin for w in found} == {1.0, 0.9}


def test_the_table_counts_misses_of_the_confirmations_bar_and_of_the_goal_per_share():
    pool = [Window(0.95, lost, GOAL, 30.0, "confirmation") for lost in (0.001, 0.007, 0.02)]
    pool.append(Window(0.55, 0.0, GOAL, 30.0, "verification"))
    rows = table(pool).splitlines()[2:]
    assert rows[0].startswith("| 0.5-0.6 | 1 | 0/1 (")
    assert rows[1].startswith("| 0.9-1.0 | 3 | 2/3 (") and "| 1/3 (" in rows[1]
    assert rows[1].endswith("| 0.70%, 2.00% |")


def _pool(miss_from: float, flaky: tuple[float, float] = (0.0, 0.0)) -> list[Window]:
    """Ten windows per bin from 0.1 to 1.0 of the knee: every window at or above
    ``miss_from`` misses; in the ``flaky`` band half of them do."""
    pool = []
    for tenth in range(1, 11):
        share = tenth / 10 + 0.05
        for index in range(10):
            flaky_miss = flaky[0] <= share < flaky[1] and index % 2 == 0
            lost = 0.05 if share >= miss_from or flaky_miss else 0.0
            pool.append(Window(share, lost, GOAL, 30.0, "confirmation"))
    return pool


def test_a_steep_miss_curve_gives_the_same_figure_every_time():
    """The same figure, under the step at 0.9: the safe end of the crossing's interval
    (issue 60), which a dozen windows of a step leave far below it (gentle curves through
    them stay plausible)."""
    found = resample(_pool(miss_from=0.9), sets=10)
    assert found.within == 1.0 and found.verified == 1.0
    assert 0.4 <= found.p10 == found.p90 < 0.9


def test_a_wide_band_of_flaky_windows_scatters_the_figure_and_fails_verifications():
    found = resample(_pool(miss_from=0.9, flaky=(0.5, 0.9)), sets=20)
    assert found.within < 0.5 and found.verified < 0.5
    # the miss curve puts 10 % of misses under the flaky band's start (half miss in it), and
    # its safe end further down, scattered by a factor of two
    assert found.p90 < 0.5 and found.p90 > 1.5 * found.p10


def test_no_windows_or_mixed_goals_are_refused():
    with pytest.raises(ValueError, match="no whole-window trials"):
        resample([])
    mixed = [Window(0.5, 0.0, GOAL, 30.0, "confirmation"),
             Window(0.5, 0.0, LatencyGoal(0.99, 10.0), 30.0, "confirmation")]
    with pytest.raises(ValueError, match="mix goals"):
        resample(mixed)
