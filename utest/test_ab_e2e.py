"""A/B runs for real on the 3node testbed (short: 6 rounds of 1 s): a sysctl that cripples the
DUT's receive buffers is a regression that fails the test with the message a user reads, the
original value is put back after the test, and each side's record and the run report say so;
an nginx knob restarts only the proxy, and skips tcp_term, which runs no nginx; bad comparison
files stop the suite before anything is measured, naming the file and key."""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from robot.api import ExecutionResult

REPO = Path(__file__).resolve().parent.parent
SHORT = ["-v", "AB_LOOK:6", "-v", "AB_MAX_ROUNDS:6", "-v", "DURATION:1", "-v", "WARMUP:1",
         "-v", "PROFILE_SECONDS:2"]

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root to build network namespaces"),
]


def _robot(tmp_path: Path, comparison: str, test: str, suite: str,
           settings: list[str] = SHORT) -> tuple[int, Path]:
    path = tmp_path / "ab.yaml"
    path.write_text(comparison)
    out = tmp_path / "out"
    run = subprocess.run([sys.executable, "-m", "robot", "-d", str(out), "-v", "RUN_ID:ab",
                          "-v", "TOPOLOGY:3node", "-v", f"AB:{path}", *settings, "-t", test,
                          "--console", "dotted", suite], cwd=REPO, capture_output=True,
                         text=True, timeout=900, check=False)
    return run.returncode, out


def _messages(out: Path) -> dict[str, tuple[str, str]]:
    result = ExecutionResult(str(out / "output.xml"))
    found: dict[str, tuple[str, str]] = {}

    def visit(suite) -> None:
        for test in suite.tests:
            found[test.name] = (test.status, test.message)
        for child in suite.suites:
            visit(child)
    visit(result.suite)
    return found


def test_a_crippled_receive_buffer_is_a_regression_and_the_sysctl_comes_back(tmp_path: Path):
    # 10 rounds: at 6 (one look at 0.05) the interval is the rounds' whole range, so a single
    # round disturbed by other work (two CPU burners, another test) left it inconclusive
    ten = ["-v", "AB_LOOK:10", "-v", "AB_MAX_ROUNDS:10", *SHORT[4:]]
    code, out = _robot(tmp_path, "name: tiny rmem\na: {name: default}\nb:\n  name: tiny\n"
                       "  sysctl: {dut: {net.ipv4.tcp_rmem: 4096 4096 4096}}\n",
                       "1s-kernel-tcp-term", "tests/tcp_term/kernel.robot", ten)
    status, message = _messages(out)["1s-kernel-tcp-term"]
    assert code == 1, message
    assert status == "FAIL" and message.startswith("A/B tiny ")
    assert " % slower than default on throughput [" in message
    # the regression's message ends with the profiles' hint (a frame beyond noise, nothing
    # beyond noise, or that the DUT's CPU per Gbit did not change)
    assert " after 10 rounds; profile: " in message, message
    (record,) = map(json.loads, (out / "records.jsonl").read_text().splitlines())
    hint = record["evidence"]["profile"]["diff"]["hint"]
    assert hint["kind"] in ("frame", "noise", "not_cpu") and message.endswith(
        "; profile: " + hint["text"]), (hint, message)
    assert record["schema_version"] == 4 and record["verdict"] == "fail"
    block = record["ab"]
    assert block["verdict"] == "regression" and block["rounds"]["run"] == 10
    orders = block["rounds"]["order"].split(" | ")
    assert len(orders) == 10 and set(orders) <= {"A B", "B A"}
    assert isinstance(block["rounds"]["order_seed"], int)
    ran = "AB" + "".join(order.replace(" ", "") for order in orders)  # warm-ups, then rounds
    assert block["switch"]["count"] == 1 + sum(x != y for x, y in itertools.pairwise(ran))
    assert block["comparison"]["text"].startswith("name:")
    assert len(record["metrics"]["ab_throughput_ratio"]["trials"]) == 10
    assert set(record["evidence"]["sides"]) == {"a", "b"}
    # each side's telemetry: every node's CPU per process over that side's trials
    variants = record["telemetry"]["variants"]
    assert set(variants) == {"a iperf3", "b iperf3"}
    assert variants["b iperf3"]["nodes"]["dut"]["processes"]["iperf3-server"]["cpu"] > 0
    generator = block["sides"]["b"]["load_generator"]
    assert generator["node"] == "tg" and generator["process"] == "iperf3-client"
    assert generator["cpu_pct"] > 0 and isinstance(generator["saturated"], bool)
    log = (out / "output.xml").read_text()
    original = log.split("sysctl -n net.ipv4.tcp_rmem")[0]  # read in the suite setup
    assert "net.ipv4.tcp_rmem=4096 4096 4096" in log
    restored = log.rsplit("sysctl -q -w", 1)[1].split("'")[1]
    assert restored.startswith("net.ipv4.tcp_rmem=") and restored != \
        "net.ipv4.tcp_rmem=4096 4096 4096", original[-200:]
    page = (out / "run-report.html").read_text()
    assert "<h2>A/B</h2>" in page and "default per round" in page
    # a profiling trial per side after the rounds (-v PROFILE:auto): the iperf3 server's CPU
    profile = record["evidence"]["profile"]
    assert "unavailable" not in profile, profile
    for side in "ab":
        entry = profile["profiles"][side]
        assert entry["processes_ms"]["iperf3"] > 100, entry  # 2 s of a busy server
        assert (out / entry["svg"]).read_text().startswith("<?xml"), entry
    assert (out / profile["diff"]["svg"]).is_file() and profile["diff"]["changes"]
    assert f'data="{profile["diff"]["svg"]}"' in page


def test_an_nginx_knob_restarts_only_the_proxy_and_an_aa_check_is_no_finding(tmp_path: Path):
    # 10 rounds at alpha 0.01: an A/A test calls a regression in at most 0.5 % of runs (6
    # rounds at 0.05 did in 1 of 3 runs beside two CPU burners and a robot run: a disturbance
    # of one side's slots, -11.8 % [-24.2, -0.6])
    aa = ["-v", "AB_LOOK:10", "-v", "AB_MAX_ROUNDS:10", "-v", "ALPHA:0.01", *SHORT[4:]]
    code, out = _robot(tmp_path, "aa: true\na: {name: log-off}\nb:\n  name: log-off-again\n"
                       "  nginx: {proxy: {server: ['access_log off;']}}\n",
                       "1kb-10c-kernel-ssl-proxy", "tests/ssl_proxy/kernel.robot", aa)
    status, message = _messages(out)["1kb-10c-kernel-ssl-proxy"]
    (record,) = map(json.loads, (out / "records.jsonl").read_text().splitlines())
    verdict = record["ab"]["verdict"]
    # no change passes; inconclusive is skipped (-v AB_INCONCLUSIVE:skip, the default)
    assert (verdict, status) in (("no change", "PASS"), ("inconclusive", "SKIP")), message
    assert code == 0
    assert record["ab"]["sides"]["b"]["criteria"][0]["metric"] == "errors"
    assert record["ab"]["switch"]["median_s"] < 2.0
    log = (out / "output.xml").read_text()
    assert "(nginx-proxy restarted)" in log and "nginx-server restarted" not in log
    # the proxy's profile: Debian's nginx is stripped (named), OpenSSL and the kernel resolve
    proxy = record["evidence"]["profile"]["profiles"]["b"]
    assert proxy["processes_ms"]["nginx"] > 100, proxy
    assert proxy["unresolved"]["nginx"] > 0, proxy
    functions = (out / proxy["folded"]).read_text()
    assert "_[k]" in functions and ("SSL_" in functions or "ossl_" in functions), \
        functions[:2000]


def test_a_comparison_the_test_does_not_use_is_skipped_with_the_reason(tmp_path: Path):
    code, out = _robot(tmp_path, "a: {name: log-off}\nb:\n  name: log-on\n"
                       "  nginx: {proxy: {server: ['access_log /dev/null;']}}\n",
                       "1s-kernel-tcp-term", "tests/tcp_term/kernel.robot")
    status, message = _messages(out)["1s-kernel-tcp-term"]
    assert code == 0 and status == "SKIP", message
    assert "the sides differ only in nginx.proxy, which this test does not use (it runs: " \
        "iperf3 on tg, iperf3-server)" in message
    assert not (out / "records.jsonl").exists() or not \
        (out / "records.jsonl").read_text().strip()


def test_with_ab_unused_plain_such_a_test_is_measured_plainly_saying_why(tmp_path: Path):
    """Issue 37: the nightly against an nginx reference still measures tcp_term, plainly."""
    code, out = _robot(tmp_path, "a: {name: log-off}\nb:\n  name: log-on\n"
                       "  nginx: {proxy: {server: ['access_log /dev/null;']}}\n",
                       "1s-kernel-tcp-term", "tests/tcp_term/kernel.robot",
                       [*SHORT, "-v", "AB_UNUSED:plain", "-v",
                        f"CRITERIA:{REPO / 'utest/fixtures/criteria/machinery.yaml'}"])
    status, message = _messages(out)["1s-kernel-tcp-term"]
    assert code == 0 and status == "PASS", message
    assert "which this test does not use" in message
    assert "measured plainly (-v AB_UNUSED:plain)" in message
    record = json.loads((out / "records.jsonl").read_text().splitlines()[-1])
    assert "ab" not in record and len(record["metrics"]["throughput"]["trials"]) >= 2


def test_a_side_that_answers_with_errors_fails_the_test_naming_the_side(tmp_path: Path):
    """Issue 34: errors passed in A/B mode (every criterion was skipped). A candidate proxy
    that answers 500 fails the test, the side named, whatever its rate."""
    code, out = _robot(tmp_path, "a: {name: good}\nb:\n  name: broken\n"
                       "  nginx: {proxy: {server: ['return 500;']}}\n",
                       "1kb-10c-kernel-ssl-proxy", "tests/ssl_proxy/kernel.robot")
    status, message = _messages(out)["1kb-10c-kernel-ssl-proxy"]
    assert code == 1 and status == "FAIL"
    assert re.search(r"A/B side b \(broken\), (round \d+|warm-up) of proxy: proxy:", message)
    assert "were not 2xx/3xx" in message


@pytest.mark.parametrize(("node", "tool", "source", "test", "suite", "runs"), [
    # issue 34's first defect: ab-nginx-builds on tcp_term measured iperf3 against itself for
    # 40 rounds and reported a verdict about nginx builds it never started
    ("dut", "nginx", "nginx", "1s-kernel-tcp-term", "tests/tcp_term/kernel.robot",
     "iperf3 on tg, iperf3-server"),
    # the closed-loop trials run wrk where a node declares it: a comparison of wrk2 builds
    # measured wrk against itself (3node with /opt/wrk2, 2026-11-27); copies of Debian's wrk
    # stand in for the builds (they answer `-v`), so nodes without wrk2 run it too
    ("tg", "wrk2", "wrk", "1kb-10c-kernel-ssl-proxy", "tests/ssl_proxy/kernel.robot",
     "nginx-proxy, nginx-server, wrk on tg"),
])
def test_builds_of_a_tool_the_test_does_not_run_are_skipped_not_judged(
        tmp_path: Path, node: str, tool: str, source: str, test: str, suite: str, runs: str):
    binary = shutil.which(source)  # setup.sh installs it
    assert binary, f"{source} is not on PATH"
    builds = [tmp_path / f"{tool}-{name}" for name in ("built", "candidate")]
    for build in builds:
        shutil.copy2(binary, build)
    code, out = _robot(tmp_path, f"a: {{name: built, tools: {{{node}: {{{tool}: {builds[0]}}}}}}}\n"
                       f"b:\n  name: candidate\n  tools: {{{node}: {{{tool}: {builds[1]}}}}}\n",
                       test, suite)
    status, message = _messages(out)[test]
    assert code == 0 and status == "SKIP", message
    assert f"the sides differ only in tools.{node}.{tool}, which this test does not use (it " \
        f"runs: {runs})" in message


@pytest.mark.parametrize(("comparison", "expected"), [
    ("a: {name: x}\nb: {name: y, tools: {dut: {nginx: /bin/false}}}\n",
     "b.tools.dut.nginx: /bin/false does not answer its version command"),
    ("a: {name: x}\nb: {name: y, sysctl: {dut: {net.ipv4.no_such_knob: 1}}}\n",
     "sysctl net.ipv4.no_such_knob: no such key"),
    ("a: {name: x}\nb: {name: y, tools: {client: {nginx: /x}}}\n",
     "b.tools.client: no node 'client' in topology 3node"),
])
def test_bad_comparisons_stop_the_suite_before_anything_is_measured(tmp_path: Path,
                                                                    comparison: str,
                                                                    expected: str):
    code, out = _robot(tmp_path, comparison, "1s-kernel-tcp-term", "tests/tcp_term/kernel.robot")
    assert code == 1
    status, message = _messages(out)["1s-kernel-tcp-term"]
    assert status == "FAIL" and "Parent suite setup failed" in message and expected in message
    assert not (out / "records.jsonl").exists()


FLAKY_503 = ("a: {name: good}\nb:\n  name: flaky\n  nginx: {proxy: {server: "
             "['if ($request_id ~ \"^0[0-2]\") { return 503; }']}}\n")
"""A candidate proxy that answers 503 to 3 in 256 requests (1.2 %; ``$request_id`` is random)
and serves the rest as side a does."""


def test_a_candidate_answering_503_to_one_percent_fails_a_sequential_ab_naming_the_side(
        tmp_path: Path):
    """Issue 55: correctness holds in every trial of both sides, whatever the rates say."""
    code, out = _robot(tmp_path, FLAKY_503, "1kb-10c-kernel-ssl-proxy",
                       "tests/ssl_proxy/kernel.robot")
    status, message = _messages(out)["1kb-10c-kernel-ssl-proxy"]
    assert code == 1 and status == "FAIL", message
    assert re.search(r"side b \(flaky\)", message), message
    assert re.search(r"\d+ of \d+ responses were not 2xx/3xx", message), message


def test_a_candidate_answering_503_to_one_percent_fails_a_duet_naming_side_b_s_run(
        tmp_path: Path):
    """Issue 55: in a duet side b's run measures the candidate; its errors fail the test
    that side a's run records, naming side b and its run."""
    comparison = tmp_path / "ab.yaml"
    comparison.write_text(FLAKY_503)
    out = tmp_path / "duet"
    run = subprocess.run(
        [sys.executable, "-m", "libraries.ab.duet_run", str(comparison), "-d", str(out),
         "--timeout", "800", "--", "-v", "RUN_ID:duet", "-v", "TOPOLOGY:3node", *SHORT,
         "-t", "1kb-10c-kernel-ssl-proxy", "--console", "dotted",
         "tests/ssl_proxy/kernel.robot"],
        cwd=REPO, capture_output=True, text=True, timeout=900, check=False)
    status, message = _messages(out / "a")["1kb-10c-kernel-ssl-proxy"]
    assert run.returncode != 0 and status == "FAIL", (run.stdout[-2000:], message)
    assert "side b (flaky)" in message and "side b's run" in message, message
    assert re.search(r"\d+ of \d+ responses were not 2xx/3xx", message), message


def _costlier(regexes: int) -> str:
    """A candidate proxy that runs ``regexes`` regular expressions (that never match) over
    every request's id (benchmarks/cost_bench.py ``regex:N``): 40 cost 20 % more CPU per
    request on this VM, quiet, 300 cost 73 % more (and 500 no more than 300: a pattern longer
    than the 32-character id fails on its length at once)."""
    return ("name: proxy costs more per request\na: {name: plain}\nb:\n  name: regex-map\n"
            "  nginx: {proxy: {http: ['map $request_id $cost_probe { "
            + " ".join(f'"~[g-z]{{{i + 1}}}" m{i};' for i in range(regexes))
            + " default none; }'], server: ['set $cost_seen $cost_probe;']}}\n")


COSTLIER = _costlier(40)
"""About 20 % more CPU per request: what a duet, its rounds paired, calls in 10 rounds beside
other work."""
COSTLIEST = _costlier(300)
"""About 73 % more CPU per request: a sequential A/B's rounds are not paired, and beside the
other unit tests (tox p) its per-round cost spread reached 72 % (CI, 2026-11-28: 40 regular
expressions inconclusive at 10 rounds, +10.8 % [-31.1, +99.7])."""
TEN = ["-v", "AB_LOOK:10", "-v", "AB_MAX_ROUNDS:10", "-v", "DURATION:2", "-v", "WARMUP:1",
       "-v", "PROFILE:off"]
UP_TO_THIRTY = ["-v", "AB_LOOK:10", "-v", "AB_MAX_ROUNDS:30", *TEN[4:]]
"""A look at 10 rounds and, if it decides nothing (a busy machine), more at 20 and 30."""


def _called_on_cost(record: dict, message: str) -> None:
    """Issue 61: the A/B judged the proxy's CPU per request beside its rate and called it."""
    block = record["ab"]
    assert set(block["metrics"]) == {"rps", "cost"}
    cost = block["metrics"]["cost"]
    assert cost["verdict"] == "regression" and cost["cost"] is True, cost
    assert block["verdict"] == "regression" and record["verdict"] == "fail"
    assert re.search(r"regex-map costs \d+\.\d % more CPU per request than plain \(cost "
                     r"\[\+\d+\.\d, \+\d+\.\d\]\)", message), message
    assert block["metrics"]["rps"]["verdict"] != "progression"
    assert record["cost"]["metric"] == "cost" and "nginx-proxy" in record["cost"]["counts"]
    for side in "ab":
        assert 0 <= block["sides"][side]["foreign_load"]["share_pct"] <= 100
    # each side's telemetry: one reading per round, each with its own trial's work
    variants = record["telemetry"]["variants"]
    rounds = block["rounds"]["run"]
    assert rounds in (10, 20, 30), rounds
    assert {v: n["nodes"]["dut"]["trials"] for v, n in variants.items()} == \
        {"a proxy": rounds, "b proxy": rounds}
    sides = record["evidence"]["sides"]
    assert len(sides["b"]["metrics"]["cost"]["trials"]) == rounds
    assert "ab_cost_ratio" in record["metrics"]


def test_a_candidate_costing_more_cpu_per_request_fails_on_cost_naming_it(tmp_path: Path):
    code, out = _robot(tmp_path, COSTLIEST, "1kb-10c-kernel-ssl-proxy",
                       "tests/ssl_proxy/kernel.robot", UP_TO_THIRTY)
    status, message = _messages(out)["1kb-10c-kernel-ssl-proxy"]
    assert code == 1 and status == "FAIL", message
    (record,) = map(json.loads, (out / "records.jsonl").read_text().splitlines())
    _called_on_cost(record, message)


def test_a_duet_pairs_each_rounds_telemetry_and_fails_on_cost(tmp_path: Path):
    """Both runs measure every round; each side's record telemetry holds all its rounds (the
    leading run's alone before: e.g. 4 of one side and 6 of the other in 10 rounds)."""
    comparison = tmp_path / "ab.yaml"
    comparison.write_text(COSTLIER)
    out = tmp_path / "duet"
    run = subprocess.run(
        [sys.executable, "-m", "libraries.ab.duet_run", str(comparison), "-d", str(out),
         "--timeout", "800", "--", "-v", "RUN_ID:duet", "-v", "TOPOLOGY:3node", *TEN,
         "-t", "1kb-10c-kernel-ssl-proxy", "--console", "dotted",
         "tests/ssl_proxy/kernel.robot"],
        cwd=REPO, capture_output=True, text=True, timeout=900, check=False)
    status, message = _messages(out / "a")["1kb-10c-kernel-ssl-proxy"]
    assert run.returncode == 1 and status == "FAIL", (run.stdout[-2000:], message)
    (record,) = map(json.loads, (out / "a" / "records.jsonl").read_text().splitlines())
    _called_on_cost(record, message)
    held = record["ab"]["rounds"]["order"].split(": ", 1)[1].split(" | ")
    assert len(held) == 10
