"""The capacity benchmark's own parts: the topology it narrows to one generator, its table read
from records (figures, knees, windows, the verification runs), and issue 52's held-out windows
(fakes: no testbed)."""

from __future__ import annotations

import json

import yaml

from benchmarks import capacity_bench
from benchmarks.capacity_bench import _only, analyse
from benchmarks.capacity_holdout import holdouts


def test_one_generator_is_left_on_the_load_node(tmp_path):
    topology = yaml.safe_load(_only("vegeta", tmp_path).read_text())
    tg = topology["nodes"]["tg"]
    assert "vegeta" in tg["tools"] and "wrk2" not in tg["tools"]
    assert "wrk2" not in tg["optional_tools"] and tg["tools"]["wrk"] == "wrk"
    assert topology["nodes"]["dut"] == yaml.safe_load(
        (_only("wrk2", tmp_path)).read_text())["nodes"]["dut"]


def _record(capacity: float, knee: float, held: bool) -> dict:
    trial = {"rate": knee, "seconds": 11.0, "held": held, "loss_ratio": 0.0 if held else 0.2}
    return {"metrics": {"capacity": {"value": capacity}},
            "unavailable": {"direct_capacity": "direct path: no rate"},
            "evidence": {"capacity": {"proxy": {"capacity": knee, "seconds": 40.0,
                                                "trials": [{}] * 20}},
                         "capacity_confirmation": {"proxy": {"trials": [trial, trial]}},
                         "capacity_verification": {"proxy": {"held": held,
                                                             "loss_ratio": trial["loss_ratio"]}},
                         "capacity_search": {"tool": "wrk2"},
                         "capacity_sanity": {"proxy": {"holds": True}}},
            "bench": {"wall_s": 120.0}}


def test_the_table_reads_figures_knees_confirmations_and_verifications(tmp_path):
    path = tmp_path / "capacity.jsonl"
    path.write_text("\n".join(json.dumps(_record(c, k, h)) for c, k, h in
                              ((9000, 9500, True), (9200, 9600, True), (8800, 9400, False))))
    table = analyse([path])
    proxy = next(line for line in table.splitlines() if "| proxy |" in line)
    assert proxy.startswith("| capacity | proxy | wrk2 | 9000, 9200, 8800 | 9000 | 2.2% | "
                            "9500 (9400-9600) | 2 (2-2) | 40 (40-40) | 22 (22-22) | 2/3 "
                            "(worst 20.00%) | 3/3 |")
    direct = next(line for line in table.splitlines() if "| direct |" in line)
    assert direct.endswith("| 3: direct path: no rate |")


def test_the_report_adds_the_windows_of_records_that_name_their_goal_and_knee(tmp_path,
                                                                            monkeypatch):
    monkeypatch.setattr(capacity_bench, "SETS", 3)
    record = _record(9000, 9500, True)
    confirmation = record["evidence"]["capacity_confirmation"]["proxy"]
    confirmation.update(goal="p99<=25ms", knee=9500.0)
    for trial in confirmation["trials"]:
        trial["duration_s"] = 30.0
    record["evidence"]["capacity_verification"]["proxy"].update(rate=9000.0, duration_s=30.0)
    path = tmp_path / "capacity.jsonl"
    path.write_text(json.dumps(record))
    report = analyse([path])
    assert "capacity: proxied path, p99<=25ms, 30 s windows" in report
    assert "| 0.9-1.0 | 1 | 0/1 (" in report and "| 1.0-1.1 | 2 | 0/2 (" in report
    # three windows that all held: the suite's rule (the miss curve) gives no figure from them
    assert "the suite's rule (the miss curve) resampled, 3 sets of 5: figures within +-5 % of " \
           "their median in 0.0% of the sets" in report


def _holdout_record(missed: int, low_missed: int, high_missed: int) -> dict:
    record = _record(5100, 7000, True)
    windows = []
    for index in range(10):
        windows.append({"kind": "figure", "held": index >= missed})
        if index % 2:
            end = "low" if index % 4 == 1 else "high"
            lost = low_missed if end == "low" else high_missed
            windows.append({"kind": end, "held": sum(w["kind"] == end for w in windows) >= lost})
    record["evidence"]["capacity_holdout"] = {"proxy": {
        "rate": 5100.0, "interval": [4600.0, 5500.0], "share": 0.1,
        "share_interval": [0.04, 0.3], "windows": windows, "at_figure": 10,
        "missed_at_figure": missed, "counted": False}}
    return record


def test_held_out_windows_say_whether_the_interval_covers_the_share_they_missed(tmp_path):
    """Issue 52's check: 10 separate 30 s windows at each figure, interleaved with windows at
    its interval's ends; covered when the curve's share interval holds the measured share."""
    path = tmp_path / "holdout.jsonl"
    path.write_text("\n".join(json.dumps(_holdout_record(m, lo, hi)) for m, lo, hi in
                              ((1, 0, 2), (2, 0, 1), (0, 0, 3), (6, 2, 3), (3, 1, 3))))
    found = holdouts(json.loads(line) for line in path.read_text().splitlines())
    assert [(h.missed, h.count, h.at_low, h.at_high) for h in found][:2] == \
        [(1, 10, (0, 3), (2, 2)), (2, 10, (0, 3), (1, 2))]
    assert [h.covered for h in found] == [True, True, False, False, True]
    # 0 of 10 is within the binomial noise of a 4-30 % share; 6 of 10 is not
    assert [h.consistent for h in found] == [True, True, True, False, True]
    report = analyse([path])
    assert "| 5100 | [4600, 5500] | 18% | 10% [4%, 30%] | 1/10 (1%-39%) | yes | yes | 0/3 | " \
           "2/2 | yes |" in report
    assert "covered the held-out share in 3 of 5 tests (4 of 5 within the binomial noise" in \
        report
    assert "pooled: 12 of 50 held-out windows at the figures missed (24%, 90 % interval " \
           "14%-36%), against a claim of at most 10% at each figure" in report


def test_the_holdout_mode_asks_the_test_for_its_held_out_windows(monkeypatch, tmp_path):
    asked = {}

    def collect(runs, out, settings, slowdown, generator=None):
        asked.update(runs=runs, settings=settings)
        out.write_text(json.dumps(_holdout_record(1, 0, 1)) + "\n")

    monkeypatch.setattr(capacity_bench, "collect", collect)
    monkeypatch.setattr(capacity_bench, "SETS", 2)
    capacity_bench.main(["--runs", "5", "--holdout", "10", "--out", str(tmp_path / "h.jsonl"),
                         "LATENCY_SLO:p99<=25ms"])
    assert asked["settings"]["capacity_holdout"] == 10
    assert asked["settings"]["LATENCY_SLO"] == "p99<=25ms" and asked["runs"] == 5
    # each becomes a -v NAME:value of the robot run
    assert asked["settings"]["capacity_verify"] == 30
