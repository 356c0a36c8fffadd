"""Does a bisection find the build that did it? Real bisections over ranges of real installs.

    python -m benchmarks.bisect_bench --levels /opt/nginx-o2 /opt/nginx-o0 --builds 8 \\
        --scenario step --runs 10 --out results/bench/bisect.jsonl
    python -m benchmarks.bisect_bench --levels /opt/nginx-o2 --builds 8 --scenario none ...
    python -m benchmarks.bisect_bench --levels A B C --builds 8 --scenario two ...
    python -m benchmarks.bisect_bench --analyze results/bench/bisect.jsonl
    python -m benchmarks.bisect_bench --simulate [--searches 1000] [--builds 17] [--seed 52] \
        [--inside 2]

``--simulate`` runs the project's own search over simulated ranges (no testbed, one core, a
few minutes: :mod:`benchmarks.bisect_sim`) and prints the tables of benchmarks/README.md: two
steps (-8 % then -4 %, -12 % then -4 %) and one step beside a build that does not run; then
what the result claims (a -4 % step undone by a +4 % one before a -8 % step: exit 3 only where
every range it calls clear was checked or is said clear end to end) and one step with copies
of one build on each side (known the same files before the search, learned from the records,
or not known): exits, comparisons and minutes; at per-round spreads 2.4, 5.6 and 8.3 %.
``--inside`` is the search's budget for looking inside ranges clear only end to end.

``--levels`` are nginx install folders (``<prefix>/sbin/nginx``) built outside the repo,
fastest first: one per performance level (the same source at ``-O2`` and at ``-O0``, a real
source change with a cost, ...). Each bisection copies them into ``--builds`` install folders
in order, the first bad build(s) drawn at random (``--seed``): ``step`` one step from the first
level to the second, ``two`` two steps through three levels, ``none`` every build a copy of the
first level. The builds file names each copy as nginx on the proxy (``dut``) and the server,
and ``python -m libraries.bisect`` runs on it as a user would. One JSON line per bisection: the
truth, the culprits found, the exit code, the comparisons made against the issue's bound
``log2(n) + 2`` and the minutes.

``--analyze`` prints the table of benchmarks/README.md: per scenario, bisections that found
exactly the planted steps (and nothing else), comparisons (most against the bound), minutes.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from benchmarks.bisect_sim import simulate
from libraries.bisect.bisection import INSIDE

REPO = Path(__file__).resolve().parent.parent
SCENARIOS = {"none": 1, "step": 2, "two": 3}
"""Scenario -> how many ``--levels`` it needs."""


def plant(scenario: str, count: int, rng: random.Random) -> list[int]:
    """The first bad build of each step, drawn in ``1..count-1``."""
    steps = SCENARIOS[scenario] - 1
    return sorted(rng.sample(range(1, count), steps))


def lay_out(levels: list[Path], steps: list[int], count: int, scratch: Path) -> Path:
    """Copy the installs into ``count`` folders in order (build ``i`` at level ``number of
    steps at or before i``) and write the builds file; its path."""
    builds = []
    for index in range(count):
        level = levels[sum(1 for s in steps if s <= index)]
        folder = scratch / f"r{index + 1:02d}"
        shutil.copytree(level, folder, symlinks=True)
        nginx = str(folder / "sbin" / "nginx")
        builds.append({"name": folder.name,
                       "tools": {"dut": {"nginx": nginx}, "server": {"nginx": nginx}}})
    path = scratch / "builds.yaml"
    path.write_text(yaml.safe_dump({"name": f"bench: steps at {steps}", "builds": builds}))
    return path


def bisect_once(builds: Path, args: argparse.Namespace, results: Path) -> tuple[int, dict]:
    """Run the bisection as a user would; its exit code and ``bisect.json``."""
    command = [sys.executable, "-m", "libraries.bisect", "--topology", args.topology,
               "--test", args.test, "--builds", str(builds), "--results", str(results),
               "--max-rounds", str(args.max_rounds), "--budget", str(args.budget),
               "--margin", str(args.margin)]
    process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        stdout, stderr = process.communicate(timeout=args.timeout)
    except subprocess.TimeoutExpired:
        for _ in range(2):  # Robot's teardown on the first Ctrl-C, its removal on the second
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGINT)
            time.sleep(5)
        stdout, stderr = process.communicate(timeout=120)
        raise RuntimeError(f"{' '.join(command)}: stopped after {args.timeout:g} s (--timeout)"
                           f"; stdout: {stdout.strip()[-2000:]}") from None
    print(stdout.strip(), file=sys.stderr)
    found = sorted(results.glob("*/bisect.json"))
    if len(found) != 1:
        raise RuntimeError(f"{' '.join(command)}: exit {process.returncode}, expected one "
                           f"bisect.json under {results}, found {len(found)}; stderr: "
                           f"{stderr.strip()[-2000:]}")
    return process.returncode, json.loads(found[0].read_text())


def record(scenario: str, count: int, steps: list[int], code: int, doc: dict,
           seed: int) -> dict[str, Any]:
    """One JSON line: truth, culprits found (first bad, 0-based), comparisons, bound."""
    names = doc["builds"]
    found = sorted(names.index(c["first_bad"]) for c in doc["culprits"]
                   if c["direction"] == "regression")
    bound = math.log2(count) + 2
    return {"scenario": scenario, "builds": count, "seed": seed, "truth": steps,
            "found": found, "exact": found == steps, "exit_code": code,
            "status": doc["status"], "comparisons": len(doc["comparisons"]),
            "pairs": len({(c["a"], c["b"]) for c in doc["comparisons"]}),
            "bound": round(bound, 2), "within_bound": len(doc["comparisons"]) <= bound,
            "minutes": doc["minutes"], "undecided": doc["undecided"],
            "culprits": doc["culprits"], "test": doc["test"], "topology": doc["topology"],
            "margin_pct": doc.get("margin_pct"),
            "chain": [{k: c.get(k) for k in ("a", "b", "verdict", "change_pct", "low_pct",
                                              "high_pct", "rounds", "attempt", "minutes")}
                      for c in doc["comparisons"]]}


def collect(args: argparse.Namespace) -> None:
    """``--runs`` bisections of one scenario, appended to ``--out``."""
    levels = [Path(p).resolve() for p in args.levels]
    if len(levels) != SCENARIOS[args.scenario]:
        raise SystemExit(f"--scenario {args.scenario} needs {SCENARIOS[args.scenario]} "
                         f"--levels, got {len(levels)}")
    for level in levels:
        if not (level / "sbin" / "nginx").is_file():
            raise SystemExit(f"--levels: {level}/sbin/nginx missing (an nginx install prefix)")
    rng = random.Random(args.seed)  # noqa: S311 (positions of planted steps, not secrets)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    for run in range(args.runs):
        steps = plant(args.scenario, args.builds, rng)
        with tempfile.TemporaryDirectory(prefix="bisect-bench-") as scratch:
            builds = lay_out(levels, steps, args.builds, Path(scratch))
            code, doc = bisect_once(builds, args, Path(scratch) / "results")
        line = record(args.scenario, args.builds, steps, code, doc, args.seed)
        line["levels"] = [str(p) for p in levels]
        with args.out.open("a") as stream:
            stream.write(json.dumps(line) + "\n")
        print(f"bisection {run + 1}/{args.runs}: truth {steps} found {line['found']} "
              f"exit {code}, {line['comparisons']} comparisons (bound {line['bound']}), "
              f"{line['minutes']} min", flush=True)


def analyze(paths: list[Path]) -> str:
    """The markdown table, one row per scenario and range size."""
    rows: dict[tuple[str, int], list[dict]] = {}
    for path in paths:
        for line in path.read_text().splitlines():
            if line.strip():
                entry = json.loads(line)
                rows.setdefault((entry["scenario"], entry["builds"]), []).append(entry)
    out = ["| scenario | builds | bisections | exact | exit codes | comparisons (max / bound) "
           "| within bound | minutes (median, max) |", "|---|---|---|---|---|---|---|---|"]
    for (scenario, count), entries in sorted(rows.items()):
        minutes = [e["minutes"] for e in entries]
        codes = ", ".join(str(e["exit_code"]) for e in entries)
        out.append(
            f"| {scenario} | {count} | {len(entries)} | "
            f"{sum(e['exact'] for e in entries)}/{len(entries)} | {codes} | "
            f"{max(e['comparisons'] for e in entries)} / {entries[0]['bound']} | "
            f"{sum(e['within_bound'] for e in entries)}/{len(entries)} | "
            f"{statistics.median(minutes):.1f}, {max(minutes):.1f} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    """Collect or analyze (module docstring)."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bisect_bench")
    parser.add_argument("--analyze", nargs="+", type=Path, metavar="JSONL")
    parser.add_argument("--levels", nargs="+", help="nginx install prefixes, fastest first")
    parser.add_argument("--scenario", choices=sorted(SCENARIOS), default="step")
    parser.add_argument("--builds", type=int, default=None,
                        help="installs in the range (8-16; default 8, simulated 17)")
    parser.add_argument("--simulate", action="store_true",
                        help="simulated ranges through the project's search (no testbed)")
    parser.add_argument("--searches", type=int, default=1000,
                        help="simulated searches per scenario and spread")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--seed", type=int, default=None, help="default 1, simulated 52")
    parser.add_argument("--topology", default="3node")
    parser.add_argument("--test", default="1kb-10c-kernel-ssl-proxy")
    parser.add_argument("--max-rounds", type=int, default=60)
    parser.add_argument("--budget", type=float, default=600.0)
    parser.add_argument("--margin", type=float, default=3.0, help="percent (bisect's --margin)")
    parser.add_argument("--inside", type=int, default=INSIDE,
                        help="simulated: the search's --inside budget (comparisons)")
    parser.add_argument("--timeout", type=float, default=7200.0,
                        help="seconds one bisection may take before it is stopped")
    parser.add_argument("--out", type=Path, default=Path("results/bench/bisect.jsonl"))
    args = parser.parse_args(argv)
    if args.analyze:
        print(analyze(args.analyze))
        return 0
    if args.simulate:
        print(simulate(args.searches, args.builds or 17, 52 if args.seed is None else args.seed,
                       args.max_rounds, args.margin, args.inside))
        return 0
    args.builds = args.builds or 8
    args.seed = 1 if args.seed is None else args.seed
    if not args.levels:
        parser.error("--levels is required to collect")
    if args.builds < SCENARIOS[args.scenario]:
        parser.error(f"--builds {args.builds}: too few for --scenario {args.scenario}")
    collect(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
