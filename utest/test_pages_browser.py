"""The pages of a real run in a real browser: one short Robot run on the local 3node testbed
(tcp_term and ssl_proxy on the kernel stack, 5 trials of 1 s), one short A/B run (6 rounds of
1 s, side b with a sysctl and an environment variable), and the trend dashboard of the first;
each page opened in headless Chromium (:mod:`utest.pages`): every chart drawn with data, no
console message (a script error), each criterion's dashed line drawn over its bar (on the
dashboard: across its series' chart) and named,
Plotly's toolbar over no chart of the run report, the A/B page saying what side b set; and a
short duet (6 rounds of 1 s), whose side b's page links side a's, where the verdict is.

``utest/test_docs_browser.py`` proves the check fails on a page that does not render. Needs
root (the testbed's network namespaces) and Debian's ``chromium``; skipped with the reason
otherwise.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from libraries.report.run_charts import metric_outcome
from libraries.report.run_summary import whole_message
from libraries.report.trend_command import main as trend_main
from libraries.results.headline import figure
from utest.pages import draw
from utest.test_trend_browser import CHROMIUM

REPO = Path(__file__).resolve().parent.parent
SHORT = ["-v", "TOPOLOGY:3node", "-v", "DURATION:1", "-v", "WARMUP:1", "--console", "dotted"]
COMPARISON = """name: small rmem
a: {name: default}
b:
  name: small-rmem
  sysctl: {dut: {net.ipv4.tcp_rmem: 4096 65536 1048576}}
  env: {iperf3: {MALLOC_ARENA_MAX: "2"}}
"""

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root to build network namespaces"),
    pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (/usr/bin/chromium "
                                                "missing; setup.sh installs Debian's chromium)"),
]


@dataclass(frozen=True)
class RealRun:
    """A plain run's directory, an A/B run's directory and the plain run's dashboard."""

    run_dir: Path
    ab_dir: Path
    trend: Path


def _robot(*args: str) -> None:
    done = subprocess.run([sys.executable, "-m", "robot", *SHORT, *args], cwd=REPO,
                          capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode < 250, done.stdout[-3000:] + done.stderr[-3000:]  # tests may fail


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> RealRun:
    root = tmp_path_factory.mktemp("pages")
    _robot("-d", str(root / "results"), "-v", "TRIALS:5", "-v", "MAX_TRIALS:5",
           "-t", "1s-kernel-tcp-term", "-t", "1kb-10c-kernel-ssl-proxy",
           "tests/tcp_term/kernel.robot", "tests/ssl_proxy/kernel.robot")
    (run_dir,) = [p for p in (root / "results").iterdir() if (p / "records.jsonl").is_file()]
    comparison = root / "ab.yaml"
    comparison.write_text(COMPARISON)
    _robot("-d", str(root / "ab"), "-v", "RUN_ID:ab", "-v", f"AB:{comparison}",
           "-v", "AB_LOOK:6", "-v", "AB_MAX_ROUNDS:6", "-v", "PROFILE:off",
           "-t", "1s-kernel-tcp-term", "tests/tcp_term/kernel.robot")
    trend = root / "site" / "trend.html"
    assert trend_main([str(root / "results"), "--html", str(trend)]) in (0, 3)
    return RealRun(run_dir, root / "ab", trend)


def _records(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "records.jsonl").read_text().splitlines()]


def test_the_run_report_draws_every_chart_with_its_criterion_line(real: RealRun) -> None:
    records = _records(real.run_dir)
    assert {r["case"] for r in records} == {"tcp_term", "ssl_proxy"}
    drawn = draw((real.run_dir / "run-report.html").as_uri())
    assert drawn.problems() == []
    charts = {chart.id.split("-")[1]: chart for chart in drawn.charts}
    assert set(charts) == {"tcp_term", "ssl_proxy"}  # one rate unit each, as recorded
    for record in records:
        chart = charts[record["case"]]
        assert not chart.toolbar, chart
        floors = [c for c in record["criteria"] if not c.get("per_trial")
                  and record["metrics"].get(c["metric"], {}).get("unit", "").endswith("/s")]
        assert floors, record["criteria"]  # tcp_term's throughput, ssl_proxy's rps
        assert chart.dashed >= len(floors)
        for c in floors:
            sign = "≥" if c["op"] == ">=" else "≤"
            assert f"criterion {c['metric']} {sign} {figure(c['required'])}" in chart.labels
            assert metric_outcome(record, c["metric"]) in ("pass", "fail", "inconclusive")
        # every bar labelled with its median
        for metric in record["metrics"].values():
            if metric["unit"].endswith("/s"):
                assert figure(metric["value"]) in chart.labels, (chart.labels, metric)
    assert "Bars: the median" in drawn.dom


def test_summary_md_keeps_each_failure_whole(real: RealRun) -> None:
    summary = (real.run_dir / "summary.md").read_text()
    tests = [json.loads(line) for line in (real.run_dir / "tests.jsonl").read_text()
             .splitlines()]
    for test in tests:
        if test["status"] == "FAIL":
            assert f"`{test['name']}` " in summary
            assert whole_message(test["message"]) in summary


def test_the_ab_page_draws_its_rounds_and_says_what_side_b_set(real: RealRun) -> None:
    drawn = draw((real.ab_dir / "run-report.html").as_uri())
    assert drawn.problems() == []
    (chart,) = drawn.charts
    assert chart.id.startswith("chart-ab") and chart.marks >= 6  # six rounds' ratios
    assert chart.dashed >= 2  # the margin's two lines
    assert "b small-rmem</b>: env iperf3 MALLOC_ARENA_MAX = 2; sysctl dut " \
        "net.ipv4.tcp_rmem = 4096 65536 1048576" in drawn.dom
    assert "Bars: the median" not in drawn.dom  # no bars on this page: no caption


def test_the_dashboard_of_the_run_draws_every_series(real: RealRun) -> None:
    drawn = draw(real.trend.as_uri())
    assert drawn.problems() == []
    records = _records(real.run_dir)
    series = {(r["test_id"], name) for r in records for name in r["metrics"]}
    assert len(drawn.charts) == len(series) and all(c.marks for c in drawn.charts)
    # the criteria judging the run's medians, each a dashed line on its series' chart
    bounds = {f"criterion {c['metric']} {'≥' if c['op'] == '>=' else '≤'} "
              f"{figure(c['required'])}" for r in records for c in r["criteria"]
              if not c.get("per_trial")}
    drawn_bounds = {label for c in drawn.charts if c.dashed for label in c.labels
                    if label.startswith("criterion ")}
    assert bounds and drawn_bounds == bounds


def test_a_duets_two_pages_link_each_other_and_side_b_points_to_the_verdict(
        tmp_path: Path) -> None:
    comparison = tmp_path / "ab.yaml"
    comparison.write_text(COMPARISON)
    done = subprocess.run(
        [sys.executable, "-m", "libraries.ab.duet_run", str(comparison), "-d",
         str(tmp_path / "duet"), "--timeout", "600", "--", *SHORT, "-v", "AB_LOOK:6",
         "-v", "AB_MAX_ROUNDS:6", "-v", "PROFILE:off", "-t", "1s-kernel-tcp-term",
         "tests/tcp_term/kernel.robot"], cwd=REPO, capture_output=True, text=True,
        timeout=900, check=False)
    assert done.returncode < 250, done.stdout[-3000:] + done.stderr[-3000:]
    (a_page,) = (tmp_path / "duet" / "a").glob("*/run-report.html")
    (b_page,) = (tmp_path / "duet" / "b").glob("*/run-report.html")
    side_b = draw(b_page.as_uri())
    assert side_b.problems() == []
    link = re.search(r'the verdicts are on side a\'s page: <a href="([^"]+)"', side_b.dom)
    assert link and (b_page.parent / link.group(1)).resolve() == a_page.resolve()
    side_a = draw(a_page.as_uri())
    assert side_a.problems() == [] and len(side_a.charts) == 1  # the rounds' ratios
    back = re.search(r'side b\'s run: <a href="([^"]+)"', side_a.dom)
    assert back and (a_page.parent / back.group(1)).resolve() == b_page.resolve()
    assert "the verdicts are on side a's page" in (b_page.parent / "summary.md").read_text()
