"""Faults on the real namespace testbed give clear errors and leave nothing running:
a port in use, a config nginx rejects, a proxy dying mid-trial, wrk and iperf3 hanging past
their timeout, a broken topology given to robot."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from robot.api import ExecutionResult

from libraries.testbed.errors import CommandTimeout, HostStackError, NodeError, ParseError
from libraries.testbed.provision import Testbed
from libraries.tools.iperf3 import IperfClientOptions, run_iperf3_client
from libraries.tools.nginx.config import HttpsServerParams, NginxInstance
from libraries.tools.nginx.service import nginx_is_alive, start_nginx
from libraries.tools.wrk.run import WrkOptions, run_wrk
from utest.namespaces import namespaces, unexplained

REPO = Path(__file__).resolve().parent.parent

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root to build network namespaces"),
]


@pytest.fixture(scope="module")
def testbed():
    bed = Testbed.up("3node")
    server = bed.node("server")
    server.run(f"mkdir -p {server.workdir}/www && head -c 1024 /dev/urandom > "
               f"{server.workdir}/www/1kb && cd {server.workdir} && openssl req -x509 -nodes "
               "-newkey ec -pkeyopt ec_paramgen_curve:P-256 -subj /CN=t -days 1 "
               "-keyout k.pem -out c.pem 2>/dev/null")
    try:
        yield bed
    finally:
        bed.down()


def _server_config(node, name: str) -> str:
    return HttpsServerParams(
        instance=NginxInstance(prefix=f"{node.workdir}/{name}", user="root"),
        cert_path=f"{node.workdir}/c.pem", key_path=f"{node.workdir}/k.pem",
        root_dir=f"{node.workdir}/www").render()


def _no_process(node, pattern: str) -> bool:
    """No process matching ``pattern`` in the node's own namespace (other runs on the machine
    share the PID space)."""
    script = (f"me=$(ip netns identify); for p in $(pgrep -f {pattern!r}); do "
              '[ "$(ip netns identify $p 2>/dev/null)" = "$me" ] && exit 0; done; exit 1')
    return node.run(script, check=False).exit_code == 1


def _gone_soon(node, pattern: str, seconds: float) -> bool:
    """True once no process matches ``pattern`` in the node's namespace, polled for up to
    ``seconds``: a killed command goes within a moment of its kill (SIGKILL 2 s after the
    node-side timeout's SIGTERM) even on a busy machine; one never killed is still there."""
    deadline = time.monotonic() + seconds
    while not _no_process(node, pattern):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def test_port_in_use_names_the_holder_and_starts_nothing(testbed):
    server = testbed.node("server")
    holder = server.start("iperf3 -s -p 8445", "holder")
    server.wait_for_listener(8445, holder)
    with pytest.raises(NodeError, match=r"port 8445 is already in use by: .*iperf3 -s -p 8445"):
        start_nginx(server, "nginx-busy", _server_config(server, "nginx-busy"), [8445])
    assert [p.name for p in server.processes] == ["holder"]
    server.stop(holder)


def test_config_nginx_rejects_fails_with_its_message_and_the_file(testbed):
    server = testbed.node("server")
    config = _server_config(server, "nginx-bad").replace("ssl_certificate ",
                                                        "ssl_certificat ", 1)
    with pytest.raises(HostStackError) as error:
        start_nginx(server, "nginx-bad", config, [8445])
    message = str(error.value)
    assert 'unknown directive "ssl_certificat"' in message
    assert "nginx-bad/nginx.conf" in message
    assert server.processes == ()


def test_proxy_dying_mid_trial_is_reported_with_its_log(testbed):
    server, tg = testbed.node("server"), testbed.node("tg")
    handle = start_nginx(server, "nginx-dies", _server_config(server, "nginx-dies"), [8445])
    killer = server.start(f"sh -c 'sleep 1; kill -9 {handle.process.pid}'", "killer")
    options = WrkOptions(url="https://198.18.2.2:8445/1kb", duration=3)
    try:
        result = run_wrk(tg, "wrk", options)
    except (ParseError, HostStackError):
        pass  # wrk may also see every connection fail: that is reported too
    else:
        assert result.total_requests > 0
    time.sleep(0.5)
    with pytest.raises(HostStackError, match="nginx nginx-dies is no longer running"):
        nginx_is_alive(server, handle)
    server.stop(killer)
    server.stop(handle.process)
    assert server.processes == ()


def test_wrk_against_nothing_is_a_parse_error_quoting_wrk(testbed):
    tg = testbed.node("tg")
    options = WrkOptions(url="https://198.18.2.2:9/1kb", duration=1)
    with pytest.raises(ParseError, match="unable to connect"):
        run_wrk(tg, "wrk", options)


def test_wrk_hanging_past_its_timeout_is_killed(testbed):
    tg = testbed.node("tg")
    server = testbed.node("server")
    handle = start_nginx(server, "nginx-slow", _server_config(server, "nginx-slow"), [8445])
    try:
        with pytest.raises(CommandTimeout, match="timed out after 2 s"):
            run_wrk(tg, "wrk", WrkOptions(url="https://198.18.2.2:8445/1kb", duration=10),
                    timeout=2)
        # gone within 2 s of the timeout (SIGKILL after SIGTERM); a wrk never killed runs on
        # to its own end 10 s after its start, past this 5 s wait
        assert _gone_soon(tg, "[w]rk -t", 5)
    finally:
        server.stop(handle.process)


def test_iperf3_hanging_past_its_timeout_is_killed(testbed):
    tg, dut = testbed.node("tg"), testbed.node("dut")
    server = dut.start("iperf3 -s -p 5202", "iperf3-server")
    dut.wait_for_listener(5202, server)
    try:
        with pytest.raises(CommandTimeout):
            run_iperf3_client(tg, "iperf3",
                              IperfClientOptions(server="198.18.1.1", port=5202, duration=20),
                              timeout=2)
        assert _gone_soon(tg, "[i]perf3 -c", 5)  # a client never killed runs its 20 s
    finally:
        dut.stop(server)


def test_robot_with_a_broken_topology_fails_clearly_and_builds_nothing(tmp_path):
    broken = tmp_path / "broken.yaml"
    broken.write_text((REPO / "topologies" / "3node.yaml").read_text()
                      .replace("cpus: {load: [1]}", "cpus: {load: one}"))
    before = namespaces()
    result = subprocess.run(
        [str(Path(sys.executable).parent / "robot"), "-d", str(tmp_path), "-v",
         f"TOPOLOGY:{broken}", "--console", "dotted", str(REPO / "tests" / "smoke")],
        capture_output=True, text=True, timeout=120, cwd=REPO)
    assert result.returncode != 0
    assert f"{broken}: nodes.tg.cpus.load: Input should be a valid list, got 'one'" in (
        result.stdout + result.stderr)
    assert unexplained(before) == set()  # other runs' testbeds may come and go meanwhile


_BAD_SETTINGS = {
    "yaml syntax": (["-v", "CRITERIA:{bad}"], "version: 1\ncriteria: [{case: tcp_term,\n",
                    "{bad}: not valid YAML"),
    "unmeasured metric": (["-v", "CRITERIA:{bad}"],
                          "version: 1\ncriteria:\n  - {case: tcp_term, metric: gbps, min: 1}\n",
                          "{bad}: criteria.0.metric: 'gbps' is not measured by case tcp_term"),
    "unknown operator": (["-v", "CRITERIA:{bad}"],
                         "version: 1\ncriteria:\n"
                         "  - {case: tcp_term, metric: throughput, ge: 1}\n",
                         "{bad}: criteria.0.ge: Extra inputs are not permitted"),
    "fractional duration": (["-v", "DURATION:1.5"], None,
                            "-v DURATION:1.5: expected whole seconds >= 1, got '1.5'"),
}


@pytest.mark.parametrize("case", list(_BAD_SETTINGS))
def test_bad_criteria_or_trial_settings_stop_the_suite_before_anything_runs(tmp_path, case):
    """These were reported only after the test had run its trials (criteria), or not at all
    (DURATION:1.5 ran 1 s trials): now the suite setup refuses them, naming file and entry,
    before a testbed is built."""
    options, text, expected = _BAD_SETTINGS[case]
    bad = tmp_path / "criteria.yaml"
    if text is not None:
        bad.write_text(text)
    options = [o.format(bad=bad) for o in options]
    result = subprocess.run(
        [str(Path(sys.executable).parent / "robot"), "-d", str(tmp_path), "-v",
         "TOPOLOGY:3node", *options, "--console", "verbose", "-t", "1s-kernel-tcp-term",
         str(REPO / "tests" / "tcp_term")], capture_output=True, text=True, timeout=120,
        cwd=REPO)
    console = result.stdout + result.stderr
    assert result.returncode == 1, console
    assert "Parent suite setup failed:" in console
    assert expected.format(bad=bad) in console
    assert "trial 1/" not in console
    assert list(tmp_path.glob("*/records.jsonl")) == []
    setup = ExecutionResult(str(tmp_path / "output.xml")).suite.suites[0].setup
    steps = [(step.name, step.status) for step in setup.body]
    assert steps == [("Check Measurement Settings", "FAIL"),  # no testbed was built
                     ("Set Up Suite Testbed", "NOT RUN"), ("Set Up A/B Comparison", "NOT RUN")]
