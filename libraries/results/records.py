"""Per-test JSON records: schema validation on write and on load, JSON-lines storage.

A record is one measuring test's result (schemas:
``libraries/results/schemas/record-v<N>.schema.json``; new records are version 4, versions 1
to 3 stay readable). Records of a run are appended to ``<results>/<run-id>/records.jsonl``;
``run.json`` beside it holds the run's metadata.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import math
import os
from collections.abc import Iterator
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema

from libraries.results.criteria import CriterionResult
from libraries.results.measurement import Measurement
from libraries.results.telemetry_block import unavailable_block
from libraries.testbed.errors import HostStackError

SCHEMA_DIR = Path(__file__).resolve().parent / "schemas"
MAX_LINE_BYTES = 16 * 1024 * 1024
"""Longest line a records file may have: a real record is ~14 KB; a longer "line" is not a
record (reading ``/dev/full`` or a binary file line by line would never end)."""
SCHEMA_VERSIONS = (1, 2, 3, 4)
CURRENT_VERSION = 4


class RecordError(HostStackError):
    """A record violates the schema, or a records file cannot be read (names file and line)."""


def schema_path(version: int) -> Path:
    """The schema file of record version ``version``."""
    return SCHEMA_DIR / f"record-v{version}.schema.json"


@cache
def _validator(version: int) -> jsonschema.Draft202012Validator:
    schema = json.loads(schema_path(version).read_text())
    return jsonschema.Draft202012Validator(
        schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
    )


def record_version(record: Any) -> int:
    """The schema version a record claims (1 when it claims none we know: the v1 schema
    then names the problem)."""
    version = record.get("schema_version") if isinstance(record, dict) else None
    if isinstance(version, int) and not isinstance(version, bool) and \
            version in SCHEMA_VERSIONS:
        return version
    return 1


def make_test_id(topology: str, suite_source: Path, test_name: str) -> str:
    """A test's id in records and trends: ``<topology>/<case folder>/<test name>``.

    The case folder is the directory of the suite file (``tests/ssl_proxy/kernel.robot`` ->
    ``ssl_proxy``), so splitting a case into files per variant keeps every id, and history.
    """
    return f"{topology}/{Path(suite_source).parent.name}/{test_name}"


def validate_record(record: dict[str, Any], where: str = "record") -> None:
    """Raise :class:`RecordError` listing every schema violation with its JSON path."""
    validator = _validator(record_version(record))
    errors = sorted(validator.iter_errors(record), key=lambda e: list(e.absolute_path))
    if errors:
        lines = [
            f"{where}: {'.'.join(str(p) for p in error.absolute_path) or '(record)'}: "
            f"{error.message}"
            for error in errors[:10]
        ]
        raise RecordError("\n".join(lines))


def append_line(path: Path, line: str, what: str) -> None:
    """Append ``line`` (ending in a newline) to ``path`` whole or not at all.

    One locked write per line (concurrent writers, pabot, never interleave); a write that
    fails or stops short (a full disk) is cut back off, so the file keeps only whole lines,
    and :class:`RecordError` names the file, ``what`` was lost and why.
    """
    data = line.encode()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    except OSError as error:
        raise RecordError(f"{path}: cannot open to write {what}: {error.strerror}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        size = os.fstat(fd).st_size
        written = 0
        try:
            while written < len(data):
                written += os.write(fd, data[written:])
        except OSError as error:
            with contextlib.suppress(OSError):  # a device (/dev/full) cannot be truncated
                os.ftruncate(fd, size)
            raise RecordError(f"{path}: {what} not written ({error.strerror}); the file "
                              f"keeps its {size} bytes of whole lines") from None
    finally:
        os.close(fd)


def append_record(path: Path, record: dict[str, Any]) -> None:
    """Validate ``record`` and append it as one line to the JSON-lines file ``path``, whole or
    not at all (:func:`append_line`)."""
    where = f"record for {record.get('test_id', '?')}"
    validate_record(record, where=where)
    try:
        line = json.dumps(record, sort_keys=True, allow_nan=False) + "\n"
    except ValueError as error:  # NaN or infinity somewhere: not JSON
        found = ", ".join(f"{key} = {value}" for key, value in non_finite(record)[:5])
        raise RecordError(f"{where}: {error}: {found or 'no field found'}") from None
    append_line(path, line, f"the {where}")


def non_finite(value: Any, path: str = "") -> list[tuple[str, float]]:
    """``(key path, value)`` of every NaN or infinity in ``value`` (dicts, lists, tuples),
    e.g. ``("evidence.capacity.proxy.goals[0].lower", nan)``, in the order found."""
    if isinstance(value, float):
        return [] if math.isfinite(value) else [(path or "(the record)", value)]
    if isinstance(value, dict):
        return [found for key, item in value.items()
                for found in non_finite(item, f"{path}.{key}" if path else str(key))]
    if isinstance(value, list | tuple):
        return [found for index, item in enumerate(value)
                for found in non_finite(item, f"{path}[{index}]")]
    return []


def read_lines(path: Path) -> Iterator[tuple[int, str]]:
    """``(line number, text)`` of every non-blank line of ``path``, read line by line (never
    more than :data:`MAX_LINE_BYTES` at once): :class:`RecordError` names ``file:line`` for a
    line that is too long or not UTF-8, and refuses anything but a regular file."""
    try:
        if not path.is_file():
            raise RecordError(f"{path}: not a regular file (expected a JSON-lines file)")
        handle = path.open("rb")
    except OSError as error:
        raise RecordError(f"{path}: cannot read: {error.strerror}") from None
    with handle:
        for number, raw in enumerate(iter(lambda: handle.readline(MAX_LINE_BYTES + 1), b""),
                                     start=1):
            if len(raw) > MAX_LINE_BYTES:
                raise RecordError(f"{path}:{number}: line longer than {MAX_LINE_BYTES} bytes "
                                  "(not a records file?)")
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as error:
                raise RecordError(f"{path}:{number}: not valid UTF-8 (byte {error.start} of "
                                  f"the line: {raw[error.start:error.start + 8]!r})") from None
            if text.strip():
                yield number, text


def parse_record_line(path: Path, number: int, line: str) -> dict[str, Any]:
    """One line of a records file as a validated record (errors name ``file:line``)."""
    try:
        record = json.loads(line)
    except ValueError as error:
        raise RecordError(f"{path}:{number}: not valid JSON: {error}") from None
    if not isinstance(record, dict):
        raise RecordError(f"{path}:{number}: expected a JSON object per line")
    validate_record(record, where=f"{path}:{number}")
    return record


def iter_records(path: Path, problems: list[str] | None = None) -> Iterator[dict[str, Any]]:
    """Yield the validated records of ``path``; a bad line raises naming file and line, or,
    with ``problems`` given, is described there and skipped (a run report shows what it could
    read and what it could not)."""
    lines = read_lines(path)
    while True:
        try:
            number, line = next(lines)
        except StopIteration:
            return
        except RecordError as error:
            if problems is None:
                raise
            problems.append(str(error))
            return  # the rest of an unreadable file cannot be trusted
        try:
            yield parse_record_line(path, number, line)
        except RecordError as error:
            if problems is None:
                raise
            problems.append(str(error))


def find_record_files(roots: list[Path]) -> list[Path]:
    """Every ``records.jsonl`` under the given directories (or the files themselves)."""
    found: list[Path] = []
    for root in roots:
        if root.is_file():
            found.append(root)
        elif root.is_dir():
            found.extend(sorted(root.rglob("records.jsonl")))
        else:
            raise RecordError(f"{root}: no such file or directory")
    return found


AB_VERDICTS = {"regression": "fail", "inconclusive": "inconclusive"}
"""An A/B test's record verdict from its comparison's (no change / progression: pass)."""


def fixed_rounds(measurement: Measurement) -> dict[str, Any]:
    """``rounds`` of a measurement that did not measure adaptively: the trials it has."""
    run = max((m.summary.count for m in measurement.metrics.values()), default=1)
    return {"planned": run, "run": run, "max_trials": run, "max_seconds": None,
            "alpha": measurement.alpha, "stopped": "fixed number of trials"}


def build_record(measurement: Measurement, criteria: list[CriterionResult], *, test_id: str,
                 suite: str, name: str, tags: list[str], topology: str,
                 versions: dict[str, dict[str, str]], started: datetime, seconds: float,
                 host: str) -> dict[str, Any]:
    """One test's record at :data:`CURRENT_VERSION` (``run_id`` and ``project_revision`` are
    the writer's to fill): metrics with every trial, criteria and the verdict (an A/B test's
    from its comparison, not from floors), parameters, evidence, telemetry, rounds,
    environment, versions, what was unavailable or invalid, and how its cost was measured
    (``cost``)."""
    outcomes = {c.outcome for c in criteria}
    verdict = ("fail" if measurement.invalid or "fail" in outcomes else "no_criteria"
               if not criteria else "inconclusive" if "inconclusive" in outcomes else "pass")
    if measurement.ab:  # judged by its comparison; a side's invalid result still fails it
        verdict = "fail" if measurement.invalid else \
            AB_VERDICTS.get(measurement.ab["verdict"], "pass")
    return {
        "schema_version": CURRENT_VERSION, "run_id": "", "test_id": test_id, "suite": suite,
        "name": name, "tags": tags, "topology": topology, "stack": measurement.stack,
        "case": measurement.case, "parameters": measurement.parameters,
        "start_time": started.isoformat(), "duration_s": seconds,
        "metrics": {n: m.as_record() for n, m in measurement.metrics.items()},
        "criteria": [c.as_record() for c in criteria], "verdict": verdict,
        "versions": versions, "evidence": measurement.evidence, "host": host,
        "telemetry": measurement.telemetry or unavailable_block(
            f"case {measurement.case} collected no per-trial telemetry"),
        "rounds": measurement.rounds or fixed_rounds(measurement),
        "environment": measurement.environment or {
            "unavailable": f"case {measurement.case} read no node environment"},
        **({"unavailable": measurement.unavailable} if measurement.unavailable else {}),
        **({"invalid": measurement.invalid} if measurement.invalid else {}),
        **({"ab": measurement.ab} if measurement.ab else {}),
        **({"cost": measurement.cost} if measurement.cost else {}),
    }
