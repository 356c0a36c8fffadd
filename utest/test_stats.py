"""Tests of libraries.results.stats: trial summaries."""

from __future__ import annotations

import math

import pytest

from libraries.results.stats import TrialSummary, summarize


def test_summary_of_odd_number_of_trials():
    summary = summarize([54366.42, 29968.73, 61218.58], "req/s")
    assert summary.values == (54366.42, 29968.73, 61218.58)  # run order kept
    assert summary.unit == "req/s"
    assert summary.median == 54366.42
    assert summary.minimum == 29968.73
    assert summary.maximum == 61218.58
    assert summary.mean == pytest.approx(48517.91)
    # sample stdev (n - 1): sqrt(sum((x - mean)^2) / 2)
    deviations = [(x - 48517.91) ** 2 for x in summary.values]
    assert summary.stdev == pytest.approx(math.sqrt(sum(deviations) / 2))
    assert summary.cv == pytest.approx(summary.stdev / summary.mean)
    assert summary.count == 3


def test_median_of_even_number_of_trials_is_the_middle_mean():
    summary = summarize([4, 1, 3, 2], "Gbit/s")
    assert summary.median == 2.5
    assert summary.stdev == pytest.approx(1.2909944487)
    assert summary.values == (4.0, 1.0, 3.0, 2.0)


def test_single_trial_has_zero_spread():
    summary = summarize([15.5], "Gbit/s")
    assert (summary.median, summary.minimum, summary.maximum, summary.mean) == (15.5,) * 4
    assert summary.stdev == 0.0
    assert summary.cv == 0.0


def test_cv_undefined_for_zero_mean():
    summary = summarize([0.0, 0.0], "errors")
    assert summary.cv is None
    assert summary.stdev == 0.0


def test_generator_input_and_dict_form():
    summary = summarize((x * 1.0 for x in range(1, 6)), "req/s")
    assert summary.as_dict() == {
        "values": [1.0, 2.0, 3.0, 4.0, 5.0], "unit": "req/s", "median": 3.0, "minimum": 1.0,
        "maximum": 5.0, "mean": 3.0, "stdev": pytest.approx(1.5811388), "cv":
        pytest.approx(0.5270463),
    }


def test_summary_is_frozen():
    summary = summarize([1.0, 2.0], "x")
    with pytest.raises(AttributeError):
        summary.median = 5.0  # type: ignore[misc]
    assert isinstance(summary, TrialSummary)


def test_empty_input_raises():
    with pytest.raises(ValueError, match="cannot summarise 'req/s': no trial values"):
        summarize([], "req/s")


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), "12", None, True])
def test_non_numbers_raise(bad):
    with pytest.raises(ValueError, match=r"trial 1 of 'req/s': expected a"):
        summarize([1.0, bad, 2.0], "req/s")
