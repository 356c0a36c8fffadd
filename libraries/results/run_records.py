"""Where a Robot run keeps its records, as plain Python (:class:`RunRecords`): the run's id
(``-v RUN_ID`` or one it names itself, ``YYYYmmdd-HHMMSS-xxxx``), ``records.jsonl`` and
``run.json`` in the run folder, each test's record (built, validated and appended whole,
:mod:`libraries.results.records`) with its summary lines for the log and the headline its
message gets, and one line per test in the tests file (status, message, log anchor) that the
run report reads. The results library (``libraries.keywords.results``) adapts it: its listener
hooks and ``Record Result`` each make one call here. Files only: no Robot Framework, no
command on a node (the project's revision is read once from the checkout's git).
"""

from __future__ import annotations

import datetime
import json
import os
import socket
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from libraries.results.headline import headline
from libraries.results.measurement import Measurement
from libraries.results.records import (
    RecordError,
    append_line,
    append_record,
    build_record,
    make_test_id,
)

if TYPE_CHECKING:
    from libraries.results.adaptive import Judge

REPO = Path(__file__).resolve().parent.parent.parent
Info = Callable[[str], None]
"""A line of the log."""


def now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def project_revision(repo: Path = REPO) -> str:
    """The checkout's commit (12 hex digits), ``unknown`` outside a git checkout."""
    try:
        result = subprocess.run(["git", "-C", str(repo), "rev-parse", "--short=12", "HEAD"],
                                capture_output=True, text=True, timeout=5, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return result.stdout.strip() if result.returncode == 0 else "unknown"


@dataclass(frozen=True)
class TestInfo:
    """The running test as a record names it: ``name``, the suite's ``source`` file and
    ``suite`` name, its ``tags``."""

    __test__ = False  # not a pytest class

    name: str
    source: Path
    suite: str
    tags: tuple[str, ...]


class RunRecords:
    """One run's records: opened at the first suite (:meth:`open`) in ``output_dir``, under
    ``given`` (``-v RUN_ID``: the folder itself) or an id of its own (a folder below it);
    ``tests_file``: the name of the per-test lines' file."""

    def __init__(self, tests_file: str) -> None:
        self.started = now()
        self.tests_file = tests_file
        self.run_id: str | None = None
        self.records_path: Path | None = None
        self.revision: str | None = None
        self.given = False
        self.test_started: datetime.datetime | None = None
        self.headline: str | None = None

    def open(self, output_dir: Path, given: str | None) -> Path:
        """The records file, the run named at the first call."""
        if self.records_path is None:
            self.given = bool(given)
            if given:
                self.run_id, run_dir = given, output_dir
            else:
                self.run_id = self.started.strftime("%Y%m%d-%H%M%S-") + os.urandom(2).hex()
                run_dir = output_dir / self.run_id
            self.records_path = run_dir / "records.jsonl"
            self.revision = project_revision()
        return self.records_path

    @property
    def run_dir(self) -> Path | None:
        """The run folder, once open."""
        return self.records_path.parent if self.records_path is not None else None

    def test_started_now(self) -> None:
        """A test starts: its record's start time; no headline yet."""
        self.test_started = now()
        self.headline = None

    def message(self, message: str) -> str:
        """The test's message with its headline figures (after a failure message)."""
        if not self.headline or self.headline in (message or ""):
            return message
        return f"{message} | measured: {self.headline}" if message else self.headline

    def test_line(self, entry: dict[str, Any], log_file: str | None, warn: Info) -> None:
        """Append the test's line (``entry`` and the log's path relative to the run folder) to
        the tests file; a full disk costs the line, with a warning, not the run."""
        if self.records_path is None:
            return
        log = (os.path.relpath(log_file, self.records_path.parent)
               if log_file and str(log_file).upper() != "NONE" else None)
        line = {**entry, "headline": self.headline, "log": log}
        ordered = {key: line[key] for key in ("test_id", "name", "robot_id", "suite", "status",
                                              "message", "headline", "log", "tags")}
        try:  # a run stopped before its first record has no folder yet: append_line makes it
            append_line(self.records_path.parent / self.tests_file, json.dumps(ordered) + "\n",
                        f"the line of test {entry['name']}")
        except RecordError as error:
            warn(str(error))

    def record(self, measurement: Measurement, judge: Judge, test: TestInfo, topology: str,
               versions: dict[str, dict[str, str]], output: tuple[Path, str | None],
               info: Info, debug: Info) -> Path:
        """Judge ``measurement`` (an A/B one per side), append its record to the run's
        records file (``output``: the output folder and ``-v RUN_ID``) and ``run.json``
        beside it; each metric's summary line and the notes to ``info``, the record as JSON
        to ``debug``. Returns the records file."""
        criteria = [] if measurement.ab else judge.evaluate(measurement)
        if measurement.ab:  # each side's criteria: floors reported, correctness checked
            judge.judge_sides(measurement)
        started = self.test_started or now()
        record = build_record(
            measurement, criteria, test_id=make_test_id(topology, test.source, test.name),
            suite=test.suite, name=test.name, tags=list(test.tags), topology=topology,
            versions=versions, started=started, seconds=(now() - started).total_seconds(),
            host=socket.gethostname())
        path = self.open(*output)
        record["run_id"] = self.run_id
        record["project_revision"] = self.revision or "unknown"
        append_record(path, record)
        self.write_run_metadata(topology)
        for line in summary_lines(measurement):
            info(line)
        debug(json.dumps(record, indent=2, sort_keys=True))
        info(f"record appended to {path}")
        self.headline = headline(measurement)
        return path

    def write_run_metadata(self, topology: str) -> None:
        """``run.json`` beside the records, whole or not at all."""
        assert self.records_path is not None
        path = self.records_path.parent / "run.json"
        metadata = {
            "run_id": self.run_id, "start_time": self.started.isoformat(),
            "end_time": now().isoformat(), "project_revision": self.revision,
            "topology": topology, "host": socket.gethostname(),
        }
        partial = path.with_name(f".{path.name}.{os.getpid()}")
        try:  # whole or not at all: a reader never sees half a file
            partial.write_text(json.dumps(metadata, indent=2) + "\n")
            partial.replace(path)
        except OSError as error:
            partial.unlink(missing_ok=True)
            raise RecordError(f"{path}: run metadata not written ({error.strerror})") from None


def summary_lines(measurement: Measurement) -> list[str]:
    """One line per metric (median, interval, min, max, cv, every trial), then the notes."""
    lines = []
    for name, metric in measurement.metrics.items():
        s = metric.summary
        cv = "n/a" if s.cv is None else f"{s.cv:.1%}"
        interval = metric.interval
        within = ("" if interval.level is None else f", [{interval.low:.6g}, "
                  f"{interval.high:.6g}] at {interval.level:.1%} confidence")
        lines.append(f"{name}: median {s.median:.6g} {s.unit}{within} (min {s.minimum:.6g}, "
                     f"max {s.maximum:.6g}, cv {cv}) over {s.count} trials: "
                     f"{', '.join(f'{v:.6g}' for v in s.values)}")
    return lines + list(measurement.notes)
