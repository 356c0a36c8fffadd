"""A measuring test's status from its result (:func:`check_result`): pass, fail or skip by the
pass criteria of its case on the running topology, in a fixed order; an A/B result by its
sides' correctness and its verdict (:func:`libraries.cases.ab_setup.check_ab_verdict`). Plain
Python: ``Check Criteria`` of ``libraries.keywords.results`` makes one call here, and a unit
test judges a measurement with a judge of its own.
"""

from __future__ import annotations

from collections.abc import Callable

from libraries.cases.ab_setup import check_ab_verdict
from libraries.cases.context import Log, Skip
from libraries.results.adaptive import Judge
from libraries.results.cost import busy_cores
from libraries.results.measurement import Measurement
from libraries.results.records import fixed_rounds
from libraries.testbed.errors import HostStackError


def check_result(measurement: Measurement, judge: Judge, topology: str, log: Log,
                 tag: Callable[[str], None]) -> None:
    """``Check Criteria``: an A/B result by :func:`check_sides` then its verdict (``tag``
    names the test's verdict tag), any other by :func:`check_criteria`."""
    if measurement.ab:
        check_sides(measurement, judge, log)
        check_ab_verdict(measurement, tag, log)
        return
    check_criteria(measurement, judge, topology, log)


def check_sides(measurement: Measurement, judge: Judge, log: Log) -> None:
    """An A/B test fails, naming the side, on an invalid result or a correctness check
    (``errors max: 0``) broken in any trial of either side; floors are logged per side."""
    for line in judge.judge_sides(measurement):
        log.info(line)
    if measurement.invalid:
        raise HostStackError("A/B: " + "; ".join(measurement.invalid))


def check_criteria(measurement: Measurement, judge: Judge, topology: str, log: Log) -> None:
    """In this order: fail on an invalid result (a warning with ``-v JUDGE:correctness``),
    then with measured vs required for every criterion missed (correctness criteria first);
    skip a result the testbed could not measure; pass with a warning when the case has no
    criterion on ``topology``; fail when a criterion is still inconclusive after the budget's
    trials. Every outcome and every unavailable metric is logged."""
    results = judge.evaluate(measurement)
    for metric, why in measurement.unavailable.items():
        log.info(f"NOT JUDGED {metric}: unavailable ({why})")
    if measurement.invalid and judge.correctness_only:
        log.warn("NOT JUDGED (-v JUDGE:correctness): recorded as an invalid result: "
                 + "; ".join(measurement.invalid))
    elif measurement.invalid:
        raise HostStackError("invalid result: " + "; ".join(measurement.invalid))
    for result in results:
        log.info(f"{result.outcome.upper()} {result.describe()}")
    failed = sorted((r for r in results if r.outcome == "fail"),
                    key=lambda r: not r.per_trial)  # correctness first
    busy = f"; {told}" if (told := busy_cores(measurement)) else ""
    if failed:
        raise HostStackError("criteria not met: " + "; ".join(r.describe() for r in failed)
                             + (busy if any(not r.per_trial for r in failed) else ""))
    if measurement.untestable:
        raise Skip("not measurable on this testbed (recorded): "
                   + "; ".join(measurement.untestable))
    if not results:
        log.warn(f"no pass criterion for case {measurement.case} on topology {topology}: the "
                 "result is recorded, not judged")
        return
    pending = [r for r in results if r.outcome == "inconclusive"]
    if pending:
        rounds = measurement.rounds or fixed_rounds(measurement)
        raise HostStackError(
            f"criteria inconclusive after {rounds['run']} trials ({rounds['stopped']}): "
            + "; ".join(r.describe() for r in pending) + busy)
