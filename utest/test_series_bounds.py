"""The trend dashboard's criterion lines and verdict colours (libraries.report.series_bounds):
the bound judging a series today, for its newest sample's case, stack, parameters and
topology (other cases, topologies and parameters not drawn); each sample's verdict."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd

from libraries.history.ingest import ingest
from libraries.history.store import Store
from libraries.report.dashboard import build_dashboard
from libraries.report.series_bounds import default_criteria, series_bounds, verdict_codes
from libraries.results.criteria import CriteriaFile, Criterion, load_criteria
from libraries.trend.gate import analyse_store
from utest.test_trend import SERIES, write_runs

CRITERIA = CriteriaFile(version=1, criteria=[
    Criterion(case="tcp_term", metric="throughput", min=4e9, topologies=["3node"],
              when={"stack": "kernel", "streams": 1}),
    Criterion(case="tcp_term", metric="throughput", min=1e9, topologies=["1node"]),
    Criterion(case="tcp_term", metric="throughput", min=9e9, when={"streams": 4}),
    Criterion(case="tcp_term", metric="latency", max=3.0),
    Criterion(case="ssl_proxy", metric="throughput", min=1.0),
])


def _trends(tmp_path: Path):
    write_runs(tmp_path / "results", SERIES, runs=6)
    store = Store(tmp_path / "results" / "history")
    ingest([tmp_path / "results"], store)
    return {t.test_id.rsplit(".", 1)[1]: t for t in analyse_store(store).trends}


def test_each_series_gets_the_bounds_that_judge_it_today(tmp_path: Path):
    trends = _trends(tmp_path)
    assert series_bounds(trends["step-down"], CRITERIA) == [{"y": 4e9,
                                                             "text": "throughput ≥ 4G"}]
    assert series_bounds(trends["latency-step-up"], CRITERIA) == [{"y": 3.0,
                                                                   "text": "latency ≤ 3"}]
    assert series_bounds(trends["step-down"], None) == []
    page = build_dashboard(list(trends.values()), criteria=CRITERIA).page
    series = json.loads(re.search(r"const SERIES = (\[.*?\]);\n", page).group(1))
    assert [len(s["bounds"]) for s in series] == [1, 1, 1, 1]
    assert build_dashboard(list(trends.values())).page.count('"bounds":[]') == 4


def test_the_project_criteria_file_loads_and_a_broken_one_leaves_the_lines_out(
        monkeypatch, tmp_path: Path):
    assert default_criteria() is not None
    broken = tmp_path / "criteria.yaml"
    broken.write_text("version: 9\n")
    monkeypatch.setattr("libraries.report.series_bounds.load_criteria",
                        lambda: load_criteria(broken))
    assert default_criteria() is None


def test_each_sample_keeps_its_verdict_code():
    rows = pd.DataFrame({"verdict": ["pass", "fail", "inconclusive", "no_criteria"]})
    assert verdict_codes(rows) == ["", "f", "i", ""]
    assert verdict_codes(pd.DataFrame({"value": [1.0]})) == [""]
