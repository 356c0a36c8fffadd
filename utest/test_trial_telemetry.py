"""The keywords' TrialTelemetry observer over local nodes: real /proc reads around trials, a
node that cannot be read, and VPP's runtime counters from a stand-in vppctl."""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import pytest

from libraries.cases.trial_observer import TrialTelemetry
from libraries.results.adaptive import run_interleaved
from libraries.results.measurement import Measurement
from libraries.results.plan import TrialPlan
from libraries.results.records import validate_record
from libraries.testbed.command import Ledger, NodeCommand
from libraries.testbed.errors import CommandError
from libraries.testbed.topology import VppInstall
from utest.localnode import LocalNode
from utest.test_measurement_criteria import _record

RUNTIME = Path(__file__).resolve().parent / "fixtures" / "vpp_runtime"


@dataclass
class Tracked:
    pid: int
    name: str


@dataclass
class TrackedNode(LocalNode):
    """A LocalNode that knows the processes 'started' on it, as Node.processes does."""

    processes: tuple[Tracked, ...] = ()
    broken: bool = False
    commands: list[str] = field(default_factory=list)

    def run(self, command, timeout: float | None = None, sudo: bool = False,
            check: bool = True, quiet: bool = False):
        if self.broken:
            raise CommandError(self.where, command, 1, "", "sh: 1: cannot open /proc/stat: "
                               "Permission denied")
        return super().run(command, timeout, sudo, check, quiet)


def pause(seconds: int) -> int:
    """A trial long enough for /proc/uptime (10 ms ticks) to move."""
    time.sleep(0.05)
    return seconds


@pytest.fixture
def spinner():
    process = subprocess.Popen(["sh", "-c", "while :; do :; done"], start_new_session=True)
    yield process
    process.kill()
    process.wait()


def _bed(**nodes):
    """A testbed as TrialTelemetry sees it: nodes, and a topology declaring no CPUs."""
    return SimpleNamespace(nodes=nodes, topology=SimpleNamespace(
        nodes={name: SimpleNamespace(cpus={}) for name in nodes}))


def test_every_node_is_read_around_measured_trials_only(tmp_path: Path, spinner):
    dut = TrackedNode(workdir=str(tmp_path / "dut"), name="dut",
                      processes=(Tracked(spinner.pid, "spinner"),))
    tg = TrackedNode(workdir=str(tmp_path / "tg"), name="tg")
    lost = TrackedNode(workdir=str(tmp_path / "lost"), name="lost", broken=True)
    telemetry = TrialTelemetry(_bed(dut=dut, tg=tg, lost=lost))
    ledger = telemetry.ledger("tg")

    def trial(seconds: int) -> int:
        busy = "i=0; while [ $i -lt 50000 ]; do i=$((i+1)); done"
        tg.run(NodeCommand.shell(busy, 60, ledger=Ledger(ledger, "load")))
        return seconds

    run_interleaved({"only": trial}, TrialPlan(trials=2, duration=1, warmup=1), telemetry)
    assert len(telemetry.trials["only"]) == 2
    first = telemetry.trials["only"][0]
    # a tracked spinner's CPU is read: 60-87 % of a core with two CPU burners and a robot run
    # beside it, and above 5 % unless starved 19 ticks in 20; read for the wrong process (or
    # not at all) it is 0
    assert first["dut"]["processes"]["spinner"]["cpu"] > 5.0
    assert first["tg"]["processes"]["load"]["count"] == 1  # warm-up's entry was discarded
    assert first["lost"] == {"unavailable": "/proc not readable: lost (localhost): the read "
                                            "exited 1: sh: 1: cannot open /proc/stat: "
                                            "Permission denied"}
    starts = [c for c in dut.history if "pgrep" in c and "==cpus" not in c]  # not at ends
    environment = [c for c in dut.history if "==cpus" in c]
    assert len(starts) == 2 and len(dut.history) - len(environment) == 4
    assert len(environment) == 1  # before the first measured trial only
    assert f'm="{spinner.pid}"' in starts[1]  # members known from trial 1: pgrep only if gone
    measurement = Measurement(case="tcp_term", stack="kernel", parameters={})
    measurement.add("throughput", [1.0, 1.0], "Gbit/s")
    block = telemetry.finish(measurement)
    nodes = block["variants"]["only"]["nodes"]
    assert nodes["lost"]["unavailable"].startswith("/proc not readable: lost (localhost)")
    assert nodes["dut"]["trials"] == 2
    assert any("share one kernel" in note for note in measurement.notes)
    assert len([c for c in dut.history if "==cpus" in c]) == 2  # and after the last
    assert measurement.environment["nodes"]["dut"]["placement"]["processes"] == {
        "spinner": "0-1"}
    assert measurement.environment["nodes"]["lost"]["unavailable"].startswith("lost")
    validate_record(_record(schema_version=2, telemetry=block, case="tcp_term"))


def test_vpp_runtime_is_cleared_before_and_read_after_each_trial(tmp_path: Path):
    fake = tmp_path / "vppctl"
    fake.write_text("#!/bin/sh\n"
                    f'echo "$@" >> {tmp_path}/vppctl.calls\n'
                    'case "$*" in\n'
                    f'  *"show runtime") cat {RUNTIME}/show_runtime_two_threads.txt ;;\n'
                    f'  *"show session") cat {RUNTIME}/show_session.txt ;;\n'
                    "esac\n")
    fake.chmod(0o755)
    dut = TrackedNode(workdir=str(tmp_path / "dut"), name="dut")
    install = VppInstall(vppctl=str(fake), cli_socket=str(tmp_path / "cli.sock"))
    telemetry = TrialTelemetry(_bed(dut=dut),
                               vpp={"dut": SimpleNamespace(install=install)})
    run_interleaved({"vpp": pause}, TrialPlan(trials=2, duration=1, warmup=0), telemetry)
    calls = (tmp_path / "vppctl.calls").read_text().splitlines()
    socket = f"-s {tmp_path}/cli.sock"
    assert calls == [f"{socket} clear runtime", f"{socket} show runtime",
                     f"{socket} show session"] * 2
    vpp = telemetry.trials["vpp"][1]["dut"]["vpp"]
    assert vpp["threads"]["vpp_wk_0"]["loops_per_sec"] == 84211.90
    assert vpp["sessions"] == {"0": 0, "1": 14}
    assert [label for _, label, _ in telemetry.raw_runtime] == ["vpp trial 1", "vpp trial 2"]
    block = telemetry.finish(Measurement(case="tcp_term", stack="vpp", parameters={}))
    assert block["variants"]["vpp"]["nodes"]["dut"]["vpp"]["median"]["threads"]["vpp_wk_0"][
        "vectors_per_call"] > 0


def test_vpp_without_runtime_data_is_unavailable_not_zero(tmp_path: Path):
    fake = tmp_path / "vppctl"
    fake.write_text("#!/bin/sh\necho 'clib_socket_init: connect (fd 3): Connection refused'\n")
    fake.chmod(0o755)
    dut = TrackedNode(workdir=str(tmp_path / "dut"), name="dut")
    install = VppInstall(vppctl=str(fake), cli_socket=str(tmp_path / "cli.sock"))
    telemetry = TrialTelemetry(_bed(dut=dut),
                               vpp={"dut": SimpleNamespace(install=install)})
    run_interleaved({"vpp": pause}, TrialPlan(trials=1, duration=1, warmup=0), telemetry)
    reading = telemetry.trials["vpp"][0]["dut"]
    assert reading["vpp"]["unavailable"].startswith("VPP runtime data: vppctl show runtime: ")
    # the node's CPU reading is still there (an idle machine may read 100% idle)
    assert sum(reading["cores"]["all"].values()) == pytest.approx(100.0, abs=0.5)
