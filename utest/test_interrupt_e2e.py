"""Interrupted runs: a double Ctrl-C in the middle of a trial leaves nothing of the run behind
and a readable output.xml; a dry run or an early stop logs no listener error.

The guard itself (which signal goes where) is tested in-process with fake handlers.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from robot.api import ExecutionResult

from libraries.cases import testbed_setup
from libraries.testbed.errors import HostStackError
from libraries.testbed.interrupt import InterruptGuard
from libraries.testbed.provision import Testbed
from libraries.testbed.teardown import pid_alive, process_state, state_dir

REPO = Path(__file__).resolve().parent.parent
ROBOT = [sys.executable, "-m", "robot"]

e2e = [
    pytest.mark.e2e,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root to build network namespaces"),
]


# -- the guard --------------------------------------------------------------------------------


@pytest.fixture
def restore_handlers():
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    yield
    for sig, handler in saved.items():
        signal.signal(sig, handler)


def test_first_signal_goes_on_second_cleans_up_third_goes_on(restore_handlers):
    seen: list[int] = []
    cleaned: list[str] = []
    signal.signal(signal.SIGINT, lambda signum, frame: seen.append(signum))
    signal.signal(signal.SIGTERM, lambda signum, frame: seen.append(signum))
    guard = InterruptGuard.install()
    assert guard is not None and InterruptGuard.install() is guard
    guard.protect("testbed a", lambda: cleaned.append("a"))
    guard.protect("testbed b", lambda: cleaned.append("b"))
    guard.release("testbed b")
    os.kill(os.getpid(), signal.SIGINT)
    assert (seen, cleaned) == ([signal.SIGINT], [])
    os.kill(os.getpid(), signal.SIGTERM)  # Robot counts SIGINT and SIGTERM together
    assert (seen, cleaned) == ([signal.SIGINT], ["a"])
    os.kill(os.getpid(), signal.SIGINT)
    assert (seen, cleaned) == ([signal.SIGINT, signal.SIGINT], ["a"])


def test_a_failing_cleanup_does_not_stop_the_others(restore_handlers, capfd):
    signal.signal(signal.SIGINT, lambda signum, frame: None)
    guard = InterruptGuard.install()
    cleaned = []

    def broken() -> None:
        raise OSError("namespace busy")

    guard.protect("testbed broken", broken)
    guard.protect("testbed fine", lambda: cleaned.append("fine"))
    guard(signal.SIGINT, None)
    guard(signal.SIGINT, None)
    assert cleaned == ["fine"]
    assert "removing testbed broken after the signal failed: namespace busy" in \
        capfd.readouterr().err


def test_without_robot_the_first_ctrl_c_is_a_keyboard_interrupt(restore_handlers):
    signal.signal(signal.SIGINT, signal.default_int_handler)
    guard = InterruptGuard.install()
    with pytest.raises(KeyboardInterrupt):
        guard(signal.SIGINT, None)


class _Node:
    def __init__(self, events: list[str], name: str, on_close=None):
        self.events, self.name, self.on_close = events, name, on_close

    def close(self, remove_workdir: bool = False) -> None:
        self.events.append(f"close {self.name}")
        if self.on_close is not None:
            self.on_close()
            raise HostStackError(f"{self.name}: connection lost")  # its sshd was just killed

    def abandon(self) -> None:
        self.events.append(f"abandon {self.name}")


class _Local:
    def __init__(self, events: list[str]):
        self.events = events

    def down(self) -> None:
        self.events.append("namespaces removed")


def test_a_second_signal_during_teardown_removes_the_rest_and_the_teardown_ends_quietly():
    events: list[str] = []
    testbed = Testbed(topology=None, run_id="t", local=_Local(events))  # type: ignore[arg-type]
    testbed.nodes = {"tg": _Node(events, "tg", on_close=testbed.remove_now),
                     "dut": _Node(events, "dut")}
    testbed.down()  # the signal's removal ran inside it: no error, no SSH to the dead nodes
    assert events == ["close tg", "namespaces removed", "abandon dut"]
    assert testbed.removed and testbed.nodes == {}


def test_a_second_signal_while_the_testbed_is_built_removes_that_testbed(restore_handlers,
                                                                         monkeypatch):
    signal.signal(signal.SIGINT, lambda signum, frame: None)
    removed: list[str] = []
    seen: dict[str, object] = {}
    monkeypatch.setattr(testbed_setup, "teardown_prefix", removed.append)

    def up(topology, owner="robot", prefix=None):
        guard = InterruptGuard.install()
        assert guard is not None
        guard(signal.SIGINT, None)  # Ctrl-C: Robot's (here a no-op) handler
        guard(signal.SIGINT, None)  # again, while the build runs
        seen["prefix"] = prefix
        raise HostStackError("build stopped")

    monkeypatch.setattr(Testbed, "up", up)
    with pytest.raises(HostStackError, match="build stopped"):
        testbed_setup.SuiteTestbed().up("3node", lambda name, value: None)
    assert removed == [seen["prefix"]] and str(seen["prefix"]).startswith("hr")


# -- real runs --------------------------------------------------------------------------------


def _testbeds_of(robot: int, namespaces: set[str]) -> list[str]:
    """Prefixes of the testbeds among ``namespaces`` that process ``robot`` built (its pid is
    the ``owner_pid`` of their ``state.json``)."""
    found = []
    for prefix in sorted({ns.rsplit("-", 1)[0] for ns in namespaces}):
        try:
            state = json.loads((state_dir(prefix) / "state.json").read_text())
        except (OSError, ValueError):
            continue
        if state.get("owner_pid") == robot:
            found.append(prefix)
    return found


def _namespaces() -> set[str]:
    return set(os.listdir("/run/netns")) if os.path.isdir("/run/netns") else set()


def _pids_in(namespace: str) -> dict[int, str]:
    out = subprocess.run(["ip", "netns", "pids", namespace], capture_output=True, text=True,
                         check=False).stdout
    found = {}
    for pid in out.split():
        try:
            found[int(pid)] = Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            continue
    return found


@pytest.mark.parametrize(("suite", "test", "load"), [
    ("tests/ssl_proxy/kernel.robot", "1kb-10c-kernel-ssl-proxy", "wrk"),
    ("tests/tcp_term/kernel.robot", "1s-kernel-tcp-term", "iperf3"),
], ids=["ssl_proxy", "tcp_term"])
@pytest.mark.e2e
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to build network namespaces")
def test_double_ctrl_c_mid_trial_leaves_nothing_and_a_readable_output(tmp_path, suite, test,
                                                                      load):
    before = _namespaces()
    run = subprocess.Popen(
        [*ROBOT, "-v", "TOPOLOGY:3node", "-v", "TRIALS:2", "-v", "DURATION:30", "-v",
         "WARMUP:0", "-d", str(tmp_path), "-t", test, suite],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 60
        processes: dict[int, str] = {}
        started = False
        while time.monotonic() < deadline and not started:
            # this run's testbed (pytest's other worker may be building one too: the wave-5
            # CI-like run signalled a robot still in its set-up, seeing another run's load),
            # and its trial's load: a load process still there a second later (well inside
            # the 30 s trial; a set-up's ``iperf3 --version`` probe is gone by then)
            mine = _testbeds_of(run.pid, _namespaces() - before)
            if mine:
                prefix = mine[0]
                processes = {pid: comm for node in ("tg", "dut", "server")
                             for pid, comm in _pids_in(f"{prefix}-{node}").items()}
                loads = [pid for pid, comm in processes.items() if comm == load]
                if loads:
                    time.sleep(1.0)
                    started = any(pid_alive(pid) for pid in loads)
            time.sleep(0.2)
        assert started, "the trial never started"
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.extend(run.stdout), daemon=True)
        reader.start()
        run.send_signal(signal.SIGINT)  # Ctrl-C twice, as a hand does it: the second lands
        # while the first one's teardowns run. It is sent once Robot took the first (it says
        # so): two signals pending together are delivered once, which on a busy machine a
        # fixed 20 ms gap did not prevent (the run then stopped gracefully, as after one)
        acknowledged = time.monotonic() + 10
        while not any("Second signal will force exit" in line for line in lines) and \
                time.monotonic() < acknowledged:
            time.sleep(0.01)
        run.send_signal(signal.SIGINT)
        run.wait(timeout=60)
        reader.join(timeout=10)
        console = "".join(lines)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    exited = time.monotonic()
    assert {"sshd", load} <= set(processes.values())
    while time.monotonic() < exited + 5:
        left_ns = {ns for ns in _namespaces() if ns.startswith(prefix + "-")}
        # a zombie is dead: these processes run in their own session, so once killed they
        # wait for PID 1 to reap them, which a container's init does when it gets to it
        left = {pid: f"{comm} ({process_state(pid)})" for pid, comm in processes.items()
                if pid_alive(pid)}
        if not left_ns and not left:
            break
        time.sleep(0.1)
    assert (left_ns, left) == (set(), {}), console[-3000:]
    assert "Second signal: removing testbed" in console
    assert "[ ERROR ]" not in console, console[-3000:]
    result = ExecutionResult(str(tmp_path / "output.xml"))  # raises on a broken file
    statuses = {t.name: t.status for t in result.suite.all_tests}
    assert statuses == {test: "FAIL"}
    rebot = subprocess.run([sys.executable, "-m", "robot.rebot", "-d", str(tmp_path / "re"),
                            str(tmp_path / "output.xml")], capture_output=True, text=True,
                           timeout=60, check=False)
    assert rebot.returncode == 1, rebot.stdout + rebot.stderr  # one failed test, file whole


@pytest.mark.e2e
def test_dry_run_logs_no_listener_error(tmp_path):
    run = subprocess.run([*ROBOT, "--dryrun", "-d", str(tmp_path), "tests"], cwd=REPO,
                         capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 0, run.stdout[-3000:]
    assert not re.search(r"\[ ERROR \]", run.stdout + run.stderr), run.stdout[-3000:]
    assert not list(tmp_path.glob("*/tests.jsonl"))  # a dry run records nothing
