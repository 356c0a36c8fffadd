"""Trend tool: jumpavg grouping, newest-sample classification, dashboard, compare, exit codes.

Inputs are real record files (valid per the record schema) written for ~30 nightly runs.
"""

from __future__ import annotations

import json
import random
import re
import statistics
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import jumpavg
import pandas as pd
import pytest

from libraries.history.load import compile_check, load_records, record_check
from libraries.report.trend_command import main
from libraries.results.records import RecordError, append_record, validate_record
from libraries.trend.analysis import analyse
from libraries.trend.detect import Group, Run, classify_batch, classify_with_jumpavg
from libraries.trend.interval_check import confirm_change

RUNS = 30
T0 = datetime(2026, 1, 1, 2, 0, tzinfo=UTC)

# Series shapes: f(run index, rng) -> level; noise is added per trial.
Shape = Callable[[int], float]


def make_record(run_id: str, when: datetime, test: str, metrics: dict[str, tuple[str, str,
                list[float]]]) -> dict:
    """A schema-valid record; ``metrics`` maps name -> (unit, direction, trials)."""
    return {
        "schema_version": 1, "run_id": run_id, "test_id": f"Tests.Tcp Term.{test}",
        "suite": "Tests.Tcp Term", "name": test, "tags": ["TCP_TERM", "KERNEL"],
        "topology": "3node", "stack": "kernel", "case": "tcp_term",
        "parameters": {"streams": 1}, "start_time": when.isoformat(), "duration_s": 12.5,
        "metrics": {
            name: {"unit": unit, "value": statistics.median(trials), "trials": trials,
                   "min": min(trials), "max": max(trials), "mean": statistics.fmean(trials),
                   "stdev": statistics.stdev(trials),
                   "cv": statistics.stdev(trials) / statistics.fmean(trials),
                   "direction": direction}
            for name, (unit, direction, trials) in metrics.items()
        },
        "criteria": [], "verdict": "no_criteria",
        "versions": {"dut": {"kernel": "6.1.0", "nginx": "1.22.1"}},
    }


def trials_for(rng: random.Random, level: float, noise: float, count: int = 3) -> list[float]:
    run_level = rng.gauss(level, level * noise)          # run-to-run spread
    return [rng.gauss(run_level, level * 0.01) for _ in range(count)]  # within-run spread


SERIES: dict[str, tuple[str, str, Callable[[int], float]]] = {
    # name: (unit, direction, level of run i)
    "step-down": ("bit/s", "higher_is_better", lambda i: 10e9 * (0.8 if i >= RUNS - 2 else 1)),
    "flat-noisy": ("req/s", "higher_is_better", lambda i: 23000.0),
    "latency-step-up": ("ms", "lower_is_better", lambda i: 2.0 * (1.3 if i >= RUNS - 2 else 1)),
    "step-up": ("bit/s", "higher_is_better", lambda i: 5e9 * (1.25 if i >= RUNS - 2 else 1)),
}


def write_runs(root: Path, shapes: dict[str, tuple[str, str, Callable[[int], float]]],
               runs: int = RUNS, seed: int = 7, noise: float = 0.05,
               trials: int = 5) -> list[str]:
    """Write ``runs`` run directories (records.jsonl + run.json); returns the run ids."""
    rng = random.Random(seed)
    run_ids = []
    for i in range(runs):
        when = T0 + timedelta(days=i)
        run_id = f"{when:%Y%m%d-%H%M%S}-{i:04x}"
        run_ids.append(run_id)
        run_dir = root / run_id
        for test, (unit, direction, level) in shapes.items():
            metric = "latency" if unit == "ms" else "throughput"
            record = make_record(run_id, when + timedelta(minutes=1), test,
                                 {metric: (unit, direction,
                                           trials_for(rng, level(i), noise, trials))})
            append_record(run_dir / "records.jsonl", record)
        (run_dir / "run.json").write_text(json.dumps(
            {"run_id": run_id, "start_time": when.isoformat(), "project_revision": f"abc{i:04d}",
             "topology": "3node"}))
    return run_ids


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    root = tmp_path_factory.mktemp("results")
    return root, write_runs(root, SERIES)


@pytest.fixture(scope="module")
def results5(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """As ``results``, with 5 trials per run: the fewest that give a change interval."""
    root = tmp_path_factory.mktemp("results5")
    return root, write_runs(root, SERIES, trials=5)


def by_test(frame_root: Path) -> dict[str, str]:
    return {t.test_id.rsplit(".", 1)[1]: t.classification
            for t in analyse(load_records([frame_root]))}


# --- grouping equals jumpavg's own -----------------------------------------------------------

def test_fast_grouping_equals_jumpavg_classify_on_plain_values() -> None:
    rng = random.Random(11)
    series = []
    for _ in range(25):
        level, values = rng.uniform(10, 1e6), []
        for _ in range(rng.randint(2, 70)):
            if rng.random() < 0.06:
                level *= rng.uniform(0.6, 1.4)
            values.append(rng.gauss(level, level * 0.04))
        series.append(values)
    fast = classify_batch([[Run(v) for v in values] for values in series])
    for values, groups in zip(series, fast, strict=True):
        reference = jumpavg.classify(values)
        assert [len(g) for g in reference] == [g.end - g.start + 1 for g in groups]
        assert [g.comment for g in reference] == [g.label for g in groups]
        assert [g.stats.avg for g in reference] == pytest.approx([g.avg for g in groups])


def test_fast_grouping_equals_jumpavg_classes_with_trial_spread() -> None:
    rng = random.Random(12)
    series = [[Run(rng.gauss(100 if i < n // 2 else 90, 3), abs(rng.gauss(0, 2)))
               for i in range(n)] for n in (5, 17, 40, 61)]
    for runs, groups in zip(series, classify_batch(series), strict=True):
        reference = classify_with_jumpavg(runs)
        assert [(g.start, g.end, g.label) for g in reference] == [
            (g.start, g.end, g.label) for g in groups]
        assert [g.avg for g in reference] == pytest.approx([g.avg for g in groups])
    assert len(classify_batch(series)[-1]) >= 2  # the 10 % step in 61 runs is found


def test_negative_and_zero_series_are_grouped_without_error() -> None:
    zero, negative = [Run(0.0)] * 5, [Run(v) for v in (-5, -5.1, -4.9, -20, -20.2, -19.8)]
    zero_groups, negative_groups = classify_batch([zero, negative])
    assert [(g.start, g.end, g.label) for g in zero_groups] == [(0, 4, "normal")]
    assert [g.label for g in negative_groups] == ["normal", "regression"]
    assert negative_groups[1].avg == pytest.approx(-20.0)


# --- classification of the newest sample ------------------------------------------------------

def test_step_down_is_flagged_and_flat_noisy_series_is_not(results) -> None:
    classes = by_test(results[0])
    assert classes == {"step-down": "regression", "flat-noisy": "normal",
                       "latency-step-up": "regression", "step-up": "progression"}


def test_regression_reports_change_against_previous_group(results) -> None:
    trend = next(t for t in analyse(load_records([results[0]])) if t.test_id.endswith("down"))
    assert trend.change_pct == pytest.approx(-20, abs=4)  # since the established level
    assert trend.confirmation.verdict == "regression"
    assert trend.confirmation.interval_pct[1] < -5  # clear of the noise and of the margin
    # With 5 % run-to-run noise jumpavg may cut the step into two short groups.
    assert trend.groups[-1].start >= RUNS - 2
    assert set(trend.anomalies.values()) == {"regression"}
    assert min(trend.anomalies) >= RUNS - 2
    assert trend.trend_avg == pytest.approx(8e9, rel=0.1)  # the newest group: 1 or 2 runs


def test_old_change_becomes_baseline_after_recent_window(tmp_path: Path) -> None:
    shapes = {"old-step": ("bit/s", "higher_is_better",
                           lambda i: 10e9 * (0.8 if i >= RUNS - 10 else 1))}
    write_runs(tmp_path, shapes)
    trend = analyse(load_records([tmp_path]))[0]
    assert trend.anomalies == {RUNS - 10: "regression"}  # still marked on the chart
    assert trend.classification == "normal"               # but no longer gates
    assert analyse(load_records([tmp_path]), recent=10)[0].classification == "regression"


def test_two_nights_are_too_few_to_flag(tmp_path: Path) -> None:
    write_runs(tmp_path, {"short": ("bit/s", "higher_is_better",
                                    lambda i: 10e9 * (0.85 if i else 1))}, runs=2)
    trend = analyse(load_records([tmp_path]))[0]
    assert len(trend.samples) == 2 and len(trend.groups) == 2  # jumpavg splits them...
    assert trend.classification == "normal"                     # ...but that is no verdict
    assert analyse(load_records([tmp_path]), min_samples=2)[0].classification == "regression"


def test_flat_series_is_not_flagged_for_several_seeds(tmp_path: Path) -> None:
    for seed in range(5):
        root = tmp_path / str(seed)
        write_runs(root, {"flat": SERIES["flat-noisy"]}, seed=seed)
        assert analyse(load_records([root]))[0].classification == "normal", seed


# --- command line ------------------------------------------------------------------------------

def test_cli_exits_3_writes_html_and_markdown(results, tmp_path: Path, capsys) -> None:
    html, md = tmp_path / "trend.html", tmp_path / "trend.md"
    assert main([str(results[0]), "--html", str(html), "--markdown", str(md)]) == 3
    text = html.read_text()
    assert text.count('class="chart"') == 4
    assert "Plotly.newPlot" in text and "https://cdn" not in text.split("<body>")[1]
    assert re.search(r'<tr class="regression"><td><a href="#chart-\d">Tests.Tcp Term.step-down',
                     text)
    assert '<tr class="normal"><td><a href="#chart-3">Tests.Tcp Term.flat-noisy' in text
    series = json.loads(re.search(r"const SERIES = (.*?);\n", text).group(1))
    step = next(s for s in series if "regression" in s["ak"] and s["unit"] == "bit/s")
    assert len(step["x"]) == RUNS and step["run"][-1] == results[1][-1]
    assert step["raw"] == 0 and step["n"] == [1] * RUNS  # 30 samples: none bucketed
    marked = step["ai"][0]  # the first marker sits on the sample that starts the change
    assert marked >= RUNS - 3 and step["x"][marked] == step["ax"][0]
    assert step["rev"][-1] == f"abc{RUNS - 1:04d}"
    summary = md.read_text()
    assert "2 regression(s), 1 progression(s), 1 normal" in summary
    out = capsys.readouterr()
    assert "regression in 2 series" in out.err
    assert re.search(r"step-down\s+throughput\s+[\d.]+ [GM]bit/s\s+[\d.]+ [GM]bit/s\s+-\d", out.out)


def test_cli_test_filter_selects_series_and_exit_0(results, tmp_path: Path) -> None:
    html = tmp_path / "flat.html"
    assert main([str(results[0]), "--html", str(html), "--test", "*flat*"]) == 0
    assert html.read_text().count('class="chart"') == 1
    assert main([str(results[0]), "--test", "TERM.STEP-UP"]) == 0  # case-insensitive substring
    assert main([str(results[0]), "--test", "nothing-matches"]) == 2


def test_cli_jumpavg_engine_gives_same_verdicts(results, capsys) -> None:
    assert main([str(results[0]), "--engine", "jumpavg"]) == 3
    slow = capsys.readouterr().out
    assert main([str(results[0])]) == 3
    assert capsys.readouterr().out == slow


def test_schema_violation_exits_2_naming_file_and_line(tmp_path: Path, capsys) -> None:
    write_runs(tmp_path, {"flat": SERIES["flat-noisy"]}, runs=3)
    bad_file = sorted(tmp_path.glob("*/records.jsonl"))[1]
    record = make_record("bad-run", T0, "flat", {"throughput": ("bit/s", "higher_is_better",
                                                                 [1.0, 2.0])})
    record["metrics"]["throughput"]["direction"] = "up"
    with bad_file.open("a") as handle:
        handle.write("\n" + json.dumps(record) + "\n")
    assert main([str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"{bad_file}:3: metrics.throughput.direction: 'up' is not one of" in err


def test_unreadable_line_and_missing_dir_exit_2(tmp_path: Path, capsys) -> None:
    (tmp_path / "r1").mkdir()
    (tmp_path / "r1" / "records.jsonl").write_text('{"schema_version": 1,\n')
    assert main([str(tmp_path)]) == 2
    assert f"{tmp_path / 'r1' / 'records.jsonl'}:1: not valid JSON" in capsys.readouterr().err
    assert main([str(tmp_path / "absent")]) == 2
    assert "no such file or directory" in capsys.readouterr().err


def test_bad_start_time_exits_2_naming_line(tmp_path: Path, capsys) -> None:
    record = make_record("r1", T0, "t", {"x": ("bit/s", "higher_is_better", [1.0, 2.0])})
    record["start_time"] = "2026-13-45T25:00:00"  # matches the schema's pattern, not a date
    path = tmp_path / "r1" / "records.jsonl"
    path.parent.mkdir()
    path.write_text(json.dumps(record) + "\n")
    assert main([str(tmp_path)]) == 2
    assert f"{path}:1: start_time: expected an ISO 8601" in capsys.readouterr().err


def test_compiled_check_agrees_with_jsonschema_on_mutations() -> None:
    check = record_check()
    good = make_record("r1", T0, "t", {"x": ("bit/s", "higher_is_better", [1.0, 2.0])})
    mutations = [
        ("schema_version", 2), ("run_id", "bad id!"), ("test_id", ""), ("stack", "dpdk"),
        ("duration_s", -1), ("metrics", {}), ("tags", ["a", 1]), ("verdict", "ok"),
        ("extra", 1), ("versions", {"dut": {"nginx": 1}}), ("criteria", [{"name": "x"}]),
        ("metrics", {"x": {"unit": "b", "value": 1, "trials": [], "direction": "up"}}),
        ("metrics", {"x": {"unit": "b", "value": True, "trials": [1], "direction": "up"}}),
        ("metrics", {"x": {"unit": "b", "value": 1, "trials": [1], "stdev": -1,
                           "direction": "lower_is_better"}}),
    ]
    assert check(good)
    for key, value in mutations:
        record = dict(good, **{key: value})
        with pytest.raises(RecordError):
            validate_record(record)
        assert not check(record), key
    missing = dict(good)
    del missing["versions"]
    assert not check(missing)
    assert compile_check({"type": "integer"})(3)
    assert compile_check({"type": ["number", "null"]})(None)
    assert not compile_check({"type": ["number", "null"]})("1")
    with pytest.raises(NotImplementedError):
        compile_check({"oneOf": []})


# --- compare -----------------------------------------------------------------------------------

def test_compare_both_ways_by_run_id_and_directory(results5, capsys) -> None:
    root, run_ids = results5
    before, after = run_ids[RUNS - 3], run_ids[RUNS - 1]
    assert main([str(root), "--compare", before, after]) == 3
    out = capsys.readouterr().out
    assert "verdicts: Hodges-Lehmann change of the trials, Mann-Whitney interval at 95%" in out
    # -20 %: the interval (widened by the series' 5 % run-to-run noise) lies below no change
    assert re.search(r"step-down\s+throughput\s+.*-\d\d\.\d% \[-\d+\.\d%, -\d+\.\d%\]\s+"
                     r"\d\.\d%\s+regression", out)
    assert re.search(r"flat-noisy\s+throughput\s+.*(no change|inconclusive)", out)
    assert re.search(r"latency-step-up\s+latency\s+.*\+\d\d\.\d% \[.*regression", out)
    # The other way round (run directories, history from root): step-down is a progression.
    assert main([str(root), "--compare", str(root / after), str(root / before),
                 "--test", "*step-down"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"step-down\s+throughput\s+.*\+\d\d\.\d% \[.*progression", out)
    assert "flat-noisy" not in out
    assert main([str(root), "--compare", str(root / after), str(root / before)]) == 3
    assert re.search(r"step-up\s+throughput\s+.*regression", capsys.readouterr().out)
    assert main([str(root), "--compare", before, "no-such-run"]) == 2
    assert "run 'no-such-run': no records" in capsys.readouterr().err


def test_compare_refuses_an_alpha_outside_0_1(results5, capsys) -> None:
    root, run_ids = results5
    assert main([str(root), "--compare", run_ids[0], run_ids[1], "--alpha", "1.5"]) == 2
    assert "--alpha: expected a number between 0 and 1" in capsys.readouterr().err
    assert main([str(root), "--compare", run_ids[0], run_ids[1], "--margin", "150"]) == 2
    assert "--margin: expected a percentage in [0, 100)" in capsys.readouterr().err


# --- the gate's interval check ------------------------------------------------------------------

def _rows(levels: list[float], spread: float) -> pd.DataFrame:
    rng = random.Random(5)
    trials = [[level * (1 + rng.uniform(-spread, spread)) for _ in range(5)] for level in levels]
    return pd.DataFrame({"value": [statistics.median(t) for t in trials],
                         "trial_values": trials})


def test_a_step_clear_of_the_noise_is_confirmed_and_a_noisy_one_is_not() -> None:
    levels = [*(100.0 * (1 + 0.01 * ((i * 7) % 3 - 1)) for i in range(18)), 80.0, 81.0]
    groups = [Group(0, 17, 100.0, "normal"), Group(18, 19, 80.5, "regression")]
    clear = confirm_change(_rows(levels, 0.01), 20, groups, 5, "higher_is_better")
    assert clear.verdict == "regression" and clear.interval_pct[1] < -10
    noisy = confirm_change(_rows([*levels[:18], 96.0, 95.0], 0.25), 20,
                           [groups[0], Group(18, 19, 95.5, "regression")], 5,
                           "higher_is_better")
    assert noisy.verdict == "inconclusive"
    # a step jumpavg cut into two short groups is measured from the established level
    split = [groups[0], Group(18, 18, 80.0, "regression"), Group(19, 19, 81.0, "progression")]
    assert confirm_change(_rows(levels, 0.01), 20, split, 5,
                          "higher_is_better").pct == pytest.approx(-19.5, abs=1.5)
