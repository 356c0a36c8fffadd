"""The columnar history: ingest (idempotent, v1..v3, concurrent), DuckDB reads, corrupt input.

Inputs are schema-valid records written the way the Results library writes them.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from libraries.history.ingest import ingest
from libraries.history.load import load_records
from libraries.history.store import Store, StoreError
from libraries.report.trend_command import main
from libraries.results import records as records_module
from libraries.results.records import RecordError, append_record
from utest.test_trend import SERIES, T0, make_record, write_runs

REPO = Path(__file__).resolve().parent.parent


def lab_record(run_id: str, lab: str, test: str, day: int, value: float) -> dict:
    """A v2-style record of ``test`` on ``lab`` (test id ``<lab>/tcp_term/<test>``)."""
    trials = [value * 0.99, value, value * 1.01]
    record = make_record(run_id, T0 + timedelta(days=day, minutes=1), test,
                         {"throughput": ("Gbit/s", "higher_is_better", trials)})
    record.update(topology=lab, test_id=f"{lab}/tcp_term/{test}", schema_version=2,
                  telemetry={"unavailable": "not measured in this test"})
    return record


def write_lab_runs(root: Path, labs: dict[str, float], days: int = 10, tag: str = "0") -> None:
    """One run per day; each run measures ``forward`` on every lab (lab -> level); ``tag``
    makes the run ids of another runner's results differ."""
    for day in range(days):
        run_id = f"{(T0 + timedelta(days=day)):%Y%m%d-%H%M%S}-{tag}{day:03x}"
        for lab, level in labs.items():
            append_record(root / run_id / "records.jsonl",
                          lab_record(run_id, lab, "forward", day, level + day * 0.01))


def sorted_frame(frame):
    return frame.sort_values(["test_id", "metric", "run_id"]).reset_index(drop=True)


def test_ingest_is_idempotent_and_the_store_reads_as_the_records(tmp_path: Path) -> None:
    write_runs(tmp_path / "results", SERIES)
    store = Store(tmp_path / "history")
    first = ingest([tmp_path / "results"], store)
    assert len(first.stored) == 30 and not first.errors
    files = {p: p.stat().st_mtime_ns for p in store.files()}
    assert all(p.parent.name == "month=2026-01" for p in files)
    again = ingest([tmp_path / "results"], store)
    assert again.stored == [] and len(again.skipped) == 30
    assert {p: p.stat().st_mtime_ns for p in store.files()} == files  # nothing rewritten
    stored = sorted_frame(store.frame())
    loaded = sorted_frame(load_records([tmp_path / "results"]))
    assert list(stored.columns) == list(loaded.columns)
    for column in stored.columns:
        if column == "trial_values":
            assert [list(v) for v in stored[column]] == [list(v) for v in loaded[column]]
        elif column.startswith("ci_"):
            assert stored[column].isna().all() and loaded[column].isna().all()
        else:
            assert stored[column].tolist() == loaded[column].tolist(), column


def test_a_run_that_grew_is_replaced_by_its_longer_version(tmp_path: Path) -> None:
    write_lab_runs(tmp_path / "results", {"lab-a": 10.0}, days=3)
    store = Store(tmp_path / "history")
    ingest([tmp_path / "results"], store)
    run_dir = sorted((tmp_path / "results").iterdir())[-1]
    append_record(run_dir / "records.jsonl", lab_record(run_dir.name, "lab-b", "forward", 2, 9))
    report = ingest([tmp_path / "results"], store)
    assert report.stored == [run_dir.name]
    assert len(list(store.root.glob(f"month=*/{run_dir.name}~*.parquet"))) == 1
    assert len(store.frame("run_id = ?", [run_dir.name])) == 2


def v3_record(run_id: str, lab: str, test: str, value: float) -> dict:
    """A record of schema v3: every metric with its interval, the rounds and environment."""
    record = lab_record(run_id, lab, test, 0, value)
    record.update(schema_version=3, verdict="inconclusive",
                  rounds={"planned": 3, "run": 3, "max_trials": 9, "max_seconds": None,
                          "alpha": 0.05, "stopped": "no criteria"},
                  environment={"unavailable": "not read in this test"})
    record["metrics"]["throughput"]["interval"] = {"low": value * 0.95, "high": value * 1.05,
                                                   "level": 0.75, "method": "order statistics"}
    return record


def test_records_v1_to_v4_map_to_one_table(tmp_path: Path) -> None:
    assert records_module.SCHEMA_VERSIONS == (1, 2, 3, 4)
    run_dir = tmp_path / "results" / "r1"
    v1 = make_record("r1", T0, "old", {"throughput": ("Gbit/s", "higher_is_better", [1., 2.])})
    v2 = lab_record("r1", "lab-a", "forward", 0, 10.0)
    v3 = v3_record("r1", "lab-a", "reverse", 12.0)
    v4 = v3_record("r1", "lab-a", "capacity", 14.0)
    v4.update(schema_version=4, verdict="fail", invalid=["proxy path: capacity 392 below the "
                                                         "latency pass"],
              unavailable={"capacity": "proxy path: capacity 392 below the latency pass"})
    for record in (v1, v2, v3, v4):
        append_record(run_dir / "records.jsonl", record)
    store = Store(tmp_path / "history")
    assert ingest([tmp_path / "results"], store).errors == []
    frame = store.frame().set_index("test_id")
    assert frame.loc["lab-a/tcp_term/reverse", ["ci_low", "ci_high", "ci_level"]].tolist() == [
        pytest.approx(11.4), pytest.approx(12.6), 0.75]
    assert frame.loc["lab-a/tcp_term/reverse", "ci_method"] == "order statistics"
    assert frame.loc["lab-a/tcp_term/reverse", "verdict"] == "inconclusive"
    assert frame.loc["lab-a/tcp_term/forward", ["ci_low", "ci_high"]].isna().all()
    assert frame["schema_version"].sort_values().tolist() == [1, 2, 3, 4]
    assert frame.loc["lab-a/tcp_term/capacity", "verdict"] == "fail"
    assert frame.loc["lab-a/tcp_term/reverse", "test_key"] == "tcp_term/reverse"
    assert frame.loc["lab-a/tcp_term/reverse", "lab"] == "lab-a"
    assert list(frame.loc["lab-a/tcp_term/reverse", "trial_values"]) == pytest.approx(
        [11.88, 12.0, 12.12])


def test_lab_a_against_lab_b_on_the_same_test_is_one_query(tmp_path: Path) -> None:
    write_lab_runs(tmp_path / "results", {"lab-a": 10.0, "lab-b": 8.0})
    store = Store(tmp_path / "history")
    ingest([tmp_path / "results"], store)
    rows = store.query(
        "SELECT test_key, metric, median(value) FILTER (lab = 'lab-a') AS a,"
        " median(value) FILTER (lab = 'lab-b') AS b FROM samples GROUP BY ALL")
    assert rows["test_key"].tolist() == ["tcp_term/forward"]
    assert rows["a"].iloc[0] / rows["b"].iloc[0] == pytest.approx(10.045 / 8.045)


def _runs_rows(store: Store) -> dict[str, int]:
    frame = store.frame()
    return frame.groupby("run_id").size().to_dict()


def test_bad_json_line_is_named_and_stored_runs_and_good_runs_stay(tmp_path: Path,
                                                                   capsys) -> None:
    results = tmp_path / "results"
    write_runs(results, SERIES, runs=3)
    store = Store(results / "history")
    ingest([results], store)
    before = _runs_rows(store)
    bad = results / "late-bad" / "records.jsonl"
    bad.parent.mkdir()
    good = make_record("late-good", T0, "x", {"throughput": ("Gbit/s", "higher_is_better",
                                                             [1.0, 1.1])})
    bad.write_text(json.dumps(dict(good, run_id="late-bad")) + "\n{not json\n")
    append_record(results / "late-good" / "records.jsonl", good)
    assert main([str(results)]) == 2
    assert f"{bad}:2: not valid JSON" in capsys.readouterr().err
    after = _runs_rows(store)
    assert after == {**before, "late-good": 1}


def test_unknown_schema_version_is_named_and_nothing_is_stored_from_it(tmp_path: Path,
                                                                       capsys) -> None:
    results = tmp_path / "results"
    record = make_record("r9", T0, "x", {"throughput": ("Gbit/s", "higher_is_better", [1., 1.1])})
    append_record(results / "r1" / "records.jsonl", dict(record, run_id="r1"))
    path = results / "r9" / "records.jsonl"
    path.parent.mkdir()
    path.write_text(json.dumps(dict(record, schema_version=9)) + "\n")
    assert main([str(results)]) == 2
    err = capsys.readouterr().err
    assert f"{path}:1: schema_version 9 is not a record schema this library knows" in err
    assert set(Store(results / "history").runs()) == {"r1"}


def test_a_parquet_file_cut_short_is_named_and_the_other_runs_stay(tmp_path: Path,
                                                                   capsys) -> None:
    results = tmp_path / "results"
    write_runs(results, SERIES, runs=6)
    store = Store(results / "history")
    ingest([results], store)
    victim = store.files()[2]
    victim.write_bytes(victim.read_bytes()[: victim.stat().st_size // 2])
    with pytest.raises(StoreError, match=rf"{victim}: not a readable Parquet file"):
        store.frame()
    assert main([str(results), "--compare", store.files()[0].name.split("~")[0],
                 store.files()[1].name.split("~")[0]]) == 2
    assert f"{victim}: not a readable Parquet file" in capsys.readouterr().err
    assert main([str(results)]) == 2  # the cache sees the file change and reads it again
    assert str(victim) in capsys.readouterr().err
    victim.unlink()  # the fix the message names: delete it and ingest the run again
    assert main([str(results)]) == 0  # six flat nights
    assert len(store.frame()) == 6 * len(SERIES)


def test_two_concurrent_ingests_into_one_store_lose_nothing(tmp_path: Path) -> None:
    first, second = tmp_path / "lab-a", tmp_path / "lab-b"
    write_lab_runs(first, {"lab-a": 10.0}, days=40, tag="a")
    write_lab_runs(second, {"lab-b": 8.0}, days=40, tag="b")
    # Both publish 10 runs of the other too (a shared run ingested twice at once).
    for run in sorted(second.iterdir())[:10]:
        shutil.copytree(run, first / f"{run.name}")
    shared = tmp_path / "shared-history"
    command = [sys.executable, "-m", "libraries.history.ingest", "--store", str(shared)]
    processes = [subprocess.Popen([*command, str(root)], cwd=REPO, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for root in (first, second)]
    outputs = [p.communicate(timeout=120) for p in processes]
    assert [p.returncode for p in processes] == [0, 0], outputs
    store = Store(shared)
    assert len(store.runs()) == 80
    frame = store.frame()
    assert sorted(frame.groupby("lab").size().to_dict().items()) == [("lab-a", 40),
                                                                     ("lab-b", 40)]
    assert not frame.duplicated(["run_id", "test_id", "metric"]).any()
    assert not list(shared.rglob("*.tmp"))


def test_missing_store_folder_reads_as_empty_and_records_error_is_a_record_error(
        tmp_path: Path) -> None:
    store = Store(tmp_path / "nothing-here")
    assert store.frame().empty and store.runs() == {}
    assert issubclass(StoreError, RecordError)


def test_ab_records_are_series_of_their_own_per_comparison_file(tmp_path: Path) -> None:
    """Issue 34: A/B records entered the history under the plain test ids, so ab_* series of
    different comparison files mixed in one trend line."""
    run_dir = tmp_path / "results" / "r1"
    plain = v3_record("r1", "lab-a", "forward", 10.0)
    records = [plain]
    for name, sha in (("nginx builds", "a" * 64), ("nginx builds", "b" * 64), ("knob", "c" * 64)):
        record = v3_record("r1", "lab-a", "forward", 0.97)
        record.update(schema_version=4, ab={
            "comparison": {"path": "ab.yaml", "sha256": sha, "text": "", "name": name,
                           "aa": False},
            "sides": {"a": {"name": "a"}, "b": {"name": "b"}},
            "metrics": {"throughput": {"direction": "higher_is_better", "ratios": [0.97],
                                       "change": 0.97, "low": None, "high": None,
                                       "verdict": "inconclusive", "method": "HL"}},
            "verdict": "inconclusive", "rounds": {"run": 1, "looks": [1], "stopped": "x"},
            "switch": {"count": 2, "total_s": 0.2}})
        records.append(record)
    for record in records:
        append_record(run_dir / "records.jsonl", record)
    store = Store(tmp_path / "history")
    assert ingest([tmp_path / "results"], store).errors == []
    assert sorted(store.frame()["test_key"]) == [
        "tcp_term/forward", "tcp_term/forward [A/B knob cccccccccccc]",
        "tcp_term/forward [A/B nginx builds aaaaaaaaaaaa]",
        "tcp_term/forward [A/B nginx builds bbbbbbbbbbbb]"]
