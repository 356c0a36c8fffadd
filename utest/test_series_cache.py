"""The change-detection cache gives the same groups and verdicts as a full search.

Every check compares :func:`analyse_store` (cache: only new samples searched) with
:func:`analyse` over the whole stored table (every series searched from scratch), night after
night, and through the cases that make the cache resume earlier or search again: a run
ingested late (older than the newest samples), a run replaced by its longer version, a new
maximum (the series' units change), a run deleted from the store, a damaged cache file.
"""

from __future__ import annotations

import json
import random
import statistics
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest

from libraries.history.ingest import ingest
from libraries.history.store import Store
from libraries.results.records import append_record
from libraries.trend.analysis import analyse
from libraries.trend.detect import Group, Run, classify_batch, spread_groups
from libraries.trend.gate import analyse_store
from libraries.trend.incremental import Scale, build, extend
from libraries.trend.series import POINTER, SeriesCache
from utest.test_trend import T0, make_record


def write_night(root: Path, day: int, levels: dict[str, float], rng: random.Random,
                run_id: str | None = None) -> str:
    run_id = run_id or f"{(T0 + timedelta(days=day)):%Y%m%d-%H%M%S}-{day:04x}"
    for test, level in levels.items():
        run_level = rng.gauss(level, level * 0.03)
        trials = [rng.gauss(run_level, level * 0.01) for _ in range(3)]
        append_record(root / run_id / "records.jsonl", make_record(
            run_id, T0 + timedelta(days=day, minutes=1), test,
            {"throughput": ("bit/s", "higher_is_better", trials)}))
    return run_id


def level(test: int, day: int) -> float:
    base = 1e9 * (1 + test)
    if test % 3 == 1 and day >= 25:
        return base * 0.8  # a regression
    if test % 3 == 2 and day >= 18:
        return base * 0.9 if day < 33 else base * 0.95  # down, then partly back
    return base


def shape(trends) -> dict:
    return {(t.test_id, t.metric): ([(g.start, g.end, g.label) for g in t.groups],
                                    [g.avg for g in t.groups], t.classification,
                                    sorted(t.anomalies.items()), t.size) for t in trends}


def assert_agree(store: Store) -> None:
    cached = shape(analyse_store(store).trends)
    full = shape(analyse(store.frame()))
    assert cached.keys() == full.keys()
    for key in full:
        assert cached[key][0] == full[key][0], key
        assert cached[key][1] == pytest.approx(full[key][1], rel=1e-12), key
        assert cached[key][2:] == full[key][2:], key


@pytest.fixture
def nights(tmp_path: Path):
    rng = random.Random(5)
    results, store = tmp_path / "results", Store(tmp_path / "history")
    tests = {f"t{i}": 0.0 for i in range(6)}

    def add(day: int, **kwargs) -> str:
        run = write_night(results, day, {t: level(i, day) for i, t in enumerate(tests)}, rng,
                          **kwargs)
        assert ingest([results], store).errors == []
        return run
    return results, store, add


def test_cached_and_full_search_agree_night_after_night(nights) -> None:
    _, store, add = nights
    for day in range(20):
        add(day)
    assert_agree(store)  # cold: every series searched in full
    reports = []
    for day in range(20, 40):
        add(day)
        reports.append(analyse_store(store).update)
        assert_agree(store)
    assert all(r.added == 1 and r.removed == 0 for r in reports)
    # Each night only extends (no series searched again) unless a series set a new maximum.
    assert sum(r.extended for r in reports) >= 20 * 6 - sum(r.rebuilt for r in reports)
    assert sum(r.rebuilt for r in reports) < 20 * 6 / 2
    trends = {t.test_id.rsplit(".", 1)[1]: t for t in analyse_store(store).trends}
    assert trends["t1"].classification == "normal"  # the day-25 step is 15 nights old
    assert len(trends["t1"].groups) >= 2


def test_a_late_run_a_replaced_run_and_a_deleted_run_resume_earlier(nights) -> None:
    results, store, add = nights
    for day in range(30):
        add(day)
    analyse_store(store)
    add(12, run_id="late-run-0012")  # ingested late: its samples sort into the middle
    report = analyse_store(store).update
    assert report.added == 1 and report.extended + report.rebuilt == 6
    assert_agree(store)
    run = add(30)
    analyse_store(store)
    rng = random.Random(9)
    write_night(results, 30, {"t-extra": 5e9}, rng, run_id=run)  # the run grew: replaced
    assert ingest([results], store).stored == [run]
    report = analyse_store(store).update
    assert (report.added, report.removed) == (1, 1)
    assert_agree(store)
    store.runs()["late-run-0012"].path.unlink()
    report = analyse_store(store).update
    assert (report.added, report.removed) == (0, 1)
    assert_agree(store)
    assert all(t.size == 31 for t in analyse_store(store).trends if "extra" not in t.test_id)


def test_deleting_the_newest_run_shortens_every_series_state(nights) -> None:
    """The newest run's file deleted: every series lost its last sample and nothing came
    after it, so no search was resumed; the cached state kept its old length (one group
    reaching past the series' end) until the states were cut to the samples kept."""
    _, store, add = nights
    for day in range(12):
        add(day)
    analyse_store(store)
    run = add(12)
    analyse_store(store)
    store.runs()[run].path.unlink()
    report = analyse_store(store).update
    assert (report.added, report.removed) == (0, 1)
    assert_agree(store)
    assert all(len(s.state) == len(s) == 12
               for s in SeriesCache.load(store.cache_dir).series.values())


def test_a_damaged_cache_is_rebuilt_with_the_same_result(nights, caplog) -> None:
    _, store, add = nights
    for day in range(12):
        add(day)
    first = shape(analyse_store(store).trends)
    folder = store.cache_dir / (store.cache_dir / POINTER).read_text()
    values = folder / "value.bin"
    values.write_bytes(values.read_bytes()[: values.stat().st_size // 2])
    add(12)  # a new night: the damaged generation cannot be read, so it is rebuilt whole
    again = analyse_store(store)
    assert "unreadable change-detection cache" in caplog.text
    assert again.update.rebuilt == 6 and again.update.added == 13
    assert_agree(store)
    assert len(SeriesCache.load(store.cache_dir).files) == 13
    assert not folder.exists()  # the damaged generation was removed
    assert first.keys() == shape(again.trends).keys()


def test_resumed_state_equals_a_full_search_bit_for_bit() -> None:
    rng = np.random.default_rng(4)
    value = np.concatenate([rng.normal(100, 2, 300), rng.normal(92, 2, 200)])
    stdev = np.abs(rng.normal(0, 1, 500))
    high = value + stdev
    full = build([(value, stdev, high)])[0]
    assert Scale.of(value[:350], high[:350]) == full.scale  # the maximum came early
    resumed = extend(full.truncated(350), value, stdev)
    assert np.array_equal(resumed.best, full.best)
    assert np.array_equal(resumed.choice, full.choice)
    reference = classify_batch([[Run(v, s, h) for v, s, h in zip(value, stdev, high,
                                                                  strict=True)]])[0]
    assert [(g.start, g.end, g.label) for g in resumed.groups()] == [
        (g.start, g.end, g.label) for g in reference]
    assert len(reference) >= 2 and statistics.fmean(value[300:]) < 95


def test_excluded_nights_are_drawn_but_never_part_of_a_level(tmp_path: Path) -> None:
    """Two partial nights (excluded) at -30 % among calm ones: in a plain series they
    stay on the chart, on the level's line, but jumpavg never sees them, in the cache and in
    a full search alike; gated, they would be a group of their own."""
    results, store = tmp_path / "results", Store(tmp_path / "history")
    rng = random.Random(3)
    failed = {12, 13}
    for day in range(20):
        run_id = f"{(T0 + timedelta(days=day)):%Y%m%d-%H%M%S}-{day:04x}"
        scale = 0.7 if day in failed else 1.0
        trials = [rng.gauss(1e9 * scale, 1e6) for _ in range(3)]
        record = make_record(run_id, T0 + timedelta(days=day, minutes=1), "calm",
                             {"throughput": ("bit/s", "higher_is_better", trials)})
        append_record(results / run_id / "records.jsonl", record)
        if day in failed:  # a suite run that did not finish: the night is partial
            (results / run_id / "run.json").write_text(json.dumps(
                {"partial": "suite run(s) did not finish: {'3node': 253}"}))
    assert ingest([results], store).errors == []
    frame = store.frame()
    assert (frame["excluded"] != "").sum() == 2
    for trends in (analyse(frame), analyse_store(store).trends):
        (trend,) = trends
        assert [(g.start, g.end, g.label) for g in trend.groups] == [(0, 19, "normal")]
        assert trend.groups[0].avg == pytest.approx(1e9, rel=2e-3)  # not pulled down
        assert trend.size == 20 and trend.classification == "normal"
    (series,) = SeriesCache.load(store.cache_dir).series.values()
    assert len(series) == 20 and len(series.state) == 18  # the search saw the judged only
    assert not series.judged[12] and not series.judged[13] and series.judged.sum() == 18
    # the same nights judged: a dip of their own
    judged = frame.assign(excluded="")
    assert len(analyse(judged)[0].groups) == 3
    assert_agree(store)


def test_groups_of_judged_samples_spread_over_all_samples() -> None:
    groups = [Group(0, 2, 1.0, "normal"), Group(3, 4, 0.8, "regression")]
    judged = np.array([False, True, True, False, True, True, False, True])
    assert spread_groups(groups, judged) == [Group(0, 4, 1.0, "normal"),
                                             Group(5, 7, 0.8, "regression")]
    assert spread_groups(groups[:1], np.ones(3, bool)) == groups[:1]
    assert spread_groups([], np.zeros(2, bool), np.array([4.0, 6.0])) == [
        Group(0, 1, 5.0, "normal")]
