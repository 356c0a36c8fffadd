"""What the history keeps of a night: why a record is excluded (a failed correctness check named
with its recorded bound, whatever it is)."""

from __future__ import annotations

from libraries.history.load import excluded_reason
from libraries.results.correctness import trial_violations, worst
from libraries.results.criteria import CriterionResult


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
