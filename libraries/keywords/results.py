"""Keywords to record a measuring test's result as one JSON record and judge it by criteria."""

from __future__ import annotations

import datetime
import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from robot.api import SkipExecution, logger
from robot.api.deco import keyword, library
from robot.libraries.BuiltIn import BuiltIn
from robot.running.context import EXECUTION_CONTEXTS

from libraries.ab.settings import ab_settings_from_variables, check_ab_plan
from libraries.capacity.settings import capacity_settings_from_variables
from libraries.cases.profile_settings import ProfileSettings, profile_settings_from_variables
from libraries.keywords import context
from libraries.keywords.ab import check_ab_verdict
from libraries.report.run import RUN_REPORT, TESTS_FILE
from libraries.report.run_end import failure_line, finish_run
from libraries.results.adaptive import Judge
from libraries.results.cost import busy_cores
from libraries.results.criteria import (
    DEFAULT_CRITERIA,
    CriteriaFile,
    load_criteria,
)
from libraries.results.headline import headline
from libraries.results.measurement import Measurement
from libraries.results.plan import Settings, TrialPlan
from libraries.results.records import (
    RecordError,
    append_line,
    append_record,
    build_record,
    fixed_rounds,
    make_test_id,
)
from libraries.results.settings import parse_judge, parse_settings, parse_switch
from libraries.testbed.errors import HostStackError
from libraries.testbed.topology import Topology
from libraries.testbed.topology_file import load_topology

REPO = Path(__file__).resolve().parent.parent.parent


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _dry_run() -> bool:
    """True under ``robot --dryrun``: nothing is measured, so nothing is recorded."""
    context = EXECUTION_CONTEXTS.current
    return bool(context is not None and context.dry_run)


def _project_revision() -> str:
    try:
        result = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short=12", "HEAD"],
                                capture_output=True, text=True, timeout=5, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return result.stdout.strip() if result.returncode == 0 else "unknown"


@library(scope="GLOBAL", auto_keywords=False, listener="SELF")
class ResultsKeywords:
    """Keywords that record a measuring test's result and judge it by its pass criteria.

    Every measuring suite checks its settings first (`Check Measurement Settings`); each
    test hands the measurement its case keyword returned to `Record Result`, which appends
    one JSON record to ``records.jsonl``, and to `Check Criteria`, which passes, fails or
    skips the test by the criteria of the case on the running topology. The case keywords
    also ask this library, while they measure, whether the criteria are conclusive yet
    (trials, budget and alpha from ``-v TRIALS``, ``DURATION``, ``WARMUP``,
    ``MAX_TRIALS``, ``MAX_SECONDS``, ``ALPHA``).

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
        self._test_started: datetime.datetime | None = None
        self._run_started = _now()
        self._run_id: str | None = None
        self._records_path: Path | None = None
        self._revision: str | None = None
        self._headline: str | None = None
        self._metadata_set = False
        self._run_given = False
        self._store_dir: str | None = None
        self._criteria: tuple[Path, CriteriaFile] | None = None
        self._failed: list[str] = []

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
        records = self._records_file()
        top.metadata["Run id"] = self._run_id
        top.metadata["Records"] = str(records)
        log_file = self._variable("LOG FILE")
        if log_file and str(log_file).upper() != "NONE":
            report = os.path.relpath(records.parent / RUN_REPORT, Path(log_file).parent)
            top.metadata["Run report"] = f"[{report}|{report}]"

    def start_test(self, data: Any, result: Any) -> None:
        """Listener hook: remember when the test started."""
        self._test_started = _now()
        self._headline = None

    def end_test(self, data: Any, result: Any) -> None:
        """Listener hook: the test's message carries its figures (after a failure message),
        and one line per test (status, message, log anchor) goes to ``tests.jsonl``."""
        if self._headline and self._headline not in (result.message or ""):
            result.message = (f"{result.message} | measured: {self._headline}"
                              if result.message else self._headline)
        if result.status == "FAIL":
            self._failed.append(failure_line(result.full_name, result.message))
        if self._records_path is None or _dry_run():
            return
        log_file = self._variable("LOG FILE")
        log = (os.path.relpath(log_file, self._records_path.parent)
               if log_file and str(log_file).upper() != "NONE" else None)
        entry = {"test_id": self._test_id_now(result.name), "name": result.name,
                 "robot_id": result.id, "suite": result.parent.full_name if result.parent
                 else "", "status": result.status, "message": result.message,
                 "headline": self._headline, "log": log, "tags": list(result.tags)}
        # A run stopped before its first record (an interrupt) has no directory yet:
        # append_line makes it. A full disk costs this line, not the run.
        try:
            append_line(self._records_path.parent / TESTS_FILE, json.dumps(entry) + "\n",
                        f"the line of test {result.name}")
        except RecordError as error:
            logger.warn(str(error))

    def close(self) -> None:
        """Listener hook at the end of the run: write ``<run dir>/run-report.html`` and, for
        a run that chose its own run id, store the run in the history ``${OUTPUT DIR}/history``
        (``-v TREND_STORE:<dir>`` elsewhere, ``NONE`` not at all). With ``-v RUN_ID`` the
        caller (the nightly runner, after pabot's processes) stores the whole run itself.
        The failed tests and their messages are printed last
        (:func:`libraries.report.run_end.finish_run`)."""
        run_dir = self._records_path.parent if self._records_path is not None else None
        store_to = None if self._run_given else str(self._store_dir or "")
        finish_run(run_dir, store_to, self._failed, sys.__stdout__)

    # -- helpers -----------------------------------------------------------------------------

    def _variable(self, name: str, default: Any = None) -> Any:
        return BuiltIn().get_variable_value("${" + name + "}", default)

    def _records_file(self) -> Path:
        if self._records_path is None:
            output_dir = Path(self._variable("OUTPUT DIR", "results"))
            given = self._variable("RUN_ID")
            self._run_given = bool(given)
            self._store_dir = self._variable("TREND_STORE")
            if given:
                self._run_id, run_dir = str(given), output_dir
            else:
                self._run_id = (self._run_started.strftime("%Y%m%d-%H%M%S-")
                                + os.urandom(2).hex())
                run_dir = output_dir / self._run_id
            self._records_path = run_dir / "records.jsonl"
            self._revision = _project_revision()
        return self._records_path

    def _write_run_metadata(self, topology: str) -> None:
        path = self._records_file().parent / "run.json"
        metadata = {
            "run_id": self._run_id, "start_time": self._run_started.isoformat(),
            "end_time": _now().isoformat(), "project_revision": self._revision,
            "topology": topology, "host": socket.gethostname(),
        }
        partial = path.with_name(f".{path.name}.{os.getpid()}")
        try:  # whole or not at all: a reader never sees half a file
            partial.write_text(json.dumps(metadata, indent=2) + "\n")
            partial.replace(path)
        except OSError as error:
            partial.unlink(missing_ok=True)
            raise RecordError(f"{path}: run metadata not written ({error.strerror})") from None

    def _criteria_file(self) -> tuple[Path, CriteriaFile]:
        """The criteria of ``${CRITERIA}``, read and checked once per file."""
        path = Path(self._variable("CRITERIA", DEFAULT_CRITERIA))
        if self._criteria is None or self._criteria[0] != path:
            self._criteria = (path, load_criteria(path))
        return self._criteria

    def _settings(self, topology: Topology | None = None) -> Settings:
        """Trials, budget and alpha from the Robot variables and the topology's ``budget``
        (``ValueError`` naming the variable)."""
        budget = topology.budget if topology is not None else None
        return parse_settings(
            self._variable("TRIALS", TrialPlan.trials), self._variable("DURATION",
                                                                       TrialPlan.duration),
            self._variable("WARMUP", TrialPlan.warmup), self._variable("MAX_TRIALS"),
            self._variable("MAX_SECONDS"), self._variable("ALPHA"),
            budget.model_dump(exclude_none=True) if budget is not None else None)

    def judge(self) -> Judge:
        """The criteria of the running testbed's topology at this suite's settings (case
        libraries measure until it is conclusive)."""
        testbed = context.testbed()
        path, criteria = self._criteria_file()
        try:
            settings = self._settings(testbed.topology)
            correctness_only = parse_judge(self._variable("JUDGE", "all"))
        except ValueError as error:
            raise HostStackError(str(error)) from None
        return Judge(criteria, path.name, testbed.topology.name, settings, correctness_only)

    def profiling(self) -> tuple[ProfileSettings, Path]:
        """``-v PROFILE`` and ``PROFILE_SECONDS``, and the run folder profiles go into."""
        return profile_settings_from_variables(self._variable), self._records_file().parent

    def _test_id_now(self, test_name: str) -> str:
        """The running test's record id (topology from the testbed, when one is up)."""
        try:
            topology, _ = self._testbed_context()
        except (RuntimeError, AttributeError, HostStackError):
            topology = str(self._variable("TOPOLOGY", "unknown"))
        return make_test_id(topology, Path(self._variable("SUITE SOURCE", "unknown")), test_name)

    @staticmethod
    def _testbed_context() -> tuple[str, dict[str, dict[str, str]]]:
        return context.testbed().topology.name, context.testbed_versions()

    # -- keywords ----------------------------------------------------------------------------

    @keyword("Check Measurement Settings")
    def check_measurement_settings(self) -> None:
        """Check the run's measurement settings and criteria file before anything is built.

        Checks ``${TRIALS}``, ``${DURATION}``, ``${WARMUP}``, the budget (``${MAX_TRIALS}``,
        ``${MAX_SECONDS}`` or the topology's ``budget``), ``${ALPHA}``, ``${EXTENDED}``,
        ``${JUDGE}``, the profiling settings and the criteria file (``${CRITERIA}``, default
        ``topologies/criteria.yaml``) completely: whole numbers of trials and seconds (``-v
        DURATION:1.5`` is refused, not truncated), a budget that allows the planned trials
        and a conclusive interval, an alpha in (0, 1), valid YAML, known keys, and every
        criterion on a metric and parameters its case really has
        (``libraries.results.catalogue``). In an A/B run (``${AB}``) the ``AB_*``
        settings too, refused when their budget cannot reach a deciding look; in a capacity
        suite (``${LATENCY_SLO}`` set) the ``CAPACITY_*`` settings. The plan and the
        criteria found are logged.

        Fails with the variable, its value and what was expected for the first bad
        setting, or with the file and key for a bad criteria file.

        Examples:
        | Check Measurement Settings |
        """
        try:
            topology = load_topology(str(self._variable("TOPOLOGY", "3node")))
            settings = self._settings(topology)
            parse_switch("EXTENDED", self._variable("EXTENDED", False))
            if parse_judge(self._variable("JUDGE", "all")):
                logger.info("-v JUDGE:correctness: only correctness criteria (every trial) and the "
                            "per-trial proofs are judged; performance bounds and sanity "
                            "findings are recorded, not failed on")
            profile_settings_from_variables(self._variable)
            if self._variable("AB", ""):  # an A/B run: settings that can decide, or none
                check_ab_plan(ab_settings_from_variables(self._variable), settings.plan)
        except ValueError as error:
            raise HostStackError(str(error)) from None
        logger.info(f"{settings.plan.trials} trials of {settings.plan.duration} s after "
                    f"{settings.plan.warmup} s warm-up; up to {settings.budget.max_trials} "
                    f"while a criterion is inconclusive; confidence {1 - settings.alpha:.0%}")
        if self._variable("LATENCY_SLO", None) is not None:  # capacity tests: their settings
            try:
                capacity = capacity_settings_from_variables(self._variable)
            except ValueError as error:
                raise HostStackError(str(error)) from None
            logger.info(f"capacity: {', '.join(g.name for g in capacity.goals)}, MLRsearch "
                        f"{capacity.as_record()}")
        self._criteria = None
        path, criteria = self._criteria_file()
        logger.info(f"{path}: {len(criteria.criteria)} criteria, all on metrics and "
                    "parameters their cases have")

    @keyword("Skip Extended Row Unless Asked")
    def skip_extended_row_unless_asked(self) -> None:
        """Skip a test tagged ``EXTENDED`` unless the run asks for extended rows.

        The default run keeps one row per seed variant; extended rows (the kernel twins of
        VPP rows, more streams, a counting tracer) run with ``-v EXTENDED:yes``, as CI's
        end-to-end job and the nightly do. A test without the tag always runs. Use it as
        the test setup.

        Examples:
        | [Setup] | Skip Extended Row Unless Asked |
        | Test Setup | Skip Extended Row Unless Asked |
        """
        if "EXTENDED" in self._variable("TEST TAGS", []) and \
                not parse_switch("EXTENDED", self._variable("EXTENDED", False)):
            raise SkipExecution("extended row: runs with -v EXTENDED:yes (CI's e2e job and "
                                "the nightly do); the default run keeps one row per seed "
                                "variant")

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
        topology, versions = self._testbed_context()
        criteria = [] if measurement.ab else self.judge().evaluate(measurement)
        if measurement.ab:  # each side's criteria: floors reported, correctness checked
            self.judge().judge_sides(measurement)
        started = self._test_started or _now()
        suite_source = Path(self._variable("SUITE SOURCE", "unknown"))
        test_name = self._variable("TEST NAME", "unknown")
        record = build_record(
            measurement, criteria, test_id=make_test_id(topology, suite_source, test_name),
            suite=self._variable("SUITE NAME", ""), name=test_name,
            tags=list(self._variable("TEST TAGS", [])), topology=topology, versions=versions,
            started=started, seconds=(_now() - started).total_seconds(),
            host=socket.gethostname())
        path = self._records_file()
        record["run_id"] = self._run_id
        record["project_revision"] = self._revision or "unknown"
        append_record(path, record)
        self._write_run_metadata(topology)
        for name, metric in measurement.metrics.items():
            s = metric.summary
            cv = "n/a" if s.cv is None else f"{s.cv:.1%}"
            interval = metric.interval
            within = ("" if interval.level is None else f", [{interval.low:.6g}, "
                      f"{interval.high:.6g}] at {interval.level:.1%} confidence")
            logger.info(f"{name}: median {s.median:.6g} {s.unit}{within} (min {s.minimum:.6g}, "
                        f"max {s.maximum:.6g}, cv {cv}) over {s.count} trials: "
                        f"{', '.join(f'{v:.6g}' for v in s.values)}")
        for note in measurement.notes:
            logger.info(note)
        logger.debug(json.dumps(record, indent=2, sort_keys=True))
        logger.info(f"record appended to {path}")
        self._headline = headline(measurement)
        return str(path)

    def _check_sides(self, measurement: Measurement) -> None:
        """An A/B test fails, naming the side, on an invalid result or a correctness check
        (``errors max: 0``) broken in any trial of either side; floors are logged per
        side."""
        for line in self.judge().judge_sides(measurement):
            logger.info(line)
        if measurement.invalid:
            raise HostStackError("A/B: " + "; ".join(measurement.invalid))

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
        if measurement.ab:
            self._check_sides(measurement)
            check_ab_verdict(measurement)
            return
        topology, _ = self._testbed_context()
        judge = self.judge()
        results = judge.evaluate(measurement)
        for metric, why in measurement.unavailable.items():
            logger.info(f"NOT JUDGED {metric}: unavailable ({why})")
        if measurement.invalid and judge.correctness_only:
            logger.warn("NOT JUDGED (-v JUDGE:correctness): recorded as an invalid result: "
                        + "; ".join(measurement.invalid))
        elif measurement.invalid:
            raise HostStackError("invalid result: " + "; ".join(measurement.invalid))
        for result in results:
            logger.info(f"{result.outcome.upper()} {result.describe()}")
        failed = sorted((r for r in results if r.outcome == "fail"),
                        key=lambda r: not r.per_trial)  # correctness first
        busy = f"; {told}" if (told := busy_cores(measurement)) else ""
        if failed:
            raise HostStackError("criteria not met: " + "; ".join(r.describe() for r in failed)
                                 + (busy if any(not r.per_trial for r in failed) else ""))
        if measurement.untestable:
            raise SkipExecution("not measurable on this testbed (recorded): "
                                + "; ".join(measurement.untestable))
        if not results:
            logger.warn(f"no pass criterion for case {measurement.case} on topology "
                        f"{topology}: the result is recorded, not judged")
            return
        pending = [r for r in results if r.outcome == "inconclusive"]
        if pending:
            rounds = measurement.rounds or fixed_rounds(measurement)
            raise HostStackError(
                f"criteria inconclusive after {rounds['run']} trials ({rounds['stopped']}): "
                + "; ".join(r.describe() for r in pending) + busy)
