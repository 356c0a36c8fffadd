"""The statistics of verdicts, checked against known distributions with a seeded generator:
an interval's empirical coverage must match its stated (exact) level."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import mannwhitneyu

from libraries.results.inference import (
    _u_distribution,
    change_interval,
    check_alpha,
    median_interval,
    minimum_decisive_trials,
)

DRAWS = 20_000


def _lognormal(rng: np.random.Generator, shape: tuple[int, ...], median: float = 100.0,
               sigma: float = 0.1) -> np.ndarray:
    return median * np.exp(rng.normal(0.0, sigma, shape))


def test_the_median_interval_of_5_trials_is_min_max_at_93_75_percent():
    interval = median_interval([5.0, 1.0, 4.0, 2.0, 3.0])
    assert (interval.low, interval.high) == (1.0, 5.0)
    assert interval.level == pytest.approx(1 - 2 / 32)
    assert interval.decisive


def test_three_trials_cannot_decide_at_alpha_0_05():
    interval = median_interval([1.0, 2.0, 3.0])
    assert (interval.low, interval.high, interval.decisive) == (1.0, 3.0, False)
    assert interval.level == pytest.approx(0.75)
    assert minimum_decisive_trials(0.05) == 5
    assert minimum_decisive_trials(0.2) == 3
    assert median_interval([1.0, 2.0, 3.0], alpha=0.2).decisive


def test_a_single_value_has_no_interval():
    interval = median_interval([7.0])
    assert (interval.low, interval.high, interval.level, interval.decisive) == \
        (7.0, 7.0, None, False)


@pytest.mark.parametrize("n", [5, 8, 12, 20, 31])
def test_median_interval_coverage_matches_its_stated_level(n):
    rng = np.random.default_rng(20261124 + n)
    samples = _lognormal(rng, (DRAWS, n), sigma=0.3)  # skewed on the raw scale
    level = median_interval(samples[0]).level
    covered = lower_miss = 0
    for row in samples:
        interval = median_interval(row)
        assert interval.level == level
        covered += interval.low <= 100.0 <= interval.high
        lower_miss += interval.low > 100.0
    assert covered / DRAWS == pytest.approx(level, abs=0.01)
    assert lower_miss / DRAWS <= 0.05 + 0.01  # each end is a one-sided 95 % bound


def test_the_u_distribution_is_a_symmetric_distribution_matching_scipy():
    for m, n in ((1, 1), (3, 4), (5, 5), (7, 12)):
        p = _u_distribution(m, n)
        assert p.sum() == pytest.approx(1.0)
        assert p == pytest.approx(p[::-1])
    rng = np.random.default_rng(7)
    for _ in range(50):
        a, b = rng.normal(size=6), rng.normal(0.5, 1, size=9)
        u = int(sum((x > y) for x in b for y in a))
        cdf = np.cumsum(_u_distribution(9, 6))
        mine = min(1.0, 2 * min(cdf[u], 1 - (cdf[u - 1] if u else 0.0)))
        exact = mannwhitneyu(b, a, alternative="two-sided", method="exact").pvalue
        assert mine == pytest.approx(exact)


def test_hodges_lehmann_estimate_of_a_known_shift():
    a = [100.0, 101.0, 99.0, 100.5, 99.5]
    change = change_interval(a, [v * 0.8 for v in a])
    assert change.ratio == pytest.approx(0.8)
    assert change.pct == pytest.approx(-20.0)
    assert change.high_pct < 0 and change.p_value < 0.05


@pytest.mark.parametrize(("m", "n"), [(5, 5), (3, 8), (10, 10), (30, 30), (70, 70)])
def test_change_interval_coverage_matches_its_level(m, n):
    rng = np.random.default_rng(m * 1000 + n)
    draws = 2000
    a = _lognormal(rng, (draws, m))
    b = _lognormal(rng, (draws, n)) * 0.9  # a true 10 % drop
    covered = 0
    level = change_interval(a[0], b[0]).level
    for x, y in zip(a, b, strict=True):
        change = change_interval(x, y)
        covered += change.low <= 0.9 <= change.high
    assert covered / draws == pytest.approx(level, abs=0.02)
    assert level >= 0.95 - 0.001


def test_the_mann_whitney_false_alarm_rate_under_no_change_is_at_most_alpha():
    rng = np.random.default_rng(99)
    a = _lognormal(rng, (DRAWS // 4, 5))
    b = _lognormal(rng, (DRAWS // 4, 5))
    alarms = sum(change_interval(x, y).p_value < 0.05 for x, y in zip(a, b, strict=True))
    assert alarms / len(a) <= 0.05 + 0.01


def test_samples_too_small_for_the_level_have_no_change_interval():
    change = change_interval([1.0, 2.0], [3.0, 4.0])
    assert change.low is None and change.level is None
    assert change.ratio == pytest.approx(np.exp(np.median(np.log([3, 1.5, 4, 2]))))


@pytest.mark.parametrize("bad", [0, 1, 1.5, -0.1, "0.05", True])
def test_alpha_outside_zero_one_is_refused(bad):
    with pytest.raises(ValueError, match=r"alpha: expected a number between 0 and 1"):
        check_alpha(bad)


def test_a_change_of_non_positive_values_is_refused():
    with pytest.raises(ValueError, match="positive values"):
        change_interval([0.0, 1.0], [1.0, 2.0])
