"""Trends of a whole store, fast at any history size: the nightly gate and the dashboard.

:func:`analyse_store` brings the change-detection cache up to the store
(:mod:`libraries.trend.series`: only series with new samples are searched again), takes each
series' groups from it, reads the newest :data:`TAIL` samples of every series with all their
columns from the Parquet files of the runs they belong to (DuckDB), and judges each series
with :func:`libraries.trend.analysis.judge`, the same function :func:`analysis.analyse` uses on
a full table. An A/B ratio series' steps are found walking all its nights (the cache holds
each night's value, standard error and whether it is judged), so the gate and ``--engine
jumpavg`` over the full table flag the same nights. A :class:`SeriesTrend` from here has
``samples`` = those newest rows and ``history`` = every sample's time, value and trial range
(for the dashboard's downsampled older points).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import duckdb
import numpy as np
import pandas as pd

from libraries.history.ab_series import is_ratio_metric
from libraries.history.store import Store
from libraries.results.records import RecordError
from libraries.trend.analysis import (
    History,
    SeriesTrend,
    judge,
    rank,
    ratio_alpha,
    select_tests,
)
from libraries.trend.series import SeriesCache, UpdateReport, update_cache

TAIL = 60
"""Newest samples of each series read with every column (drawn one by one on the chart)."""


@dataclass(frozen=True)
class StoreTrends:
    """The trends of a store and what the cache update did."""

    trends: list[SeriesTrend]
    update: UpdateReport
    runs: int


def analyse_store(store: Store, recent: int = 5, min_samples: int = 5,
                  tests: Sequence[str] = (), tail: int = TAIL) -> StoreTrends:
    """Classify every series of ``store`` (those whose test id matches ``tests``)."""
    cache, report = update_cache(store)
    keys = sorted(cache.series)
    if tests:
        wanted = set(select_tests(pd.DataFrame({"test_id": sorted({k[0] for k in keys})}),
                                  tests)["test_id"])
        keys = [k for k in keys if k[0] in wanted]
    rows = _tail_rows(store, cache, keys, max(tail, recent, 1))
    alpha, _ = ratio_alpha([(k[1], str(rows[k]["unit"].iloc[-1]), rows[k])
                            for k in keys if k in rows and len(rows[k])])
    trends = []
    for key in keys:
        series = cache.series[key]
        samples = rows.get(key)
        expected = min(len(series), max(tail, recent, 1))
        if samples is None or len(samples) != expected:
            raise RecordError(f"{store.root}: {key[0]} [{key[1]}]: the store holds "
                              f"{0 if samples is None else len(samples)} of the newest "
                              f"{expected} samples the cache lists; delete "
                              f"{store.cache_dir} to rebuild it")
        history = History(series.t, series.value, series.low, series.high)
        unit = str(samples["unit"].iloc[-1])
        nights = pd.DataFrame({"value": series.value, "stdev": series.stdev,
                               "excluded": np.where(series.judged, "", "excluded")}) \
            if is_ratio_metric(key[1], unit) else None
        trends.append(judge(key, samples, series.groups(), recent, min_samples, history,
                            alpha=alpha, nights=nights))
    return StoreTrends(rank(trends), report, len(cache.files))


def _tail_rows(store: Store, cache: SeriesCache, keys: list[tuple[str, str]],
               tail: int) -> dict[tuple[str, str], pd.DataFrame]:
    """The newest ``tail`` rows of each series, every column, oldest first (one DuckDB query
    over the files of the runs those rows belong to)."""
    if not keys:
        return {}
    wanted_runs: set[int] = set()
    since = []
    for key in keys:
        series = cache.series[key]
        wanted_runs.update(np.unique(series.run[-tail:]).tolist())
        since.append(int(series.t[-tail:][0]))
    runs = {cache.runs[i] for i in wanted_runs}
    files = [stored.path for run_id, stored in store.runs().items() if run_id in runs]
    wanted = pd.DataFrame({"want_test": [k[0] for k in keys], "want_metric": [k[1] for k in keys],
                           "since": since, "k": np.arange(len(keys))})
    try:
        con = store.connect(files)
    except duckdb.Error as error:
        raise store.explain(error, files) from None
    try:
        con.register("wanted", wanted)
        frame = con.execute(
            "SELECT s.* EXCLUDE (month), w.k AS series_index FROM samples s JOIN wanted w"
            " ON s.test_id = w.want_test AND s.metric = w.want_metric"
            " WHERE epoch_us(s.start_time) >= w.since"
            " ORDER BY w.k, s.start_time, s.run_id").df()
    except duckdb.Error as error:
        raise store.explain(error, files) from None
    finally:
        con.close()
    frame["start_time"] = pd.to_datetime(frame["start_time"], utc=True)
    for name in ("versions", "revision", "log", "excluded", "files"):  # the last two: absent
        frame[name] = frame[name].fillna("") if name in frame.columns else ""  # in older runs
    codes = frame.pop("series_index").to_numpy()
    bounds = np.flatnonzero(codes[1:] != codes[:-1]) + 1
    return {keys[int(codes[start])]: frame.iloc[int(start):int(end)]
            for start, end in zip(np.r_[0, bounds], np.r_[bounds, len(frame)], strict=True)}
