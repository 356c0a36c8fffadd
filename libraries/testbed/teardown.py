"""Removing a namespace testbed: its processes, namespaces, links and files; sweeping the
leftovers of runs that died.

Processes go in an order that lets each die where its parent can reap it at once. Nothing is
left waiting on init: a process whose parent is init (nginx started over SSH and orphaned
when its session ended) is dead once it is a zombie, holding no namespace, socket or file; PID
1 reaps it when it gets to it (this VM's init reaps every ~2 s, which made every teardown wait
~1.6 s). So:

1. every process in the namespaces but the sshd listeners (SSH sessions, nginx, iperf3, wrk,
   ...) gets SIGTERM, then SIGKILL after 2 s; the listeners, still alive, reap their session
   processes;
2. then the listeners go; their parent is the testbed's *keeper* (``sh``, which started them
   and waits for them), which reaps them at once and exits; the keeper is the owner's child
   (reaped by :class:`~libraries.testbed.netns.LocalTestbed`) or, for a CLI testbed, init's,
   and not in any namespace;
3. one ``ip -batch`` deletes the namespaces (their veths with them) and the bridge.

The namespaces' processes are found by their network namespace's inode, read from ``/proc``
directly (one pass, no ``ip netns pids`` per namespace).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

from libraries.testbed.run_paths import workdir_root

LOG = logging.getLogger(__name__)
STATE_ROOT = Path("/run/hoststack")
NETNS_DIR = Path("/run/netns")
#: a process is given this long to go after SIGTERM, and again after SIGKILL
GRACE = 2.0


def state_dir(prefix: str) -> Path:
    """Where a testbed keeps its keys, configs, pid files and ``state.json``."""
    return STATE_ROOT / prefix


def process_stat(pid: int) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (state, ppid, pgrp, ...), or
    None once ``pid`` is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[-1].split()


def process_state(pid: int) -> str | None:
    """The state letter of ``pid`` (``R``, ``S``, ``Z``, ...), or None once it is gone."""
    fields = process_stat(pid)
    return fields[0] if fields else None


def pid_alive(pid: int) -> bool:
    """True for a live process; a zombie (dead, not yet reaped) counts as gone."""
    return process_state(pid) not in (None, "Z")


def namespaces_with_prefix(prefix: str) -> list[str]:
    """Names of the network namespaces of testbed ``prefix``."""
    try:
        names = os.listdir(NETNS_DIR)
    except FileNotFoundError:
        return []
    return sorted(name for name in names if name.startswith(prefix + "-"))


def namespace_pids(namespaces: list[str]) -> set[int]:
    """Live processes whose network namespace is one of ``namespaces`` (zombies have none)."""
    inodes = set()
    for ns in namespaces:
        with contextlib.suppress(OSError):
            inodes.add(os.stat(NETNS_DIR / ns).st_ino)
    if not inodes:
        return set()
    found = set()
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if os.stat(f"/proc/{entry.name}/ns/net").st_ino in inodes:
                    found.add(int(entry.name))
    return found


def _reap_if_ours(pid: int) -> None:
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def _gone(pid: int, reaped: bool) -> bool:
    _reap_if_ours(pid)
    return process_state(pid) is None if reaped else not pid_alive(pid)


def stop_processes(pids: set[int], reaped: bool = False) -> set[int]:
    """SIGTERM ``pids``, SIGKILL what is left after :data:`GRACE` s, and wait until each is
    dead (``reaped``: gone from the process table, for processes whose parent reaps at once).
    Returns the pids still there after both waits."""
    left = {pid for pid in pids if not _gone(pid, reaped)}
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + GRACE
        while left and time.monotonic() < deadline:
            time.sleep(0.005)
            left = {pid for pid in left if not _gone(pid, reaped)}
        if not left:
            break
    return left


def _recorded_pids(prefix: str) -> tuple[set[int], int | None]:
    """The sshd listeners (their pid files) and the keeper (``state.json``) of ``prefix``."""
    rundir = state_dir(prefix)
    listeners = set()
    for pid_file in rundir.glob("sshd_*.pid"):
        with contextlib.suppress(OSError, ValueError):
            listeners.add(int(pid_file.read_text().split()[0]))
    keeper = None
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
        keeper = int(json.loads((rundir / "state.json").read_text())["keeper_pid"])
    return listeners, keeper


def _ip_batch(commands: list[str]) -> None:
    if not commands:
        return
    result = subprocess.run(["ip", "-force", "-batch", "-"], input="\n".join(commands) + "\n",
                            capture_output=True, text=True, timeout=30, check=False)
    if result.returncode != 0:
        LOG.info("local testbed: ip -batch (%s) said: %s", "; ".join(commands),
                 result.stderr.strip())


def _links_with_prefix(prefix: str) -> list[str]:
    names = os.listdir("/sys/class/net")
    return sorted(name for name in names if re.fullmatch(rf"{re.escape(prefix)}-[a-z0-9]+", name))


def _runs_for(pid: int, prefix: str) -> bool:
    """True when process ``pid`` is the keeper of testbed ``prefix`` (its command line starts
    the testbed's sshds), not a process that reused the pid of a keeper long gone (a dead
    run's, swept later: PIDs wrap within minutes beside a build)."""
    try:
        return prefix.encode() in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def teardown_prefix(prefix: str) -> None:
    """Remove every process, namespace, link and file of testbed ``prefix`` (see the module
    docstring for the order). Returns once its sshd processes are gone from the process
    table and every other process of it is dead."""
    namespaces = namespaces_with_prefix(prefix)
    listeners, keeper = _recorded_pids(prefix)
    inside = namespace_pids(namespaces)
    listeners &= inside
    stubborn = stop_processes(inside - listeners)
    stubborn |= stop_processes(listeners, reaped=True)
    if keeper is not None and process_state(keeper) is not None and _runs_for(keeper, prefix):
        stubborn |= stop_processes({keeper})
    if stubborn:
        LOG.warning("local testbed %s: processes %s survived SIGKILL", prefix, sorted(stubborn))
    _ip_batch([f"netns del {ns}" for ns in namespaces])
    for ns in namespaces:
        shutil.rmtree(Path("/etc/netns") / ns, ignore_errors=True)
    _ip_batch([f"link del {name}" for name in _links_with_prefix(prefix)])
    shutil.rmtree(state_dir(prefix), ignore_errors=True)
    shutil.rmtree(workdir_root(prefix), ignore_errors=True)
    LOG.info("local testbed %s: removed", prefix)


def list_testbeds() -> list[dict]:
    """State of every testbed on this machine (``alive``: owner process still running)."""
    found = []
    for state_file in sorted(STATE_ROOT.glob("*/state.json")):
        try:
            state = json.loads(state_file.read_text())
        except (OSError, ValueError):
            state = {"prefix": state_file.parent.name, "owner": "unknown", "owner_pid": 0}
        state["alive"] = state.get("owner") == "cli" or pid_alive(int(state.get("owner_pid", 0)))
        if state.get("owner") == "unknown" and not state["alive"]:
            # unreadable: a writer of an older version mid-write, or one killed mid-write;
            # only a file left unchanged for UNREADABLE_GRACE s is taken for a dead run's
            state["alive"] = _age(state_file) < UNREADABLE_GRACE
        state["namespaces_present"] = namespaces_with_prefix(state["prefix"])
        found.append(state)
    return found


UNREADABLE_GRACE = 120.0
"""Seconds an unreadable ``state.json`` is given before its testbed is taken for dead."""


def _age(path: Path) -> float:
    try:
        return time.time() - path.stat().st_mtime
    except OSError:
        return 0.0


def sweep_stale() -> list[str]:
    """Tear down testbeds whose owning run died (a killed robot run). Returns their prefixes."""
    removed = []
    for state in list_testbeds():
        if not state["alive"]:
            LOG.info("local testbed %s: owner pid %s is gone, removing leftovers",
                     state["prefix"], state.get("owner_pid"))
            teardown_prefix(state["prefix"])
            removed.append(state["prefix"])
    return removed
