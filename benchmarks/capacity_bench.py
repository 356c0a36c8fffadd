"""Repeatability of the capacity search (MLRsearch under a latency goal): the same CAPACITY
test several times on the local 3node testbed, as a nightly runs it.

    python -m benchmarks.capacity_bench --runs 5 --out results/bench/capacity.jsonl
    python -m benchmarks.capacity_bench --runs 3 --slowdown cpu:0.5 --out slowed.jsonl
    python -m benchmarks.capacity_bench --analyze results/bench/capacity.jsonl [slowed.jsonl]
    python -m benchmarks.capacity_bench ... -- CAPACITY_WIDTH:0.03 CAPACITY_DURATION_SUM:6

Per path (proxied, direct): each search's capacity (the first goal's conditional throughput),
their median and the largest distance from it (the issue asks for +-5 %), the trials and
seconds a search costs (its own trials, overheads included), whether the sanity check held
(capacity at most the closed-loop maximum and at least the rate of a 50 % latency pass that
met the goal), how many searches ended generator-bound (every failing trial with the
generator at >= 90 % of its cores) and how many recorded no figure (and why). A ``--slowdown``
(``cpu:<fraction>``: the proxy's nginx confined to that share of a core, from outside, see
``verdict_runs``) shows whether the search follows a slower proxy.
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
METRICS = (("proxy", "capacity"), ("direct", "direct_capacity"))


def collect(runs: int, out: Path, settings: dict[str, Any], slowdown: str | None) -> None:
    """Append ``runs`` records of the capacity test to ``out``."""
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        for index in range(runs):
            record = run_once(CASE, settings, Path(scratch) / f"c{index:03d}", slowdown,
                              REPO / "utest/fixtures/criteria/none.yaml")
            with out.open("a") as stream:
                stream.write(json.dumps(record) + "\n")
            found = {m: record["metrics"].get(m, {}).get("value") for m in CASE.metrics}
            print(f"search {index + 1}/{runs}: {found} {record.get('invalid') or ''}",
                  flush=True)


def _row(variant: str, metric: str, records: list[dict[str, Any]], label: str) -> str:
    values = [r["metrics"][metric]["value"] for r in records if metric in r["metrics"]]
    searches = [r["evidence"]["capacity"][variant] for r in records
                if variant in (r["evidence"].get("capacity") or {})]
    trials = [len(s["trials"]) for s in searches]
    seconds = [s["seconds"] for s in searches]
    sane = sum(bool((r["evidence"].get("capacity_sanity") or {}).get(variant, {}).get("holds"))
               for r in records)
    bound = sum((r["evidence"].get("capacity_limited_by") or {}).get(variant)
                == "load generator" for r in records)
    missing = [r["unavailable"][metric] for r in records
               if metric in (r.get("unavailable") or {})]
    median = statistics.median(values) if values else float("nan")
    spread = max((abs(v - median) / median for v in values), default=float("nan"))
    shown = ", ".join(f"{v:.0f}" for v in values) or "-"
    span = (f"{statistics.median(trials):.0f} ({min(trials)}-{max(trials)}) | "
            f"{statistics.median(seconds):.0f} ({min(seconds):.0f}-{max(seconds):.0f})"
            if searches else "- | -")
    return (f"| {label} | {variant} | {shown} | {median:.0f} | {spread:.1%} | {span} | "
            f"{sane}/{len(records)} | {bound}/{len(records)} | {len(missing)}"
            f"{': ' + '; '.join(sorted(set(missing))) if missing else ''} |")


def analyse(files: list[Path]) -> str:
    """The markdown table of the searches in each records file."""
    lines = ["| runs | path | capacities (requests/s) | median | largest distance | trials "
             "per search | seconds per search | sanity held | generator-bound | no figure |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for path in files:
        records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        slowed = {r.get("bench", {}).get("slowdown") for r in records} - {None}
        label = f"{path.stem}" + (f" ({', '.join(sorted(slowed))})" if slowed else "")
        lines += [_row(variant, metric, records, label) for variant, metric in METRICS]
        ratios = [r["metrics"]["capacity_ratio"]["value"] for r in records
                  if "capacity_ratio" in r["metrics"]]
        if ratios:
            lines.append(f"| {label} | ratio | {', '.join(f'{v:.3f}' for v in ratios)} | "
                         f"{statistics.median(ratios):.3f} | | | | | | |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Collect or analyse (see the module docstring)."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.capacity_bench")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--out", type=Path, default=Path("results/bench/capacity.jsonl"))
    parser.add_argument("--analyze", type=Path, nargs="+", help="only analyse these files")
    parser.add_argument("--slowdown", help="cpu:<fraction> of a core for the proxy's nginx")
    parser.add_argument("variables", nargs="*", help="after --: NAME:value Robot variables")
    args = parser.parse_args(argv)
    if args.analyze is None:
        settings: dict[str, Any] = {"trials": 5, "duration": 2, "warmup": 1}
        settings.update(v.split(":", 1) for v in args.variables)
        collect(args.runs, args.out, settings, args.slowdown)
    sys.stdout.write(analyse(args.analyze or [args.out]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
