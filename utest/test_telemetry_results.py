"""The record's telemetry block, efficiency metrics, record schema v2 and a v1+v2 history."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from libraries.history.load import load_records, record_check
from libraries.results.adaptive import run_interleaved
from libraries.results.criteria import evaluate, load_criteria
from libraries.results.efficiency import (
    ProcessCost,
    RateCost,
    add_process_costs,
    add_rate_costs,
    add_ratio,
)
from libraries.results.measurement import Measurement
from libraries.results.plan import TrialPlan
from libraries.results.records import RecordError, append_record, iter_records, validate_record
from libraries.results.telemetry_block import (
    busy_cores,
    format_cpu_table,
    median_tree,
    shared_kernels,
    softirq_share,
    summarize_node,
    telemetry_block,
)
from libraries.tools.cpu.proc_stat import parse_snapshot
from libraries.tools.cpu.telemetry import cpu_usage
from utest.test_measurement_criteria import _record

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "telemetry"


def real_reading() -> dict:
    """One node's reading of one trial, from the real capture (see its README)."""
    before, after = (parse_snapshot((FIXTURES / f"snapshot_{w}.txt").read_text(), w)
                     for w in ("before", "after"))
    names = {384: "wrk", 30987: "iperf3-server", 30988: "nginx-stream", 30989: "odd"}
    return cpu_usage(before, after, names).as_record()


def scaled(reading: dict, factor: float) -> dict:
    """The reading with every process's CPU multiplied by ``factor`` (another trial)."""
    other = copy.deepcopy(reading)
    for row in other["processes"].values():
        for key in ("cpu", "usr", "sys"):
            row[key] = round(row[key] * factor, 2)
    return other


def test_median_tree_takes_medians_of_leaves_present():
    trials = [{"a": {"x": 1.0, "y": 5}}, {"a": {"x": 3.0}}, {"a": {"x": 2.0, "y": 7}}]
    assert median_tree(trials) == {"a": {"x": 2.0, "y": 6.0}}


def test_node_summary_medians_per_trial_values_and_partial_unavailability():
    reading = real_reading()
    trials = [reading, scaled(reading, 2.0), {"unavailable": "/proc not readable: refused"},
              scaled(reading, 3.0)]
    summary = summarize_node(trials)
    assert summary["trials"] == 3
    assert summary["unavailable_trials"] == ["/proc not readable: refused"]
    assert summary["processes"]["wrk"]["cpu"] == pytest.approx(2 * 9.63, abs=0.01)
    assert summary["processes"]["wrk"]["in_trials"] == 3
    assert [t["processes"]["wrk"]["cpu"] for t in summary["per_trial"]] == \
        pytest.approx([9.63, 19.26, 28.89])
    assert summary["cores"]["all"]["sys"] == 45.18
    assert summarize_node([{"unavailable": "no /proc"}]) == {"unavailable": "no /proc"}


def test_block_validates_in_a_v2_record_and_names_shared_kernels(tmp_path: Path):
    reading = real_reading()
    block = telemetry_block({
        "direct": [{"tg": reading, "dut": reading}],
        "native": [{"tg": reading, "dut": scaled(reading, 0.5)}],
    })
    assert shared_kernels(block) == [["dut", "tg"]]
    record = _record(schema_version=2, telemetry=block)
    append_record(tmp_path / "records.jsonl", record)
    assert next(iter_records(tmp_path / "records.jsonl"))["telemetry"] == block
    assert record_check(2)(json.loads(json.dumps(record)))


@pytest.mark.parametrize("telemetry", [
    {}, {"variants": {}}, {"variants": {"a": {"nodes": {"dut": {}}}}},
    {"variants": {"a": {"nodes": {"dut": {"cores": {"all": {"usr": 1}}}}}}},
    {"variants": {"a": {"nodes": {"dut": {"processes": {"x": {"cpu": -1, "usr": 0, "sys": 0,
                                                             "count": 1}}}}}}},
    {"unavailable": ""}, {"zeros": 0},
])
def test_v2_schema_refuses_empty_or_malformed_telemetry(telemetry):
    record = _record(schema_version=2, telemetry=telemetry)
    with pytest.raises(RecordError, match="telemetry"):
        validate_record(record)
    assert not record_check(2)(record)


def test_v2_record_needs_telemetry_and_v1_refuses_it():
    with pytest.raises(RecordError, match="'telemetry' is a required property"):
        validate_record(_record(schema_version=2))
    with pytest.raises(RecordError, match="Additional properties"):
        validate_record(_record(telemetry={"unavailable": "x"}))
    validate_record(_record(schema_version=2, telemetry={"unavailable": "no /proc"}))


def test_trend_loads_a_history_mixing_v1_and_v2(tmp_path: Path):
    v1 = _record(run_id="r1")
    v2 = _record(run_id="r2", schema_version=2, start_time="2026-11-23T03:00:00+00:00",
                 telemetry=telemetry_block({"proxy": [{"dut": real_reading()}]}))
    v2["metrics"]["rps_per_dut_core"] = {"unit": "requests/s/core", "value": 9000.0,
                                         "trials": [9000.0], "direction": "higher_is_better"}
    for run, record in (("r1", v1), ("r2", v2)):
        append_record(tmp_path / run / "records.jsonl", record)
    frame = load_records([tmp_path])
    assert sorted(frame["run_id"].unique()) == ["r1", "r2"]
    efficiency = frame[frame["metric"] == "rps_per_dut_core"]
    assert list(efficiency["value"]) == [9000.0]
    assert list(efficiency["unit"]) == ["requests/s/core"]
    assert set(frame[frame["run_id"] == "r1"]["metric"]) < set(frame["metric"])


def readings_for(variant_cpu: dict[str, list[float]]) -> dict:
    """Trials per variant whose DUT runs 'nginx-stream worker' at the given CPU."""
    base = real_reading()
    trials = {}
    for variant, values in variant_cpu.items():
        trials[variant] = []
        for value in values:
            reading = copy.deepcopy(base)
            reading["processes"]["nginx-stream worker"]["cpu"] = value
            trials[variant].append({"dut": reading})
    return trials


def test_rate_and_process_costs_per_trial():
    m = Measurement(case="ebpf_stream", stack="kernel", parameters={})
    m.add("native", [10.0, 12.0], "Gbit/s")
    trials = readings_for({"native": [40.0, 50.0]})
    add_rate_costs(m, trials, [RateCost("native", "native", "gbps", prefix="native_")])
    add_process_costs(m, trials, [ProcessCost("native", "dut", "nginx-stream worker",
                                              "native_nginx_worker_cpu")])
    cores = real_reading()["cores"]
    busy = busy_cores(cores)  # usr+sys+irq+soft of cpu0 and cpu1, nice left out
    assert busy == pytest.approx((20.64 + 33.03 + 6.88 + 17.89 + 57.8 + 13.76) / 100, abs=1e-4)
    assert m.metrics["native_gbps_per_dut_core"].summary.values == \
        pytest.approx((10.0 / busy, 12.0 / busy))
    assert m.metrics["native_gbps_per_dut_core"].summary.unit == "Gbit/s/core"
    assert m.metrics["native_dut_softirq_share"].value == softirq_share(cores) == \
        pytest.approx(100 * 10.32 / (19.5 + 45.18 + 10.32), abs=0.01)
    worker = m.metrics["native_nginx_worker_cpu"]
    assert (worker.summary.values, worker.summary.unit, worker.direction) == \
        ((40.0, 50.0), "% of a core", "lower_is_better")


def test_worker_ratio_and_missing_inputs_become_notes_not_zeros():
    m = Measurement(case="ebpf_stream", stack="kernel", parameters={})
    trials = readings_for({"native": [40.0, 50.0], "ebpf": [2.0, 0.5]})
    trials["direct"] = [{"dut": {"unavailable": "/proc not readable: refused"}}]
    add_process_costs(m, trials, [
        ProcessCost(v, "dut", "nginx-stream worker", f"{v}_nginx_worker_cpu")
        for v in ("native", "ebpf")])
    add_ratio(m, "ebpf_nginx_worker_cpu", "native_nginx_worker_cpu",
              "ebpf_nginx_worker_cpu_ratio")
    assert m.metrics["ebpf_nginx_worker_cpu_ratio"].summary.values == \
        pytest.approx((0.05, 0.01))
    m.add("direct", [5.0], "Gbit/s")
    add_rate_costs(m, trials, [RateCost("direct", "direct", "gbps", prefix="direct_")])
    add_process_costs(m, trials, [ProcessCost("native", "dut", "nginx-absent", "absent_cpu")])
    zero = Measurement(case="ebpf_stream", stack="kernel", parameters={})
    zero.add("ebpf_nginx_worker_cpu", [1.0], "%")
    zero.add("native_nginx_worker_cpu", [0.0], "%")
    add_ratio(zero, "ebpf_nginx_worker_cpu", "native_nginx_worker_cpu",
              "ebpf_nginx_worker_cpu_ratio")
    assert "direct_gbps_per_dut_core" not in m.metrics and "absent_cpu" not in m.metrics
    assert "ebpf_nginx_worker_cpu_ratio" not in zero.metrics
    assert any("direct_gbps_per_dut_core unavailable: dut telemetry: /proc not readable"
               in n for n in m.notes)
    assert any("absent_cpu unavailable: no process 'nginx-absent'" in n for n in m.notes)
    assert zero.notes == ["ebpf_nginx_worker_cpu_ratio unavailable: native_nginx_worker_cpu "
                          "was 0 in a trial"]


def test_cpu_table_reads_like_mpstat():
    summary = summarize_node([real_reading()])
    text = format_cpu_table("dut", summary)
    lines = text.splitlines()
    assert lines[1].split() == ["CPU", "%usr", "%nice", "%sys", "%iowait", "%irq", "%soft",
                                "%steal", "%idle"]
    assert lines[2].split() == ["all", "19.50", "24.77", "45.18", "0.00", "0.00", "10.32",
                                "0.23", "0.00"]
    assert any(line.split()[:3] == ["nginx-stream", "worker", "11.93"] for line in lines)
    assert "same kernel as tg" in format_cpu_table("dut", summary, cores_of="tg")
    assert format_cpu_table("dut", {"unavailable": "no /proc"}) == \
        "dut: telemetry unavailable: no /proc"


class Recorder:
    """A TrialObserver that writes down what it hears."""

    def __init__(self) -> None:
        self.events: list[tuple] = []

    def trial_started(self, variant: str, round_number: int, total: int) -> None:
        self.events.append(("start", variant, round_number, total))

    def trial_finished(self, variant: str, round_number: int, total: int, result) -> None:
        self.events.append(("end", variant, round_number, total, result))


def test_observer_hears_measured_trials_only_in_order():
    recorder = Recorder()
    calls: list[tuple[str, int]] = []

    def variant(name: str):
        return lambda trial: calls.append((name, trial.seconds)) or f"{name}{len(calls)}"

    results, _ = run_interleaved({"a": variant("a"), "b": variant("b")},
                                 TrialPlan(trials=2, duration=3, warmup=1), recorder)
    assert calls[:2] == [("a", 1), ("b", 1)]  # warm-ups: not observed
    assert recorder.events == [
        ("start", "a", 1, 2), ("end", "a", 1, 2, "a3"), ("start", "b", 1, 2),
        ("end", "b", 1, 2, "b4"), ("start", "a", 2, 2), ("end", "a", 2, 2, "a5"),
        ("start", "b", 2, 2), ("end", "b", 2, 2, "b6")]
    assert results == {"a": ["a3", "a5"], "b": ["b4", "b6"]}


def test_ebpf_worker_cpu_criterion_is_a_portable_ceiling():
    def judged(ratio: float, ebpf: bool = True) -> list[tuple[float, bool]]:
        m = Measurement(case="ebpf_stream", stack="kernel", parameters={"ebpf": ebpf})
        m.add("native_direct_ratio", [0.4], "ratio")
        m.add("ebpf_native_ratio", [0.8], "ratio")
        m.add("ebpf_nginx_worker_cpu_ratio", [ratio], "ratio", "lower_is_better")
        return [(r.required, r.passed) for r in evaluate(load_criteria(), m, "lab-x")
                if r.metric == "ebpf_nginx_worker_cpu_ratio"]

    assert judged(0.02) == [(0.25, True)]
    assert judged(0.95) == [(0.25, False)]  # fell back to native copying
    assert judged(0.95, ebpf=False) == []
