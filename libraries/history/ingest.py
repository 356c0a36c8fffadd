"""Ingest runs' ``records.jsonl`` into the columnar history (:mod:`libraries.history.store`).

    python -m libraries.history.ingest RESULTS_DIR... [--store DIR] [--rebuild]

Finds every ``records.jsonl`` under the folders, groups the files by run id (the first
record's; the Results library writes one run per file) and stores each run not yet stored as
one Parquet file: records of schema v1, v2 and later versions map to one table (a metric's
``interval``, record v3, fills ``ci_low``/``ci_high``/``ci_level``/``ci_method``; null before).
A run already stored with the same source size is skipped (idempotent); one whose files grew
is replaced. ``--rebuild`` re-creates every run found from its records (the store can always be
rebuilt from them). A bad record (not JSON, invalid, unknown schema version) names its file and
line; the other runs are still stored and nothing already stored is touched. The nightly
runner ingests each run when it ends, and ``python -m libraries.report RESULTS_DIR`` ingests
the runs it has not seen before it reads the store.

Exit status: 0 stored (or nothing new), 2 a run could not be stored (file and line named).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import sys
from collections import defaultdict
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa

from libraries.history.load import load_files
from libraries.history.store import SCHEMA, STORE_FORMAT, Store, default_store
from libraries.results.records import RecordError, find_record_files

LOG = logging.getLogger(__name__)
SOURCES = "sources.json"
"""Index of the records files seen (path -> size, mtime, run id) in the store's cache folder:
a scan of a large results tree then reads only new or changed files."""
WRITERS = 2
BATCH_BYTES = 64_000_000
"""Runs are loaded in batches of about this many bytes of JSON (memory stays bounded)."""


@dataclass(frozen=True)
class SourceRun:
    """A run found under the results folders: its ``run_id``, ``files`` and their ``size``."""

    run_id: str
    files: tuple[Path, ...]
    size: int


@dataclass
class IngestReport:
    """What an ingest did: run ids ``stored``, ``skipped`` (already stored), ``errors``."""

    stored: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    outdated: list[str] = field(default_factory=list)
    """Runs of an older store format whose records were not found: kept as they are."""


def _first_run_id(path: Path) -> str | None:
    """The run id of a records file's first record (None when unreadable: loading it then
    names the problem)."""
    try:
        with path.open("rb") as handle:
            line = handle.readline()
        record = json.loads(line)
    except (OSError, ValueError):
        return None
    run_id = record.get("run_id") if isinstance(record, dict) else None
    return run_id if isinstance(run_id, str) and run_id else None


def find_runs(roots: list[Path], known: dict[str, list] | None = None) -> list[SourceRun]:
    """Runs under ``roots``: records files grouped by run id (an unreadable file is a run of
    its own, keyed by its path, so that loading it reports the problem). ``known`` (path ->
    [size, mtime_ns, run id]) spares reading files seen before; it is updated in place."""
    known = {} if known is None else known
    groups: dict[str, list[tuple[Path, int]]] = defaultdict(list)
    for path in find_record_files(roots):
        stat = path.stat()
        if stat.st_size == 0:
            continue
        seen = known.get(str(path))
        if seen and seen[:2] == [stat.st_size, stat.st_mtime_ns]:
            run_id = seen[2]
        else:
            run_id = _first_run_id(path)
            if run_id:
                known[str(path)] = [stat.st_size, stat.st_mtime_ns, run_id]
        groups[run_id or str(path)].append((path, stat.st_size))
    return [SourceRun(run_id, tuple(p for p, _ in files), sum(size for _, size in files))
            for run_id, files in sorted(groups.items())]


def _load_known(store: Store) -> dict[str, list]:
    """The store's index of records files seen before (``_cache/sources.json``)."""
    try:
        data = json.loads((store.cache_dir / SOURCES).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _save_known(store: Store, known: dict[str, list]) -> None:
    try:
        store.cache_dir.mkdir(parents=True, exist_ok=True)
        temporary = store.cache_dir / f".{SOURCES}.{os.getpid()}.tmp"
        temporary.write_text(json.dumps(known))
        os.replace(temporary, store.cache_dir / SOURCES)
    except OSError as error:  # a read-only store: the next scan reads the files again
        LOG.info("%s: index of records files not saved: %s", store.cache_dir, error)


def run_table(frame_rows: object) -> pa.Table:
    """The store table of a :func:`load_files` frame (columns in :data:`SCHEMA` order)."""
    return pa.Table.from_pandas(frame_rows[SCHEMA.names], schema=SCHEMA,  # type: ignore[index]
                                preserve_index=False)


def _batches(runs: list[SourceRun]) -> list[list[SourceRun]]:
    batches: list[list[SourceRun]] = [[]]
    size = 0
    for run in runs:
        if batches[-1] and size + run.size > BATCH_BYTES:
            batches.append([])
            size = 0
        batches[-1].append(run)
        size += run.size
    return [batch for batch in batches if batch]


def _store_batch(store: Store, batch: list[SourceRun], report: IngestReport) -> None:
    try:
        frame = load_files([path for run in batch for path in run.files])
    except RecordError:
        if len(batch) == 1:
            raise
        for run in batch:  # find the bad run(s); store the others
            try:
                _store_batch(store, [run], report)
            except RecordError as error:
                report.errors.append(str(error))
        return
    jobs = []
    by_file = frame.groupby("file", sort=False).indices
    for run in batch:
        rows = [by_file[str(p)] for p in run.files if str(p) in by_file]
        if not rows:
            continue
        part_rows = frame.iloc[np.concatenate(rows)]
        for run_id, part in part_rows.groupby("run_id", sort=True):
            month = part["start_time"].min().strftime("%Y-%m")
            jobs.append((str(run_id), month, run_table(part), run.size,
                         [str(p) for p in run.files]))
    # Parquet encoding releases the GIL: files are written two at a time.
    with ThreadPoolExecutor(max_workers=WRITERS) as pool:
        for (run_id, *_), written in zip(jobs, pool.map(lambda job: store.write_run(*job),
                                                        jobs), strict=True):
            (report.stored if written else report.skipped).append(run_id)


def ingest(roots: list[Path], store: Store, rebuild: bool = False) -> IngestReport:
    """Store every run under ``roots`` that the store lacks (every run with ``rebuild``)."""
    report = IngestReport()
    upgrade, old_format = not rebuild and store.outdated(), store.format
    stored = {} if rebuild or upgrade else store.runs()
    todo = []
    known = _load_known(store)
    before = len(known)
    runs = find_runs(roots, known)
    if len(known) != before:
        _save_known(store, known)
    for run in runs:
        known = stored.get(run.run_id)
        if known is not None and known.fingerprint >= run.size:
            report.skipped.append(run.run_id)
        else:
            todo.append(run)
    if rebuild or upgrade:  # an older format: every run found is stored again
        found = {run.run_id for run in todo}
        for run in store.runs().values():
            if rebuild or run.run_id in found:
                run.path.unlink()
            else:
                report.outdated.append(run.run_id)
        shutil.rmtree(store.cache_dir, ignore_errors=True)
    for batch in _batches(todo):
        try:
            _store_batch(store, batch, report)
        except RecordError as error:
            report.errors.append(str(error))
    if not report.errors:
        store.mark_format()
    if report.outdated:
        LOG.warning("%s: %d run(s) stored in format %s (their records were not found under "
                    "%s) are kept as they are; what a sample means changed in format %s "
                    "(history/store.py STORE_FORMAT)", store.root, len(report.outdated),
                    old_format, ", ".join(map(str, roots)), STORE_FORMAT)
    return report


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m libraries.history.ingest",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("results", nargs="*", type=Path, metavar="RESULTS_DIR",
                        help="folders searched for records.jsonl (default: results)")
    parser.add_argument("--store", type=Path, help="history folder (default: "
                        "<first RESULTS_DIR>/history)")
    parser.add_argument("--rebuild", action="store_true",
                        help="re-create every run found from its records")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s: %(message)s")
    roots = args.results or [Path("results")]
    store = Store(args.store or default_store(roots))
    try:
        report = ingest(roots, store, rebuild=args.rebuild)
    except RecordError as error:
        sys.stderr.write(f"error: {error}\n")
        return 2
    sys.stdout.write(f"{store.root}: {len(report.stored)} run(s) stored, "
                     f"{len(report.skipped)} already there\n")
    for error in report.errors:
        sys.stderr.write(f"error: {error}\n")
    return 2 if report.errors else 0


if __name__ == "__main__":
    sys.exit(main())
