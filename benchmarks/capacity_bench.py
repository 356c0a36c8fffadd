"""Repeatability of the capacity search (MLRsearch under a latency goal): the same CAPACITY
test several times on the local 3node testbed, as a nightly runs it.

    python -m benchmarks.capacity_bench --runs 5 --out results/bench/capacity.jsonl
    python -m benchmarks.capacity_bench --runs 3 --slowdown cpu:0.5 --out slowed.jsonl
    python -m benchmarks.capacity_bench --runs 3 --generator vegeta --out vegeta.jsonl
    python -m benchmarks.capacity_bench --analyze results/bench/capacity.jsonl [slowed.jsonl]
    python -m benchmarks.capacity_bench --runs 5 --holdout 10 --out holdout.jsonl \
        -- LATENCY_SLO:p99<=25ms
    python -m benchmarks.capacity_bench ... -- CAPACITY_WIDTH:0.03 CAPACITY_DURATION_SUM:6
    python -m benchmarks.capacity_bench --simulate [--tests 100] [--seed 52]

Per path (proxied, direct): each test's capacity (since issue 52 the rate at which a 30 s
window misses the goal with probability at most 10 %, from the miss curve of its windows),
their median and the largest distance from it, the knees, the windows, the seconds a search
and its windows cost (trials with overheads), a verification run at each figure (30 s by
default, ``CAPACITY_VERIFY``: did the goal hold over all its requests; counted in the curve),
whether the sanity check held
(capacity at most the closed-loop maximum and at least the rate of a 50 % latency pass that
met the goal), how many searches ended generator-bound (every failing trial with the
generator at >= 90 % of its cores) and how many recorded no figure (and why). A ``--slowdown``
(``cpu:<fraction>``: the proxy's nginx confined to that share of a core, from outside, see
``verdict_runs``) shows whether the search follows a slower proxy.

``--holdout N`` (issue 52's check; about 8 minutes more per test at N = 10): each test then runs
N separate 30 s windows at its recorded rate, interleaved with windows at its interval's ends,
never counted (``-v CAPACITY_HOLDOUT``); the analysis tells whether the figure's interval covers
the share of them that missed (:mod:`benchmarks.capacity_holdout`), with the interval's width.

``--simulate`` runs the suite's windows and miss curve on known curves instead of a testbed
(:mod:`benchmarks.capacity_sim`; floors, a machine slow part of the time, machines that drift):
tests with a figure, the true miss share at it and whether it is within the stated share,
intervals holding the true crossing, widths, drifts stated.

``--analyze`` also pools the proxied path's whole-window trials of each file (confirmation
trials and verification runs, per goal and length) by share of the knee and runs the suite's
confirmation rule on them (:mod:`benchmarks.capacity_windows`): how often a set of five
figures lies within +-5 % and how often its five verifications hold, on windows like the ones
recorded.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

from benchmarks.capacity_holdout import holdouts, rows
from benchmarks.capacity_sim import table as simulated
from benchmarks.capacity_windows import resample, table, windows
from benchmarks.verdict_runs import REPO, Case, run_once

CASE = Case("ssl_proxy", "tests/ssl_proxy/kernel.robot", "1kb-10c-kernel-ssl-proxy-capacity",
            ("capacity", "direct_capacity", "capacity_ratio"), "nginx-proxy")
METRICS = (("proxy", "capacity"), ("direct", "direct_capacity"))
SETS = 50
"""Sets of five tests the suite's rule is resampled in (each test a plan of windows and fits:
about 0.1 s)."""
GENERATORS = ("wrk2", "vegeta", "oha")


def collect(runs: int, out: Path, settings: dict[str, Any], slowdown: str | None,
            generator: str | None = None) -> None:
    """Append ``runs`` records of the capacity test to ``out`` (``generator``: the only
    constant-rate generator left on the load node, through a copy of the topology)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        if generator:
            settings = {**settings, "topology": _only(generator, Path(scratch))}
        for index in range(runs):
            record = run_once(CASE, settings, Path(scratch) / f"c{index:03d}", slowdown,
                              REPO / "utest/fixtures/criteria/none.yaml")
            record["bench"]["generator"] = generator
            with out.open("a") as stream:
                stream.write(json.dumps(record) + "\n")
            found = {m: record["metrics"].get(m, {}).get("value") for m in CASE.metrics}
            print(f"search {index + 1}/{runs}: {found} {record.get('invalid') or ''}",
                  flush=True)


def _only(generator: str, folder: Path) -> Path:
    """A copy of the 3node topology whose load node declares ``generator`` as its only
    constant-rate generator (the search takes the first it finds: wrk2 where built)."""
    topology = yaml.safe_load((REPO / "topologies/3node.yaml").read_text())
    tg = topology["nodes"]["tg"]
    for other in set(GENERATORS) - {generator}:
        tg["tools"].pop(other, None)
        if other in tg.get("optional_tools", []):
            tg["optional_tools"].remove(other)
    path = folder / f"3node-{generator}.yaml"
    path.write_text(yaml.safe_dump(topology, sort_keys=False))
    return path


def _median_span(values: list[float], digits: int = 0) -> str:
    if not values:
        return "-"
    return (f"{statistics.median(values):.{digits}f} ({min(values):.{digits}f}-"
            f"{max(values):.{digits}f})")


def _row(variant: str, metric: str, records: list[dict[str, Any]], label: str) -> str:
    values = [r["metrics"][metric]["value"] for r in records if metric in r["metrics"]]
    searches = [r["evidence"]["capacity"][variant] for r in records
                if variant in (r["evidence"].get("capacity") or {})]
    knees = [s["capacity"] for s in searches if s.get("capacity")]
    confirmations = [c[variant] for r in records
                     if variant in (c := r["evidence"].get("capacity_confirmation") or {})]
    steps = [len(c["trials"]) for c in confirmations]
    confirm_s = [sum(t["seconds"] for t in c["trials"]) for c in confirmations]
    verified = [v[variant] for r in records
                if variant in (v := r["evidence"].get("capacity_verification") or {})]
    held = sum(bool(v["held"]) for v in verified)
    worst = max((v["loss_ratio"] for v in verified), default=float("nan"))
    tools = sorted({(r["evidence"].get("capacity_search") or {}).get("tool", "?")
                    for r in records})
    sane = sum(bool((r["evidence"].get("capacity_sanity") or {}).get(variant, {}).get("holds"))
               for r in records)
    bound = sum((r["evidence"].get("capacity_limited_by") or {}).get(variant)
                == "load generator" for r in records)
    missing = [r["unavailable"][metric] for r in records
               if metric in (r.get("unavailable") or {})]
    median = statistics.median(values) if values else float("nan")
    spread = max((abs(v - median) / median for v in values), default=float("nan"))
    shown = ", ".join(f"{v:.0f}" for v in values) or "-"
    return (f"| {label} | {variant} | {', '.join(tools)} | {shown} | {median:.0f} | "
            f"{spread:.1%} | {_median_span(knees)} | {_median_span(steps)} | "
            f"{_median_span([s['seconds'] for s in searches])} | {_median_span(confirm_s)} | "
            f"{held}/{len(verified)} (worst {worst:.2%}) | {sane}/{len(records)} | "
            f"{bound}/{len(records)} | {len(missing)}"
            f"{': ' + '; '.join(sorted(set(missing))) if missing else ''} |")


def analyse(files: list[Path]) -> str:
    """The markdown table of the searches in each records file."""
    lines = ["| runs | path | generator | capacities (requests/s) | median | largest distance "
             "| knees (MLRsearch) | windows | seconds per search | seconds of windows "
             "| verification held (loss) | sanity held | generator-bound | no "
             "figure |", "|" + "---|" * 14]
    sections: list[str] = []
    for path in files:
        records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        slowed = {r.get("bench", {}).get("slowdown") for r in records} - {None}
        label = f"{path.stem}" + (f" ({', '.join(sorted(slowed))})" if slowed else "")
        lines += [_row(variant, metric, records, label) for variant, metric in METRICS]
        ratios = [r["metrics"]["capacity_ratio"]["value"] for r in records
                  if "capacity_ratio" in r["metrics"]]
        walls = [r["bench"]["wall_s"] for r in records if "bench" in r]
        lines.append(f"| {label} | ratio | | {', '.join(f'{v:.3f}' for v in ratios) or '-'} | "
                     f"{statistics.median(ratios) if ratios else float('nan'):.3f} | | | | | "
                     f"| test wall {_median_span(walls)} s | | | |")
        sections.append(_windows(records, label))
        held_out = holdouts(records)
        if held_out:
            sections.append(f"\n{label}: proxied path, held-out windows at each figure:\n\n"
                            f"{rows(held_out)}")
    return "\n".join(lines) + "\n" + "".join(sections)


def _windows(records: list[dict[str, Any]], label: str) -> str:
    """The proxied path's whole-window trials of one file, per goal and window length:
    how often a window missed per share of the knee, and the suite's confirmation rule
    resampled on them (:mod:`benchmarks.capacity_windows`)."""
    groups: dict[tuple[str, float], list[Any]] = {}
    for window in windows(records, "proxy"):
        groups.setdefault((window.goal.name, window.seconds), []).append(window)
    parts = []
    for (goal, seconds), pool in sorted(groups.items()):
        parts.append(f"\n{label}: proxied path, {goal}, {seconds:g} s windows (confirmations and "
                     f"verifications):\n\n{table(pool)}\n{resample(pool, SETS).line()}\n")
    return "".join(parts)


def main(argv: list[str] | None = None) -> int:
    """Collect or analyse (see the module docstring)."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.capacity_bench")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--out", type=Path, default=Path("results/bench/capacity.jsonl"))
    parser.add_argument("--analyze", type=Path, nargs="+", help="only analyse these files")
    parser.add_argument("--slowdown", help="cpu:<fraction> of a core for the proxy's nginx")
    parser.add_argument("--generator", choices=GENERATORS,
                        help="the only constant-rate generator the load node keeps")
    parser.add_argument("--holdout", type=int, default=0,
                        help="held-out 30 s windows at each figure (issue 52: 10 or more)")
    parser.add_argument("--simulate", action="store_true",
                        help="the windows and miss curve on simulated curves (no testbed)")
    parser.add_argument("--tests", type=int, default=100, help="with --simulate: per curve")
    parser.add_argument("--seed", type=int, default=52, help="with --simulate")
    parser.add_argument("variables", nargs="*", help="after --: NAME:value Robot variables")
    args = parser.parse_args(argv)
    if args.simulate:
        sys.stdout.write(simulated(args.tests, args.seed))
        return 0
    if args.analyze is None:
        settings: dict[str, Any] = {"trials": 5, "duration": 2, "warmup": 1,
                                    "capacity_verify": 30, "extended": "yes"}
        if args.holdout:
            settings["capacity_holdout"] = args.holdout
        settings.update(v.split(":", 1) for v in args.variables)
        collect(args.runs, args.out, settings, args.slowdown, args.generator)
    sys.stdout.write(analyse(args.analyze or [args.out]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
