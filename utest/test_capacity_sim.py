"""The capacity simulation (benchmarks/capacity_sim.py): its curves, and the suite's own windows
and miss curve run against them (no testbed)."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.capacity_sim import HOLDOUT, Curve, one_test, simulate, table


@pytest.mark.parametrize(("rise", "floor"), [(0.15, 0.0), (0.3, 0.03), (0.6, 0.03)])
def test_a_curve_crosses_each_share_where_it_says(rise, floor):
    curve = Curve(rise, floor)
    for share in (0.1, 0.5, 0.9):
        assert curve.miss(curve.crossing(share)) == pytest.approx(share)
    bare = Curve(rise, 0.0)  # the floor aside, from 10 % to 90 % over ``rise`` of rate
    assert bare.crossing(0.9) / bare.crossing(0.1) == pytest.approx(1.0 + rise)


def test_a_share_under_the_floor_has_no_rate():
    assert Curve(0.3, 0.2).crossing(0.1) == 0.0


def test_a_steep_curve_gives_figures_that_hold_the_true_rate():
    outcomes = simulate(Curve(0.15, 0.0), 6, seed=3)
    figures = [o for o in outcomes if not o.why]
    assert len(figures) >= 5
    assert sum(o.covered for o in figures) >= 4
    for outcome in figures:
        assert 0.0 < outcome.width < 1.5 and 0 <= outcome.held_out <= HOLDOUT
        assert outcome.within_noise or not outcome.strict
        assert outcome.windows >= 13  # the plan's 12 and the verification


def test_a_curve_missing_half_the_windows_everywhere_gives_no_figure_and_says_why():
    outcome = one_test(Curve(0.3, 0.5), np.random.default_rng(1))
    assert outcome.why and not outcome.covered and np.isnan(outcome.width)


def test_the_table_has_a_row_per_curve():
    text = table(2, seed=5, curves=((0.15, 0.0), (0.3, 0.03)))
    lines = text.splitlines()
    assert len(lines) == 4 and lines[2].startswith("| 15% | 0% | ")
    assert lines[3].startswith("| 30% | 3% | ")
