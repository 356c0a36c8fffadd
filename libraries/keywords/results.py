"""Keywords to record a measuring test's result as one JSON record and judge it by criteria;
the work is :class:`libraries.results.run_records.RunRecords`' (the run's records) and
:func:`libraries.cases.judging.check_result`'s (the test's status)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from robot.api import logger
from robot.api.deco import keyword, library

from libraries.cases.judging import check_result
from libraries.cases.testbed_settings import TOPOLOGY
from libraries.history.load import TESTS_FILE
from libraries.keywords import context
from libraries.report.run_end import failure_line, finish_run
from libraries.report.run_report import RUN_REPORT
from libraries.results.measurement import Measurement
from libraries.results.records import make_test_id
from libraries.results.run_records import RunRecords, TestInfo
from libraries.results.trial_settings import RUN_ID, TREND_STORE
from libraries.testbed.errors import HostStackError


@library(scope="GLOBAL", auto_keywords=False, listener="SELF")
class ResultsKeywords:
    """Keywords that record a measuring test's result and judge it by its pass criteria.

    Every measuring suite checks its settings first (``Check Measurement Settings`` of the
    suite library); each test hands the measurement its case keyword returned to `Record
    Result`, which appends one JSON record to ``records.jsonl``, and to `Check Criteria`,
    which passes, fails or skips the test by the criteria of the case on the running
    topology (trials, budget and alpha from the suite's settings: ``-v TRIALS``,
    ``DURATION``, ``WARMUP``, ``MAX_TRIALS``, ``MAX_SECONDS``, ``ALPHA``).

    Records go to ``${OUTPUT DIR}/<run-id>/records.jsonl``; with ``-v RUN_ID:<id>`` (the
    nightly runner passes it together with ``-d results/<id>``) to ``${OUTPUT
    DIR}/records.jsonl``. Criteria come from ``topologies/criteria.yaml`` or ``-v
    CRITERIA:<path>``. At the end of the run the library writes ``run-report.html`` beside
    the records and, unless the nightly runner gave ``-v RUN_ID`` (it stores the run
    itself), stores the run in the history: ``${OUTPUT DIR}/history``, ``-v
    TREND_STORE:<dir>`` elsewhere, ``NONE`` not at all.

    The library needs the testbed library (``Set Up Testbed``) in the same suite; suites
    import it through ``resources/measure.resource``, whose test ends:

    | =Setting= | =Value= |
    | Library | libraries.keywords.results.ResultsKeywords |

    | =Keyword= | =Arguments= | |
    | ${result} = | Measure TCP Throughput From Node | tg |
    | Record Result | ${result} | |
    | Check Criteria | ${result} | |
    """

    ROBOT_LISTENER_API_VERSION = 3

    def __init__(self) -> None:
        self._records = RunRecords(TESTS_FILE)
        self._failed: list[str] = []
        self._metadata_set = False
        self._store: str | None = None

    # -- listener ----------------------------------------------------------------------------

    def start_suite(self, data: Any, result: Any) -> None:
        """Listener hook: name the run id, the records and the run report in the metadata of
        the top-level suite (the first suite this library sees)."""
        if self._metadata_set:
            return
        self._metadata_set = True
        top = result
        while top.parent is not None:
            top = top.parent
        records = self._records.open(*self._output())
        self._store = context.run_setting(TREND_STORE)
        top.metadata["Run id"] = self._records.run_id
        top.metadata["Records"] = str(records)
        log_file = context.variable("LOG FILE")
        if log_file and str(log_file).upper() != "NONE":
            report = os.path.relpath(records.parent / RUN_REPORT, Path(log_file).parent)
            top.metadata["Run report"] = f"[{report}|{report}]"

    def start_test(self, data: Any, result: Any) -> None:
        """Listener hook: remember when the test started."""
        self._records.test_started_now()

    def end_test(self, data: Any, result: Any) -> None:
        """Listener hook: the test's message carries its figures (after a failure message),
        and one line per test (status, message, log anchor) goes to the tests file."""
        result.message = self._records.message(result.message)
        if result.status == "FAIL":
            self._failed.append(failure_line(result.full_name, result.message))
        if self._records.records_path is None or context.dry_run():
            return
        self._records.test_line(
            {"test_id": self._test_id_now(result.name), "name": result.name,
             "robot_id": result.id, "suite": result.parent.full_name if result.parent else "",
             "status": result.status, "message": result.message, "tags": list(result.tags)},
            context.variable("LOG FILE"), logger.warn)

    def close(self) -> None:
        """Listener hook at the end of the run: write ``<run dir>/run-report.html`` and, for
        a run that chose its own run id, store the run in the history ``${OUTPUT DIR}/history``
        (``-v TREND_STORE:<dir>`` elsewhere, ``NONE`` not at all). With ``-v RUN_ID`` the
        caller (the nightly runner, after pabot's processes) stores the whole run itself.
        The failed tests and their messages are printed last
        (:func:`libraries.report.run_end.finish_run`)."""
        store_to = None if self._records.given else str(self._store or "")
        finish_run(self._records.run_dir, store_to, self._failed, sys.__stdout__)

    # -- helpers -----------------------------------------------------------------------------

    @staticmethod
    def _output() -> tuple[Path, str | None]:
        """The output folder and ``-v RUN_ID``."""
        return Path(context.variable("OUTPUT DIR", "results")), context.run_setting(RUN_ID)

    def run_folder(self) -> Path:
        """The run folder (profiles go into it)."""
        return self._records.open(*self._output()).parent

    @staticmethod
    def _test_id_now(test_name: str) -> str:
        """The running test's record id (topology from the testbed, when one is up)."""
        state = context.opened_suite()
        try:
            topology = state.testbed.current.topology.name if state else None
        except HostStackError:  # no testbed (yet): the run's -v TOPOLOGY
            topology = None
        return make_test_id(topology or str(context.run_setting(TOPOLOGY)),
                            Path(context.variable("SUITE SOURCE", "unknown")), test_name)

    # -- keywords ----------------------------------------------------------------------------

    @keyword("Record Result")
    def record_result(self, measurement: Measurement) -> str:
        """Validate and append the test's record to ``records.jsonl``; return the file's path.

        The record holds the metrics with every trial, the parameters, the evidence, the
        criteria's verdict (an A/B record: each side's floors), the tool versions, the
        topology, the run id and the project's revision; ``run.json`` beside it is
        updated. The record is also logged as JSON (DEBUG), with one summary line per
        metric (median, interval, min, max, cv, trials) at INFO, and the test's message
        gets the result's headline figures.

        Args:
            measurement: The measurement a case keyword returned in this test (e.g.
                ``Measure TCP Throughput From Node`` or ``Search Capacity Under Latency SLO``).

        Returns:
            The path of the ``records.jsonl`` the record was appended to.

        Fails when the record does not validate against the record schema or cannot be
        written (e.g. a full disk).

        Examples:
        | Record Result | ${result} |
        | ${file} = | Record Result | ${result} |
        """
        return str(self._records.record(
            measurement, context.judge(), _test_info(), context.testbed().topology.name,
            context.testbed_versions(), self._output(), logger.info, logger.debug))

    @keyword("Check Criteria")
    def check_criteria(self, measurement: Measurement) -> None:
        """Pass, fail or skip the test by the pass criteria of its case on this topology.

        In this order: fails on an invalid result (a trial whose proof failed), then with
        measured vs required for every criterion the result misses (correctness criteria
        first); skips a result the testbed could not measure (e.g. a latency goal under its
        floor); passes with a warning, saying the result was recorded but not judged, when
        the case has no criterion on this topology; fails when a criterion is still
        inconclusive after the budget's trials. With ``-v JUDGE:correctness`` only the
        correctness criteria are judged: performance bounds are logged, not failed on, and
        an invalid result is a warning. An A/B result fails, naming the side, on an invalid
        result or a broken correctness check of either side, then gets ``Check A/B
        Verdict`` of the A/B library.

        Args:
            measurement: The measurement a case keyword returned in this test, after
                `Record Result`.

        Examples:
        | Record Result | ${result} |
        | Check Criteria | ${result} |
        """
        check_result(measurement, context.judge(), context.testbed().topology.name,
                     context.RobotLog(), context.set_tags)


def _test_info() -> TestInfo:
    """The running test, as its record names it."""
    return TestInfo(str(context.variable("TEST NAME", "unknown")),
                    Path(context.variable("SUITE SOURCE", "unknown")),
                    str(context.variable("SUITE NAME", "")),
                    tuple(context.variable("TEST TAGS", [])))
