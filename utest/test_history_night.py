"""What the history keeps of a night: why a record is excluded (a failed correctness check named
with its recorded bound, whatever it is) and an A/B ratio night's value and standard error (the
Hodges-Lehmann ratio the test's message reports, with a standard error that matches its spread
over nights)."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import numpy as np
import pytest

from libraries.ab.rounds import ratio_interval
from libraries.history.ab_series import ratio_night
from libraries.history.ingest import ingest
from libraries.history.load import excluded_reason
from libraries.history.store import FORMAT_FILE, STORE_FORMAT, Store
from libraries.results.correctness import trial_violations, worst
from libraries.results.criteria import CriterionResult
from libraries.trend.gate import analyse_store
from utest.test_nightly_reference import night


def per_trial(metric: str, op: str, required: float, values: list[float]) -> dict:
    """The record of a criterion judged in every trial of ``values`` (as evaluate makes it)."""
    broken = trial_violations(values, op, required)
    return CriterionResult(
        name=f"ssl_proxy.{metric} {op} {required:g} [portable]", metric=metric, op=op,
        required=required, measured=worst(values, op), unit="count",
        outcome="fail" if broken else "pass", source="criteria.yaml: criteria.0",
        per_trial=True, violations=broken, trials=len(values)).as_record()


def test_a_failed_correctness_check_is_named_with_its_own_bound() -> None:
    """``excluded_reason`` said ``> 0`` whatever the bound: a ceiling of 5 broken by 12 read
    ``errors 12 > 0``, a floor read as a ceiling."""
    zero = per_trial("errors", "<=", 0, [0, 250, 0, 12, 0])
    assert excluded_reason({"criteria": [zero]}, {}) == "failed: errors 250 > 0 in 2 of 5 trials"
    ceiling = per_trial("errors", "<=", 5, [0, 3, 12, 0])
    assert excluded_reason({"criteria": [ceiling]}, {}) == \
        "failed: errors 12 > 5 in 1 of 4 trials"
    floor = per_trial("completed", ">=", 0.99, [1.0, 0.95, 1.0])
    assert excluded_reason({"criteria": [ceiling, floor]}, {}) == (
        "failed: errors 12 > 5 in 1 of 4 trials; completed 0.95 < 0.99 in 1 of 3 trials")
    passed = per_trial("errors", "<=", 5, [0, 3])
    assert excluded_reason({"criteria": [passed]}, {}) == ""
    # a record of a criterion without its trials still names the bound
    bare = {"metric": "errors", "op": "<=", "required": 0, "measured": 7, "outcome": "fail"}
    assert excluded_reason({"criteria": [bare]}, {}) == "failed: errors 7 > 0"


def test_a_ratio_night_is_the_hodges_lehmann_ratio_the_message_reports() -> None:
    rng = np.random.default_rng(5)
    for rounds in (2, 5, 6, 24, 60, 81, 120):
        ratios = list(np.exp(rng.normal(-0.02, 0.024, rounds)))
        value, stdev = ratio_night(ratios, float(np.median(ratios)), 0.0)
        assert value == pytest.approx(ratio_interval(ratios, 0.05).change, rel=1e-12)
        assert stdev > 0
    # one round, or a ratio that is not positive: the recorded figure, as before
    assert ratio_night([1.02], 1.02, 0.0) == (1.02, 0.0)
    assert ratio_night([1.0, 0.0, 1.1], 1.0, 0.3) == (1.0, pytest.approx(0.3 / math.sqrt(3)))


@pytest.mark.parametrize(("noise", "rounds"), [("normal", 60), ("normal", 20), ("t3", 60)])
def test_a_ratio_night_s_standard_error_matches_its_spread_over_nights(noise, rounds) -> None:
    """Over 2,000 simulated nights (2.4 % per-round spread), the mean stored standard error
    over the actual spread of the stored log ratio: 1.00 and 1.05 (normal rounds, 60 and 20
    of them), 1.02 (t with 3 degrees of freedom, 60); the median with the mean's standard
    error, stored before, gave 0.80 and 0.83 (about 20 % too small) and 1.22."""
    rng = np.random.default_rng(17)
    logs = (rng.normal(0.0, 0.024, (2000, rounds)) if noise == "normal"
            else rng.standard_t(3, (2000, rounds)) * 0.024 / math.sqrt(3))
    nights = [ratio_night(list(np.exp(row)), 0.0, 0.0) for row in logs]
    y = np.log([value for value, _ in nights])
    se = np.array([stdev / value for value, stdev in nights])
    assert 0.95 < se.mean() / y.std() < 1.12
    medians = np.median(logs, axis=1)
    old = logs.std(axis=1, ddof=1) / math.sqrt(rounds)  # what was stored (in logs)
    assert abs(se.mean() / y.std() - 1) < abs(old.mean() / medians.std() - 1)


def test_a_store_of_the_older_format_is_stored_again_from_its_records(tmp_path: Path) -> None:
    """A store written before the ratio nights were Hodges-Lehmann estimates (format 1, no
    FORMAT file): the next ingest stores every run it finds again, in this format, rebuilds
    the series cache, and keeps (and names) a run whose records are gone."""
    results, store = tmp_path / "results", Store(tmp_path / "history")
    rng = np.random.default_rng(1)
    for day in range(3):
        night(results, day, list(np.exp(rng.normal(0.0, 0.02, 30))))
    assert ingest([results], store).errors == []
    assert store.format == STORE_FORMAT and not store.outdated()
    analyse_store(store)  # the cache is built
    (store.root / FORMAT_FILE).unlink()  # as a store of format 1 is
    gone = sorted(results.iterdir())[0]
    shutil.rmtree(gone)
    assert store.outdated()
    report = ingest([results], store)
    assert len(report.stored) == 2 and report.outdated == [gone.name]
    assert store.format == STORE_FORMAT and not store.cache_dir.exists()
    assert len(store.runs()) == 3
