"""The miss curve (:mod:`libraries.capacity.misscurve`) and the windows placed to fit it
(:mod:`libraries.capacity.confirm`): windows drawn from a known logistic miss curve (fixed
seeds), the interval's coverage of the true rate, and a clear reason wherever no figure can be
fitted honestly."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import numpy as np
import pytest

from libraries.capacity.confirm import (
    EXTRA,
    START,
    WindowPlan,
    confirm_capacity,
    resume,
    with_windows,
)
from libraries.capacity.misscurve import (
    MissWindow,
    firth_fit,
    fit_miss_curve,
    floor_refutes,
)
from libraries.capacity.search_settings import LatencyGoal
from libraries.capacity.trials import CapacityTrial

GOAL = LatencyGoal(0.99, 25.0)
MIDDLE = 7000.0
"""Where the true curve misses half the windows (this VM at p99<=25ms: none at 52 % of the
closed-loop maximum 10.7k, all at 75 %)."""


def true_rate(slope: float, share: float = 0.1) -> float:
    """The rate where the true curve misses ``share`` of the windows."""
    return MIDDLE * math.exp(math.log(share / (1 - share)) / slope)


def window(rate: float, missed: bool, seconds: float = 30.0) -> CapacityTrial:
    """A 30 s window at ``rate`` that lost 5 % (missed) or 0.1 % (held)."""
    sent = round(rate * seconds)
    return CapacityTrial(rate=rate, duration=seconds, ran_s=seconds, intended=sent, sent=sent,
                         failed=0, over={25.0: round(sent * (0.05 if missed else 0.001))},
                         achieved=rate, latency={"p99": 20.0}, generator_cpu=0.3, tool="wrk2",
                         processes=1, seconds=seconds + 1)


def drawn(slope: float, seed: int):
    """``measure(path, seconds, rate)``: windows that miss with the true logistic chance."""
    rng = np.random.default_rng(seed)

    def measure(path: str, seconds: float, rate: float) -> CapacityTrial:
        chance = 1.0 / (1.0 + math.exp(-slope * math.log(rate / MIDDLE)))
        return window(rate, bool(rng.random() < chance), seconds)
    return measure


def test_the_interval_covers_the_true_rate_in_most_draws_of_a_known_curve():
    """100 tests of 12 windows each (the default), placed by the suite's own plan from a knee
    of 8,000 on a curve that rises from 10 % to 90 % over 15 % of rate: the 90 % interval
    covers the true 10 % rate in at least 85 of them (86 at this seed; 91 at another, the
    misses mostly an interval under the truth: the conservative side), and a figure is refused
    in at most 5 (0 here). Median width: 53 % of the figure (12 windows are few)."""
    slope = 30.0
    truth, covered, refused, widths = true_rate(slope), 0, 0, []
    measure = drawn(slope, seed=52)
    for _test in range(100):
        confirmation = confirm_capacity(measure, "proxy", 8000.0, GOAL, 30.0, 1000.0,
                                        top=11000.0, windows=12)
        curve = confirmation.curve
        if curve.rate is None:
            refused += 1
            continue
        assert curve.low <= curve.rate <= curve.high
        covered += curve.low <= truth <= curve.high
        widths.append((curve.high - curve.low) / curve.rate)
    assert covered >= 85 and refused <= 5, (covered, refused)
    assert 0.2 < float(np.median(widths)) < 0.8  # an honest width for 12 windows


def test_a_fixed_design_of_a_gentle_curve_is_covered_too():
    """16 windows spread over 0.45-0.8 of 10.7k, a curve rising from 10 % to 90 % over 30 %
    of rate (issue 35's VM): the interval covers the true rate in at least 85 % of the draws
    fitted, and most are fitted (85 of 86 fitted of 100 at this seed)."""
    slope, rng = 15.0, np.random.default_rng(35)
    truth, rates = true_rate(slope), np.linspace(0.45 * 10_700, 0.8 * 10_700, 16)
    covered = fitted = 0
    for _draw in range(100):
        chance = 1 / (1 + np.exp(-slope * np.log(rates / MIDDLE)))
        curve = fit_miss_curve([MissWindow(r, 30.0, 0.0, bool(m))
                                for r, m in zip(rates, rng.random(16) < chance, strict=True)])
        if curve.rate is not None:
            fitted += 1
            covered += curve.low <= truth <= curve.high
    assert fitted >= 80 and covered >= 0.85 * fitted, (fitted, covered)


def test_the_interval_of_the_miss_share_at_the_figure_contains_the_stated_share():
    measure = drawn(30.0, seed=7)
    curve = confirm_capacity(measure, "proxy", 8000.0, GOAL, 30.0, 1000.0, top=11000.0).curve
    assert curve.rate is not None
    assert curve.share_low < 0.1 == pytest.approx(curve.share_high)  # at the safe end
    assert curve.miss_probability(curve.rate) == pytest.approx(0.1)
    assert curve.miss_probability(curve.figure) < 0.1


def test_perfectly_separated_windows_still_give_a_finite_gentle_fit():
    """Every window under 6,900 held and every one above missed: the plain fit's slope runs to
    infinity; Firth's stays finite, and the figure lies under where the windows turn."""
    x = np.log(np.array([5000, 6000, 6500, 6800, 7200, 7600, 8000.0]) / 6800)
    y = np.array([0, 0, 0, 0, 1, 1, 1.0])
    intercept, slope = firth_fit(x, y)
    assert math.isfinite(intercept) and 0 < slope < 200
    rates = [5000, 5500, 6000, 6500, 6800, 7200, 7600, 8000]
    curve = fit_miss_curve([MissWindow(r, 30.0, 0.0, r > 6900) for r in rates])
    assert curve.rate is not None and curve.rate < 6900 and curve.high < 7300


def test_a_steep_separated_fit_converges_where_its_steps_only_creep():
    """Simulated windows (a curve rising from 10 % to 90 % over 15 % of rate): all 15 under
    19,700 held, the two above missed. The Newton steps crept on by 3e-8 at a slope of 22.5,
    never under an absolute bound, and the test gave no figure ("did not converge")."""
    windows = [(19831, True), (16857, False), (13882, False), (10907, False), (20823, True),
               (18284, False), (19042, False), (19433, False), (19631, False), (13229, False),
               (13324, False), (16245, False), (16087, False), (15721, False), (18699, False),
               (18703, False), (18880, False)]
    curve = fit_miss_curve([MissWindow(r, 30.0, 0.0, m) for r, m in windows])
    assert curve.why == ""
    assert curve.slope == pytest.approx(22.5, abs=0.1)
    assert 11000 < curve.low < curve.rate < curve.high < 19831


@pytest.mark.parametrize(("rates", "missed", "why"), [
    ([5000, 6000, 7000], [False, False, True],
     "only 3 windows of 30 s (at least 6 needed)"),
    ([5000, 6000, 7000, 8000, 9000, 10000], [False] * 6,
     "all 6 windows of 30 s held (up to 10000 requests/s): the crossing is above the rates "
     "measured"),
    ([5000, 6000, 7000, 8000, 9000, 10000], [True] * 6,
     "all 6 windows of 30 s missed (down to 5000 requests/s): the crossing is below the rates "
     "measured"),
    ([5000, 6000, 7000, 8000, 9000, 10000], [False] * 5 + [True],
     "1 of 6 windows of 30 s missed: at least 2 that missed and 2 that held are needed around "
     "the crossing"),
    ([5000, 6000, 7000, 8000, 9000, 10000], [True, True, True, False, False, False],
     "the miss share does not rise with rate over the 6 windows (3 missed)"),
])
def test_windows_no_honest_curve_fits_give_no_figure_and_say_why(rates, missed, why):
    curve = fit_miss_curve([MissWindow(r, 30.0, 0.0, m) for r, m in zip(rates, missed,
                                                                         strict=True)])
    assert curve.rate is None and curve.low is None and curve.why == why
    assert curve.as_record()["why"] == why and curve.as_record()["rate"] is None


def test_windows_the_fit_cannot_converge_on_give_no_figure_and_a_json_record():
    """CI's e2e job beside the unit tests, 2026-11-28: 10 direct windows of 5 s, 9 at the
    search's lowest rate and one at the knee, 4 missed: the Firth fit did not converge, its
    NaN coefficients went into the record and the test failed writing it ("Out of range
    float values are not JSON compliant")."""
    lost = (0.0114, 0.0052, 0.0126, 0.0098, 0.0096, 0.0046, 0.0158, 0.0096, 0.0)
    windows = [MissWindow(1170.0, 5.0, 0.0125, True)] + \
        [MissWindow(1000.0, 5.0, share, share > 0.01) for share in lost]
    curve = fit_miss_curve(windows)
    assert curve.rate is None and curve.intercept is None and curve.slope is None
    assert curve.why == ("the miss curve cannot be fitted from the 10 windows (4 missed, "
                         "1000..1170 requests/s): the fit did not converge")
    assert json.loads(json.dumps(curve.as_record(), allow_nan=False))["why"] == curve.why


def test_a_crossing_outside_the_rates_measured_is_an_extrapolation():
    """Two windows missed at the very top, the rest held far below: the 10 % crossing the fit
    puts lies beyond what any window measured, and no figure is made of it."""
    rates = [9000, 9100, 9200, 9300, 9990, 10000]
    curve = fit_miss_curve([MissWindow(r, 30.0, 0.0, r >= 9990) for r in rates], share=0.02)
    assert curve.rate is None
    assert "lies outside the rates measured (9000..10000): an extrapolation" in curve.why or \
        "unbounded" in curve.why


def test_windows_of_another_length_are_refused_by_the_model_and_left_out_by_the_plan():
    with pytest.raises(ValueError, match="windows of one length only"):
        fit_miss_curve([MissWindow(5000, 30.0, 0.0, False), MissWindow(5000, 10.0, 0.0, True)])
    confirmation = confirm_capacity(drawn(30.0, 1), "proxy", 8000.0, GOAL, 30.0, 1000.0,
                                    top=11000.0)
    more = with_windows(confirmation, [window(7000.0, True, 10.0)], "verification")
    assert more.trials == confirmation.trials and more.curve == confirmation.curve


def test_a_path_that_holds_everywhere_stops_at_the_top_and_says_so():
    """No window missed up to the highest rate a window may run at: nothing above to try, no
    figure, the reason named (not a made-up rate at the top)."""
    asked: list[float] = []

    def measure(path: str, seconds: float, rate: float) -> CapacityTrial:
        asked.append(rate)
        return window(rate, False, seconds)

    confirmation = confirm_capacity(measure, "proxy", 8000.0, GOAL, 30.0, 1000.0,
                                    top=9000.0)
    assert confirmation.rate is None and max(asked) == 9000.0
    assert len(asked) <= 12 + EXTRA
    assert confirmation.semantics.startswith("no figure for p99<=25ms from")
    assert "held (up to 9000 requests/s): the crossing is above the rates measured" in \
        confirmation.semantics


def test_the_plan_starts_from_the_knee_then_halves_the_gap_where_a_steep_curve_turns():
    asked: list[float] = []

    def measure(path: str, seconds: float, rate: float) -> CapacityTrial:
        asked.append(rate)
        return window(rate, rate > 6_600.0, seconds)

    confirmation = confirm_capacity(measure, "proxy", 8000.0, GOAL, 30.0, 1000.0,
                                    top=11000.0)
    assert asked[:len(START)] == [8000.0 * s for s in START]
    # 6800 missed and 5600 held: the next halves that gap, and so on around the turn
    assert asked[len(START)] == pytest.approx((6800 * 5600) ** 0.5)
    assert sum(6_000 < r < 7_200 for r in asked) >= 5
    assert confirmation.crossing is not None and 5_000 < confirmation.crossing <= 6_600
    assert confirmation.rate == confirmation.curve.low < confirmation.crossing  # the safe end
    record = confirmation.as_record()
    assert record["interval"]["level"] == 0.9 and record["model"]["windows"] == len(asked)
    assert [t["kind"] for t in record["trials"]] == ["plan"] * len(asked)


def test_with_one_miss_under_windows_that_held_the_plan_climbs_past_them():
    """The direct path on this VM (issue 52's benchmark): the knee window at 22,520 held, the
    one at 19,142 missed, and every window above it held up to 24,000. The plan ran its next
    16 windows all at 20,099 (1.05 x the one miss), never a second miss and no figure; now each
    goes above every rate tried until a second window misses."""
    asked: list[float] = []

    def measure(path: str, seconds: float, rate: float) -> CapacityTrial:
        asked.append(rate)
        return window(rate, rate > 24_000.0 or abs(rate - 19_142.0) < 1.0, seconds)

    confirmation = confirm_capacity(measure, "direct", 22_520.0, GOAL, 30.0, 1000.0,
                                    top=30_000.0)
    assert asked[1] == pytest.approx(19_142.0)
    assert asked[len(START):len(START) + 2] == pytest.approx([22_520 * 1.05,
                                                             22_520 * 1.05 ** 2])
    assert max(asked.count(rate) for rate in asked) <= 3
    assert confirmation.curve.missed >= 2 and confirmation.rate is not None


def test_with_one_hold_over_windows_that_missed_the_plan_descends_past_them():
    asked: list[float] = []

    def measure(path: str, seconds: float, rate: float) -> CapacityTrial:
        asked.append(rate)
        return window(rate, rate > 4_000.0 and abs(rate - 5_600.0) > 1.0, seconds)

    confirmation = confirm_capacity(measure, "proxy", 8000.0, GOAL, 30.0, 1000.0,
                                    top=11000.0)
    assert asked[len(START)] == pytest.approx(4_400.0 / 1.05)
    assert max(asked.count(rate) for rate in asked) <= 3
    assert confirmation.curve.missed >= 2 and len(asked) - confirmation.curve.missed >= 2


def test_the_message_says_what_the_figure_claims():
    confirmation = confirm_capacity(drawn(30.0, 3), "proxy", 8000.0, GOAL, 30.0, 1000.0,
                                    top=11000.0)
    curve = confirmation.curve
    text = confirmation.semantics
    assert text == (f"p99<=25ms missed in <= 10% of 30 s windows at {_k(curve.low)} req/s (95% "
                    f"confidence; the 10% crossing {_k(curve.rate)} [{_k(curve.low)}, "
                    f"{_k(curve.high)}])")
    again = replace(confirmation, knee=1.0)
    assert again.semantics == text  # the claim is the curve's, not the knee's


def _k(value: float) -> str:
    return f"{value / 1000:.3g}k"


# kernel 3node, quiet, p99<=25ms (issue 52's held-out benchmark, its second test): the 12
# planned windows (rate, missed) and the verification window at the figure, which missed
REAL_PLAN = ((28121, True), (23903, False), (19684, False), (15466, False), (29527, True),
             (25926, True), (24894, False), (25405, False), (25664, True), (22786, False),
             (21304, False), (24878, False))
REAL_VERIFICATION = (23587, True)


def test_a_verification_that_undoes_the_fit_earns_the_plans_extra_windows():
    """The 12 windows fitted a figure; the verification window at it missed and the 13 gave
    no figure (the crossing's interval unbounded below), though every window under 22,800
    held. The plan's extra windows then go where the refit lacks them and a figure stands,
    inside the windows measured; without more windows there is none, as before."""
    plan = WindowPlan("proxy", GOAL, 30.0, 28121.0, 1000.0, 28121.0 * 1.1, 0.1, 0.9, 12,
                      trials=[window(rate, miss) for rate, miss in REAL_PLAN])
    confirmation = plan.result()
    assert confirmation.rate is not None  # what the plan fitted
    verified = with_windows(confirmation, [window(*REAL_VERIFICATION)], "verification")
    assert verified.rate is None and "unbounded" in verified.curve.why
    asked: list[float] = []

    def measure(path: str, seconds: float, rate: float) -> CapacityTrial:
        asked.append(rate)  # this testbed: held up to 23,000, missed above 25,500
        return window(rate, rate > 25_500 or (rate > 23_000 and len(asked) % 2 == 0), seconds)

    resumed = resume(verified, measure, plan)
    assert 1 <= len(asked) <= EXTRA
    assert resumed.crossing is not None and 15_466 < resumed.crossing < 23_587, \
        resumed.semantics
    assert resumed.rate is not None and resumed.rate < resumed.crossing
    assert resumed.kinds == (*verified.kinds, *["plan"] * len(asked))
    assert resume(resumed, measure, plan) is resumed  # fitted: nothing more to run
    spent = WindowPlan("proxy", GOAL, 30.0, 28121.0, 1000.0, 28121.0 * 1.1, 0.1, 0.9, 12,
                       extra=EXTRA)
    assert resume(verified, measure, spent) is verified


def test_the_figure_is_the_safe_end_of_the_crossings_interval():
    """Issue 60: the claim is made at the lowest crossing the windows leave plausible, a
    one-sided bound at (1 + level) / 2, and the record keeps the crossing beside it."""
    windows = [MissWindow(r, 30.0, 0.0, r > 6_700) for r in range(5_000, 9_000, 250)]
    curve = fit_miss_curve(windows, level=0.9)
    assert curve.figure == curve.low < curve.rate < curve.high
    assert curve.confidence == pytest.approx(0.95)
    assert fit_miss_curve(windows, level=0.8).confidence == pytest.approx(0.9)
    record = curve.as_record()
    assert (record["figure"], record["rate"], record["confidence"]) == \
        (curve.low, curve.rate, curve.confidence)


def test_on_a_curve_with_a_floor_the_figure_holds_where_the_crossing_did_not():
    """30 tests of the suite's plan on a curve rising from 10 % to 90 % over 60 % of rate
    whose windows also miss 8 % of the time at any rate (a shared machine's hiccups): a window
    at the figure misses within the stated 10 % in at least 90 % of the tests with a figure
    (20 of 21 at this seed), at the fitted crossing in far fewer (8 of 21)."""
    slope, floor, rng = 2 * math.log(9) / math.log(1.6), 0.08, np.random.default_rng(60)

    def chance(rate: float) -> float:
        return floor + (1 - floor) / (1 + math.exp(-slope * math.log(rate / MIDDLE)))

    def measure(path: str, seconds: float, rate: float) -> CapacityTrial:
        return window(rate, bool(rng.random() < chance(rate)), seconds)

    curves = [confirm_capacity(measure, "proxy", 8000.0, GOAL, 30.0, 1000.0, top=12_600.0,
                               windows=12).curve for _test in range(30)]
    figures = [c for c in curves if c.figure is not None]
    assert len(figures) >= 15
    assert sum(chance(c.figure) <= 0.1 for c in figures) >= 0.9 * len(figures)
    assert sum(chance(c.rate) <= 0.1 for c in figures) < 0.6 * len(figures)


def test_windows_at_or_below_the_figure_that_miss_beyond_chance_refute_it():
    """The miss share rises with rate, so each window at or below a rate misses at most as
    often as one at it: 2 of 3 missing where at most 10 % is claimed happens by chance in 2.8 %
    of tests (exact binomial), and the claim is refused with what the windows prove."""
    rates = np.array([3000.0, 3500.0, 3900.0, 6000.0, 7000.0])
    missed = np.array([1.0, 0.0, 1.0, 0.0, 1.0])
    why = floor_refutes(rates, missed, 4000.0, 0.1, 0.05)
    assert why == ("no rate from 4000 requests/s up meets <= 10%: 2 of 3 windows at or below it "
                   "missed (exact binomial p = 0.028 against 10%): a window misses in at least "
                   "14% at every rate from there up (95% confidence)")
    assert floor_refutes(rates, np.array([1.0, 0.0, 0.0, 1.0, 1.0]), 4000.0, 0.1, 0.05) == ""
    assert floor_refutes(rates, missed, 2000.0, 0.1, 0.05) == ""  # no window at or below
