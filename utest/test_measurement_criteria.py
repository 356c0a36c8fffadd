"""Trials, criteria evaluation and record validation."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from libraries.results.adaptive import run_interleaved
from libraries.results.criteria import (
    DEFAULT_CRITERIA,
    CriteriaError,
    CriteriaFile,
    evaluate,
    load_criteria,
)
from libraries.results.headline import figure
from libraries.results.measurement import Measurement, Trial
from libraries.results.plan import TrialPlan
from libraries.results.records import RecordError, append_record, iter_records, validate_record
from libraries.results.trial_settings import parse_plan, parse_switch
from libraries.testbed.errors import TopologyError


def _measurement(**params) -> Measurement:
    m = Measurement(case="ssl_proxy", stack="kernel",
                    parameters={"file_size": "1kb", "mtls": False, **params})
    m.add("rps", [11900.0, 12100.0, 12000.0, 11950.0, 12050.0], "requests/s")
    m.add("errors", [0.0] * 5, "count", "lower_is_better")
    m.add("proxy_direct_ratio", [0.55, 0.6, 0.58, 0.62, 0.57], "ratio")
    return m


def test_interleaving_runs_variants_in_turn_after_a_warm_up():
    calls = []
    variants = dict.fromkeys(("direct", "proxy"),
                             lambda t: calls.append((t.variant, t.seconds)) or len(calls))
    results, _ = run_interleaved(variants, TrialPlan(trials=2, duration=5, warmup=1))
    assert calls == [("direct", 1), ("proxy", 1), ("direct", 5), ("proxy", 5),
                     ("direct", 5), ("proxy", 5)]
    assert results == {"direct": [3, 5], "proxy": [4, 6]}


def test_a_warm_up_as_long_as_a_trial_is_still_a_warm_up():
    """Trials told a warm-up by its length: with -v DURATION:1 -v WARMUP:1 the warm-up's
    requests leaked into the first trial's evidence, and 2 trials left 3 evidence entries."""
    seen: list[Trial] = []
    run_interleaved({"baseline": seen.append, "traced": seen.append},
                    TrialPlan(trials=2, duration=1, warmup=1))
    assert [(t.variant, t.round, t.measured) for t in seen] == [
        ("baseline", 0, False), ("traced", 0, False), ("baseline", 1, True),
        ("traced", 1, True), ("baseline", 2, True), ("traced", 2, True)]
    assert {t.seconds for t in seen} == {1}


@pytest.mark.parametrize("bad", [{"trials": 0}, {"duration": 0}, {"warmup": -1},
                                 {"trials": "3"}])
def test_trial_plan_rejects_bad_values(bad):
    with pytest.raises(ValueError, match=next(iter(bad))):
        TrialPlan(**{"trials": 5, "duration": 2, "warmup": 1, **bad})


def test_metric_summary_is_the_median_of_trials():
    m = _measurement()
    assert m.value("rps") == 12000.0
    record = m.metrics["rps"].as_record()
    assert record["trials"] == [11900.0, 12100.0, 12000.0, 11950.0, 12050.0]
    assert record["min"] == 11900.0 and record["max"] == 12100.0
    assert record["interval"] == {"low": 11900.0, "high": 12100.0, "level": 1 - 2 / 32,
                                  "method": "order statistics"}
    with pytest.raises(KeyError, match="no metric 'latency'"):
        m.value("latency")


def test_shipped_criteria_judge_an_ssl_proxy_result_on_3node():
    criteria = load_criteria(DEFAULT_CRITERIA)
    results = evaluate(criteria, _measurement(), "3node")
    by_metric = {r.metric: r for r in results}
    assert set(by_metric) == {"errors", "rps", "proxy_direct_ratio"}
    assert all(r.passed for r in results)
    # the 64 KiB floor does not apply to a 1 KiB test, and absolute floors not to a lab
    assert len([r for r in results if r.metric == "rps"]) == 1
    assert {r.metric for r in evaluate(criteria, _measurement(), "lab-3node")} == {
        "errors", "proxy_direct_ratio"}


def _floor(metric: str = "rps", bound: float = 1000.0, op: str = "min") -> CriteriaFile:
    return CriteriaFile.model_validate({"version": 1, "criteria": [
        {"case": "ssl_proxy", "metric": metric, op: bound}]})


def test_a_criterion_passes_only_when_the_interval_clears_the_bound():
    m = _measurement()
    m.add("rps", [1200.0, 1100.0, 1300.0, 1150.0, 1250.0], "requests/s")
    [result] = evaluate(_floor(), m, "3node")
    assert result.outcome == "pass"
    assert result.describe().startswith(
        "rps 1.2k [1.1k, 1.3k] (94% confidence) requests/s >= required 1000 (")


def test_a_missed_criterion_says_measured_versus_required():
    m = _measurement()
    m.add("rps", [800.0, 812.3, 790.0, 805.0, 820.0], "requests/s")
    [failed] = evaluate(_floor(), m, "3node")
    assert failed.outcome == "fail" and not failed.passed
    assert failed.describe().startswith(
        "rps 805 [790, 820] (94% confidence) requests/s < required 1000 (")


def test_an_interval_straddling_the_bound_is_inconclusive():
    m = _measurement()
    m.add("rps", [900.0, 1100.0, 1000.0, 950.0, 1050.0], "requests/s")
    [result] = evaluate(_floor(), m, "3node")
    assert result.outcome == "inconclusive"
    assert "inconclusive against required >= 1000 (the interval straddles the bound)" in \
        result.describe()


def test_too_few_trials_are_inconclusive_even_far_from_the_bound():
    m = _measurement()
    m.add("rps", [100.0, 110.0, 105.0], "requests/s")  # 3 trials: 87.5 % one-sided at most
    [result] = evaluate(_floor(), m, "3node")
    assert result.outcome == "inconclusive"
    assert "too few trials for an interval that decides" in result.describe()


def test_a_ceiling_is_judged_with_the_upper_end():
    m = _measurement()
    m.add("latency_p99", [8.0, 9.0, 9.5, 9.0, 12.0], "ms", "lower_is_better")
    assert evaluate(_floor("latency_p99", 10, "max"), m, "3node")[0].outcome == "inconclusive"
    m.add("latency_p99", [13.0, 12.0, 14.0, 15.0, 12.0], "ms", "lower_is_better")
    assert evaluate(_floor("latency_p99", 10, "max"), m, "3node")[0].outcome == "fail"


def test_errors_in_one_trial_fail_the_correctness_check_naming_the_round():
    """A correctness check is not a statistic: one erroring trial of five fails it (judged on
    the median's interval it was 'inconclusive', and a side erroring in 36 of 60 rounds
    passed)."""
    m = _measurement()
    m.add("errors", [0.0, 0.0, 4.0, 0.0, 0.0], "count", "lower_is_better")
    [result] = [r for r in evaluate(load_criteria(), m, "3node") if r.metric == "errors"]
    assert result.outcome == "fail" and result.per_trial and result.interval is None
    assert result.measured == 4.0
    assert result.describe().startswith(
        "errors > required 0 in 1 of 5 trials (round 3: 4) count (criteria.yaml: criteria.")
    assert result.as_record()["violations"] == [{"round": 3, "value": 4.0}]


def test_a_correctness_check_has_two_outcomes_and_names_every_broken_round():
    errors = [3.0 if index % 5 < 3 else 0.0 for index in range(60)]  # 36 of 60 rounds
    m = _measurement()
    m.add("errors", errors, "count", "lower_is_better")
    interval = m.metrics["errors"].interval
    assert interval.low == 0 < interval.high  # the old judgement: inconclusive, a pass
    [result] = evaluate(_floor("errors", 0, "max"), m, "3node")
    assert result.outcome == "fail"
    assert "in 36 of 60 trials (round 1: 3; round 2: 3; round 3: 3; round 6: 3;" in \
        result.describe()
    assert "; and 28 more)" in result.describe()
    m.add("errors", [0.0] * 3, "count", "lower_is_better")  # too few for any interval
    [clean] = evaluate(_floor("errors", 0, "max"), m, "3node")
    assert clean.outcome == "pass"
    assert clean.describe().startswith("errors <= required 0 in every one of 3 trials")


def test_a_correctness_check_names_the_run_of_each_broken_round():
    m = _measurement()
    m.add("errors", [0.0, 250.0, 0.0], "count", "lower_is_better")
    m.trial_runs = ["side a's run", "side b's run", "side b's run"]
    [result] = evaluate(_floor("errors", 0, "max"), m, "3node")
    assert "in 1 of 3 trials (round 2 on side b's run: 250)" in result.describe()
    assert result.as_record()["violations"] == [
        {"round": 2, "value": 250.0, "run": "side b's run"}]


def test_a_correctness_check_resting_on_a_basis_is_refused(tmp_path):
    path = tmp_path / "criteria.yaml"
    path.write_text("version: 1\ncriteria:\n  - {case: ssl_proxy, metric: errors, max: 0, "
                    "basis: {high: 3, source: a bad day}}\n")
    with pytest.raises(CriteriaError, match=r"criteria.0.basis: errors is a correctness metric "
                                            r"of case ssl_proxy"):
        load_criteria(path)


def test_a_single_value_is_judged_by_its_value():
    m = _measurement()
    m.add("latency_p99", [12.0], "ms", "lower_is_better")
    [result] = evaluate(_floor("latency_p99", 10.0, "max"), m, "3node")
    assert result.outcome == "fail" and result.interval.level is None


def test_criterion_on_an_unmeasured_metric_is_an_error_not_a_pass():
    m = Measurement(case="ssl_proxy", stack="kernel", parameters={"file_size": "1kb",
                                                                  "mtls": False})
    m.add("rps", [2000.0], "requests/s")
    with pytest.raises(TopologyError, match="metric 'errors' was not measured"):
        evaluate(load_criteria(), m, "3node")


def test_bad_criteria_file_names_file_and_entry(tmp_path: Path):
    path = tmp_path / "criteria.yaml"
    path.write_text("version: 1\ncriteria:\n  - {case: tcp_term, metric: throughput}\n"
                    "  - {case: tcp_term, metric: x, min: 1, typo: 2}\n")
    with pytest.raises(CriteriaError) as error:
        load_criteria(path)
    text = str(error.value)
    assert f"{path}: criteria.0: expected exactly one of 'min' or 'max'" in text
    assert f"{path}: criteria.1.typo: Extra inputs are not permitted" in text


def test_criteria_on_what_a_case_never_measures_are_refused_when_loaded(tmp_path: Path):
    path = tmp_path / "criteria.yaml"
    path.write_text("version: 1\ncriteria:\n"
                    "  - {case: ssl_proxy, metric: rsp, min: 1000}\n"
                    "  - {case: ssl_proxy, metric: rps, min: 1, when: {file_sise: 1kb}}\n"
                    "  - {case: tcp_trem, metric: throughput, min: 1}\n"
                    "  - {case: ebpf_stream, metric: ebpf_gbps_per_dut_core, min: 1,\n"
                    "     when: {ebpf: true, stack: kernel}}\n")
    with pytest.raises(CriteriaError) as error:
        load_criteria(path)
    lines = str(error.value).splitlines()
    assert lines[0].startswith(f"{path}: criteria.0.metric: 'rsp' is not measured by case "
                               "ssl_proxy (its metrics: rps, errors, ")
    assert lines[1].startswith(f"{path}: criteria.1.when.file_sise: case ssl_proxy has no "
                               "parameter 'file_sise' (its parameters: stack, file_size, ")
    assert lines[2].startswith(f"{path}: criteria.2.case: unknown case 'tcp_trem': expected "
                               "one of ebpf_stream, ssl_proxy, sslsniff, tcp_term")
    assert len(lines) == 3  # the variant-prefixed metric of criteria.3 is known


def test_a_measurement_refuses_a_metric_missing_from_the_catalogue():
    with pytest.raises(ValueError, match="case tcp_term: metric 'thruput' is not in its "
                                         "catalogue"):
        Measurement("tcp_term", "kernel", {}).add("thruput", [1.0], "Gbit/s")


@pytest.mark.parametrize(("trials", "duration", "warmup", "message"), [
    ("3", "1.5", "1", "-v DURATION:1.5: expected whole seconds >= 1, got '1.5'"),
    ("0", "3", "1", "-v TRIALS:0: expected an integer >= 1"),
    ("3", "3", "-1", "-v WARMUP:-1: expected whole seconds >= 0"),
    ("three", "3", "1", "-v TRIALS:three: expected an integer >= 1"),
    (3, 2.5, 1, "-v DURATION:2.5: expected whole seconds >= 1"),
])
def test_trial_settings_from_robot_variables_are_strict(trials, duration, warmup, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        parse_plan(trials, duration, warmup)


def test_trial_settings_accept_whole_numbers_given_as_text():
    assert parse_plan("5", " 30 ", 0) == TrialPlan(5, 30, 0)


def _record(**changes) -> dict:
    m = _measurement()
    record = {
        "schema_version": 1, "run_id": "20261122-030000-ab12",
        "test_id": "3node/ssl_proxy/1kb-10c-kernel-ssl-proxy", "suite": "Ssl Proxy",
        "name": "1kb-10c-kernel-ssl-proxy", "tags": ["KERNEL"], "topology": "3node",
        "stack": "kernel", "case": "ssl_proxy", "parameters": m.parameters,
        "start_time": "2026-11-22T03:00:00+00:00", "duration_s": 12.5,
        "metrics": {name: metric.as_record() for name, metric in m.metrics.items()},
        "criteria": [], "verdict": "no_criteria", "versions": {"dut": {"nginx": "1.22.1"}},
    }
    record.update(changes)
    if record["schema_version"] < 3:  # as versions 1 and 2 were written: no intervals
        for metric in record["metrics"].values():
            metric.pop("interval", None)
    return record


def _v3(**changes) -> dict:
    """A version 3 record (intervals, rounds, environment)."""
    return _record(schema_version=3, telemetry={"unavailable": "not read in this test"},
                   rounds={"planned": 3, "run": 3, "max_trials": 6, "max_seconds": None,
                           "alpha": 0.05, "stopped": "conclusive"},
                   environment={"unavailable": "not read in this test"}, **changes)


def test_records_round_trip_and_bad_lines_name_file_and_line(tmp_path: Path):
    path = tmp_path / "run" / "records.jsonl"
    append_record(path, _record())
    append_record(path, _record(name="second"))
    assert [r["name"] for r in iter_records(path)] == ["1kb-10c-kernel-ssl-proxy", "second"]
    with path.open("a") as handle:
        handle.write(json.dumps(_record(stack="dpdk")) + "\n")
    with pytest.raises(RecordError, match=r"records\.jsonl:3: stack: 'dpdk' is not one of"):
        list(iter_records(path))


@pytest.mark.parametrize(("change", "path"), [
    ({"verdict": "ok"}, "verdict"),
    ({"metrics": {}}, "metrics"),
    ({"start_time": "yesterday"}, "start_time"),
    ({"unknown": 1}, "(record)"),
])
def test_schema_violations_are_refused_on_write(tmp_path: Path, change, path):
    with pytest.raises(RecordError, match=rf"record for .*: {re.escape(path)}"):
        append_record(tmp_path / "records.jsonl", _record(**change))
    assert not (tmp_path / "records.jsonl").exists()


def test_nan_values_are_refused_and_nothing_is_written(tmp_path: Path):
    record = _record()
    record["metrics"]["rps"]["value"] = float("nan")
    record["evidence"] = {"model": {"span": [1000.0, float("inf")], "slope": None}}
    with pytest.raises(RecordError, match=r"Out of range float values are not JSON compliant: "
                                          r"(?=.*metrics\.rps\.value = nan)"
                                          r"(?=.*evidence\.model\.span\[1\] = inf)"):
        append_record(tmp_path / "records.jsonl", record)
    assert not (tmp_path / "records.jsonl").exists()


def test_a_valid_record_validates():
    validate_record(_record())


def test_criteria_can_be_limited_to_a_stack():
    criteria = load_criteria()
    vpp = _measurement()
    vpp.stack = "vpp"
    vpp.add("rps", [500.0], "requests/s")
    floors = [r for r in evaluate(criteria, vpp, "3node") if r.metric == "rps"]
    assert [(r.required, r.passed) for r in floors] == [(900.0, False)]
    floors = [r for r in evaluate(criteria, vpp, "2node") if r.metric == "rps"]
    assert [(r.required, r.passed) for r in floors] == [(300.0, True)]
    kernel = _measurement()
    kernel.add("rps", [500.0], "requests/s")
    floors = [r for r in evaluate(criteria, kernel, "3node") if r.metric == "rps"]
    assert [(r.required, r.passed) for r in floors] == [(1200.0, False)]


def test_capacity_criteria_judge_only_the_capacity_tests():
    criteria = load_criteria()
    plain = _measurement()
    assert not [r for r in evaluate(criteria, plain, "3node") if "capacity" in r.metric]
    searched = _measurement(latency_slo_ms=10.0)
    searched.add("capacity", [600.0], "requests/s")
    searched.add("capacity_ratio", [0.7], "ratio")
    judged = {r.metric: r.passed for r in evaluate(criteria, searched, "3node")
              if "capacity" in r.metric}
    assert judged == {"capacity_ratio": True, "capacity": False}  # 600 < the 650 floor


@pytest.mark.parametrize(("given", "expected"), [
    (True, True), (False, False), ("yes", True), ("No", False), ("on", True), ("OFF", False),
    ("1", True), ("0", False), (" true ", True)])
def test_an_on_off_setting_reads_the_usual_words(given, expected):
    assert parse_switch("EXTENDED", given) is expected


def test_an_on_off_setting_refuses_anything_else_naming_the_variable():
    with pytest.raises(ValueError, match=r"-v EXTENDED:maybe: expected yes or no"):
        parse_switch("EXTENDED", "maybe")


def test_a_criterion_writes_its_figures_as_the_headline_does():
    """Issue 63: ``4.13766 [3.821, 4.359]`` beside the headline's ``4.14 [3.82, 4.36]`` in one
    message; both now come from one formatter (3 significant digits)."""
    m = _measurement()
    m.add("rps", [4.13766, 3.821, 4.359, 4.2, 4.0], "requests/s")
    [result] = evaluate(_floor(), m, "3node")
    median, interval = m.metrics["rps"].value, m.metrics["rps"].interval
    assert result.describe().startswith(
        f"rps {figure(median)} [{figure(interval.low)}, {figure(interval.high)}] (")
    assert result.describe().startswith("rps 4.14 [3.82, 4.36] (94% confidence) requests/s")
