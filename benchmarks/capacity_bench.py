"""Repeatability of the capacity search: the same CAPACITY test several times on the local
3node testbed, as a nightly runs it.

    python -m benchmarks.capacity_bench --runs 5 --out results/bench/capacity.jsonl
    python -m benchmarks.capacity_bench --analyze results/bench/capacity.jsonl

Per path (proxied, direct): each search's capacity, their median and the largest distance
from it (the issue asks for +-10 %), the probes and seconds a search costs, and whether the
sanity check held (capacity below the closed-loop maximum, on the side of the 50 % latency
pass's rate that pass's own p99 puts it), and how many searches ended at the load generator's
limit rather than the path's.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.verdict_runs import REPO, Case, run_once

CASE = Case("ssl_proxy", "tests/ssl_proxy/kernel.robot", "1kb-10c-kernel-ssl-proxy-capacity",
            ("capacity", "direct_capacity", "capacity_ratio"), "nginx-proxy")


def collect(runs: int, out: Path, settings: dict[str, Any]) -> None:
    """Append ``runs`` records of the capacity test to ``out``."""
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        for index in range(runs):
            record = run_once(CASE, settings, Path(scratch) / f"c{index:03d}", None,
                              REPO / "utest/fixtures/criteria/none.yaml")
            with out.open("a") as stream:
                stream.write(json.dumps(record) + "\n")
            found = {m: record["metrics"].get(m, {}).get("value") for m in CASE.metrics}
            print(f"search {index + 1}/{runs}: {found}", flush=True)


def analyse(records: list[dict[str, Any]]) -> str:
    """The markdown table of the searches in ``records``."""
    lines = ["| path | capacities (requests/s) | median | largest distance | probes per "
             "search | seconds per search | sanity held | generator-bound |",
             "|---|---|---|---|---|---|---|---|"]
    for variant, metric in (("proxy", "capacity"), ("direct", "direct_capacity")):
        values = [r["metrics"][metric]["value"] for r in records if metric in r["metrics"]]
        if not values:
            continue
        median = statistics.median(values)
        spread = max(abs(v - median) / median for v in values)
        searches = [r["evidence"]["capacity"][variant] for r in records
                    if variant in r["evidence"].get("capacity", {})]
        probes = [len(s["probes"]) for s in searches]
        seconds = [sum(p["seconds"] for p in s["probes"]) for s in searches]
        sane = sum(bool(r["evidence"]["capacity_sanity"][variant]["holds"]) for r in records
                   if variant in r["evidence"].get("capacity_sanity", {}))
        bound = sum(r["evidence"].get("capacity_limited_by", {}).get(variant)
                    == "load generator" for r in records)
        lines.append(f"| {variant} | {', '.join(f'{v:.0f}' for v in values)} | {median:.0f} | "
                     f"{spread:.1%} | {statistics.median(probes):.0f} "
                     f"({min(probes)}-{max(probes)}) | {statistics.median(seconds):.0f} "
                     f"({min(seconds):.0f}-{max(seconds):.0f}) | {sane}/{len(searches)} | "
                     f"{bound}/{len(searches)} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Collect or analyse (see the module docstring)."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.capacity_bench")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--out", type=Path, default=Path("results/bench/capacity.jsonl"))
    parser.add_argument("--analyze", type=Path, help="only analyse this file")
    parser.add_argument("--probe-duration", type=int, default=3)
    args = parser.parse_args(argv)
    if args.analyze is None:
        collect(args.runs, args.out, {"trials": 5, "duration": 2, "warmup": 1,
                                      "probe_duration": args.probe_duration,
                                      "capacity_budget": 300})
    path = args.analyze or args.out
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    sys.stdout.write(analyse(records))
    return 0


if __name__ == "__main__":
    sys.exit(main())
