"""Per-test JSON records: schema validation on write and on load, JSON-lines storage.

A record is one measuring test's result (schemas: ``libraries/results/schemas/record-v<N>.schema.json``;
new records are version 2, version 1 records stay readable). Records of a run are appended to
``<results>/<run-id>/records.jsonl``; ``run.json`` beside it holds the run's metadata.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema

from libraries.testbed.errors import HostStackError

SCHEMA_DIR = Path(__file__).resolve().parent / "schemas"
SCHEMA_VERSIONS = (1, 2)
CURRENT_VERSION = 2


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


def append_record(path: Path, record: dict[str, Any]) -> None:
    """Validate ``record`` and append it as one line to the JSON-lines file ``path``."""
    where = f"record for {record.get('test_id', '?')}"
    validate_record(record, where=where)
    try:
        line = json.dumps(record, sort_keys=True, allow_nan=False) + "\n"
    except ValueError as error:  # NaN or infinity somewhere: not JSON
        raise RecordError(f"{where}: {error}") from None
    path.parent.mkdir(parents=True, exist_ok=True)
    # One write call per record: concurrent writers (pabot) append whole lines.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def iter_records(path: Path) -> Iterator[dict[str, Any]]:
    """Yield the validated records of ``path``; a bad line raises naming file and line."""
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError as error:
                raise RecordError(f"{path}:{number}: not valid JSON: {error}") from None
            if not isinstance(record, dict):
                raise RecordError(f"{path}:{number}: expected a JSON object per line")
            validate_record(record, where=f"{path}:{number}")
            yield record


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
