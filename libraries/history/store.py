"""The columnar history: one Parquet dataset of every stored sample, read with DuckDB.

Layout (``<results>/history/`` unless ``--store`` names another folder, e.g. on a shared
filesystem)::

    history/month=2026-11/20261122-020000-1a2b~845113.parquet
    history/month=2026-11/20261123-020000-3c4d~851990.parquet
    history/_cache/                       (derived state: the change-detection cache)

**One file per run**, in the folder of the month the run started (UTC). Why so:

* a run is the unit of ingest and of idempotency. Its file name is its run id plus a
  fingerprint of its source (the bytes of its ``records.jsonl`` files), so "is this run
  stored?" is a directory listing, ingesting a run twice writes nothing, and a run that grew
  after it was stored (ingested while it still ran) is replaced by its larger version;
* a file is written under a temporary name, read back, then renamed into place: readers never
  see half a file, and labs publishing into one shared folder never lock each other out (each
  writes only its own runs' files; two writers of the same run write the same content);
* a run of the lab pool spans labs, so partitioning by lab would split the unit of atomicity;
  the lab is a column instead (rows are sorted by lab, test, metric, so Parquet's statistics
  still let DuckDB skip other labs' row groups). Months bound a directory's size and let a
  query of recent history (``month=2026-11``, hive partitioning) skip older folders.

A store is rebuilt from the per-run ``records.jsonl`` files, which stay the source of truth
(``python -m libraries.history.ingest --rebuild``). Every file carries the store format and its
sources in its Parquet key-value metadata.
"""

from __future__ import annotations

import json
import os
import re
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from libraries.results.records import RecordError

STORE_FORMAT = "2"
"""What a stored sample means: 2 stores an A/B ratio night as the Hodges-Lehmann estimate of
its rounds with that estimate's standard error (1: their median with the mean's standard
error). Kept in each file's metadata and in the store's ``FORMAT`` file (absent: 1)."""
FORMAT_FILE = "FORMAT"
DEFAULT_FOLDER = "history"
CACHE_FOLDER = "_cache"
_NAME = re.compile(r"^(?P<run>[A-Za-z0-9._-]{1,64})~(?P<size>\d+)\.parquet$")

SCHEMA = pa.schema([
    ("test_id", pa.string()), ("metric", pa.string()), ("unit", pa.string()),
    ("direction", pa.string()), ("value", pa.float64()), ("low", pa.float64()),
    ("high", pa.float64()), ("stdev", pa.float64()), ("cv", pa.float64()),
    ("trials", pa.int32()), ("run_id", pa.string()),
    ("start_time", pa.timestamp("us", tz="UTC")), ("versions", pa.string()),
    ("revision", pa.string()), ("verdict", pa.string()), ("case", pa.string()),
    ("stack", pa.string()), ("topology", pa.string()), ("log", pa.string()),
    ("file", pa.string()), ("line", pa.int32()), ("lab", pa.string()),
    ("test_key", pa.string()), ("trial_values", pa.list_(pa.float64())),
    ("ci_low", pa.float64()), ("ci_high", pa.float64()), ("ci_level", pa.float64()),
    ("ci_method", pa.string()), ("schema_version", pa.int16()), ("parameters", pa.string()),
    ("excluded", pa.string()), ("files", pa.string()),
])
"""One row per sample (one metric of one record): the columns of
:func:`libraries.history.load.load_records`. ``ci_*`` are null until records carry
intervals; ``excluded`` is null in runs stored before it existed (read as judged)."""


class StoreError(RecordError):
    """The store cannot be read or written (names the file and what to do)."""


@dataclass(frozen=True)
class StoredRun:
    """One stored run: its ``run_id``, source ``fingerprint`` (bytes) and Parquet ``path``."""

    run_id: str
    fingerprint: int
    path: Path


def run_file_name(run_id: str, fingerprint: int) -> str:
    """``<run id>~<fingerprint>.parquet``."""
    return f"{run_id}~{fingerprint}.parquet"


def default_store(roots: list[Path]) -> Path:
    """``<first results folder>/history`` (the folder of a records file given as a root)."""
    first = roots[0] if roots else Path("results")
    return (first if not first.is_file() else first.parent) / DEFAULT_FOLDER


@dataclass(frozen=True)
class Store:
    """A history folder. Cheap to create: nothing is read until asked."""

    root: Path

    @property
    def cache_dir(self) -> Path:
        """Folder of derived state (safe to delete: rebuilt from the Parquet files)."""
        return self.root / CACHE_FOLDER

    @property
    def format(self) -> str:
        """The format the store's runs were written in (``FORMAT``; "1" when absent)."""
        path = self.root / FORMAT_FILE
        return path.read_text().strip() if path.is_file() else "1"

    def outdated(self) -> bool:
        """Whether the store holds runs of an older :data:`STORE_FORMAT`."""
        return self.format != STORE_FORMAT and bool(self.runs())

    def mark_format(self) -> None:
        """Record that every run of the store is of this :data:`STORE_FORMAT`."""
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / FORMAT_FILE).write_text(STORE_FORMAT + "\n")

    def _candidates(self) -> Iterator[StoredRun]:
        if not self.root.is_dir():
            return
        for month in sorted(self.root.glob("month=*")):
            with os.scandir(month) as entries:
                for entry in entries:
                    found = _NAME.match(entry.name)
                    if found and entry.is_file():
                        yield StoredRun(found["run"], int(found["size"]), Path(entry.path))

    def runs(self) -> dict[str, StoredRun]:
        """run id -> its stored file (the largest fingerprint when a replacement was
        interrupted between writing the new file and removing the old one)."""
        best: dict[str, StoredRun] = {}
        for run in self._candidates():
            if run.run_id not in best or run.fingerprint > best[run.run_id].fingerprint:
                best[run.run_id] = run
        return best

    def files(self) -> list[Path]:
        """The Parquet files of every stored run, oldest month first."""
        return sorted((run.path for run in self.runs().values()),
                      key=lambda p: (p.parent.name, p.name))

    def write_run(self, run_id: str, month: str, table: pa.Table, fingerprint: int,
                  sources: list[str]) -> Path | None:
        """Store ``table`` (the run's samples) unless the run is stored with this or a larger
        fingerprint; returns the new file, or None when nothing was written."""
        current = self.runs().get(run_id)
        if current is not None and current.fingerprint >= fingerprint:
            return None
        folder = self.root / f"month={month}"
        folder.mkdir(parents=True, exist_ok=True)
        final = folder / run_file_name(run_id, fingerprint)
        temporary = folder / f".{final.name}.{secrets.token_hex(4)}.tmp"
        metadata = {b"hoststack.store_format": STORE_FORMAT.encode(),
                    b"hoststack.run_id": run_id.encode(),
                    b"hoststack.sources": json.dumps(sources).encode()}
        ordered = table.cast(SCHEMA).sort_by([("lab", "ascending"), ("test_id", "ascending"),
                                              ("metric", "ascending")])
        try:
            pq.write_table(ordered.replace_schema_metadata(metadata), temporary,
                           compression="zstd")
            if pq.ParquetFile(temporary).metadata.num_rows != table.num_rows:
                raise StoreError(f"{temporary}: read back a different row count")
            os.replace(temporary, final)
        finally:
            temporary.unlink(missing_ok=True)
        for older in self._candidates():
            if older.run_id == run_id and older.fingerprint < fingerprint:
                older.path.unlink(missing_ok=True)
        return final

    def connect(self, files: list[Path] | None = None) -> duckdb.DuckDBPyConnection:
        """An in-memory DuckDB connection with a view ``samples`` over the stored runs (or
        ``files``): every column of :data:`SCHEMA` plus ``month``."""
        files = self.files() if files is None else files
        con = duckdb.connect(config={"threads": min(os.cpu_count() or 1, 4)})
        if files:
            con.read_parquet([str(p) for p in files], hive_partitioning=True,
                             union_by_name=True).create_view("samples")
        else:
            con.register("empty_samples", SCHEMA.empty_table())
            con.execute("CREATE VIEW samples AS SELECT *, NULL::VARCHAR AS month "
                        "FROM empty_samples")
        return con

    def query(self, sql: str, params: list[Any] | None = None,
              files: list[Path] | None = None) -> pd.DataFrame:
        """Run ``sql`` over the view ``samples``; a damaged file raises :class:`StoreError`
        naming it."""
        files = self.files() if files is None else files
        try:
            con = self.connect(files)
        except duckdb.Error as error:
            raise self.explain(error, files) from None
        try:
            return con.execute(sql, params or []).df()
        except duckdb.Error as error:
            raise self.explain(error, files) from None
        finally:
            con.close()

    def explain(self, error: Exception, files: list[Path]) -> StoreError:
        """The store error for a failed read: the damaged file(s) by name, or the error."""
        damaged = []
        for path in files:
            try:
                pq.ParquetFile(path).metadata  # noqa: B018 (reads and checks the footer)
            except (OSError, pa.ArrowException) as problem:
                damaged.append(f"{path}: not a readable Parquet file ({problem})")
        if not damaged:
            return StoreError(f"{self.root}: query failed: {error}")
        return StoreError(
            "\n".join(damaged) + "\nthe store keeps every other run; delete the damaged file(s) "
            "and ingest their runs again from results/<run-id>/records.jsonl "
            f"(python -m libraries.history.ingest RESULTS_DIR --store {self.root})")

    def frame(self, where: str = "", params: list[Any] | None = None,
              files: list[Path] | None = None) -> pd.DataFrame:
        """Stored samples as the table of :func:`libraries.history.load.load_records` (same
        columns and types; ``where`` is an optional SQL condition over them; ``files``
        limits the read to those runs' files)."""
        columns = ", ".join(f'"{name}"' for name in SCHEMA.names)
        # ``where`` is SQL written by the calling code; values go in ``params``.
        sql = f"SELECT {columns} FROM samples {'WHERE ' + where if where else ''}"  # noqa: S608
        frame = self.query(sql, params, files)
        frame["start_time"] = pd.to_datetime(frame["start_time"], utc=True)
        for name in ("versions", "revision", "log"):
            frame[name] = frame[name].fillna("")
        return frame
