"""The capacity benchmark's own parts: the topology it narrows to one generator, and its table
read from records (confirmed figures, knees, the verification runs)."""

from __future__ import annotations

import json

import yaml

from benchmarks.capacity_bench import _only, analyse


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


def test_the_report_adds_the_windows_of_records_that_name_their_goal_and_knee(tmp_path):
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
    assert "within +-5 % of their median in 100.0% of the sets" in report
