"""The lab pool for real: two local namespace testbeds as two labs, pabot's value sets.

Each lab is a copy of ``topologies/3node.yaml`` under another name (the netns code gives each
testbed its own prefix, so they coexist); a third lab points at a port on 127.0.0.1 where
nothing listens (a lab that is down). The suites are ``utest/fixtures/pool``: two measuring
kernel TCP termination suites and one whose test fails after it acquired a lab.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from robot.api import ExecutionResult

from libraries.history.store import Store
from libraries.nightly.lab_pool import EVENTS_FILE, Lab, preflight, resource_file
from libraries.nightly.nightly_run import main as nightly
from libraries.report.run_report import RUN_REPORT
from libraries.testbed.teardown import list_testbeds
from utest.namespaces import unexplained

REPO = Path(__file__).resolve().parent.parent
SUITES = REPO / "utest" / "fixtures" / "pool"
SHORT = ["-v", "TRIALS:5", "-v", "DURATION:1", "-v", "WARMUP:0"]  # 5: the fewest that decide

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(os.geteuid() != 0, reason="namespace testbeds need root"),
    pytest.mark.skipif(shutil.which("sshd") is None and not Path("/usr/sbin/sshd").exists(),
                       reason="openssh-server not installed (/usr/sbin/sshd missing)"),
]


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def labs(tmp_path: Path) -> dict[str, Path]:
    base = (REPO / "topologies" / "3node.yaml").read_text()
    found = {}
    for name in ("lab-a", "lab-b"):
        found[name] = tmp_path / f"{name}.yaml"
        found[name].write_text(base.replace("name: 3node", f"name: {name}", 1))
    found["lab-down"] = tmp_path / "lab-down.yaml"
    found["lab-down"].write_text(
        "name: lab-down\ndescription: nothing listens on its SSH port\nnodes:\n  dut:\n"
        f"    roles: [tg, dut, server]\n    host: 127.0.0.1\n    port: {closed_port()}\n"
        f"    user: root\n    key: {tmp_path / 'no-key'}\n    tools: {{iperf3: iperf3}}\n"
        "links: []\n")
    return found


def namespaces() -> set[str]:
    done = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=10,
                          check=True)
    return {line.split()[0] for line in done.stdout.splitlines() if line.strip()}


def assert_nothing_left(before: set[str]) -> None:
    """No testbed of these labs is left (state or namespaces); namespaces that appeared
    meanwhile belong to other runs on this machine (another topology's state names them)."""
    mine = [s for s in list_testbeds() if s.get("topology", "").startswith("lab-")]
    assert mine == []
    assert unexplained(before) == set()


def events(run_dir: Path) -> list[dict]:
    path = run_dir / EVENTS_FILE
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def records(run_dir: Path) -> list[dict]:
    return [json.loads(line) for path in run_dir.rglob("records.jsonl")
            for line in path.read_text().splitlines()]


def only_run(results: Path) -> Path:
    (run_dir,) = [p for p in results.iterdir() if p.is_dir() and p.name[:2] == "20"]
    return run_dir


def test_preflight_leaves_a_down_lab_out_with_the_reason(labs) -> None:
    passed, failed = preflight([str(labs["lab-a"]), str(labs["lab-down"])])
    assert passed == [Lab("lab-a", str(labs["lab-a"]))]
    assert list(failed) == ["lab-down"]
    assert "127.0.0.1" in failed["lab-down"] and "Connection refused" in failed["lab-down"]
    assert resource_file(passed) == (f"[lab-a]\ntags: hoststack-lab\ntopology: "
                                     f"{labs['lab-a']}\n\n")


def test_nightly_spreads_suites_over_two_labs_and_leaves_the_down_lab_out(
        labs, tmp_path: Path) -> None:
    before = namespaces()
    results = tmp_path / "results"
    status = nightly(["--pool", *(str(p) for p in labs.values()), "--results", str(results),
                      "--suites", *(str(SUITES / f"{s}.robot")
                                    for s in ("forward", "reverse", "failing")), "--", *SHORT])
    assert status == 1  # the failing suite failed; nothing regressed, nothing broke
    run_dir = only_run(results)
    pool = json.loads((run_dir / "run.json").read_text())["pool"]
    assert pool["labs"] == ["lab-a", "lab-b"]
    assert "Connection refused" in pool["excluded"]["lab-down"]
    assert sorted(pool["suites"]) == ["Suites.Failing", "Suites.Forward", "Suites.Reverse"]
    assert all(len(labs_used) == 1 for labs_used in pool["suites"].values())
    assert {lab for used in pool["suites"].values() for lab in used} == {"lab-a", "lab-b"}
    log = events(run_dir)  # every acquired lab was given back, the failed suite's too
    for suite, (lab,) in pool["suites"].items():
        assert {"event": "released", "lab": lab, "suite": suite} in [
            {k: e[k] for k in ("event", "lab", "suite")} for e in log]
    result = ExecutionResult(str(run_dir / "output.xml"))
    statuses = {suite.name: suite.status for suite in result.suite.suites}
    assert statuses == {"Forward": "PASS", "Reverse": "PASS", "Failing": "FAIL"}
    recorded = records(run_dir)
    assert len(recorded) == 3
    for record in recorded:
        suite = "Suites.Forward" if record["name"] == "1s-kernel-tcp-term" else "Suites.Reverse"
        assert record["topology"] == pool["suites"][suite][0]
        assert record["test_id"].startswith(f"{record['topology']}/pool/")
    stored = Store(results / "history").frame()
    assert set(stored["lab"]) == set(pool["suites"]["Suites.Forward"]
                                     + pool["suites"]["Suites.Reverse"])
    assert set(stored["test_key"]) == {"pool/1s-kernel-tcp-term", "pool/4s-kernel-tcp-term",
                                       "pool/1s-kernel-tcp-term-reverse"}
    page = (results / "trend.html").read_text()
    for lab in set(stored["lab"]):
        assert f'<span class="badge lab">{lab}</span>' in page
    assert "lab-down" in (run_dir / RUN_REPORT).read_text()
    assert_nothing_left(before)


def test_a_lab_failing_in_a_suite_is_disabled_and_the_suite_takes_another(
        labs, tmp_path: Path) -> None:
    """pabot run by hand with the down lab in its resource file: the suite that acquires it
    disables it (PabotLib's Disable Value Set) and sets up on the other lab."""
    before = namespaces()
    resources = tmp_path / "labs.dat"
    resources.write_text(resource_file([Lab("lab-down", str(labs["lab-down"])),
                                        Lab("lab-a", str(labs["lab-a"]))]))
    out = tmp_path / "out"
    log = tmp_path / "pool.jsonl"
    command = [str(Path(sys.executable).parent / "pabot"), "--processes", "1",
               "--pabotlibport", "0", "--resourcefile", str(resources), "--outputdir", str(out),
               "--variable", "LAB_POOL:hoststack-lab", "--variable", f"POOL_LOG:{log}",
               "--variable", "RUN_ID:pool-disable", *SHORT, str(SUITES / "forward.robot")]
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, env=env,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-3000:]
    kinds = [(e["event"], e["lab"]) for e in map(json.loads, log.read_text().splitlines())]
    assert kinds == [("acquired", "lab-down"), ("disabled", "lab-down"),
                     ("acquired", "lab-a"), ("released", "lab-a")]
    (record,) = records(out)
    assert record["topology"] == "lab-a"
    assert_nothing_left(before)


def _kill_sshd_of(lab: str) -> list[int]:
    """SIGKILL every sshd (listener and sessions) in the namespaces of ``lab``'s testbed."""
    killed = []
    for state in list_testbeds():
        if state.get("topology") != lab:
            continue
        for ns in state.get("namespaces_present", []):
            pids = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True,
                                  timeout=10, check=False).stdout.split()
            for pid in map(int, pids):
                try:
                    if Path(f"/proc/{pid}/comm").read_text().strip() == "sshd":
                        os.kill(pid, signal.SIGKILL)
                        killed.append(pid)
                except OSError:
                    continue
    return killed


def test_killing_one_labs_sshd_mid_run_loses_no_record_of_the_other(
        labs, tmp_path: Path) -> None:
    before = namespaces()
    results = tmp_path / "results"
    killed: list[int] = []

    def killer() -> None:
        """When both suites hold a lab, cut the SSH of the one running Suites.Reverse."""
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            run_dirs = [p for p in results.glob("20*") if p.is_dir()] if results.is_dir() else []
            held = {e["suite"]: e["lab"] for d in run_dirs for e in events(d)
                    if e["event"] == "acquired"}
            if len(held) == 2:
                time.sleep(2.0)
                killed.extend(_kill_sshd_of(held["Suites.Reverse"]))
                return
            time.sleep(0.2)

    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    status = nightly(["--pool", str(labs["lab-a"]), str(labs["lab-b"]), "--results",
                      str(results), "--suites", str(SUITES / "forward.robot"),
                      str(SUITES / "reverse.robot"), "--", "-v", "TRIALS:5", "-v",
                      "DURATION:1", "-v", "WARMUP:0"])
    thread.join(10)
    assert killed, "the sshd of the reverse suite's lab was never found"
    assert status == 1
    run_dir = only_run(results)
    pool = json.loads((run_dir / "run.json").read_text())["pool"]
    (victim,) = pool["suites"]["Suites.Reverse"]
    (other,) = pool["suites"]["Suites.Forward"]
    assert victim != other
    result = ExecutionResult(str(run_dir / "output.xml"))
    statuses = {suite.name: suite.status for suite in result.suite.suites}
    assert statuses == {"Forward": "PASS", "Reverse": "FAIL"}
    others = [r for r in records(run_dir) if r["topology"] == other]
    assert [r["name"] for r in others] == ["1s-kernel-tcp-term"]
    assert len(others[0]["metrics"]["throughput"]["trials"]) >= 5
    stored = Store(results / "history").frame()
    assert set(stored.loc[stored["lab"] == other, "test_key"]) == {"pool/1s-kernel-tcp-term"}
    assert {e["event"] for e in events(run_dir) if e["lab"] == victim} >= {"acquired",
                                                                           "released"}
    assert_nothing_left(before)


def test_without_a_pool_a_suite_runs_on_its_topology_and_the_run_stores_itself(
        labs, tmp_path: Path) -> None:
    """Plain ``robot`` (no pabot, no LAB_POOL): the fixture suite sets up ``-v TOPOLOGY`` and
    the results listener stores the run in ``<output dir>/history`` when the run ends."""
    before = namespaces()
    out = tmp_path / "out"
    done = subprocess.run([str(Path(sys.executable).parent / "robot"), "--outputdir", str(out),
                           "--variable", f"TOPOLOGY:{labs['lab-b']}", *SHORT, "--console",
                           "quiet", str(SUITES / "forward.robot")],
                          capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (record,) = records(out)
    stored = Store(out / "history").frame()
    assert stored["run_id"].unique().tolist() == [record["run_id"]]
    assert set(stored["lab"]) == {"lab-b"} and set(stored["metric"]) == set(record["metrics"])
    assert_nothing_left(before)
