"""The change-detection cache of a store: every series' samples and its jumpavg search state.

``<store>/_cache/`` remembers which Parquet files it has seen (name and size), each
(test id, metric) series' samples (time, run, value, trial min / max, stdev, judged; oldest
first) and its resumable search state (:mod:`libraries.trend.incremental`) over its judged
samples only (an excluded one, a failed, invalid or partial night, is drawn but never part of
a level: :func:`Series.groups`), as raw arrays in a generation
folder (``gen-*``, memory-mapped when read; ``series.current`` names the current one).
:func:`refresh` reads only the files stored since: a series whose new samples come after its
last one is extended (O(n) per new sample), a series whose samples changed earlier (a late
run, a run replaced by its longer version) is resumed from the first changed sample, and one
whose units changed (a new maximum) is searched again in full; series without new samples are
copied as they are. A file that shrank or vanished counts as changed. Series are merged,
searched and written one at a time, so memory holds about one mapped copy of the cache. The
cache is derived data: deleting it only costs one full search. Several writers each write their own
generation and switch the pointer atomically (last one wins).
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import numpy as np

from libraries.history.store import Store, StoreError
from libraries.trend.detect import Group, spread_groups
from libraries.trend.incremental import GroupState, Scale, Tables, build, extend

LOG = logging.getLogger(__name__)
CACHE_VERSION = 3
POINTER = "series.current"
Key = tuple[str, str]
_ARRAYS = ("t", "run", "value", "low", "high", "stdev", "judged")
_STATE = ("best", "choice", "group_avg")
_DTYPES = {"t": np.int64, "run": np.int32, "value": np.float64, "low": np.float64,
           "high": np.float64, "stdev": np.float64, "judged": np.bool_, "best": np.float64,
           "choice": np.int32, "group_avg": np.float64}
_SAMPLES = ("SELECT hash(test_id, metric) AS k, epoch_us(start_time) AS t, hash(run_id) AS r,"
            " value, low, high, stdev, coalesce(excluded, '') = '' AS judged FROM samples"
            " ORDER BY k, t, run_id")
_SAMPLES_BEFORE_EXCLUDED = _SAMPLES.replace("coalesce(excluded, '') = ''", "true")
"""Every sample of the files read (runs stored before the ``excluded`` column: all judged)."""
BATCH_CELLS = 2_000_000
"""Series searched in full are batched up to this many (series x runs) cells."""


@dataclass
class Series:
    """One series, oldest sample first: ``t`` (start time, µs since the epoch, UTC), ``run``
    (index into :attr:`SeriesCache.runs`), ``value``, ``low``/``high`` (trial min / max),
    ``stdev``, ``judged`` (False: an excluded sample) and the search ``state`` over the
    judged samples."""

    t: np.ndarray
    run: np.ndarray
    value: np.ndarray
    low: np.ndarray
    high: np.ndarray
    stdev: np.ndarray
    judged: np.ndarray
    state: GroupState

    def __len__(self) -> int:
        return len(self.t)

    def arrays(self) -> list[np.ndarray]:
        return [getattr(self, name) for name in _ARRAYS]

    def groups(self) -> list[Group]:
        """jumpavg's groups of the judged samples, as groups of all samples (an excluded
        sample is drawn on the level before it: :func:`libraries.trend.detect.spread_groups`)."""
        return spread_groups(self.state.groups(), self.judged, self.value)


@dataclass
class UpdateReport:
    """What an update did: files ``added``/``removed``, series ``extended``/``rebuilt``."""

    added: int = 0
    removed: int = 0
    extended: int = 0
    rebuilt: int = 0


@dataclass
class SeriesCache:
    """Series of a store as of the files in ``files`` (name -> size), memory-mapped from one
    generation folder of the cache (``folder``)."""

    files: dict[str, int] = field(default_factory=dict)
    runs: list[str] = field(default_factory=list)
    series: dict[Key, Series] = field(default_factory=dict)
    folder: Path | None = None

    @classmethod
    def load(cls, cache_dir: Path) -> SeriesCache:
        """The current generation under ``cache_dir``; an empty cache when there is none, or
        it is of another version or unreadable (logged: it is rebuilt from the store)."""
        pointer = cache_dir / POINTER
        if not pointer.is_file():
            return cls()
        try:
            folder = cache_dir / pointer.read_text().strip()
            meta = json.loads((folder / "meta.json").read_text())
            if meta.get("version") != CACHE_VERSION:
                LOG.warning("%s: cache version %s, expected %s: rebuilding", folder,
                            meta.get("version"), CACHE_VERSION)
                return cls()
            offsets, state_offsets = meta["offsets"], meta["state_offsets"]
            arrays = {name: _mapped(folder / f"{name}.bin", dtype, (
                state_offsets if name in _STATE else offsets)[-1])
                      for name, dtype in _DTYPES.items()}
            cache = cls(files=meta["files"], runs=meta["runs"], folder=folder)
            for index, (key, scale) in enumerate(zip(meta["keys"], meta["scales"],
                                                     strict=True)):
                part = slice(offsets[index], offsets[index + 1])
                judged = slice(state_offsets[index], state_offsets[index + 1])
                cache.series[(key[0], key[1])] = Series(
                    *(arrays[name][part] for name in _ARRAYS),
                    GroupState(Scale(*scale), *(arrays[name][judged] for name in _STATE)))
        except (OSError, ValueError, KeyError, TypeError) as error:
            LOG.warning("%s: unreadable change-detection cache (%s): rebuilding", cache_dir,
                        error)
            return cls()
        return cache


def _mapped(path: Path, dtype: type, length: int) -> np.ndarray:
    """``length`` values of ``dtype`` mapped from ``path`` (empty when none)."""
    return np.memmap(path, dtype=dtype, mode="r", shape=(length,)) if length else \
        np.empty(0, dtype)


class _Writer:
    """Appends series to the raw arrays of a new generation folder, one series at a time."""

    def __init__(self, folder: Path):
        folder.mkdir(parents=True)
        self.folder = folder
        self.handles = {name: (folder / f"{name}.bin").open("wb") for name in _DTYPES}
        self.keys: list[list[str]] = []
        self.scales: list[list[float]] = []
        self.offsets = [0]
        self.state_offsets = [0]

    def write(self, key: Key, series: Series) -> None:
        parts = dict(zip(_ARRAYS, series.arrays(), strict=True))
        parts.update(best=series.state.best, choice=series.state.choice,
                     group_avg=series.state.group_avg)
        for name, handle in self.handles.items():
            handle.write(np.ascontiguousarray(parts[name], dtype=_DTYPES[name]).tobytes())
        self.keys.append(list(key))
        self.scales.append([series.state.scale.max_value, series.state.scale.low])
        self.offsets.append(self.offsets[-1] + len(series))
        self.state_offsets.append(self.state_offsets[-1] + len(series.state))

    def finish(self, files: dict[str, int], runs: list[str]) -> None:
        for handle in self.handles.values():
            handle.close()
        meta = {"version": CACHE_VERSION, "files": files, "runs": runs, "keys": self.keys,
                "scales": self.scales, "offsets": self.offsets,
                "state_offsets": self.state_offsets}
        (self.folder / "meta.json").write_text(json.dumps(meta))


def _read_added(store: Store, files: list[Path], runs: list[str]
                ) -> dict[Key, list[np.ndarray]]:
    """The samples of ``files`` per series, sorted by time and run id; new run ids are
    appended to ``runs``."""
    try:
        con = store.connect(files)
    except duckdb.Error as error:
        raise store.explain(error, files) from None
    try:
        names = dict(con.execute("SELECT DISTINCT hash(test_id, metric), [test_id, metric] "
                                 "FROM samples").fetchall())
        run_names = dict(con.execute("SELECT DISTINCT hash(run_id), run_id FROM samples")
                         .fetchall())
        columns = {c[0] for c in con.execute("SELECT * FROM samples LIMIT 0").description}
        data = con.execute(_SAMPLES if "excluded" in columns else _SAMPLES_BEFORE_EXCLUDED
                           ).fetchnumpy()
    except duckdb.Error as error:
        raise store.explain(error, files) from None
    finally:
        con.close()
    index = {run: i for i, run in enumerate(runs)}
    for name in run_names.values():
        if name not in index:
            index[name] = len(runs)
            runs.append(name)
    hashes, inverse = np.unique(data["r"], return_inverse=True)
    run = np.array([index[run_names[h]] for h in hashes.tolist()], dtype=np.int32)[inverse]
    keys = np.asarray(data["k"])
    bounds = np.flatnonzero(np.diff(keys)) + 1
    grouped: dict[Key, list[np.ndarray]] = {}
    for start, end in zip(np.r_[0, bounds], np.r_[bounds, len(keys)], strict=True):
        test_id, metric = names[int(keys[start])]
        grouped[(test_id, metric)] = [
            np.asarray(data["t"][start:end], dtype=np.int64), run[start:end],
            *(np.asarray(data[n][start:end], dtype=np.float64)
              for n in ("value", "low", "high", "stdev")),
            np.asarray(data["judged"][start:end], dtype=np.bool_)]
    return grouped


def _merged(old: Series | None, new: list[np.ndarray] | None, gone: np.ndarray,
            runs: list[str]) -> tuple[list[np.ndarray], int]:
    """The series' samples after dropping the runs ``gone`` and adding ``new``, and how many
    of its first samples are unchanged (its search state stays valid that far)."""
    if old is None:
        return list(new or []), 0
    arrays, prefix = old.arrays(), len(old)
    if gone.size:
        mask = np.isin(old.run, gone)
        if mask.any():
            prefix = int(np.argmax(mask))
            arrays = [a[~mask] for a in arrays]
    if new is not None:
        late = len(arrays[0]) and new[0][0] <= arrays[0][-1]
        arrays = [np.concatenate([a, b]) for a, b in zip(arrays, new, strict=True)]
        if late:  # not after the last sample: merge in (time, run id) order
            order = np.lexsort((np.array(runs)[arrays[1]], arrays[0]))
            arrays = [a[order] for a in arrays]
            moved = np.flatnonzero(order != np.arange(len(order)))
            prefix = min(prefix, int(moved[0]) if len(moved) else prefix)
    return arrays, prefix


def refresh(store: Store) -> tuple[SeriesCache, UpdateReport]:
    """Bring the store's cache up to its files (see the module docstring): series are merged,
    searched and written to a new generation one at a time (memory stays about one copy of
    the cache, mapped from disk), then the generation becomes current."""
    cache_dir = store.cache_dir
    old = SeriesCache.load(cache_dir)
    current = {str(p.relative_to(store.root)): p.stat().st_size for p in store.files()}
    removed = [name for name, size in old.files.items() if current.get(name) != size]
    added = [name for name, size in current.items() if old.files.get(name) != size]
    report = UpdateReport(added=len(added), removed=len(removed))
    if not removed and not added:
        return old, report
    runs = list(old.runs)
    gone_names = {Path(name).name.split("~")[0] for name in removed}
    gone = np.array([i for i, run in enumerate(runs) if run in gone_names], dtype=np.int32)
    new = _read_added(store, [store.root / name for name in added], runs) if added else {}
    try:
        writer = _Writer(cache_dir / f"gen-{secrets.token_hex(6)}")
    except OSError as error:
        raise StoreError(f"{cache_dir}: cannot write the change-detection cache ({error}); "
                         "give the trend tool a writable --store") from None
    keys = sorted(set(old.series) | set(new))
    longest = max((len(old.series[k]) if k in old.series else 0) + len(new.get(k, [[]])[0])
                  for k in keys) if keys else 0
    tables = Tables.upto(longest)
    batch: list[tuple[Key, list[np.ndarray]]] = []
    for key in keys:
        arrays, prefix = _merged(old.series.get(key), new.get(key), gone, runs)
        if not len(arrays) or not len(arrays[0]):
            continue
        state = old.series[key].state if key in old.series else None
        judged = arrays[6]
        scale = _scale(arrays, judged)
        prefix = int(np.count_nonzero(judged[:prefix]))  # in judged samples
        if state is None or prefix == 0 or scale != state.scale:
            batch.append((key, arrays))
            if len(batch) * max(len(a[0]) for _, a in batch) > BATCH_CELLS:
                report.rebuilt += _write_built(writer, batch)
            continue
        state = state.truncated(prefix)  # the newest run deleted: no longer than the series
        if prefix < np.count_nonzero(judged):
            state = extend(state, arrays[2][judged], arrays[5][judged], tables)
            report.extended += 1
        writer.write(key, Series(*arrays, state))
    report.rebuilt += _write_built(writer, batch)
    writer.finish(current, runs)
    temporary = cache_dir / f".{POINTER}.{secrets.token_hex(4)}"
    temporary.write_text(writer.folder.name)
    os.replace(temporary, cache_dir / POINTER)
    keep = {writer.folder, old.folder}
    for folder in cache_dir.glob("gen-*"):
        if folder not in keep:
            shutil.rmtree(folder, ignore_errors=True)
    del old
    return SeriesCache.load(cache_dir), report


def _scale(arrays: list[np.ndarray], judged: np.ndarray) -> Scale | None:
    """The search's scale over a series' judged samples (None: it has none)."""
    return Scale.of(arrays[2][judged], arrays[4][judged]) if judged.any() else None


def _write_built(writer: _Writer, batch: list[tuple[Key, list[np.ndarray]]]) -> int:
    """Search the batched series in full (their judged samples), write them; empties the
    batch."""
    searched = [(key, arrays, arrays[6]) for key, arrays in batch]
    states = iter(build([(a[2][j], a[5][j], a[4][j]) for _, a, j in searched if j.any()]))
    for key, arrays, judged in searched:
        state = next(states) if judged.any() else GroupState(
            Scale(1.0, 0.0), np.empty(0), np.empty(0, np.int32), np.empty(0))
        writer.write(key, Series(*arrays, state))
    count = len(batch)
    batch.clear()
    return count


def update_cache(store: Store) -> tuple[SeriesCache, UpdateReport]:
    """The store's cache, brought up to date (an alias of :func:`refresh`)."""
    return refresh(store)
