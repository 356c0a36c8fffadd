"""The night's summary.md (libraries.nightly.night_summary), from a real run's files and a trend
summary written by the trend tool's own table writer."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from libraries.nightly.night_summary import GATE, flagged_series, write_night_summary
from libraries.trend.analysis import SUMMARY_HEADER, markdown_summary, markdown_table

FIXTURE = Path(__file__).parent / "fixtures" / "runs" / "kernel-3node"
ROWS = [
    ["3node/tcp_term/1s-kernel-tcp-term", "throughput", "6.39 Gbit/s", "6.4 Gbit/s", "-0.2%",
     "-", "normal"],
    ["3node/ssl_proxy/1kb-10c-kernel-ssl-proxy", "rps", "9.1 kreq/s", "10 kreq/s", "-9.0%",
     "-9.0% [-11.2%, -6.9%] regression", "regression"],
    ["3node/ssl_proxy/1kb-10c-kernel-ssl-proxy", "p99 | tail", "12 ms", "11 ms", "+9.1%",
     "+9.1% [+4.0%, +13.6%] pending regression: confirmed or cleared by the next night",
     "pending"],
    ["3node/sslsniff/1kb-10c-kernel-sslsniff", "overhead_pct", "80", "83", "-3.6%", "-",
     "progression"],
]


@pytest.fixture
def night(tmp_path: Path) -> tuple[Path, Path]:
    run_dir = tmp_path / "results" / "20261122-223030-9080"
    shutil.copytree(FIXTURE, run_dir)
    trend_md = tmp_path / "results" / "trend.md"
    trend_md.write_text("# Performance trend\n\n4 series\n\n"
                        + markdown_table(SUMMARY_HEADER, ROWS))
    (tmp_path / "results" / "trend.html").write_text("<html></html>")
    return run_dir, trend_md


def test_the_gate_says_its_exit_code_and_lists_regressed_and_pending_series(night):
    run_dir, trend_md = night
    codes = {"run_codes": {"3node": 0}, "merge_code": None, "trend_code": 3, "status": 3}
    path = write_night_summary(run_dir, "20261122-223030-9080", codes,
                               trend_md.with_name("trend.html"), trend_md)
    text = path.read_text()
    assert path == run_dir / "summary.md"
    lines = text.splitlines()
    assert lines[0] == "# Nightly 20261122-223030-9080: exit 3"
    assert lines[2] == "[trend dashboard](../trend.html) · [trend summary](../trend.md)"
    assert f"Gate: **exit 3**: {GATE[3]}.\n\nExit codes: run on 3node 0, trend tool 3.\n" in text
    assert "## Series: 1 regression(s), 1 pending" in text
    table = [line for line in lines if line.startswith("| 3node/")]
    assert table == [
        "| 3node/ssl_proxy/1kb-10c-kernel-ssl-proxy | rps | 9.1 kreq/s | -9.0% | "
        "-9.0% [-11.2%, -6.9%] regression | regression |",
        "| 3node/ssl_proxy/1kb-10c-kernel-ssl-proxy | p99 \\| tail | 12 ms | +9.1% | "
        "+9.1% [+4.0%, +13.6%] pending regression: confirmed or cleared by the next night | "
        "pending |"]
    # then the night's tests: the run's own summary, one level down
    assert "## Run 20261122-223030-9080: 11 passed, 1 skipped" in text
    assert "### Skipped (1)" in text
    assert len(lines) < 40


def test_a_night_without_a_trend_summary_says_its_series_were_not_judged(night):
    run_dir, trend_md = night
    trend_md.unlink()
    codes = {"run_codes": {"3node": 253}, "merge_code": None, "trend_code": 2, "status": 4}
    text = write_night_summary(run_dir, "r", codes, trend_md.with_name("nope.html"),
                               trend_md).read_text()
    assert f"Gate: **exit 4**: {GATE[4]}.\n\nExit codes: run on 3node 253, trend tool 2." in text
    assert "Series: not judged (the trend summary was not written)." in text
    assert "[trend dashboard]" not in text


def test_a_quiet_night_lists_no_series_and_a_broken_run_folder_is_said():
    text = markdown_summary([])
    assert flagged_series(text) == []
    with pytest.raises(ValueError, match="no trend table"):
        flagged_series("# nothing here\n")


def test_a_run_folder_that_cannot_be_read_is_said(tmp_path: Path):
    run_dir = tmp_path / "empty"
    run_dir.mkdir()
    text = write_night_summary(run_dir, "r", {"status": 0, "run_codes": {}}, tmp_path / "x",
                               tmp_path / "y").read_text()
    assert "## Run r\n\nnot summarised: " in text
    assert "Exit codes: no run started." in text

