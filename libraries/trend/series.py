"""The change-detection cache of a store: every series' samples and its jumpavg search state.

``<store>/_cache/series.npz`` remembers which Parquet files it has seen (name and size), each
(test id, metric) series' samples (time, run, value, trial min / max, stdev; oldest first) and
its resumable search state (:mod:`libraries.trend.incremental`). :meth:`SeriesCache.update`
reads only the files stored since: a series whose new samples come after its last one is
extended (O(n) per new sample), a series whose samples changed earlier (a late run, a run
replaced by its longer version) is resumed from the first changed sample, and one whose
units changed (a new maximum) is searched again in full; series without new samples are not
touched. A file that shrank or vanished counts as changed. The cache is derived data: deleting
it only costs one full search. Several writers replace it atomically (last one wins).
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import numpy as np

from libraries.trend.incremental import GroupState, Scale, Tables, build, extend
from libraries.trend.store import Store

LOG = logging.getLogger(__name__)
CACHE_VERSION = 1
CACHE_FILE = "series.npz"
Key = tuple[str, str]
_ARRAYS = ("t", "run", "value", "low", "high", "stdev")


@dataclass
class Series:
    """One series, oldest sample first: ``t`` (start time, µs since the epoch, UTC), ``run``
    (index into :attr:`SeriesCache.runs`), ``value``, ``low``/``high`` (trial min / max),
    ``stdev`` and the search ``state`` over them."""

    t: np.ndarray
    run: np.ndarray
    value: np.ndarray
    low: np.ndarray
    high: np.ndarray
    stdev: np.ndarray
    state: GroupState

    def __len__(self) -> int:
        return len(self.t)


@dataclass
class UpdateReport:
    """What an update did: files ``added``/``removed``, series ``extended``/``rebuilt``."""

    added: int = 0
    removed: int = 0
    extended: int = 0
    rebuilt: int = 0


@dataclass
class SeriesCache:
    """Series of a store as of the files in ``files`` (name -> size)."""

    files: dict[str, int] = field(default_factory=dict)
    runs: list[str] = field(default_factory=list)
    series: dict[Key, Series] = field(default_factory=dict)

    # -- persistence -----------------------------------------------------------------------

    @classmethod
    def load(cls, path: Path) -> SeriesCache:
        """The cache at ``path``; an empty one when absent, of another version or unreadable
        (logged: it is rebuilt from the store)."""
        if not path.is_file():
            return cls()
        try:
            with np.load(path, allow_pickle=False) as data:
                meta = json.loads(bytes(data["meta"]).decode())
                if meta.get("version") != CACHE_VERSION:
                    LOG.warning("%s: cache version %s, expected %s: rebuilding", path,
                                meta.get("version"), CACHE_VERSION)
                    return cls()
                arrays = {name: data[name] for name in
                          (*_ARRAYS, "offsets", "best", "choice", "group_avg", "scales")}
        except (OSError, ValueError, KeyError, zipfile.BadZipFile) as error:
            LOG.warning("%s: unreadable change-detection cache (%s): rebuilding", path, error)
            return cls()
        cache = cls(files=meta["files"], runs=meta["runs"])
        offsets = arrays["offsets"]
        for index, key in enumerate(meta["keys"]):
            part = slice(int(offsets[index]), int(offsets[index + 1]))
            scale = Scale(*(float(x) for x in arrays["scales"][index]))
            cache.series[(key[0], key[1])] = Series(
                *(arrays[name][part] for name in _ARRAYS),
                GroupState(scale, arrays["best"][part], arrays["choice"][part],
                           arrays["group_avg"][part]))
        return cache

    def save(self, path: Path) -> None:
        """Write the cache atomically (temporary file, then rename)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        keys = list(self.series)
        ordered = [self.series[k] for k in keys]
        lengths = np.array([len(s) for s in ordered], dtype=np.int64)
        arrays = {name: _concat([getattr(s, name) for s in ordered], name) for name in _ARRAYS}
        arrays["best"] = _concat([s.state.best for s in ordered], "best")
        arrays["choice"] = _concat([s.state.choice for s in ordered], "choice")
        arrays["group_avg"] = _concat([s.state.group_avg for s in ordered], "group_avg")
        arrays["scales"] = np.array([[s.state.scale.max_value, s.state.scale.low]
                                     for s in ordered], dtype=float).reshape(-1, 2)
        arrays["offsets"] = np.concatenate([[0], np.cumsum(lengths)])
        meta = {"version": CACHE_VERSION, "files": self.files, "runs": self.runs,
                "keys": [list(k) for k in keys]}
        arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
        temporary = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
        try:
            with temporary.open("wb") as handle:
                np.savez(handle, **arrays)
            os.replace(temporary, path)
        finally:
            temporary.unlink(missing_ok=True)

    # -- update ----------------------------------------------------------------------------

    def update(self, store: Store) -> UpdateReport:
        """Bring the cache up to the store's files (see the module docstring)."""
        current = {}
        for path in store.files():
            current[str(path.relative_to(store.root))] = path.stat().st_size
        removed = [name for name, size in self.files.items() if current.get(name) != size]
        added = [name for name, size in current.items() if self.files.get(name) != size]
        report = UpdateReport(added=len(added), removed=len(removed))
        valid: dict[Key, int] = {}
        if removed:
            self._drop_runs({Path(name).name.split("~")[0] for name in removed}, valid)
        if added:
            self._merge([store.root / name for name in added], store, valid)
        self._search(valid, report)
        self.files = current
        return report

    def _run_index(self, run_id: str, index: dict[str, int]) -> int:
        if run_id not in index:
            index[run_id] = len(self.runs)
            self.runs.append(run_id)
        return index[run_id]

    def _drop_runs(self, run_ids: set[str], valid: dict[Key, int]) -> None:
        gone = np.array([i for i, run in enumerate(self.runs) if run in run_ids], dtype=np.int32)
        for key, series in list(self.series.items()):
            mask = np.isin(series.run, gone)
            if not mask.any():
                continue
            first = int(np.argmax(mask))
            keep = ~mask
            self.series[key] = Series(*(getattr(series, n)[keep] for n in _ARRAYS),
                                      series.state.truncated(first))
            valid[key] = min(valid.get(key, first), first)

    def _merge(self, files: list[Path], store: Store, valid: dict[Key, int]) -> None:
        try:
            con = store.connect(files)
        except duckdb.Error as error:
            raise store.explain(error, files) from None
        try:
            names = dict(con.execute("SELECT DISTINCT hash(test_id, metric), [test_id, metric] "
                                     "FROM samples").fetchall())
            run_names = dict(con.execute("SELECT DISTINCT hash(run_id), run_id FROM samples")
                             .fetchall())
            data = con.execute(
                "SELECT hash(test_id, metric) AS k, epoch_us(start_time) AS t, hash(run_id) AS r,"
                " value, low, high, stdev FROM samples ORDER BY k, t, run_id").fetchnumpy()
        except duckdb.Error as error:
            raise store.explain(error, files) from None
        finally:
            con.close()
        index = {run: i for i, run in enumerate(self.runs)}
        hashes, inverse = np.unique(data["r"], return_inverse=True)
        run = np.array([self._run_index(run_names[h], index) for h in hashes.tolist()],
                       dtype=np.int32)[inverse]
        keys = np.asarray(data["k"])
        bounds = np.flatnonzero(np.diff(keys)) + 1
        for start, end in zip(np.r_[0, bounds], np.r_[bounds, len(keys)], strict=True):
            test_id, metric = names[int(keys[start])]
            new = [np.asarray(data["t"][start:end], dtype=np.int64), run[start:end],
                   *(np.asarray(data[n][start:end], dtype=float)
                     for n in ("value", "low", "high", "stdev"))]
            self._insert((test_id, metric), new, valid)

    def _insert(self, key: Key, new: list[np.ndarray], valid: dict[Key, int]) -> None:
        old = self.series.get(key)
        if old is None:
            empty = GroupState(Scale(1.0, 0.0), np.empty(0), np.empty(0, np.int32), np.empty(0))
            self.series[key] = Series(*new, empty)
            valid[key] = 0
            return
        arrays = [np.concatenate([getattr(old, n), part]) for n, part in zip(_ARRAYS, new,
                                                                              strict=True)]
        first = len(old)
        if len(old) and new[0][0] <= old.t[-1]:  # not after the last sample: merge in order
            names = np.array(self.runs)[arrays[1]]
            order = np.lexsort((names, arrays[0]))
            arrays = [a[order] for a in arrays]
            moved = np.flatnonzero(order != np.arange(len(order)))
            first = int(moved[0]) if len(moved) else len(old)
        self.series[key] = Series(*arrays, old.state)
        valid[key] = min(valid.get(key, first), first)

    def _search(self, valid: dict[Key, int], report: UpdateReport) -> None:
        full: list[Key] = []
        longest = max((len(self.series[k]) for k in valid if k in self.series), default=0)
        tables = Tables.upto(longest)
        for key, prefix in valid.items():
            series = self.series[key]
            if not len(series):
                del self.series[key]
                continue
            scale = Scale.of(series.value, series.high)
            if prefix == 0 or scale != series.state.scale:
                full.append(key)
                continue
            series.state = extend(series.state.truncated(prefix), series.value, series.stdev,
                                  tables)
            report.extended += 1
        states = build([(self.series[k].value, self.series[k].stdev, self.series[k].high)
                        for k in full])
        for key, state in zip(full, states, strict=True):
            self.series[key].state = state
        report.rebuilt = len(full)


def _concat(parts: list[np.ndarray], name: str) -> np.ndarray:
    dtype = {"t": np.int64, "run": np.int32, "choice": np.int32}.get(name, np.float64)
    return np.concatenate(parts).astype(dtype, copy=False) if parts else np.empty(0, dtype)


def update_cache(store: Store) -> tuple[SeriesCache, UpdateReport]:
    """Load the store's cache, bring it up to date and save it when anything changed."""
    path = store.cache_dir / CACHE_FILE
    cache = SeriesCache.load(path)
    report = cache.update(store)
    if report.added or report.removed:
        cache.save(path)
    return cache, report
