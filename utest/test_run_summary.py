"""A run's summary.md (libraries.report.run_summary), from a real run's files and fixture
records."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import pytest

from libraries.report.run_report import main as run_main
from libraries.report.run_report import write_run_report, write_summary
from libraries.report.run_summary import render_summary, whole_message

FIXTURES = Path(__file__).parent / "fixtures"
AB_RECORD = json.loads((FIXTURES / "records" / "ab_record.json").read_text())


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    target = tmp_path / "results" / "20261122-223030-9080"
    shutil.copytree(FIXTURES / "runs" / "kernel-3node", target)
    (tmp_path / "results" / "log.html").write_text("<html></html>")
    return target


def _test(name: str, status: str, message: str, case: str = "ssl_proxy") -> dict:
    return {"test_id": f"3node/{case}/{name}", "name": name, "robot_id": "s1-t1",
            "suite": "S", "status": status, "message": message, "headline": None,
            "log": "../log.html", "tags": []}


def _ab(name: str, change_pct: float, low: float, high: float, verdict: str) -> dict:
    record = copy.deepcopy(AB_RECORD)
    record["name"], record["test_id"] = name, f"1node/tcp_term/{name}"
    record["ab"]["metrics"]["throughput"].update(
        change_pct=change_pct, low=low, high=high, verdict=verdict)
    return record


def test_a_real_run_summary_counts_links_and_groups_skips(run_dir: Path):
    write_run_report(run_dir)
    text = write_summary(run_dir).read_text()
    lines = text.splitlines()
    assert lines[0] == "# Run 20261122-223030-9080: 11 passed, 1 skipped"
    assert lines[2].startswith("[run report](run-report.html) · [log](../log.html) · "
                               "topology 3node")
    assert (run_dir / "run-report.html").is_file() and (run_dir / "../log.html").is_file()
    assert "## Skipped (1)" in text
    assert "- 1 x bpftime not declared" in text
    assert "## Failed" not in text and "## A/B" not in text


def test_failed_tests_show_their_whole_message(run_dir: Path):
    long = ("A/B tiny 15.7 % slower than default on throughput [-22.5, -7.5] after 10 rounds; "
            "profile: tcp_recvmsg 12 % of the DUT's CPU on side b against 4 % on side a, "
            "beyond the noise of the warm-up profiles (3 %); the candidate's kernel path "
            "changed, not nginx's.")
    assert len(long) > 200  # the old cut
    with (run_dir / "tests.jsonl").open("a") as out:
        out.write(json.dumps(_test("1kb-10c-vpp-ssl-proxy", "FAIL",
                                   "criteria not met: rps 812 < 1000\nsecond line | measured: "
                                   "rps 812 req/s")) + "\n")
        out.write(json.dumps(_test("1s-vpp-tcp-term", "FAIL", long)) + "\n")
    text = write_summary(run_dir).read_text()
    assert "# Run 20261122-223030-9080: 2 failed, 11 passed, 1 skipped" in text
    assert "## Failed (2)\n\n- `1kb-10c-vpp-ssl-proxy` (3node/ssl_proxy): criteria not met: " \
        "rps 812 < 1000 / second line\n" in text
    assert f"- `1s-vpp-tcp-term` (3node/ssl_proxy): {long}\n" in text
    assert "measured: rps 812" not in text


def test_every_ab_test_has_its_change_interval_and_verdict(run_dir: Path):
    records = [_ab("1s-vpp-tcp-term", -4.25, 0.9412, 0.9731, "regression"),
               _ab("4s-vpp-tcp-term", 0.3, 0.995, 1.011, "no change")]
    with (run_dir / "records.jsonl").open("a") as out:
        out.writelines(json.dumps(r) + "\n" for r in records)
    with (run_dir / "tests.jsonl").open("a") as out:
        out.write(json.dumps(_test("1s-vpp-tcp-term", "FAIL", "A/B regression", "tcp_term")
                             | {"test_id": "1node/tcp_term/1s-vpp-tcp-term"}) + "\n")
    text = write_summary(run_dir).read_text()
    assert "## A/B (2 tests; comparison vpp installs)" in text
    assert "- side b `vpp-copy` sets: vpp dut api_dir = /opt/vpp-copy/share/vpp/api; vpp dut " \
        "bin = /opt/vpp-copy/bin/vpp;" in text
    assert "| 1s-vpp-tcp-term | throughput | vpp -> vpp-copy | -4.2 % [-5.9, -2.7] | " \
        "regression | FAIL |" in text
    assert "| 4s-vpp-tcp-term | throughput | vpp -> vpp-copy | +0.3 % [-0.5, +1.1] | " \
        "no change | " in text


def test_a_31_test_run_stays_short():
    tests = [_test(f"t{i}", "PASS", "rps 10k") for i in range(18)]
    tests += [_test(f"f{i}", "FAIL", f"criteria not met: rps {i} < 1000") for i in range(4)]
    tests += [_test(f"x{i}", "SKIP", "extended row: runs with -v EXTENDED:yes") for i in range(6)]
    tests += [_test(f"v{i}", "SKIP", "VPP not installed on dut: /usr/bin/vpp missing")
              for i in range(3)]
    records = [_ab(f"t{i}", 1.0, 1.0, 1.02, "inconclusive") for i in range(6)]
    text = render_summary(records, tests, {"topology": "3node"}, "r1", "log.html")
    assert text.startswith("# Run r1: 4 failed, 18 passed, 9 skipped\n")
    assert len(text.splitlines()) <= 60
    assert "- 6 x extended row: runs with -v EXTENDED:yes" in text
    assert "- 3 x VPP not installed on dut: /usr/bin/vpp missing" in text
    # a long list is cut and counted
    many = [_test(f"f{i}", "FAIL", "broken") for i in range(45)]
    cut = render_summary([], many, {}, "r2", None, None)
    assert "- ... and 25 more failed tests (see the run report)" in cut
    assert len(cut.splitlines()) < 30
    assert "[run report]" not in cut and "[log]" not in cut


def test_the_latest_line_of_a_test_counts_and_an_embedded_summary_nests():
    tests = [_test("a", "FAIL", "first try"), _test("a", "PASS", "rerun")]
    text = render_summary([], tests, {}, "r", None, heading="##")
    assert text.startswith("## Run r: 1 passed\n")
    assert "Failed" not in text


def test_a_whole_message_in_one_markdown_line():
    assert whole_message(None) == "(no message)"
    assert whole_message("a | b\n\n  c  d") == "a \\| b / c d"
    assert whole_message("x | measured: rps 1") == "x"
    assert whole_message("y" * 500) == "y" * 500


def test_the_report_command_writes_the_summary(run_dir: Path, capsys):
    assert run_main([str(run_dir)]) == 0
    assert str(run_dir / "summary.md") in capsys.readouterr().out
    assert (run_dir / "summary.md").read_text().startswith("# Run ")
