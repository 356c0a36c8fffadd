"""Observer effect of the per-trial CPU telemetry (a benchmark, not a timed test; run as root):

    .venv/bin/python -m benchmarks.telemetry_bench [--rounds 12] [--duration 3]

On the 3node testbed, tcp_term kernel through the DUT (iperf3 client on the TG, server on
the DUT): interleaved A/B rounds, telemetry on (the keywords' ``TrialTelemetry`` observer
reading every node at each trial's start and end) vs off, the order swapped every round.
Prints the on/off throughput ratio, the per-round ratio's spread and the off trials' own
run-to-run spread (the noise the effect must stay under). Then the telemetry's own CPU on
the nodes: ``reads`` back-to-back start+end reads of every node with no traffic, measured
as the CPU of every process in each node's namespace (sshd sessions, the sampling shell
and its children, reaped into the session's cutime/cstime), per trial of ``duration`` s.
Goal (issue 12): <= 1% of a core per measured node; effect below the run-to-run noise.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import time
from pathlib import Path

from libraries.cases.trial_observer import TrialTelemetry
from libraries.results.adaptive import run_interleaved
from libraries.results.plan import TrialPlan
from libraries.testbed.provision import Testbed
from libraries.tools.iperf3 import IperfClientOptions, IperfServerOptions, run_iperf3_client
from libraries.tools.iperf3 import start_iperf3_server as start_iperf3

TICK = os.sysconf("SC_CLK_TCK")


def namespace_cpu_seconds(namespace: str) -> float:
    """utime+stime+cutime+cstime of every process now in ``namespace`` (``ip netns pids``)."""
    pids = subprocess.run(["ip", "netns", "pids", namespace], capture_output=True, text=True,
                          timeout=10, check=True).stdout.split()
    total = 0
    for pid in pids:
        try:
            text = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue  # exited meanwhile
        fields = text.rsplit(")", 1)[1].split()
        total += sum(int(v) for v in fields[11:15])  # fields 14-17
    return total / TICK


def observer_effect(testbed: Testbed, rounds: int, duration: int) -> None:
    tg = testbed.node("tg")
    options = IperfClientOptions(server="198.18.1.1", duration=duration)
    telemetry = TrialTelemetry(testbed)
    on: list[float] = []
    off: list[float] = []

    def trial_on(seconds: int) -> float:
        return run_iperf3_client(tg, "iperf3", IperfClientOptions(
            server="198.18.1.1", duration=seconds), cpu_ledger=telemetry.ledger("tg")).gbps

    def trial_off(seconds: int) -> float:
        return run_iperf3_client(tg, "iperf3", IperfClientOptions(
            server="198.18.1.1", duration=seconds)).gbps

    run_iperf3_client(tg, "iperf3", options)  # warm-up
    plan = TrialPlan(trials=1, duration=duration, warmup=0)
    for index in range(rounds):
        order = [("on", trial_on), ("off", trial_off)]
        if index % 2:
            order.reverse()
        for label, trial in order:
            if label == "on":
                results, _ = run_interleaved({"on": trial}, plan, telemetry)
                on.append(results["on"][0])
            else:
                results, _ = run_interleaved({"off": trial}, plan)
                off.append(results["off"][0])
    ratios = [a / b for a, b in zip(on, off, strict=True)]
    cv_off = statistics.stdev(off) / statistics.fmean(off)
    print(f"iperf3 through the DUT, {rounds} rounds of {duration} s, telemetry on vs off "
          "(interleaved, order swapped every round)")
    for label, values in (("on ", on), ("off", off)):
        listed = ", ".join(f"{v:.2f}" for v in values)
        print(f"  {label}: median {statistics.median(values):.3f} Gbit/s  ({listed})")
    print(f"  ratio on/off of medians {statistics.median(on) / statistics.median(off):.3f}; "
          f"per-round ratio median {statistics.median(ratios):.3f}, min {min(ratios):.3f}, "
          f"max {max(ratios):.3f}, stdev {statistics.stdev(ratios):.3f}")
    print(f"  run-to-run noise (CV of the off trials): {cv_off:.1%}")


def telemetry_cpu(testbed: Testbed, reads: int, duration: int) -> None:
    telemetry = TrialTelemetry(testbed)
    namespaces = {name: f"{testbed.run_id}-{name}" for name in testbed.nodes}
    before = {name: namespace_cpu_seconds(ns) for name, ns in namespaces.items()}
    started = time.monotonic()
    for number in range(1, reads + 1):
        telemetry.trial_started("idle", number, reads)
        telemetry.trial_finished("idle", number, reads, None)
    elapsed = time.monotonic() - started
    print(f"telemetry's own CPU: {reads} start+end reads of {len(namespaces)} nodes in "
          f"{elapsed:.2f} s ({1000 * elapsed / reads:.0f} ms per trial, wall, nodes in "
          "parallel)")
    for name, ns in namespaces.items():
        spent = namespace_cpu_seconds(ns) - before[name]
        per_trial = spent / reads
        print(f"  {name}: {1000 * per_trial:.1f} ms of CPU per trial (both reads: sshd session "
              f"+ shell + cat/grep/pgrep) = {100 * per_trial / duration:.2f}% of a core over a "
              f"{duration} s trial, {100 * per_trial / 30:.3f}% over a 30 s trial")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--duration", type=int, default=3)
    parser.add_argument("--reads", type=int, default=40)
    args = parser.parse_args()
    testbed = Testbed.up("3node", owner="bench")
    try:
        dut = testbed.node("dut")
        server = start_iperf3(dut, "iperf3", IperfServerOptions(port=5201), name="iperf3-server")
        dut.wait_for_listener(5201, server)
        telemetry_cpu(testbed, args.reads, args.duration)
        observer_effect(testbed, args.rounds, args.duration)
    finally:
        testbed.down()


if __name__ == "__main__":
    main()
