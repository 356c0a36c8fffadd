"""Load result records (``records.jsonl``) and run metadata (``run.json``) into a pandas table.

Every record is validated against the schema of the version it claims (``schema_version`` 1
or 2: one history may mix them). ``jsonschema`` needs ~0.6 ms per record
(a minute for 100k records), so each line is first checked by a small compiled check of the
same schema file (:func:`compile_check`); only a line it rejects goes through
:func:`libraries.results.records.iter_records`, which is authoritative and raises the canonical
:class:`RecordError` naming file and line. The compiled check only supports the keywords the
schema uses and refuses to compile otherwise (then every line is checked by jsonschema).
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import statistics
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from functools import cache
from pathlib import Path
from typing import Any

import pandas as pd

from libraries.history.ab_series import (
    ab_series_suffix,
    files_text,
    is_ratio_metric,
    ratio_night,
    side_metrics,
)
from libraries.results.records import (
    SCHEMA_VERSIONS,
    RecordError,
    find_record_files,
    iter_records,
    read_lines,
    record_version,
    schema_path,
)

LOG = logging.getLogger(__name__)

Check = Callable[[Any], bool]
_ANNOTATIONS = {"$schema", "$id", "title", "description", "$defs", "format"}


def _same(value: Any, constant: Any) -> bool:
    return isinstance(value, bool) == isinstance(constant, bool) and value == constant


_GUARDS = {
    "object": "isinstance({v}, dict)",
    "array": "isinstance({v}, list)",
    "string": "isinstance({v}, str)",
    "number": "(isinstance({v}, (int, float)) and not isinstance({v}, bool))",
    "integer": "(isinstance({v}, int) and not isinstance({v}, bool))",
    "boolean": "isinstance({v}, bool)",
    "null": "{v} is None",
}
_MINIMA = {"minLength": "str", "minItems": "list", "minProperties": "dict"}


class _Emitter:
    """Generates the Python source of a predicate for a JSON schema (like fastjsonschema)."""

    def __init__(self, root: dict[str, Any]):
        self.root = root
        self.lines = ["def check(v0):"]
        self.constants: list[Any] = []

    def constant(self, value: Any) -> str:
        self.constants.append(value)
        return f"K[{len(self.constants) - 1}]"

    def fail_unless(self, condition: str, indent: int) -> None:
        self.lines.append(" " * indent + f"if not ({condition}): return False")

    def emit(  # noqa: PLR0912 (one branch per keyword reads best)
        self, schema: dict[str, Any], var: str, indent: int, depth: int = 0
    ) -> None:
        if depth > 20:
            raise NotImplementedError("schema nesting deeper than 20 (recursive $ref?)")
        for key, arg in schema.items():
            if key in _ANNOTATIONS or key == "additionalProperties":
                continue
            if key in _MINIMA:
                self.fail_unless(f"not isinstance({var}, {_MINIMA[key]}) or len({var}) >= "
                                 f"{int(arg)}", indent)
            elif key == "type":
                kinds = [arg] if isinstance(arg, str) else arg
                self.fail_unless(" or ".join(_GUARDS[k].format(v=var) for k in kinds), indent)
            elif key in {"const", "enum"}:
                self.emit_enum([arg] if key == "const" else list(arg), var, indent)
            elif key == "pattern":
                pattern = self.constant(re.compile(arg))
                self.fail_unless(f"not isinstance({var}, str) or {pattern}.search({var})",
                                 indent)
            elif key == "minimum":
                self.fail_unless(f"not {_GUARDS['number'].format(v=var)} or {var} >= "
                                 f"{float(arg)!r}", indent)
            elif key == "required":
                keys = " and ".join(f"{k!r} in {var}" for k in arg) or "True"
                self.fail_unless(f"not isinstance({var}, dict) or ({keys})", indent)
            elif key == "$ref":
                if not arg.startswith("#/$defs/"):
                    raise NotImplementedError(f"$ref {arg!r}")
                self.emit(self.root["$defs"][arg.removeprefix("#/$defs/")], var, indent,
                          depth + 1)
            elif key == "items":
                item = f"v{depth + 1}"
                self.lines.append(" " * indent + f"if isinstance({var}, list):")
                self.lines.append(" " * (indent + 4) + f"for {item} in {var}:")
                self.emit(arg, item, indent + 8, depth + 1)
            elif key == "properties":
                self.emit_object(schema, var, indent, depth)
            else:
                raise NotImplementedError(f"keyword {key!r}")
        if "additionalProperties" in schema and "properties" not in schema:
            self.emit_object(schema, var, indent, depth)

    def emit_enum(self, values: list[Any], var: str, indent: int) -> None:
        if all(isinstance(value, str) for value in values):
            self.fail_unless(f"isinstance({var}, str) and {var} in {self.constant(set(values))}",
                             indent)
        else:
            self.fail_unless(f"any(_same({var}, c) for c in {self.constant(values)})", indent)

    def emit_object(self, schema: dict[str, Any], var: str, indent: int, depth: int) -> None:
        extra = schema.get("additionalProperties", True)
        if not isinstance(extra, bool | dict):
            raise NotImplementedError("additionalProperties")
        name, item = f"k{depth + 1}", f"v{depth + 1}"
        pad = " " * indent
        self.lines.append(f"{pad}if isinstance({var}, dict):")
        self.lines.append(f"{pad}    for {name}, {item} in {var}.items():")
        branch = "if"
        for key, sub in schema.get("properties", {}).items():
            self.lines.append(f"{pad}        {branch} {name} == {key!r}:")
            self.lines.append(f"{pad}            pass")
            self.emit(sub, item, indent + 12, depth + 1)
            branch = "elif"
        if extra is False or isinstance(extra, dict):
            self.lines.append(f"{pad}        {'else' if branch == 'elif' else 'if True'}:")
            if extra is False:
                self.lines.append(f"{pad}            return False")
            else:
                self.lines.append(f"{pad}            pass")
                self.emit(extra, item, indent + 12, depth + 1)


def compile_check(schema: dict[str, Any]) -> Check:
    """Compile ``schema`` into a predicate; raises NotImplementedError on unknown keywords.

    The predicate may be stricter than JSON Schema (e.g. ``1.0`` vs ``const: 1``), never looser:
    a rejected record is re-checked by jsonschema.
    """
    emitter = _Emitter(schema)
    emitter.emit(schema, "v0", 4)
    emitter.lines.append("    return True")
    namespace: dict[str, Any] = {"K": emitter.constants, "_same": _same}
    exec(compile("\n".join(emitter.lines), "<record schema check>", "exec"), namespace)  # noqa: S102
    return namespace["check"]


@cache
def record_check(version: int = 1) -> Check:
    """The compiled check of record schema ``version``, or one that defers every record to
    jsonschema."""
    try:
        return compile_check(json.loads(schema_path(version).read_text()))
    except NotImplementedError as error:
        LOG.warning("record schema v%d has %s: validating every record with jsonschema",
                    version, error)
        return lambda _value: False


MAX_WORKERS = 4
BYTES_PER_WORKER = 4_000_000
"""Large trees (~4k records per worker) are read by several processes, one file per task."""
COLUMNS = ("test_id", "metric", "unit", "direction", "value", "low", "high", "stdev", "cv",
           "trials", "run_id", "start_time", "versions", "revision", "verdict", "case", "stack",
           "topology", "log", "file", "line",
           "lab", "test_key", "trial_values", "ci_low", "ci_high", "ci_level", "ci_method",
           "schema_version", "parameters", "excluded", "files")
"""Today's columns first (``test_id``: an A/B record's carries its comparison, see
:func:`ab_series_suffix`), then: ``lab`` (the topology the test ran on), ``test_key`` (the test id
without the lab: the same test on every lab), ``trial_values`` (every trial), the metric's
``interval`` (record v3: ``ci_low``, ``ci_high``, ``ci_level``, ``ci_method``; None before),
``schema_version``, ``parameters`` (JSON text, sorted keys) and ``excluded``: why the sample
is drawn but never judged nor used as a baseline (:func:`excluded_reason`), else ``""``;
``files``: an A/B record's sides' hashed files as JSON text (:func:`files_text`)."""
TESTS_FILE = "tests.jsonl"
"""Written beside ``records.jsonl`` by the results listener: each test's log.html anchor."""


def _spread(metric: dict[str, Any]) -> tuple[float, float, float]:
    """(min, max, stdev) of a metric's trials; recorded fields win over recomputed ones."""
    trials = metric["trials"]
    low = metric.get("min", min(trials))
    high = metric.get("max", max(trials))
    stdev = metric.get("stdev")
    if stdev is None:
        stdev = statistics.stdev(trials) if len(trials) > 1 else 0.0
    return float(low), float(high), float(stdev)


def test_key(test_id: str, topology: str) -> str:
    """The lab-independent part of a test id: ``3node/ssl_proxy/x`` -> ``ssl_proxy/x`` (ids of
    old records, Robot long names, are their own key)."""
    return test_id.removeprefix(f"{topology}/")


def _interval(metric: dict[str, Any]) -> tuple[float | None, float | None, float | None,
                                              str | None]:
    """(low, high, level, method) of a metric's ``interval`` (record v3), Nones without one."""
    interval = metric.get("interval")
    if not isinstance(interval, dict):
        return None, None, None, None
    def number(key: str) -> float | None:
        value = interval.get(key)
        return float(value) if isinstance(value, int | float) else None
    method = interval.get("method")
    return number("low"), number("high"), number("level"), \
        method if isinstance(method, str) else None


def excluded_reason(record: dict[str, Any], run: dict[str, Any]) -> str:
    """Why a record's figures must not be judged nor serve as a baseline, else ``""``: its run
    was partial (``run.json`` ``partial``: a suite run that could not finish), the result is
    ``invalid`` (its reasons), or a correctness check failed (a criterion bounding a metric
    at ``<= 0``, such as ``errors max: 0``, or any criterion judged in every trial,
    ``per_trial``: a night that served errors measured something else), named with its bound
    as recorded (``failed: errors 250 > 0 in 2 of 30 trials``). A test failing its performance
    verdict or a floor is a valid night: that is the change the gate looks for."""
    partial = run.get("partial")
    if partial:
        return f"partial night: {partial}"
    invalid = record.get("invalid")
    if invalid:
        return "invalid: " + "; ".join(str(reason) for reason in invalid)
    failed = [c for c in record.get("criteria") or []
              if c.get("outcome") == "fail" and (c.get("per_trial") or (
                  c.get("op") == "<=" and c.get("required") == 0))]
    if failed:
        return "failed: " + "; ".join(_failed_text(c) for c in failed)
    return ""


def _failed_text(c: dict[str, Any]) -> str:
    """``errors 250 > 0 in 2 of 30 trials``: a failed criterion with its recorded bound (``op``
    ``<=``: exceeded, ``>=``: fell short) and, judged in every trial, the trials that broke it."""
    g = lambda v: f"{v:g}" if isinstance(v, int | float) else str(v)  # noqa: E731
    broken = c.get("violations") if c.get("per_trial") and c.get("trials") else None
    return (f"{c.get('metric')} {g(c.get('measured'))} {'<' if c.get('op') == '>=' else '>'} "
            f"{g(c.get('required'))}" + (f" in {len(broken)} of {c['trials']} trials"
                                         if isinstance(broken, list) and broken else ""))


def _versions_text(versions: dict[str, dict[str, str]]) -> str:
    return "; ".join(
        f"{node}: " + ", ".join(f"{tool} {ver}" for tool, ver in sorted(tools.items()))
        for node, tools in sorted(versions.items())
    )


def load_records(roots: list[Path]) -> pd.DataFrame:
    """One row per (record, metric) of every ``records.jsonl`` under ``roots``.

    Columns: ``test_id, metric, unit, direction, value`` (median of the trials), ``low, high``
    (trial min / max), ``stdev, cv, trials`` (count), ``run_id, start_time`` (UTC timestamp),
    ``versions`` (one line of text), ``revision`` (project git revision from the record or the
    run's ``run.json``, else ``""``), ``verdict, case, stack, topology``, ``log`` (absolute
    ``log.html#<test>`` of the run from its ``tests.jsonl``, else ``""``), ``file, line``, then
    the columns :data:`COLUMNS` adds (lab, test key, trials, interval, ...).
    Raises :class:`RecordError` (file and line) on an unreadable or invalid record.
    """
    return load_files(find_record_files(roots))


def load_files(files: list[Path]) -> pd.DataFrame:
    """The table of :func:`load_records` for the given ``records.jsonl`` files."""
    size = sum(path.stat().st_size for path in files)
    workers = min(os.cpu_count() or 1, MAX_WORKERS, len(files), size // BYTES_PER_WORKER)
    if workers > 1:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            parts = list(pool.map(_load_file, files, chunksize=8))
    else:
        parts = [_load_file(path) for path in files]
    columns = {name: [item for part in parts for item in part[name]] for name in COLUMNS}
    frame = pd.DataFrame(columns)
    times = pd.to_datetime(frame["start_time"], utc=True, format="ISO8601", errors="coerce")
    bad = times.isna()
    if bad.any():
        row = frame[bad].iloc[0]
        raise RecordError(f"{row['file']}:{row['line']}: start_time: expected an ISO 8601 "
                          f"date-time, got {row['start_time']!r}")
    frame["start_time"] = times
    for name in ("ci_low", "ci_high", "ci_level"):
        frame[name] = frame[name].astype("float64")
    return frame


def _load_file(path: Path) -> dict[str, list[Any]]:
    """The columns of one records file (runs in a worker process for large trees)."""
    rows: list[tuple[Any, ...]] = []
    where = str(path)
    run = load_run_metadata(path)
    run_revision = str(run.get("project_revision", ""))
    logs = load_log_anchors(path.parent / TESTS_FILE)
    validated = False
    for number, line in read_lines(path):
        try:
            record = json.loads(line)
        except ValueError:
            record = None
        claimed = record.get("schema_version") if isinstance(record, dict) else None
        if claimed is not None and claimed not in SCHEMA_VERSIONS:
            raise RecordError(f"{path}:{number}: schema_version {claimed!r} is not a record "
                              f"schema this library knows (expected one of "
                              f"{', '.join(map(str, SCHEMA_VERSIONS))}): written by a newer "
                              "hoststack-perf? Nothing of this file was loaded")
        if not validated and not record_check(record_version(record))(record):
            # Authoritative check: raises the canonical error naming the file and line.
            for _ in iter_records(path):
                pass
            validated = True
        versions = _versions_text(record["versions"])
        series = record["test_id"] + ab_series_suffix(record)
        key = test_key(series, record["topology"])
        parameters = json.dumps(record["parameters"], sort_keys=True, default=str)
        excluded, files = excluded_reason(record, run), files_text(record)
        for name, metric in [*record["metrics"].items(), *side_metrics(record)]:
            low, high, stdev = _spread(metric)
            value = float(metric["value"])
            if not math.isfinite(value) or not math.isfinite(high - low):
                raise RecordError(f"{path}:{number}: metrics.{name}: expected finite numbers, "
                                  f"got value {metric['value']!r}, trials {metric['trials']!r}")
            if is_ratio_metric(name, metric["unit"]):  # the night's estimate, as reported
                value, stdev = ratio_night(metric["trials"], value, stdev)
                cv = stdev / abs(value) if value else 0.0
            else:
                cv = metric.get("cv")
            if cv is None:  # absent, or null when the mean is 0
                cv = stdev / abs(value) if value else 0.0
            rows.append((series, name, metric["unit"], metric["direction"], value,
                         low, high, stdev, float(cv), len(metric["trials"]), record["run_id"],
                         record["start_time"], versions,
                         record.get("project_revision", run_revision), record["verdict"],
                         record["case"], record["stack"], record["topology"],
                         logs.get(record["test_id"], ""), where, number,
                         record["topology"], key, [float(t) for t in metric["trials"]],
                         *_interval(metric), int(record.get("schema_version", 1)), parameters,
                         excluded, files))
    if not rows:
        return {column: [] for column in COLUMNS}
    return {column: list(items)
            for column, items in zip(COLUMNS, zip(*rows, strict=True), strict=True)}


def load_log_anchors(tests_file: Path) -> dict[str, str]:
    """test id -> absolute ``<log.html>#<robot id>`` from a run's ``tests.jsonl`` (``{}`` when
    absent; unreadable lines are logged and skipped: links are a convenience, not data)."""
    if not tests_file.is_file():
        return {}
    anchors: dict[str, str] = {}
    try:
        for number, line in read_lines(tests_file):
            try:
                entry = json.loads(line)
                if entry.get("log"):
                    log = (tests_file.parent / entry["log"]).resolve()
                    anchors[entry["test_id"]] = f"{log}#{entry['robot_id']}"
            except (ValueError, AttributeError, KeyError, TypeError) as error:
                LOG.warning("%s:%d: ignoring unreadable test entry: %s", tests_file, number,
                            error)
    except RecordError as error:
        LOG.warning("ignoring the rest of %s: %s", tests_file, error)
    return anchors


def load_run_metadata(records_file: Path) -> dict[str, Any]:
    """The run's ``run.json``: beside a records file, or up to 3 directories up (pabot and
    per-topology output directories sit below the run directory); ``{}`` when absent or
    unreadable (logged)."""
    candidates = [parent / "run.json" for parent in records_file.parents[:4]]
    path = next((c for c in candidates if c.is_file()), None)
    if path is None:
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        LOG.warning("%s: ignoring unreadable run metadata: %s", path, error)
        return {}
    return data if isinstance(data, dict) else {}
