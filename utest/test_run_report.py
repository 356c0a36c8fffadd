"""Tests of libraries.report.run_report: the per-run run-report.html, from a real run's files.

``fixtures/runs/kernel-3node`` holds records.jsonl, tests.jsonl and run.json of a real run
(3node, kernel stack, 2 trials of 2 s: tcp_term, ssl_proxy with wrk2, sslsniff, ebpf_stream
native; the bpftime test skipped).
"""

from __future__ import annotations

import io
import json
import re
import shutil
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from libraries.cases.context import Skip
from libraries.cases.judging import check_criteria
from libraries.keywords.results import ResultsKeywords
from libraries.report.run_end import finish_run
from libraries.report.run_report import load_tests, main, render_run_report
from libraries.results.measurement import Measurement
from libraries.testbed.errors import HostStackError
from utest.kept_log import KeptLog
from utest.test_trend_browser import CHROMIUM, chromium, console_lines

FIXTURE = Path(__file__).parent / "fixtures" / "runs" / "kernel-3node"


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    """The fixture run laid out as robot writes it: results/<run-id>/ beside results/log.html."""
    target = tmp_path / "results" / "20261122-223030-9080"
    shutil.copytree(FIXTURE, target)
    (tmp_path / "results" / "log.html").write_text("<html><body>log</body></html>")
    return target


def test_every_case_has_its_section_and_every_test_its_row(run_dir: Path):
    page = render_run_report(run_dir)
    records = [json.loads(line) for line in (run_dir / "records.jsonl").read_text().splitlines()]
    for case in {r["case"] for r in records}:
        assert f'id="case-{case}"' in page
    for record in records:
        assert f"<td>{record['name']}</td>" in page
    # the skipped test has no record: listed with Robot's status and reason
    assert "Tests without a record" in page
    assert re.search(r"1kb-10c-bpftime-sslsniff</td>.*?SKIP.*?bpftime not declared", page)
    assert "11 pass, 1 skip" in page


def test_charts_carry_every_trial_and_the_median_label(run_dir: Path):
    page = render_run_report(run_dir)
    charts = json.loads(re.search(r"const CHARTS = (\[.*?\]);\n", page).group(1))
    assert len(charts) == 4  # Gbit/s for tcp_term and ebpf_stream, requests/s for two cases
    ssl = next(c for c in charts if "ssl_proxy" in c["layout"]["title"]["text"])
    bars = {t["name"]: t for t in ssl["data"] if t["type"] == "bar"}
    assert set(bars) == {"rps", "direct_rps"}
    record = next(json.loads(line) for line in (run_dir / "records.jsonl").read_text()
                  .splitlines() if '"1kb-10c-kernel-ssl-proxy"' in line)
    index = bars["rps"]["x"].index("1kb-10c-kernel-ssl-proxy")
    assert bars["rps"]["y"][index] == pytest.approx(record["metrics"]["rps"]["value"])
    points = next(t for t in ssl["data"] if t["name"] == "rps trials")
    trials = [y for x, y in zip(points["x"], points["y"], strict=True)
              if x == "1kb-10c-kernel-ssl-proxy"]
    assert trials == pytest.approx(record["metrics"]["rps"]["trials"])


def test_links_into_the_log_resolve(run_dir: Path):
    page = render_run_report(run_dir)
    links = re.findall(r'href="([^"#]+\.html)(#[^"]*)?"', page)
    assert links
    for path, anchor in links:
        assert (run_dir / path).is_file(), path
        assert anchor == "" or re.fullmatch(r"#s1(-s\d+)*-t\d+", anchor)


def test_cli_writes_the_page_and_rejects_a_directory_without_a_run(run_dir: Path,
                                                                   tmp_path: Path, capsys):
    assert main([str(run_dir)]) == 0
    assert (run_dir / "run-report.html").stat().st_size > 100_000  # plotly.js inlined
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main([str(empty)]) == 2
    assert "not a run directory" in capsys.readouterr().err


def test_a_garbled_tests_file_is_named_with_its_line(run_dir: Path):
    with (run_dir / "tests.jsonl").open("a") as stream:
        stream.write("{not json\n")
    with pytest.raises(ValueError, match=r"tests.jsonl:13: not JSON"):
        load_tests(run_dir)


@pytest.mark.integration
@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (/usr/bin/chromium missing)")
def test_the_page_renders_in_chromium_without_console_errors(run_dir: Path, tmp_path: Path):
    assert main([str(run_dir)]) == 0
    done = chromium(tmp_path / "profile", "--dump-dom", (run_dir / "run-report.html").as_uri())
    assert done.returncode == 0, done.stderr[-2000:]
    assert console_lines(done.stderr) == []
    assert done.stdout.count('class="plot-container plotly"') == 4
    shot = tmp_path / "report.png"
    chromium(tmp_path / "profile2", "--hide-scrollbars", "--window-size=1280,2000",
             f"--screenshot={shot}", (run_dir / "run-report.html").as_uri())
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _listener_with_headline(text: str):
    listener = ResultsKeywords()
    listener._records.headline = text
    return listener


def test_a_passing_test_message_is_its_headline():
    result = SimpleNamespace(message="", passed=True, status="PASS", full_name="T.Pass")
    _listener_with_headline("throughput 14.2 Gbit/s (receiver, cv 3%)").end_test(None, result)
    assert result.message == "throughput 14.2 Gbit/s (receiver, cv 3%)"


def test_a_failed_test_keeps_its_failure_first_and_the_figures_after():
    result = SimpleNamespace(message="criteria not met: rps 812 requests/s < required 1000",
                             passed=False, status="FAIL", full_name="T.Fail")
    _listener_with_headline("rps 812 req/s (cv 4%)").end_test(None, result)
    assert result.message == ("criteria not met: rps 812 requests/s < required 1000 | "
                              "measured: rps 812 req/s (cv 4%)")


def test_the_run_ends_with_its_failed_tests_and_their_messages(monkeypatch):
    console = io.StringIO()
    monkeypatch.setattr(sys, "__stdout__", console)
    listener = ResultsKeywords()
    listener.end_test(None, SimpleNamespace(message="rps 14k", status="PASS",
                                            full_name="Tests.Ssl Proxy.Kernel.ok"))
    message = "criteria not met:\nrps 812 < 1000 " + "x" * 900
    listener.end_test(None, SimpleNamespace(message=message, status="FAIL",
                                            full_name="Tests.Ssl Proxy.Kernel.bad"))
    listener.end_test(None, SimpleNamespace(message="", status="SKIP",
                                            full_name="Tests.Ssl Proxy.Vpp.skipped"))
    listener.close()
    lines = console.getvalue().splitlines()
    assert lines[0] == "Failed tests (1):"
    assert lines[1].startswith("  Tests.Ssl Proxy.Kernel.bad: criteria not met: rps 812 < 1000 x")
    assert lines[1].endswith("...") and len(lines[1]) < 700
    assert len(lines) == 2


def test_a_run_is_stored_reported_and_its_failures_printed_last(run_dir: Path):
    console = io.StringIO()
    finish_run(run_dir, "", ["  T.bad: criteria not met"], console)
    lines = console.getvalue().splitlines()
    history = run_dir.parent / "history"
    assert lines == [f"History: {history}", f"Run report: {run_dir / 'run-report.html'}",
                     f"Summary: {run_dir / 'summary.md'}",
                     "Failed tests (1):", "  T.bad: criteria not met"]
    assert (run_dir / "summary.md").read_text().startswith("# Run 20261122-223030-9080: ")
    assert any(history.rglob("*.parquet"))
    console = io.StringIO()
    finish_run(run_dir.parent / "missing", "NONE", [], console)
    assert console.getvalue() == ""


def test_a_run_without_failures_prints_no_failure_list(monkeypatch):
    console = io.StringIO()
    monkeypatch.setattr(sys, "__stdout__", console)
    listener = ResultsKeywords()
    listener.end_test(None, SimpleNamespace(message="ok", status="PASS", full_name="T.ok"))
    listener.close()
    assert console.getvalue() == ""


def test_telemetry_of_a_v2_run_is_folded_per_test_variant_and_node(tmp_path: Path):
    """A real full 3node run (VPP, eBPF nginx, bpftime, wrk2 present): record v2."""
    run = tmp_path / "results" / "run"
    shutil.copytree(FIXTURE.parent / "full-3node", run)
    page = render_run_report(run)
    assert "18 pass" in page  # the 2 smoke tests do not measure: no results library there
    records = [json.loads(line) for line in (run / "records.jsonl").read_text().splitlines()]
    with_telemetry = [r for r in records if "variants" in r.get("telemetry", {})]
    assert len(with_telemetry) == len(records)
    assert page.count("<summary>CPU telemetry of ") == len(records)
    ebpf = next(r for r in records if r["name"] == "reverse-unpinned-stream-proxy-ebpf")
    section = page.split("CPU telemetry of reverse-unpinned-stream-proxy-ebpf")[1]
    section = section.split("</details>")[0]
    for variant in ebpf["telemetry"]["variants"]:
        assert f"<b>{variant}</b>" in section
    assert re.search(r"CPU +%usr +%nice +%sys", section) and "nginx" in section


def _checked(measurement: Measurement, outcomes: list[str],
             correctness_only: bool = False) -> None:
    """``Check Criteria``'s judgement (:func:`libraries.cases.judging.check_criteria`) by
    criteria of ``outcomes`` on 3node (``correctness_only``: as with ``-v JUDGE:correctness``);
    no Robot."""
    results = [SimpleNamespace(outcome=o, floor=False, per_trial=False,
                               describe=lambda o=o: f"rps {o}") for o in outcomes]
    judge = SimpleNamespace(evaluate=lambda measurement: results,
                            correctness_only=correctness_only)
    check_criteria(measurement, judge, "3node", KeptLog())  # type: ignore[arg-type]


def test_a_result_the_testbed_cannot_measure_is_skipped_after_what_fails():
    """A capacity goal under the testbed's latency floor (libraries.capacity.floor) is
    recorded, then skipped; an invalid result or a missed criterion still fails first."""
    measurement = Measurement("ssl_proxy", "kernel", {})
    measurement.untestable.append("p99<=10ms is under this testbed's latency floor")
    with pytest.raises(Skip, match="not measurable on this testbed .recorded.: "
                       "p99<=10ms is under this testbed's latency floor"):
        _checked(measurement, ["pass"])
    with pytest.raises(HostStackError, match="criteria not met: rps fail"):
        _checked(measurement, ["pass", "fail"])
    measurement.invalid.append("direct path: the search did not finish")
    with pytest.raises(HostStackError, match="invalid result: direct path"):
        _checked(measurement, ["pass"])
    # -v JUDGE:correctness (CI's e2e job): the sanity finding is recorded, not failed on;
    # what stays is the skip of the untestable goal
    with pytest.raises(Skip, match="not measurable on this testbed"):
        _checked(measurement, ["pass"], correctness_only=True)


def test_a_failed_or_inconclusive_plain_verdict_says_when_others_held_the_duts_cores():
    """Issue 63: two tcp_term rows inconclusive beside other work, with nothing saying so."""
    busy = Measurement("tcp_term", "kernel", {})
    busy.add("throughput", [3.1, 4.4, 3.8], "Gbit/s")
    busy.cost = {"metric": "cost", "foreign_load": {"node": "dut", "share_pct": 57.2}}
    told = "other processes took 57 % of dut's cores during the trials"
    with pytest.raises(HostStackError, match=rf"^criteria inconclusive after 3 trials "
                       rf"\(fixed number of trials\): rps inconclusive; {told}$"):
        _checked(busy, ["pass", "inconclusive"])
    with pytest.raises(HostStackError, match=rf"^criteria not met: rps fail; {told}$"):
        _checked(busy, ["fail"])
    busy.cost["foreign_load"]["share_pct"] = 12.0  # under LARGE_FOREIGN: not said
    with pytest.raises(HostStackError, match=r"^criteria not met: rps fail$"):
        _checked(busy, ["fail"])
