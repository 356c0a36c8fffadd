"""The A/B verdict against known distributions (seeded): false alarms at most alpha when the
run-to-run noise is known, a clear slowdown detected, the margin and directions honoured."""

from __future__ import annotations

import numpy as np
import pytest

from libraries.results.verdict import ab_verdict, run_to_run_cv

PAIRS = 600


def _runs(rng: np.random.Generator, pairs: int, trials: int, run_sd: float, trial_sd: float,
          change: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """Two runs per pair: each run has its own level (run-to-run noise), trials around it."""
    level_a = rng.normal(0.0, run_sd, (pairs, 1))
    level_b = rng.normal(0.0, run_sd, (pairs, 1))
    a = 100.0 * np.exp(level_a + rng.normal(0.0, trial_sd, (pairs, trials)))
    b = 100.0 * change * np.exp(level_b + rng.normal(0.0, trial_sd, (pairs, trials)))
    return a, b


def _rate(a: np.ndarray, b: np.ndarray, noise: float | None, verdicts: tuple[str, ...],
          direction: str = "higher_is_better") -> float:
    hits = sum(ab_verdict(x, y, direction, noise=noise).verdict in verdicts
               for x, y in zip(a, b, strict=True))
    return hits / len(a)


def test_without_run_noise_the_trial_test_keeps_false_alarms_under_alpha():
    a, b = _runs(np.random.default_rng(1), PAIRS, 5, run_sd=0.0, trial_sd=0.03)
    assert _rate(a, b, None, ("regression", "progression")) <= 0.05 + 0.02


def test_run_noise_makes_the_trial_test_alarm_and_the_history_corrects_it():
    rng = np.random.default_rng(2)
    a, b = _runs(rng, PAIRS, 5, run_sd=0.06, trial_sd=0.02)
    naive = _rate(a, b, None, ("regression", "progression"))
    history = run_to_run_cv(100.0 * np.exp(rng.normal(0.0, 0.06, 30)))
    assert history == pytest.approx(0.06, rel=0.35)
    corrected = _rate(a, b, history, ("regression", "progression"))
    assert naive > 0.2  # trials of one run understate the noise between runs
    assert corrected <= 0.05 + 0.02


def test_a_20_percent_drop_is_detected_as_a_regression():
    a, b = _runs(np.random.default_rng(3), 200, 5, run_sd=0.02, trial_sd=0.03, change=0.8)
    assert _rate(a, b, 0.02, ("regression",)) >= 0.9


def test_lower_is_better_turns_a_rise_into_the_regression():
    a = [10.0, 10.2, 9.9, 10.1, 10.0]
    worse = [v * 1.3 for v in a]
    assert ab_verdict(a, worse, "lower_is_better").verdict == "regression"
    assert ab_verdict(a, worse, "higher_is_better").verdict == "progression"


def test_a_clear_change_smaller_than_the_margin_is_no_finding():
    a = [100.0, 100.1, 99.9, 100.05, 99.95]
    b = [v * 0.98 for v in a]
    result = ab_verdict(a, b, "higher_is_better")
    assert result.change.high < 1.0  # significant ...
    assert result.verdict == "no change"  # ... but inside the 5 % margin
    assert result.interval_pct[0] >= -5.0


def test_a_wide_interval_that_holds_no_change_is_inconclusive():
    a = [100.0, 140.0, 70.0, 120.0, 90.0]
    b = [95.0, 130.0, 80.0, 110.0, 85.0]
    assert ab_verdict(a, b, "higher_is_better").verdict == "inconclusive"


def test_too_few_trials_are_inconclusive_and_say_so():
    result = ab_verdict([100.0, 101.0], [80.0, 81.0], "higher_is_better")
    assert result.verdict == "inconclusive" and result.interval_pct is None
    assert "too few trials" in result.test


def test_the_history_needs_five_runs():
    assert run_to_run_cv([100.0, 101.0, 99.0, 100.0]) is None
    assert run_to_run_cv([100.0, 101.0, 99.0, 100.0, 100.5]) > 0


@pytest.mark.parametrize("margin", [-0.1, 1.0, 2])
def test_a_margin_outside_0_1_is_refused(margin):
    with pytest.raises(ValueError, match="margin: expected a fraction"):
        ab_verdict([1.0] * 5, [1.0] * 5, "higher_is_better", margin=margin)
