"""The node environment read around a test: parsed from real output, deltas per CPU, the
placement of started processes; garbage is an error quoting it."""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from libraries.testbed.errors import ParseError
from libraries.tools.cpu.environment import (
    environment_command,
    environment_entry,
    parse_environment,
)
from utest.localnode import LocalNode

# captured on this project's VM (2 vCPUs, no cpufreq) with one process group tracked
VM_READ = """==cpus 2
==frequency
==mhz
2596.120
2596.120
==interrupts
cpu0 6399272
cpu1 6748702
==softirqs
      NET_TX:       1344       1210
      NET_RX:   25865009   38745027
==irqbalance
no
==affinity
14132 14132 nginx 0-1
14132 14140 nginx 0
==end
"""


def test_a_vm_read_parses_with_its_reported_mhz_and_no_governor():
    reading = parse_environment(VM_READ)
    assert reading.cpus == 2 and reading.governors == {} and reading.mhz == [2596.12] * 2
    assert reading.interrupts == {"cpu0": 6399272, "cpu1": 6748702}
    assert reading.net_rx == {"cpu0": 25865009, "cpu1": 38745027}
    assert reading.irqbalance is False
    assert reading.affinity == {14132: [(14132, "nginx", "0-1"), (14140, "nginx", "0")]}


def test_the_entry_holds_deltas_and_the_placement_beside_the_declared_cpus():
    before = parse_environment(VM_READ)
    after = parse_environment(VM_READ.replace("cpu0 6399272", "cpu0 6400272")
                              .replace("25865009", "25875009")
                              .replace("==frequency\n", "==frequency\ncpu0 performance "
                                       "2600000\ncpu1 powersave 800000\n"))
    entry = environment_entry(before, after, {14132: "nginx-proxy"}, {"proxy": [0]})
    assert entry["interrupts"]["cpu0"] == {"hard": 1000, "net_rx": 10000, "net_tx": 0}
    assert entry["frequency"] == {"governor": ["performance", "powersave"],
                                  "mhz": {"cpu0": 2600.0, "cpu1": 800.0}}
    assert entry["placement"] == {"declared": {"proxy": [0]},
                                  "processes": {"nginx-proxy": ["0", "0-1"]}}


@pytest.mark.parametrize("garbage", ["", "==cpus two\n==end\n", "==cpus 2\n",
                                     "==cpus 2\n==interrupts\ncpu0 many\n==end\n",
                                     "==cpus 2\n==affinity\nnot four words\n==end\n"])
def test_garbage_is_an_error_quoting_it(garbage):
    with pytest.raises(ParseError, match="environment read"):
        parse_environment(garbage)


@pytest.mark.integration
def test_a_real_read_sees_a_started_process_and_interrupts_moving(tmp_path):
    node = LocalNode(workdir=str(tmp_path))
    sleeper = subprocess.Popen(["taskset", "-c", "0", "sleep", "5"], start_new_session=True)
    try:
        time.sleep(0.1)
        first = parse_environment(node.run(environment_command([sleeper.pid])).stdout)
        time.sleep(0.2)
        second = parse_environment(node.run(environment_command([sleeper.pid])).stdout)
    finally:
        sleeper.kill()
        sleeper.wait()
    assert first.cpus == os.cpu_count()
    assert first.affinity == {sleeper.pid: [(sleeper.pid, "sleep", "0")]}
    assert sum(second.interrupts.values()) > sum(first.interrupts.values())
