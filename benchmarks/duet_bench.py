"""Duet against sequential rounds on one machine: how much of a round's scatter is the machine.

An A/B round today runs side a's trial, then side b's (order by a coin). On a shared VM whose
cores slow down for seconds at a time, the two trials of a round meet different disturbances,
and the round's ratio scatters with them. A *duet* round runs both sides' trials at the same
time on the same cores (two namespace testbeds of the same topology, each with its own server
and client), so both meet the same disturbance and it cancels in the ratio.

    python -m benchmarks.duet_bench --case tcp_term --rounds 30 --out results/bench/duet.jsonl
    python -m benchmarks.duet_bench --case tcp_term --rounds 30 \\
        --b-sysctl net.ipv4.tcp_rmem="4096 131072 262144" --out results/bench/duet.jsonl
    python -m benchmarks.duet_bench --case ssl_proxy --rounds 30 --out results/bench/duet.jsonl
    python -m benchmarks.duet_bench --case ssl_proxy --rounds 30 \\
        --b-proxy-http "access_log /tmp/duet-access.log;" --out results/bench/duet.jsonl

The cases are built from the library directly (no Robot) on two testbeds of one topology
(``3node``: side a, side b), pinned as the topology says: ``tcp_term`` is
``1s-kernel-tcp-term`` (an iperf3 server on each DUT, an iperf3 client on each TG, metric
Gbit/s), ``ssl_proxy`` is ``1kb-10c-kernel-ssl-proxy``'s proxied path (seed 000's nginx HTTPS
server and reverse proxy, wrk with 10 connections through the proxy, metric requests/s).
Every round runs one duet pair (both sides at once) and one sequential pair (one side after
the other, order by a coin), so both methods meet the same hour of the machine. A real change
on side b only: ``--b-sysctl`` sets a sysctl in side b's DUT namespace (a per-namespace
``net.*`` key), ``--b-proxy-http`` adds nginx directives to side b's proxy (``http`` block).
Prints, per method, the change b/a in percent with its 95 % interval as the A/B engine
computes them from per-round ratios (Hodges-Lehmann, signed rank) and the per-round spread;
writes one JSON line per run. An experiment for a design choice, not a suite: nothing here is
a product setting.
"""

from __future__ import annotations

import argparse
import json
import math
import signal
import statistics
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from libraries.ab.rounds import ratio_interval
from libraries.testbed.errors import HostStackError
from libraries.testbed.provision import Testbed
from libraries.testbed.topology_file import load_topology
from libraries.tools.certs import RunCertificates, make_run_certificates
from libraries.tools.content import content_file_command
from libraries.tools.iperf3 import (
    IperfClientOptions,
    IperfServerOptions,
    run_iperf3_client,
    start_iperf3_server,
)
from libraries.tools.nginx.config import (
    PROXY_PORT,
    SERVER_PORT,
    HttpsServerParams,
    NginxInstance,
    SslProxyParams,
)
from libraries.tools.nginx.service import instance_prefix, start_nginx
from libraries.tools.sysctl import write_sysctls
from libraries.tools.wrk.run import WrkOptions, run_wrk

IPERF_PORT = 5201
UNITS = {"tcp_term": "Gbit/s", "ssl_proxy": "requests/s"}


@dataclass
class Knobs:
    """What side b sets differently: sysctls in its DUT namespace, lines in its proxy's
    ``http`` block (``{workdir}`` is the DUT's work directory)."""

    sysctls: dict[str, str] = field(default_factory=dict)
    proxy_http: tuple[str, ...] = ()


@dataclass
class Side:
    """One side's testbed and its trial: one run of the load, its figure."""

    name: str
    testbed: Testbed
    trial: Callable[[], float]


def _first(cpus: list[int]) -> tuple[int, ...] | None:
    return (cpus[0],) if cpus else None


def _tcp_term(testbed: Testbed, seconds: int) -> Callable[[], float]:
    dut, tg = testbed.node("dut"), testbed.node("tg")
    tools = {node.name: testbed.topology.nodes[node.name].tools for node in (dut, tg)}
    server = start_iperf3_server(dut, tools[dut.name].get("iperf3", "iperf3"), IperfServerOptions(
        port=IPERF_PORT, cpus=testbed.topology.cpus_of(dut.name, "server")))
    dut.wait_for_listener(IPERF_PORT, server)
    client = IperfClientOptions(server=testbed.topology.address_of(dut.name, seen_from=tg.name),
                                port=IPERF_PORT, duration=seconds,
                                cpus=testbed.topology.cpus_of(tg.name, "load"))
    binary = tools[tg.name].get("iperf3", "iperf3")
    return lambda: run_iperf3_client(tg, binary, client).gbps


def _certificates(testbed: Testbed, certs: RunCertificates) -> dict[str, str]:
    folders = {}
    for role in ("server", "dut"):
        node = testbed.node(role)
        folders[role] = f"{node.workdir}/certs"
        node.put_files(folders[role], {
            f"{name}.{kind}": (getattr(getattr(certs, name), f"{kind}_pem"),
                               0o644 if kind == "cert" else 0o600)
            for name in ("server", "proxy") for kind in ("cert", "key")})
    return folders


def _ssl_proxy(testbed: Testbed, seconds: int, certs: RunCertificates,
               proxy_http: tuple[str, ...]) -> Callable[[], float]:
    server, dut, tg = testbed.node("server"), testbed.node("dut"), testbed.node("tg")
    folders = _certificates(testbed, certs)
    server.run(content_file_command(f"{server.workdir}/www/1kb", "1kb"), timeout=60)
    top = testbed.topology
    config = HttpsServerParams(
        instance=NginxInstance(prefix=instance_prefix(server, "nginx-server"), user="root",
                               worker_cpus=_first(top.cpus_of(server.name, "server"))),
        cert_path=f"{folders['server']}/server.cert", key_path=f"{folders['server']}/server.key",
        root_dir=f"{server.workdir}/www", listen_port=SERVER_PORT).render()
    start_nginx(server, "nginx-server", config, [SERVER_PORT],
                binary=top.nodes[server.name].tools.get("nginx", "nginx"))
    upstream = top.address_of(server.name, seen_from=dut.name)
    lines = tuple(line.replace("{workdir}", dut.workdir) for line in proxy_http)
    config = SslProxyParams(
        instance=NginxInstance(prefix=instance_prefix(dut, "nginx-proxy"), user="root",
                               worker_cpus=_first(top.cpus_of(dut.name, "proxy")),
                               extra_http=lines),
        cert_path=f"{folders['dut']}/proxy.cert", key_path=f"{folders['dut']}/proxy.key",
        listen_port=PROXY_PORT, upstreams=(f"{upstream}:{SERVER_PORT}",)).render()
    start_nginx(dut, "nginx-proxy", config, [PROXY_PORT],
                binary=top.nodes[dut.name].tools.get("nginx", "nginx"))
    options = WrkOptions(url=f"https://{top.address_of(dut.name, seen_from=tg.name)}:"
                             f"{PROXY_PORT}/1kb", threads=1, connections=10, duration=seconds,
                         cpus=top.cpus_of(tg.name, "load"))
    wrk = top.nodes[tg.name].tools.get("wrk", "wrk")  # plain wrk: closed loop, as the suite

    def trial() -> float:
        result = run_wrk(tg, wrk, options, flavour="wrk")
        if result.total_requests == 0 or result.non_2xx_3xx:
            raise HostStackError(f"{tg.name}: wrk through the proxy: {result.total_requests} "
                                 f"requests, {result.non_2xx_3xx} not 2xx/3xx: "
                                 f"{result.raw[-500:]!r}")
        return result.requests_per_second

    return trial


def _side(name: str, case: str, topology: str, seconds: int, knobs: Knobs,
          certs: RunCertificates) -> Side:
    testbed = Testbed.up(topology, owner=f"duet{name}")
    try:
        if knobs.sysctls:
            write_sysctls(testbed.node("dut"), knobs.sysctls)
        if case == "tcp_term":
            return Side(name, testbed, _tcp_term(testbed, seconds))
        return Side(name, testbed, _ssl_proxy(testbed, seconds, certs, knobs.proxy_http))
    except BaseException:
        testbed.down()
        raise


def _down(testbeds: list[Testbed]) -> None:
    """Remove every testbed, even when removing one fails; then raise the first failure."""
    failures = []
    for testbed in testbeds:
        try:
            testbed.down()
        except (HostStackError, OSError) as error:  # the other testbed must still go
            failures.append(error)
    if failures:
        raise failures[0]


def _summary(pairs: list[tuple[float, float]]) -> dict[str, float]:
    """The change b/a and its 95 % interval as the A/B engine computes them from per-round
    ratios (:func:`libraries.ab.rounds.ratio_interval`), and the per-round spread (standard
    deviation of the log ratios, in percent)."""
    ratios = tuple(b / a for a, b in pairs)
    interval = ratio_interval(ratios, 0.05)
    return {"change_pct": 100 * (interval.change - 1),
            "low_pct": 100 * (interval.low - 1) if interval.low is not None else math.nan,
            "high_pct": 100 * (interval.high - 1) if interval.high is not None else math.nan,
            "spread_pct": 100 * statistics.stdev(math.log(r) for r in ratios),
            "median_a": statistics.median(a for a, _ in pairs),
            "median_b": statistics.median(b for _, b in pairs)}


def run(case: str, rounds: int, seconds: int, topology: str, knobs: Knobs) -> dict:
    """Build both testbeds, warm both up, run ``rounds`` rounds; every testbed is removed on
    every path."""
    sides: list[Side] = []
    duet: list[tuple[float, float]] = []
    sequential: list[tuple[float, float]] = []
    coins = np.random.default_rng()
    certs = make_run_certificates(server_names=["server.hoststack.test"],
                                  proxy_names=["proxy.hoststack.test"])
    started = time.monotonic()
    try:
        sides.append(_side("a", case, topology, seconds, Knobs(), certs))
        sides.append(_side("b", case, topology, seconds, knobs, certs))
        a, b = sides
        with ThreadPoolExecutor(max_workers=2) as pool:
            for index in range(rounds + 1):
                both = pool.submit(a.trial), pool.submit(b.trial)
                pair = (both[0].result(), both[1].result())
                order = (a, b) if coins.random() < 0.5 else (b, a)
                alone_by = {side.name: side.trial() for side in order}
                alone = (alone_by["a"], alone_by["b"])
                if index:  # round 0 warms both sides up
                    duet.append(pair)
                    sequential.append(alone)
                    print(f"round {index}: duet {pair[0]:.2f} {pair[1]:.2f}  "
                          f"sequential {alone[0]:.2f} {alone[1]:.2f} {UNITS[case]}",
                          flush=True)
    finally:
        _down([side.testbed for side in sides])
    return {"case": case, "topology": topology, "seconds": seconds, "rounds": rounds,
            "b_sysctls": knobs.sysctls, "b_proxy_http": list(knobs.proxy_http),
            "wall_s": round(time.monotonic() - started, 1),
            "duet": {"pairs": duet, **_summary(duet)},
            "sequential": {"pairs": sequential, **_summary(sequential)}}


def _sysctl(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"--b-sysctl {text!r}: expected KEY=VALUE")
    if not key.startswith("net."):
        raise argparse.ArgumentTypeError(f"--b-sysctl {key}: only per-namespace net.* keys "
                                         "(side a shares every other key)")
    return key.strip(), value.strip()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--case", choices=sorted(UNITS), required=True)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--seconds", type=int, default=2, help="per trial (DURATION)")
    parser.add_argument("--topology", default="3node")
    parser.add_argument("--b-sysctl", type=_sysctl, action="append", default=[])
    parser.add_argument("--b-proxy-http", action="append", default=[],
                        help="an nginx directive for side b's proxy (ssl_proxy)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    if args.rounds < 2:
        parser.error("--rounds: at least 2")
    if load_topology(args.topology).provision != "netns":
        parser.error(f"--topology {args.topology}: a duet needs two testbeds on this machine "
                     "(provision: netns)")
    if args.b_proxy_http and args.case != "ssl_proxy":
        parser.error("--b-proxy-http: only --case ssl_proxy runs a proxy")
    knobs = Knobs(dict(args.b_sysctl), tuple(args.b_proxy_http))
    # a SIGTERM unwinds like Ctrl-C, so both testbeds are removed (run's finally)
    signal.signal(signal.SIGTERM, lambda number, frame: sys.exit(128 + number))
    record = run(args.case, args.rounds, args.seconds, args.topology, knobs)
    for method in ("duet", "sequential"):
        s = record[method]
        print(f"{method:10} change {s['change_pct']:+.2f} % [{s['low_pct']:+.2f}, "
              f"{s['high_pct']:+.2f}]  per-round spread {s['spread_pct']:.2f} %  "
              f"medians {s['median_a']:.2f} / {s['median_b']:.2f} {UNITS[args.case]}")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        with args.out.open("a") as out:
            out.write(json.dumps(record) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
