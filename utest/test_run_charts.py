"""The run report's bars (libraries.report.run_charts) and its confidence line
(libraries.report.confidence): whiskers, outcome colours, criterion lines, labels at the base,
the caption only with bars, no toolbar over a title."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from libraries.report.confidence import confidence_note, page_levels
from libraries.report.run_charts import (
    CONFIG,
    OUTCOME_COLOURS,
    _label_y,
    bar_chart,
    metric_outcome,
)
from libraries.report.run_report import render_run_report
from libraries.results.inference import median_interval

BASE = {k: v for k, v in json.loads((Path(__file__).parent / "fixtures" / "records" /
                                     "ab_record.json").read_text()).items()
        if k != "ab"}
"""A valid record of the current schema, without its A/B block."""


def _metric(trials: list[float], unit: str = "Gbit/s") -> dict:
    ordered = sorted(trials)
    interval = median_interval(trials)
    return {"value": ordered[len(ordered) // 2], "unit": unit, "trials": trials,
            "direction": "higher_is_better",
            "interval": {"low": interval.low, "high": interval.high, "level": interval.level,
                         "method": interval.method}}


def _record(name: str, trials: list[float], outcome: str | None, bound: float = 4.0,
            **more: dict) -> dict:
    metrics = {"throughput": _metric(trials), **more}
    criteria = [] if outcome is None else [
        {"name": f"tcp_term.throughput >= {bound:g} [3node]", "metric": "throughput",
         "op": ">=", "required": bound, "outcome": outcome,
         "passed": outcome == "pass", "measured": metrics["throughput"]["value"],
         "interval": metrics["throughput"]["interval"], "source": "criteria.yaml: criteria.0"},
        {"name": "tcp_term.errors <= 0 [portable]", "source": "criteria.yaml: criteria.1",
         "metric": "errors", "op": "<=", "required": 0, "outcome": "pass", "passed": True,
         "per_trial": True, "measured": 0, "trials": len(trials), "violations": []}]
    return {**BASE, "name": name, "test_id": f"3node/tcp_term/{name}", "case": "tcp_term",
            "stack": "kernel", "verdict": outcome or "pass", "evidence": {},
            "metrics": metrics, "criteria": criteria}


def test_bars_are_filled_by_their_outcome_with_whiskers_and_labels_at_the_base():
    records = [_record("fast", [5.0, 5.2, 5.1, 5.3, 4.9], "pass"),
               _record("slow", [3.0, 3.1, 2.9, 3.2, 3.0], "fail"),
               _record("near", [3.9, 4.2, 4.0, 4.1, 3.8], "inconclusive"),
               _record("free", [1.0, 1.1, 1.2, 1.0, 0.9], None)]
    chart = json.loads(bar_chart("tcp_term", "Gbit/s", records).to_json())
    (bars,) = [t for t in chart["data"] if t["type"] == "bar"]
    colours = bars["marker"]["color"]
    assert colours[:3] == [OUTCOME_COLOURS[o] for o in ("pass", "fail", "inconclusive")]
    assert colours[3] not in OUTCOME_COLOURS.values()  # not judged: pale
    # whiskers: the medians' intervals, asymmetric
    whiskers = bars["error_y"]
    assert whiskers["symmetric"] is False
    first = records[0]["metrics"]["throughput"]
    assert whiskers["array"][0] == first["interval"]["high"] - first["value"]
    assert whiskers["arrayminus"][0] == first["value"] - first["interval"]["low"]
    # the medians as labels, one per bar
    assert [a["text"] for a in chart["layout"]["annotations"]] == ["5.1", "3", "4", "1"]


def test_every_criterion_is_a_dashed_line_over_its_bar_and_the_axis_reaches_it():
    records = [_record("fast", [5.0, 5.2, 5.1, 5.3, 4.9], "pass", bound=4.0),
               _record("low", [0.5, 0.6, 0.5, 0.4, 0.5], "fail", bound=9.0,
                       direct=_metric([9.0, 9.5, 9.2, 9.1, 9.3]))]
    chart = json.loads(bar_chart("tcp_term", "Gbit/s", records).to_json())
    shapes = chart["layout"]["shapes"]
    # one slot of 0.8 / 2 a variant in each group; throughput is the second (sorted)
    assert [(s["y0"], s["x0"], s["x1"]) for s in shapes] == \
        [(4.0, pytest.approx(0.0), pytest.approx(0.4)),
         (9.0, pytest.approx(1.0), pytest.approx(1.4))]
    assert all(s["line"]["dash"] == "dash" for s in shapes)
    assert chart["layout"]["bargap"] == pytest.approx(0.2)
    # named in the legend, not written over the bars (the annotations are the medians)
    assert [a["text"] for a in chart["layout"]["annotations"]] == ["9.2", "5.1", "0.5"]
    legend = [t["name"] for t in chart["data"] if t.get("mode") == "lines"]
    assert legend == ["criterion throughput ≥ 4", "criterion throughput ≥ 9"]
    # the per-trial correctness check is no line; an invisible point lifts the axis to 9
    assert len(shapes) == 2
    assert any(t["type"] == "scatter" and t.get("y") == [4.0, 9.0] for t in chart["data"])
    assert chart["layout"]["xaxis"]["categoryarray"] == ["fast", "low"]


def test_a_metric_outcome_is_its_worst_criterion_on_the_median():
    record = _record("x", [1.0, 1.0, 1.0, 1.0, 1.0], "pass")
    assert metric_outcome(record, "throughput") == "pass"
    record["criteria"].append({"metric": "throughput", "op": "<=", "required": 9,
                               "outcome": "inconclusive", "passed": False})
    assert metric_outcome(record, "throughput") == "inconclusive"
    assert metric_outcome(record, "errors") is None  # judged per trial: not the bar's


def test_no_toolbar_over_a_title():
    assert CONFIG["displayModeBar"] is False
    chart = json.loads(bar_chart("c", "Gbit/s", [_record("a", [1.0] * 5, "pass")]).to_json())
    title = chart["layout"]["title"]
    assert title["x"] == 0 and title["xanchor"] == "left"


def _run_dir(tmp_path: Path, records: list[dict]) -> Path:
    run = tmp_path / "run"
    run.mkdir(parents=True)
    (run / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return run


def test_the_bar_caption_only_on_a_page_with_bars(tmp_path: Path):
    page = render_run_report(_run_dir(tmp_path, [_record("a", [1.0, 1.1, 1.2, 1.0, 1.1],
                                                         "pass")]))
    assert "Bars: the median" in page and '"displayModeBar": false' in page
    ratio_only = _record("b", [1.0] * 5, None)
    ratio_only["metrics"] = {"ratio": _metric([0.9, 0.8, 0.85, 0.9, 0.88], "ratio")}
    assert "Bars: the median" not in render_run_report(_run_dir(tmp_path / "2", [ratio_only]))


def test_differing_confidence_levels_are_explained_in_one_line(tmp_path: Path):
    five = _record("five", [5.0, 5.2, 5.1, 5.3, 4.9], "pass")
    ten = _record("ten", [5.0, 5.2, 5.1, 5.3, 4.9, 5.0, 5.2, 5.1, 5.3, 4.9], "pass")
    assert page_levels([five, ten]) == ({94, 98}, set())
    note = confidence_note([five, ten])
    assert note.startswith("Confidence levels differ on this page (94 %, 98 %): a median's")
    assert "A/B" not in note
    assert confidence_note([five]) == ""  # one level: nothing to explain
    ab = {"name": "t", "ab": {"metrics": {"throughput": {"level": 0.9917, "low": 0.9,
                                                         "high": 0.95},
                                          "cost": {"level": 0.95, "low": None}}},
          "evidence": {"sides": {"a": {"metrics": {"throughput": five["metrics"]["throughput"]
                                                   }}}}}
    assert page_levels([ab]) == ({94}, {99})
    assert "Bonferroni" in confidence_note([ab])
    page = render_run_report(_run_dir(tmp_path, [five, ten]))
    assert re.search(r'<p class="note">Confidence levels differ on this page \(94 %, 98 %\)',
                     page)


def test_a_label_keeps_clear_of_its_bars_points_whiskers_and_criterion():
    band = 0.06 * 10
    # trials about the middle: the label goes lower
    y, anchor = _label_y(8.0, [4.0, 4.2, 3.9], band)
    assert anchor == "middle" and all(abs(y - o) > band for o in (4.0, 4.2, 3.9))
    # a bar too short for any clear place: above every point and its bound
    y, anchor = _label_y(1.0, [0.5, 1.2, 0.9], band)
    assert anchor == "bottom" and y > 1.2
    records = [_record("fast", [5.0, 5.2, 5.1, 5.3, 4.9], "pass", bound=2.6),
               _record("low", [2.0, 3.0, 1.0, 2.5, 1.5], "fail", bound=9.0)]
    chart = json.loads(bar_chart("tcp_term", "Gbit/s", records).to_json())
    labels = chart["layout"]["annotations"]
    assert [a["text"] for a in labels] == ["5.1", "2"]
    for label, record in zip(labels, records, strict=True):
        metric = record["metrics"]["throughput"]
        near = [*metric["trials"], metric["interval"]["low"], metric["interval"]["high"],
                record["criteria"][0]["required"]]
        assert label["yanchor"] != "middle" or \
            all(abs(label["y"] - other) > 0.06 * 9.0 for other in near), (label, near)
