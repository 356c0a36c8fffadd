"""Runs for the verdict benchmark: one test of a suite under robot, as a nightly runs it, with
the DUT slowed by a real, known mechanism or not.

Slowdowns (applied from outside, the way a regression would come: the library does not know):

* ``cpu:<fraction>``: the DUT processes that do the case's work (the reverse proxy's nginx for
  ssl_proxy, the iperf3 server for tcp_term) go into a CPU cgroup limited to ``fraction`` of
  one core (cgroup v2 ``cpu.max``, or v1 ``cpu.cfs_quota_us`` where v2 is not mounted), as
  soon as they appear in the run's DUT namespace (within the warm-up);
* ``tc:<Mbit>``: a token bucket on the TG's link interface (``tbf``), the link slowed.

The true size of a slowdown is measured, not assumed: runs with and without it alternate in
one session, and the analysis compares their medians (``verdict_bench``).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
CGROUP_V2 = Path("/sys/fs/cgroup")
CGROUP_V1 = Path("/sys/fs/cgroup/cpu")
PERIOD_US = 100_000


@dataclass(frozen=True)
class Case:
    """A benchmarked test: its suite file, test name, the metrics compared, and which DUT
    processes a ``cpu`` slowdown confines (matched on their command line)."""

    name: str
    suite: str
    test: str
    metrics: tuple[str, ...]
    dut_process: str


CASES = {
    "ssl_proxy": Case("ssl_proxy", "tests/ssl_proxy/kernel.robot", "1kb-10c-kernel-ssl-proxy",
                      ("rps", "proxy_direct_ratio"), "nginx-proxy"),
    "tcp_term": Case("tcp_term", "tests/tcp_term/kernel.robot", "1s-kernel-tcp-term",
                     ("throughput",), "iperf3 -s"),
}


class _CpuLimit:
    """A CPU cgroup limited to ``fraction`` of a core."""

    def __init__(self, name: str, fraction: float):
        quota = int(fraction * PERIOD_US)
        if (CGROUP_V2 / "cgroup.controllers").is_file():
            self.path = CGROUP_V2 / name
            self.path.mkdir(exist_ok=True)
            (self.path / "cpu.max").write_text(f"{quota} {PERIOD_US}\n")
        else:
            self.path = CGROUP_V1 / name
            self.path.mkdir(exist_ok=True)
            (self.path / "cpu.cfs_period_us").write_text(f"{PERIOD_US}\n")
            (self.path / "cpu.cfs_quota_us").write_text(f"{quota}\n")

    def add(self, pid: int) -> None:
        with contextlib.suppress(OSError):  # the process may have gone meanwhile
            (self.path / "cgroup.procs").write_text(f"{pid}\n")

    def remove(self) -> None:
        for _ in range(50):
            try:
                self.path.rmdir()
                return
            except OSError:
                time.sleep(0.1)


def _namespaces() -> set[str]:
    return set(os.listdir("/run/netns")) if os.path.isdir("/run/netns") else set()


def _pids_in(namespace: str) -> list[int]:
    out = subprocess.run(["ip", "netns", "pids", namespace], capture_output=True, text=True,
                         check=False, timeout=10).stdout
    return [int(p) for p in out.split()]


def _pgid(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[2])
    except (OSError, IndexError, ValueError):
        return None


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


class Slowdown(threading.Thread):
    """Watches for the run's namespaces and applies ``spec`` (``cpu:0.5``, ``tc:2000``) to the
    new testbed as soon as its target appears; :meth:`stop` undoes what outlives the run."""

    def __init__(self, spec: str, case: Case, before: set[str]):
        super().__init__(daemon=True)
        self.kind, _, value = spec.partition(":")
        self.value = float(value)
        self.case = case
        self.before = before
        self.done = threading.Event()
        self.applied: list[str] = []
        self.limit = _CpuLimit(f"hsbench{os.getpid()}", self.value) if self.kind == "cpu" \
            else None

    def run(self) -> None:
        """Poll until the slowdown is applied, then stop polling: the watcher's own CPU (a
        subprocess per namespace every 20 ms) must not slow the run down beside it."""
        confined: set[int] = set()
        shaped = False
        while not self.done.is_set() and not (shaped or self._complete(confined)):
            for ns in sorted(_namespaces() - self.before):
                if self.kind == "cpu" and ns.endswith("-dut") and self.limit is not None:
                    pids = _pids_in(ns)
                    groups = {_pgid(p) for p in pids if self.case.dut_process in _cmdline(p)}
                    for pid in pids:  # the process and its group (nginx's workers)
                        if pid not in confined and _pgid(pid) in groups - {None}:
                            self.limit.add(pid)
                            confined.add(pid)
                            self.applied.append(f"pid {pid} ({_cmdline(pid)[:40]}) limited to "
                                                f"{self.value:g} core")
                if self.kind == "tc" and ns.endswith("-tg") and not shaped:
                    done = subprocess.run(
                        ["ip", "netns", "exec", ns, "tc", "qdisc", "replace", "dev", "eth1",
                         "root", "tbf", "rate", f"{self.value:g}mbit", "burst", "1mb",
                         "latency", "50ms"], capture_output=True, text=True, check=False)
                    shaped = done.returncode == 0
                    if shaped:
                        self.applied.append(f"{ns} eth1 tbf {self.value:g} Mbit/s")
            time.sleep(0.02)

    def _complete(self, confined: set[int]) -> bool:
        """A confined group with a worker (nginx: master and worker; iperf3: itself) is
        complete: nothing new will join it during the run."""
        need = 2 if "nginx" in self.case.dut_process else 1
        groups = {_pgid(pid) for pid in confined} - {None}
        return any(sum(_pgid(pid) == group for pid in confined) >= need for group in groups)

    def stop(self) -> None:
        self.done.set()
        self.join(timeout=5)
        if self.limit is not None:
            self.limit.remove()


def run_once(case: Case, settings: dict[str, Any], out: Path, slowdown: str | None,
             criteria: Path) -> dict[str, Any]:
    """One robot run of ``case``; its record (with ``bench`` notes: slowdown, what was applied,
    wall time). Raises RuntimeError naming the run when it wrote no record."""
    out.mkdir(parents=True, exist_ok=True)
    variables = [f"{k.upper()}:{v}" for k, v in settings.items()]
    command = [sys.executable, "-m", "robot", "-d", str(out), "-v", f"RUN_ID:{out.name}",
               "-v", f"CRITERIA:{criteria}", "--console", "none", "--log", "NONE",
               "--report", "NONE", "-t", case.test]
    for variable in variables:
        command += ["-v", variable]
    command.append(case.suite)
    watcher = None
    if slowdown:
        watcher = Slowdown(slowdown, case, _namespaces())
        watcher.start()
    started = time.monotonic()
    try:
        subprocess.run(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       timeout=3600, check=False)
    finally:
        if watcher is not None:
            watcher.stop()
    records = out / "records.jsonl"
    if not records.is_file() or not records.read_text().strip():
        raise RuntimeError(f"run {out.name} of {case.test} wrote no record (see {out})")
    record = json.loads(records.read_text().splitlines()[-1])
    record["bench"] = {"slowdown": slowdown, "applied": watcher.applied if watcher else [],
                       "wall_s": time.monotonic() - started}
    return record
