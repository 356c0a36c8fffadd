"""End to end: real tcp_term and ssl_proxy runs on the 3node namespace testbed write v2
records whose telemetry has per-core and per-process CPU for every node of the test."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from libraries.results.records import CURRENT_VERSION, iter_records

REPO = Path(__file__).resolve().parent.parent
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root to build network namespaces"),
    pytest.mark.skipif(shutil.which("iperf3") is None or shutil.which("wrk") is None,
                       reason="needs iperf3 and wrk"),
]
NODES = {"tg", "dut", "server"}


@pytest.fixture(scope="module")
def records(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    out = tmp_path_factory.mktemp("robot")
    command = [sys.executable, "-m", "robot", "--outputdir", str(out), "--variable",
               "TOPOLOGY:3node", "--variable", "TRIALS:2", "--variable", "DURATION:1",
               "--variable", "WARMUP:0", "--variable", "RUN_ID:e2e", "--variable",
               f"CRITERIA:{REPO / 'utest/fixtures/criteria/none.yaml'}", "--test",
               "1s-kernel-tcp-term", "--test", "1kb-10c-kernel-ssl-proxy", "--console",
               "dotted", "tests/tcp_term/kernel.robot", "tests/ssl_proxy/kernel.robot"]
    env = dict(os.environ, PYTHONPATH=str(REPO))
    run = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True,
                         timeout=600, check=False)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    found = {record["name"]: record for record in iter_records(out / "records.jsonl")}
    assert sorted(found) == ["1kb-10c-kernel-ssl-proxy", "1s-kernel-tcp-term"]
    log = (out / "output.xml").read_text()  # log.html holds the same messages, compressed
    assert "CPU telemetry: iperf3 (median of measured trials)" in log
    assert "CPU telemetry: proxy (median of measured trials)" in log
    return found


def _check_nodes(record: dict, variant: str) -> dict:
    assert record["schema_version"] == CURRENT_VERSION
    nodes = record["telemetry"]["variants"][variant]["nodes"]
    assert set(nodes) == NODES
    for name, node in nodes.items():
        assert "unavailable" not in node, (name, node)
        assert node["trials"] == 2 and len(node["per_trial"]) == 2
        assert {"all", "0"} <= set(node["cores"])
        for row in node["cores"].values():
            assert sum(row.values()) == pytest.approx(100.0, abs=0.2)
            assert row["idle"] < 100.0  # the trial loaded this 2-core machine
    return nodes


def test_tcp_term_record_carries_cpu_of_every_node(records):
    record = records["1s-kernel-tcp-term"]
    nodes = _check_nodes(record, "iperf3")
    assert nodes["dut"]["processes"]["iperf3-server"]["cpu"] > 1.0
    assert nodes["tg"]["processes"]["iperf3-client"]["cpu"] > 1.0
    assert nodes["server"]["processes"] == {}  # nothing of this test runs there
    metrics = record["metrics"]
    assert metrics["gbps_per_dut_core"]["unit"] == "Gbit/s/core"
    assert metrics["gbps_per_dut_core"]["value"] > 0
    assert metrics["iperf3_server_cpu"]["trials"] == \
        [t["processes"]["iperf3-server"]["cpu"] for t in nodes["dut"]["per_trial"]]


def test_ssl_proxy_record_carries_cpu_of_every_node(records):
    record = records["1kb-10c-kernel-ssl-proxy"]
    assert set(record["telemetry"]["variants"]) == {"proxy", "direct"}
    proxied = _check_nodes(record, "proxy")
    direct = _check_nodes(record, "direct")
    assert proxied["dut"]["processes"]["nginx-proxy worker"]["cpu"] > 1.0
    assert direct["dut"]["processes"]["nginx-proxy worker"]["cpu"] < 1.0  # idle: not in path
    assert proxied["server"]["processes"]["nginx-server worker"]["cpu"] > 1.0
    assert proxied["tg"]["processes"]["wrk"]["cpu"] > 1.0
    assert record["metrics"]["proxy_nginx_worker_cpu"]["direction"] == "lower_is_better"
    assert record["metrics"]["rps_per_dut_core"]["value"] > 0
    json.dumps(record, allow_nan=False)


def _tree_seconds(node: dict, group: str) -> list[float]:
    """Per trial, the CPU seconds of ``group``'s processes from the record's telemetry."""
    return [sum(row["cpu"] / 100.0 * elapsed for name, row in trial["processes"].items()
                if name == group or name.startswith(f"{group} "))
            for trial, elapsed in zip(node["per_trial"], node["elapsed_s"], strict=True)]


def test_ssl_proxy_records_the_proxys_cpu_per_request_of_each_trial(records):
    """Issue 61: the proxy's process tree (master and workers) CPU seconds per request wrk
    completed, per trial, from the telemetry read around that very trial."""
    record = records["1kb-10c-kernel-ssl-proxy"]
    cost = record["metrics"]["cost"]
    assert cost["unit"] == "CPU µs/request" and cost["direction"] == "lower_is_better"
    dut = record["telemetry"]["variants"]["proxy"]["nodes"]["dut"]
    # wrk ran 1 s of each trial's window: requests ~ rps * 1 s
    estimate = [seconds / rps * 1e6 for seconds, rps in
                zip(_tree_seconds(dut, "nginx-proxy"), record["metrics"]["rps"]["trials"],
                    strict=True)]
    assert cost["trials"] == pytest.approx(estimate, rel=0.25)
    assert 1.0 < cost["value"] < 10000.0  # µs of CPU per 1 KiB request through TLS
    assert record["metrics"]["kernel_cost"]["unit"] == "CPU µs/request"
    assert 0.0 <= record["metrics"]["foreign_share"]["value"] <= 100.0
    block = record["cost"]
    assert block["metric"] == "cost" and "nginx-proxy" in block["counts"]
    assert "softirq" in block["not_counted"] and block["foreign_load"]["node"] == "dut"


def test_tcp_term_records_the_servers_cpu_per_gb_of_each_trial(records):
    record = records["1s-kernel-tcp-term"]
    cost = record["metrics"]["cost"]
    assert cost["unit"] == "CPU s/GB"
    dut = record["telemetry"]["variants"]["iperf3"]["nodes"]["dut"]
    gigabytes = [gbps / 8 for gbps in record["metrics"]["throughput"]["trials"]]  # 1 s each
    estimate = [s / gb for s, gb in zip(_tree_seconds(dut, "iperf3-server"), gigabytes,
                                        strict=True)]
    assert cost["trials"] == pytest.approx(estimate, rel=0.25)
    assert record["cost"]["counts"].startswith("user + system CPU time of the iperf3 server")
