"""A machine that drifted while a path's windows ran (:mod:`libraries.capacity.drift`): the same
rate judged differently in the windows' first and second half is stated in the claim, the
record and a note; a steady machine's windows are not flagged."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from libraries.capacity.confirm import WindowPlan
from libraries.capacity.drift import drift_test, firth_design
from libraries.capacity.limits import _drifted
from libraries.capacity.misscurve import MissWindow, firth_fit
from libraries.capacity.search_settings import LatencyGoal
from libraries.results.measurement import Measurement
from utest.test_capacity_misscurve import window

GOAL = LatencyGoal(0.99, 25.0)
# in the order they ran: early, the windows up to 9,000 held; late, windows at 6,500-8,000
# missed where early ones at 7,000-8,800 had held (the machine slowed by about a third)
EARLY = ((10_000, True), (8_500, False), (7_000, False), (5_500, False), (9_000, False),
         (9_500, True), (8_800, False))
LATE = ((8_000, True), (7_000, True), (6_000, False), (6_500, True), (5_500, False),
        (6_200, False), (6_800, True))


def _windows(pairs) -> list[MissWindow]:
    return [MissWindow(rate, 30.0, 0.0, miss) for rate, miss in pairs]


def test_windows_held_early_and_missed_late_at_the_same_rates_are_a_drift():
    drift = drift_test(_windows(EARLY + LATE))
    assert drift.detected and drift.p_value < 0.01
    assert (drift.early, drift.late) == ((2, 7), (4, 7))
    assert 0.5 < drift.factor < 0.8  # the second half's curve at ~0.69 x the first's rates
    assert drift.statement == (
        "the machine drifted during the test: at the same rate the windows of its second half "
        f"missed more than those of its first, its curve at {drift.factor:.2f} x the first "
        "half's rates (2 of 7 early and 4 of 7 late windows missed; penalised likelihood "
        f"ratio test p = {drift.p_value:.2g})")
    assert drift.as_record()["detected"] is True


@pytest.mark.parametrize("turn", [7_500, 6_600])
def test_a_steady_machine_judging_every_rate_alike_is_no_drift(turn):
    """The same rates in the same order, each window missing above one rate throughout."""
    drift = drift_test(_windows((rate, rate > turn) for rate, _miss in EARLY + LATE))
    assert not drift.detected and drift.statement == "" and drift.p_value > 0.5


def test_windows_too_few_for_a_curve_in_each_half_are_not_tested():
    drift = drift_test(_windows(EARLY[:4]))
    assert drift.p_value is None and not drift.detected
    assert drift.why == "1 of 4 windows missed: too few for a curve in each half"


def test_the_general_fit_agrees_with_the_two_column_one():
    x = np.log(np.array([5000, 6000, 6500, 6800, 7200, 7600, 8000.0]) / 6800)
    y = np.array([0, 0, 1, 0, 1, 1, 1.0])
    beta, _penalised = firth_design(np.column_stack([np.ones(len(x)), x]), y)
    assert beta == pytest.approx(firth_fit(x, y), rel=1e-5)


def test_a_drift_is_stated_in_the_claim_the_record_and_a_note(caplog):
    trials = [window(rate, miss) for rate, miss in EARLY + LATE]
    confirmation = WindowPlan("proxy", GOAL, 30.0, 9_000.0, 1_000.0, 11_000.0,
                              trials=trials).result()
    statement = confirmation.drift.statement
    assert statement and confirmation.semantics.endswith(f"; {statement}")
    assert confirmation.as_record()["drift"]["detected"] is True
    measurement = Measurement("ssl_proxy", "kernel", {})
    with caplog.at_level(logging.WARNING):
        _drifted(measurement, {"proxy": confirmation})
    assert measurement.notes == [f"proxy path: {statement}"]
    assert f"proxy path: {statement}" in caplog.text
    steady = WindowPlan("proxy", GOAL, 30.0, 9_000.0, 1_000.0, 11_000.0, trials=[
        window(rate, rate > 7_500) for rate, _miss in EARLY + LATE]).result()
    quiet = Measurement("ssl_proxy", "kernel", {})
    _drifted(quiet, {"proxy": steady})
    assert quiet.notes == [] and "drifted" not in steady.semantics
