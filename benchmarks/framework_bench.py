"""Benchmarks of the framework itself (not timed tests): run as root after setup.sh.

    .venv/bin/python -m benchmarks.framework_bench testbed     # up+down time, SSH round trip
    .venv/bin/python -m benchmarks.framework_bench overhead    # per-test overhead, robot CPU
    .venv/bin/python -m benchmarks.framework_bench fidelity    # library vs hand-run figures

Goals (issues 2 and 4): testbed up+down <= 1.0 s, SSH command round trip median <= 50 ms,
framework overhead per measuring test <= 2 s, robot CPU during a trial <= 1% of a core,
library figure / hand-run figure within 0.97-1.03 (alternated in the same window).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from libraries.testbed.netns import LocalTestbed
from libraries.testbed.provision import Testbed
from libraries.testbed.run_paths import make_prefix
from libraries.testbed.topology_file import load_topology
from libraries.tools.iperf3 import IperfClientOptions, IperfServerOptions, run_iperf3_client
from libraries.tools.iperf3 import start_iperf3_server as start_iperf3
from libraries.tools.nginx.config import SERVER_PORT, HttpsServerParams, NginxInstance
from libraries.tools.nginx.service import start_nginx
from libraries.tools.wrk.run import WrkOptions, run_wrk

REPO = Path(__file__).resolve().parent.parent
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def _median_line(what: str, ups: list[float], downs: list[float]) -> str:
    total = [u + d for u, d in zip(ups, downs, strict=True)]
    return (f"{what}: up median {statistics.median(ups):.3f} s, down median "
            f"{statistics.median(downs):.3f} s, up+down median {statistics.median(total):.3f} s "
            f"(max {max(total):.3f} s) over {len(total)} rounds")


def bench_testbed(rounds: int) -> None:
    """Testbed up+down three ways: the namespaces alone (library calls), what a suite pays
    (``Testbed.up``: namespaces, SSH to every node, pre-flight; a process started over SSH;
    ``Testbed.down``), and the command line (``python -m libraries.testbed up|down``, with
    interpreter start-up). Then the SSH round trip."""
    topology = load_topology("3node")
    ups, downs = [], []
    for _ in range(rounds):
        bed = LocalTestbed(topology, make_prefix("3node", "robot"))
        started = time.monotonic()
        bed.up()
        ups.append(time.monotonic() - started)
        started = time.monotonic()
        bed.down()
        downs.append(time.monotonic() - started)
    print(_median_line("3node namespaces", ups, downs))
    ups, downs = [], []
    for _ in range(rounds):
        started = time.monotonic()
        testbed = Testbed.up("3node")
        ups.append(time.monotonic() - started)
        testbed.node("dut").start("sleep 60", "sleeper")
        started = time.monotonic()
        testbed.down()
        downs.append(time.monotonic() - started)
    print(_median_line("3node suite (SSH, pre-flight, a process)", ups, downs))
    ups, downs = [], []
    for _ in range(rounds):
        for action, times in (("up", ups), ("down", downs)):
            started = time.monotonic()
            subprocess.run([sys.executable, "-m", "libraries.testbed", action, "3node"],
                           check=True, stdout=subprocess.DEVNULL, timeout=60, cwd=REPO)
            times.append(time.monotonic() - started)
    print(_median_line("3node command line", ups, downs))
    testbed = Testbed.up("3node")
    try:
        node = testbed.node("tg")
        times = []
        for _ in range(200):
            started = time.monotonic()
            node.run("true", quiet=True)
            times.append(time.monotonic() - started)
        print(f"SSH command round trip (tg, `true`): median {statistics.median(times) * 1e3:.1f} "
              f"ms, p90 {sorted(times)[179] * 1e3:.1f} ms over 200 commands")
    finally:
        testbed.down()


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def bench_overhead(duration: int, trials: int) -> None:
    """Run tcp_term's first test and ssl_proxy's first test under robot; report wall time
    minus nominal trial time, and robot's CPU use sampled every 0.5 s."""
    cases = [("tests/tcp_term", "1s-kernel-tcp-term", 1),
             ("tests/ssl_proxy", "1kb-10c-kernel-ssl-proxy", 2)]
    for suite, test, variants in cases:
        with tempfile.TemporaryDirectory() as out:
            command = [str(REPO / ".venv/bin/robot"), "-d", out, "-t", test,
                       "-v", f"TRIALS:{trials}", "-v", f"DURATION:{duration}",
                       "-v", "WARMUP:1", "--output", "output.xml", suite]
            process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL)
            samples = []
            started = time.monotonic()
            last = (started, 0.0)
            while process.poll() is None:
                time.sleep(0.5)
                try:
                    now = (time.monotonic(), _cpu_seconds(process.pid))
                except OSError:
                    break
                samples.append((now[1] - last[1]) / (now[0] - last[0]))
                last = now
            process.wait()
            records = list(Path(out).rglob("records.jsonl"))
            if process.returncode != 0 or not records:
                print(f"{test}: robot failed (exit {process.returncode})")
                continue
            record = json.loads(records[0].read_text().splitlines()[0])
            latency = (record.get("evidence", {}).get("latency") or {}).get("duration_s", 0)
            nominal = variants * (1 + trials * duration) + latency  # + wrk2's latency pass
            overhead = record["duration_s"] - nominal
            steady = sorted(samples)[len(samples) // 2] if samples else float("nan")
            print(f"{test}: test wall time {record['duration_s']:.2f} s, nominal trial time "
                  f"{nominal} s -> framework overhead {overhead:.2f} s; robot CPU: median "
                  f"{steady:.1%} of a core per 0.5 s interval, whole run "
                  f"{last[1] / max(last[0] - started, 1e-9):.1%}")


def bench_fidelity(rounds: int, duration: int) -> None:
    """Alternate library runs and the same command run by hand (``ip netns exec``)."""
    testbed = Testbed.up("3node")
    try:
        tg, dut, server = testbed.node("tg"), testbed.node("dut"), testbed.node("server")
        tg_ns = f"{testbed.run_id}-tg"
        process = start_iperf3(dut, "iperf3", IperfServerOptions(port=5201))
        dut.wait_for_listener(5201, process)
        options = IperfClientOptions(server="198.18.1.1", duration=duration)

        def iperf_by_hand() -> float:
            out = subprocess.run(["ip", "netns", "exec", tg_ns, "iperf3", "-c", "198.18.1.1",
                                  "-t", str(duration), "--json"], capture_output=True,
                                 text=True, timeout=duration + 30, check=True).stdout
            return json.loads(out)["end"]["sum_received"]["bits_per_second"] / 1e9

        lib, hand = _alternate(rounds, lambda: run_iperf3_client(tg, "iperf3", options).gbps,
                               iperf_by_hand)
        _report("iperf3 Gbit/s", lib, hand)
        www = f"{server.workdir}/www"
        server.run(f"mkdir -p {www} && head -c 1024 /dev/urandom > {www}/1kb")
        server.run(f"cd {server.workdir} && openssl req -x509 -nodes -newkey ec "
                   "-pkeyopt ec_paramgen_curve:P-256 -subj /CN=bench -days 1 "
                   "-keyout k.pem -out c.pem 2>/dev/null")
        params = HttpsServerParams(
            instance=NginxInstance(prefix=f"{server.workdir}/nginx", user="root"),
            cert_path=f"{server.workdir}/c.pem", key_path=f"{server.workdir}/k.pem",
            root_dir=www)
        start_nginx(server, "nginx", params.render(), [SERVER_PORT])
        url = f"https://198.18.2.2:{SERVER_PORT}/1kb"

        def wrk_by_hand() -> float:
            out = subprocess.run(["ip", "netns", "exec", tg_ns, "wrk", "-t1", "-c10",
                                  f"-d{duration}s", url], capture_output=True, text=True,
                                 timeout=duration + 30, check=True).stdout
            match = re.search(r"Requests/sec:\s+([\d.]+)", out)
            assert match, out
            return float(match.group(1))

        lib, hand = _alternate(
            rounds, lambda: run_wrk(tg, "wrk", WrkOptions(url=url, duration=duration))
            .requests_per_second, wrk_by_hand)
        _report("wrk requests/s (HTTPS 1 KiB, routed through the DUT)", lib, hand)
    finally:
        testbed.down()


def _alternate(rounds: int, library: Callable[[], float], by_hand: Callable[[], float]
               ) -> tuple[list[float], list[float]]:
    """Run both ``rounds`` times, swapping which goes first every round (A B, B A, ...)."""
    lib, hand = [], []
    for index in range(rounds):
        if index % 2:
            hand.append(by_hand())
            lib.append(library())
        else:
            lib.append(library())
            hand.append(by_hand())
    return lib, hand


def _report(what: str, lib: list[float], hand: list[float]) -> None:
    ratio = statistics.median(lib) / statistics.median(hand)
    print(f"{what}: library median {statistics.median(lib):.4g} "
          f"({', '.join(f'{v:.4g}' for v in lib)}), by hand median "
          f"{statistics.median(hand):.4g} ({', '.join(f'{v:.4g}' for v in hand)}); "
          f"ratio {ratio:.3f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=["testbed", "overhead", "fidelity"])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--duration", type=int, default=5)
    parser.add_argument("--trials", type=int, default=2)
    args = parser.parse_args()
    if args.what == "testbed":
        bench_testbed(args.rounds)
    elif args.what == "overhead":
        bench_overhead(args.duration, args.trials)
    else:
        bench_fidelity(args.rounds, args.duration)
    return 0


if __name__ == "__main__":
    sys.exit(main())
