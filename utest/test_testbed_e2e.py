"""End-to-end: build the real 3node namespace testbed, drive it over SSH, leave nothing behind.

Needs root, iproute2 and openssh-server (setup.sh installs them); skipped with the reason
otherwise.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import textwrap
import time
from pathlib import Path

import pytest

from libraries.testbed.errors import CommandTimeout, NodeError, ToolMissing
from libraries.testbed.netns import LocalTestbed
from libraries.testbed.provision import Testbed
from libraries.testbed.run_paths import make_prefix
from libraries.testbed.ssh import HELD_SESSIONS
from libraries.testbed.teardown import STATE_ROOT, sweep_stale, teardown_prefix
from libraries.testbed.topology_file import load_topology, parse_topology
from libraries.tools.versions import tool_version

REPO = Path(__file__).resolve().parent.parent

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root to build network namespaces"),
    pytest.mark.skipif(shutil.which("sshd") is None and not Path("/usr/sbin/sshd").exists(),
                       reason="openssh-server not installed (run setup.sh)"),
]


def _leftovers(prefix: str) -> list[str]:
    found = []
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    found += [line for line in netns.splitlines() if line.startswith(prefix)]
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    found += [line for line in links.splitlines() if f" {prefix}-" in line]
    procs = subprocess.run(["ps", "-eo", "stat=,args="], capture_output=True, text=True).stdout
    found += [line for line in procs.splitlines()
              if prefix in line and not line.startswith("Z")]
    for path in (STATE_ROOT / prefix, Path(f"/tmp/hoststack-{prefix}")):
        if path.exists():
            found.append(str(path))
    found += [str(p) for p in Path("/etc/netns").glob(f"{prefix}-*")]
    return found


@pytest.fixture(scope="module")
def testbed():
    bed = Testbed.up("3node")
    yield bed
    prefix = bed.run_id
    bed.down()
    assert _leftovers(prefix) == []


def test_every_node_answers_over_ssh_in_its_own_namespace(testbed):
    for name, node in testbed.nodes.items():
        result = node.run("ip netns identify; uname -s")
        assert result.stdout.split() == [f"{testbed.run_id}-{name}", "Linux"]


def test_traffic_between_tg_and_server_is_routed_by_the_dut(testbed):
    server, tg, dut = testbed.node("server"), testbed.node("tg"), testbed.node("dut")
    before = int(dut.run("cat /sys/class/net/eth2/statistics/tx_packets").stdout)
    process = server.start("iperf3 -s -1 -p 5201", "iperf3-server")
    server.wait_for_listener(5201, process)
    result = tg.run("iperf3 -c 198.18.2.2 -p 5201 -t 1 --json", timeout=20)
    assert json.loads(result.stdout)["end"]["sum_received"]["bytes"] > 0
    after = int(dut.run("cat /sys/class/net/eth2/statistics/tx_packets").stdout)
    assert after - before > 100  # the bytes crossed the DUT's server-side leg
    server.stop(process)


def test_background_process_lifecycle(testbed):
    node = testbed.node("dut")
    process = node.start("sh -c 'echo started; sleep 300 & sleep 300'", "sleeper",
                         env={"MARKER": "x y'z"}, cpus=[0])
    time.sleep(0.2)
    assert node.is_running(process)
    environ = node.run(f"tr '\\0' '\\n' < /proc/{process.pid}/environ").stdout
    assert "MARKER=x y'z" in environ.splitlines()
    assert "list: 0" in node.run(f"taskset -c -p {process.pid}").stdout
    log = node.stop(process, grace=2)
    assert "started" in log
    assert not node.is_running(process)
    # the whole process group went, the backgrounded child included
    members = node.run(f"ps -eo pgid=,stat= | awk '$1 == {process.pid} && $2 !~ /^Z/'").stdout
    assert members == ""
    assert process not in node.processes


def test_a_pid_another_process_reused_is_neither_running_nor_stopped(testbed):
    """PIDs wrap at 32768 here within minutes beside a build: a process that exited and whose
    pid went to another is not taken for it (the other is left alone), as its birth time
    (/proc/<pid>/stat field 22, read at start) tells."""
    node = testbed.node("dut")
    process = node.start("sleep 271.8", "other")
    assert process.birth is not None and node.is_running(process)
    born = process.birth
    process.birth = str(int(born) + 1)  # as if this pid now were another process's
    try:
        assert not node.is_running(process)
        node.stop(process, grace=1)
        assert node.run(f"ps -o stat= -p {process.pid}", check=False).exit_code == 0  # spared
    finally:
        process.birth, process.stopped = born, False
        node.stop(process, grace=1)
    assert not node.is_running(process)


def test_process_ignoring_sigterm_is_killed_after_grace(testbed):
    node = testbed.node("dut")
    process = node.start("sh -c 'trap \"\" TERM; while :; do sleep 0.1; done'", "stubborn")
    time.sleep(0.2)
    started = time.monotonic()
    node.stop(process, grace=0.5)
    assert time.monotonic() - started < 5
    assert not node.is_running(process)


def test_process_that_dies_before_listening_fails_with_its_output(testbed):
    node = testbed.node("dut")
    process = node.start("sh -c 'echo cannot bind: address in use >&2; exit 3'", "dies")
    expected = "(?s)dies exited \\(exit status 3\\) before listening on port 9999.*cannot bind"
    with pytest.raises(NodeError, match=expected):
        node.wait_for_listener(9999, process, timeout=5)


def test_port_in_use_is_reported_with_its_holder(testbed):
    node = testbed.node("server")
    holder = node.start("iperf3 -s -p 5300", "holder")
    node.wait_for_listener(5300, holder)
    with pytest.raises(NodeError, match=r"port 5300 is already in use by: .*iperf3 -s -p 5300"):
        node.ensure_port_free(5300)
    node.stop(holder)
    node.ensure_port_free(5300)


def test_timeout_raises_with_partial_output_and_kills_the_command(testbed):
    node = testbed.node("tg")
    with pytest.raises(CommandTimeout, match="(?s)timed out after 1 s.*before-timeout"):
        node.run("echo before-timeout; sleep 31.4159; echo never", timeout=1)
    # gone within seconds (SIGTERM at 1 s, SIGKILL 2 s later), on a busy machine too; a sleep
    # that was not killed is still there at the deadline, 15 s before it would end itself
    deadline = time.monotonic() + 15
    while node.run("pgrep -f 'slee[p] 31.4159'", check=False).exit_code != 1:
        assert time.monotonic() < deadline, "the timed-out command was not killed"
        time.sleep(0.2)


def test_topology_values_cannot_inject_commands(testbed, tmp_path):
    node = testbed.node("tg")
    marker = f"/tmp/hoststack-injected-{os.getpid()}"
    with pytest.raises(ToolMissing, match="not found"):
        tool_version(node, "nginx", f"nginx; touch {marker}")
    with pytest.raises(ToolMissing, match="does not answer"):
        tool_version(node, "nginx", f"/usr/sbin/nginx; touch {marker}")
    node.put("payload", f"{node.workdir}/odd name; touch {marker}")
    assert not Path(marker).exists()


def test_put_and_get_round_trip(testbed):
    node = testbed.node("server")
    text = "line one\n'quoted' $HOME `x`\n"
    node.put(text, f"{node.workdir}/sub/dir/file.txt", mode=0o600)
    assert node.get(f"{node.workdir}/sub/dir/file.txt") == text
    assert node.run(f"stat -c %a {node.workdir}/sub/dir/file.txt").stdout.strip() == "600"


def test_two_testbeds_of_one_topology_coexist():
    first = Testbed.up("2node")
    try:
        second = Testbed.up("2node")
        try:
            assert first.run_id != second.run_id
            assert first.node("tg").target.host != second.node("tg").target.host
            for bed in (first, second):
                assert "198.18.1.1" in bed.node("dut").run("ip -4 -o addr show eth1").stdout
        finally:
            second.down()
    finally:
        first.down()
    assert _leftovers(first.run_id) == [] and _leftovers(second.run_id) == []


def test_leftovers_of_a_killed_run_are_swept():
    topology = load_topology("1node")
    prefix = make_prefix(topology.name, "robot")
    LocalTestbed(topology, prefix).up()
    state_file = STATE_ROOT / prefix / "state.json"
    state = json.loads(state_file.read_text())
    dead = subprocess.Popen(["true"])
    dead.wait()
    state["owner_pid"] = dead.pid  # as if the robot process had been killed
    state_file.write_text(json.dumps(state))
    assert prefix in sweep_stale()
    assert _leftovers(prefix) == []


def test_unreachable_lab_node_fails_with_host_port_and_leaves_nothing():
    topology = parse_topology(
        {"name": "lab", "nodes": {"dut": {"roles": ["dut"], "host": "127.0.0.1", "port": 1}}},
        "lab.yaml",
    )
    with pytest.raises(NodeError, match=r"dut \(127\.0\.0\.1:1\): cannot connect over SSH"):
        Testbed.up(topology)


def test_cli_up_status_down_leaves_nothing(tmp_path):
    python = str(Path(os.sys.executable))
    up = subprocess.run([python, "-m", "libraries.testbed", "up", "3node"],
                        capture_output=True, text=True, timeout=60)
    assert up.returncode == 0, up.stderr
    prefix = make_prefix("3node", "cli")
    assert f"prefix {prefix}" in up.stdout
    status = subprocess.run([python, "-m", "libraries.testbed", "status", "3node"],
                            capture_output=True, text=True, timeout=60)
    assert status.returncode == 0 and f'"{prefix}"' in status.stdout
    again = subprocess.run([python, "-m", "libraries.testbed", "up", "3node"],
                           capture_output=True, text=True, timeout=60)  # idempotent rebuild
    assert again.returncode == 0, again.stderr
    down = subprocess.run([python, "-m", "libraries.testbed.provision", "down", "3node"],
                          capture_output=True, text=True, timeout=60)
    assert down.returncode == 0, down.stderr
    assert _leftovers(prefix) == []


_SLOW_INIT = """
import ctypes, os, subprocess, sys, time
ctypes.CDLL(None).prctl(36, 1)  # PR_SET_CHILD_SUBREAPER: the CLI's orphans come to us, as to init
subprocess.run([sys.executable, "-m", "libraries.testbed", "up", "2node"], check=True,
               stdout=subprocess.DEVNULL)
print("up", flush=True)
sys.stdin.read()  # a busy init: reaps nothing until the test is done (stdin closed)
while True:
    try:
        os.waitpid(-1, 0)
    except ChildProcessError:
        break
"""


def test_cli_down_returns_only_once_its_sshd_processes_are_gone():
    """The issue's `down` returned while its sshd processes were still exiting: the sshds of
    a CLI testbed are orphans (the `up` process exited), reaped by init whenever it gets to
    it. `down` must not return before they are gone from the process table.

    The init here reaps nothing while `down` runs, so `down` cannot wait for it: an sshd left
    to init is still in the process table when `down` returns (or `down` never returns), only
    the sshds' own parent (the testbed's keeper) can have reaped them. This replaced a bound
    on `down`'s time (2.5 s against an init reaping after 3 s), which a busy machine broke:
    the CLI alone takes ~1 s to start on a quiet one."""
    reaper = subprocess.Popen([os.sys.executable, "-c", _SLOW_INIT], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, cwd=REPO)
    prefix = make_prefix("2node", "cli")
    try:
        assert reaper.stdout.readline().strip() == "up"
        pids = [int(pid) for ns in (f"{prefix}-tg", f"{prefix}-dut") for pid in
                subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True,
                               check=True).stdout.split()]
        assert len(pids) == 2  # one sshd per node
        down = subprocess.run([os.sys.executable, "-m", "libraries.testbed", "down", "2node"],
                              capture_output=True, text=True, timeout=60, cwd=REPO)
        assert down.returncode == 0, down.stderr
        # the sshds' own parent (the testbed's keeper) reaped them: init has reaped nothing
        assert [pid for pid in pids if Path(f"/proc/{pid}").exists()] == []
        assert _leftovers(prefix) == []
    finally:
        reaper.stdin.close()
        reaper.wait(timeout=30)
        teardown_prefix(prefix)


def _under_lazy_init(child: str) -> str:
    """A Python script that makes itself its children's reaper, as init is
    (``PR_SET_CHILD_SUBREAPER``), runs ``child`` (Python source, with json, os, subprocess,
    sys and time imported) in a forked child, and reaps nothing until that child is over: a
    process the code under test left to init is still in the process table, a zombie, while
    ``child`` looks."""
    body = textwrap.indent(child, "    ")
    return ("import ctypes, json, os, subprocess, sys, time\n"
            "ctypes.CDLL(None).prctl(36, 1)\n"
            "child = os.fork()\n"
            "if child == 0:\n"
            f"{body}\n"
            "    os._exit(0)\n"
            "os.waitpid(child, 0)\n"
            "while True:\n"
            "    try:\n"
            "        os.waitpid(-1, 0)\n"
            "    except ChildProcessError:\n"
            "        break\n")


# a suite: up, a process started over SSH, down
_SUITE_UNDER_SLOW_INIT = _under_lazy_init("""
from libraries.testbed.provision import Testbed
bed = Testbed.up("3node")
bed.node("dut").start("sleep 100", "sleeper")
bed.node("tg").run("true")
sshds = [int(p) for ns in bed.local.namespaces.values() for p in subprocess.run(
    ["ip", "netns", "pids", ns], capture_output=True, text=True).stdout.split()]
started = time.monotonic()
bed.down()
took = time.monotonic() - started
print(json.dumps({"down": took, "left": [p for p in sshds if os.path.exists(f"/proc/{p}")
                  and open(f"/proc/{p}/comm").read().strip() == "sshd"]}), flush=True)
""")


def test_suite_teardown_does_not_wait_for_init_to_reap():
    """Each suite's teardown waited ~1.6 s for this VM's init to reap the SSH session
    processes orphaned when their sshd went first. Sessions now go first (their sshd reaps
    them), the sshds after (their keeper reaps them); nothing waits for init.

    The init here reaps nothing until the suite is over, so a teardown that left an sshd
    process to init cannot have seen it go: it is still in the process table after `down`
    (or `down` never returns). This replaced a bound on `down`'s time (1.5 s, against an init
    that slept 3 s from the fork, less than `up` takes on a busy machine), which a busy
    machine could break and a slow `up` made test nothing."""
    run = subprocess.run([os.sys.executable, "-c", _SUITE_UNDER_SLOW_INIT], capture_output=True,
                         text=True, timeout=60, cwd=REPO)
    assert run.returncode == 0, run.stderr
    outcome = json.loads(run.stdout.strip().splitlines()[-1])
    assert outcome["left"] == [], outcome


# a profiled trial: perf record beside it, collected after it
_PERF_UNDER_SLOW_INIT = _under_lazy_init("""
from libraries.testbed.provision import Testbed
from libraries.tools.perf import finish_recording, start_recording
bed = Testbed.up("2node")
try:
    dut = bed.node("dut")
    perf, pidfile = f"{dut.workdir}/perf", f"{dut.workdir}/perf.pid"
    dut.put(f"#!/bin/sh\\necho $$ > {pidfile}; sleep 0.2\\n", perf, mode=0o755)
    recording = start_recording(dut, perf, [1], 0.2, delay=0.1)
    time.sleep(1.0)  # the trial: perf ended during it
    finish_recording(recording)
    pid = int(dut.get(pidfile))
    state = dut.run(f"cat /proc/{pid}/stat", check=False).stdout.split()
    print(json.dumps({"perf": pid, "state": state[2] if len(state) > 2 else None}),
          flush=True)
finally:
    bed.down()
""")


def test_a_perf_recording_is_reaped_when_it_ends():
    """After a profiled A/B test a ``[perf] <defunct>`` stood on the DUT: perf record ran in
    the background, and ended during the trial, an orphan left to init. It now runs in the
    foreground of its SSH session (sent before the trial, collected after), whose shell
    reaps it. The init here reaps nothing until the run is over, so a perf left to it is
    still in the process table, a zombie, when the recording is collected."""
    run = subprocess.run([os.sys.executable, "-c", _PERF_UNDER_SLOW_INIT], capture_output=True,
                         text=True, timeout=90, cwd=REPO)
    assert run.returncode == 0, run.stderr
    outcome = json.loads(run.stdout.strip().splitlines()[-1])
    assert outcome["state"] is None, outcome


# a suite: a server stopped, another that ended on its own, as root and not
_BACKGROUND_UNDER_SLOW_INIT = _under_lazy_init("""
from libraries.testbed.provision import Testbed
bed = Testbed.up("2node")
try:
    dut = bed.node("dut")
    stopped = dut.start("sleep 100", "server")
    ended = dut.start("sleep 0.3", "short", sudo=True)
    time.sleep(1.5)  # the short one ended during the trial
    dut.stop(stopped, grace=1)
    dut.stop(ended, grace=1)
    states = {}
    for process in (stopped, ended):
        stat = dut.run(f"cat /proc/{process.pid}/stat", check=False).stdout
        states[process.name] = stat.rsplit(")", 1)[-1].split()[0] if stat else None
    print(json.dumps(states), flush=True)
finally:
    bed.down()
""")


def test_a_background_process_is_reaped_when_it_ends_stopped_or_on_its_own():
    """nginx, VPP, the iperf3 servers and the tracers ran detached, orphans left to the
    node's init once stopped (or ended): on a node whose init reaps late or never (a
    container) each stood as a zombie. The shell that starts one now stays in an SSH session
    of its own and waits for it. The init here reaps nothing until the run is over, so a
    process left to it is still in the process table, a zombie, after it ended."""
    run = subprocess.run([os.sys.executable, "-c", _BACKGROUND_UNDER_SLOW_INIT],
                         capture_output=True, text=True, timeout=90, cwd=REPO)
    assert run.returncode == 0, run.stderr
    outcome = json.loads(run.stdout.strip().splitlines()[-1])
    assert outcome == {"server": None, "short": None}, outcome


def test_a_node_holds_more_background_processes_than_one_connection_allows(testbed):
    """Each background process holds an SSH session: past HELD_SESSIONS a node opens another
    connection for them (sshd's MaxSessions is 10 unless told otherwise), and each is
    started, tracked and stopped as one."""
    node = testbed.node("server")
    processes = [node.start(f"sleep 31{index}", f"many{index}")
                 for index in range(HELD_SESSIONS + 2)]
    try:
        assert all(node.is_running(process) for process in processes)
        transports = {id(process.channel.get_transport()) for process in processes}
        assert len(transports) == 2
    finally:
        for process in processes:
            node.stop(process, grace=1)
    assert not any(node.is_running(process) for process in processes)
    assert all(process.channel is None for process in processes)


def test_put_files_writes_several_files_with_their_modes_in_one_command(testbed):
    node = testbed.node("dut")
    directory = f"{node.workdir}/bundle"
    node.put_files(directory, {"a.crt": ("cert\n", 0o644), "a.key": ("secret\n", 0o600)})
    listing = node.run(f"cd {directory} && stat -c '%n %a' a.crt a.key && cat a.key").stdout
    assert listing.split("\n")[:3] == ["a.crt 644", "a.key 600", "secret"]
    with pytest.raises(ValueError, match="not a plain file name"):
        node.put_files(directory, {"../escape": ("x", 0o644)})
