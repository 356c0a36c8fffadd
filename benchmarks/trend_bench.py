"""Benchmark: records -> trend dashboard (load + validate, jumpavg grouping, HTML).

    python -m benchmarks.trend_bench [--tests 400] [--metrics 1] [--runs 250] [--keep DIR]

Writes ``tests x runs`` schema-valid records (``metrics`` each; one series per test and metric;
a few series get a step) into a temporary results tree, then times each phase and the whole
command line (``python -m libraries.trend DIR --html OUT``). Goal: 100k records <= 10 s.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import random
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from libraries.trend.analysis import analyse
from libraries.trend.cli import main as trend_main
from libraries.trend.dashboard import render_dashboard
from libraries.trend.load import load_records

LOG = logging.getLogger(__name__)
T0 = datetime(2025, 1, 1, 2, 0, tzinfo=UTC)


def write_tree(root: Path, tests: int, metrics: int, runs: int, seed: int = 1) -> int:
    """Write the results tree; returns the number of records written."""
    rng = random.Random(seed)  # noqa: S311 (test data)
    levels = [rng.uniform(1e3, 1e10) for _ in range(tests)]
    count = 0
    for run in range(runs):
        when = T0 + timedelta(days=run)
        run_id = f"{when:%Y%m%d-%H%M%S}-{run:04x}"
        lines = []
        for test in range(tests):
            level = levels[test] * (0.8 if test % 50 == 0 and run >= runs - 2 else 1.0)
            metric_docs = {}
            for metric in range(metrics):
                run_level = rng.gauss(level, level * 0.05)
                trials = [rng.gauss(run_level, level * 0.01) for _ in range(3)]
                mean = statistics.fmean(trials)
                stdev = statistics.stdev(trials)
                metric_docs[f"m{metric}"] = {
                    "unit": "bit/s", "value": statistics.median(trials), "trials": trials,
                    "min": min(trials), "max": max(trials), "mean": mean, "stdev": stdev,
                    "cv": stdev / mean, "direction": "higher_is_better"}
            lines.append(json.dumps({
                "schema_version": 1, "run_id": run_id, "test_id": f"Tests.Bench.test-{test:04d}",
                "suite": "Tests.Bench", "name": f"test-{test:04d}", "tags": ["TCP_TERM"],
                "topology": "3node", "stack": "kernel", "case": "tcp_term", "parameters": {},
                "start_time": (when + timedelta(seconds=test)).isoformat(), "duration_s": 10.0,
                "metrics": metric_docs, "criteria": [], "verdict": "no_criteria",
                "versions": {"dut": {"kernel": "6.1.0", "nginx": "1.22.1"}}}))
            count += 1
        run_dir = root / run_id
        run_dir.mkdir(parents=True)
        (run_dir / "records.jsonl").write_text("\n".join(lines) + "\n")
    return count


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the timings."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tests", type=int, default=400)
    parser.add_argument("--metrics", type=int, default=1)
    parser.add_argument("--runs", type=int, default=250)
    parser.add_argument("--keep", type=Path, help="write the tree here and keep it")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="trend-bench-") as scratch:
        root = args.keep or Path(scratch)
        count = write_tree(root / "results", args.tests, args.metrics, args.runs)
        timings = {}
        start = time.perf_counter()
        frame = load_records([root / "results"])
        timings["load+validate"] = time.perf_counter() - start
        start = time.perf_counter()
        trends = analyse(frame)
        timings["classify"] = time.perf_counter() - start
        start = time.perf_counter()
        page = render_dashboard(trends)
        (root / "trend.html").write_text(page)
        timings["html"] = time.perf_counter() - start
        start = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            status = trend_main([str(root / "results"), "--html", str(root / "cli.html")])
        timings["end-to-end CLI"] = time.perf_counter() - start
        regressions = sum(t.classification == "regression" for t in trends)
        injected = len(range(0, args.tests, 50)) * args.metrics
        sys.stdout.write(
            f"{count} records, {len(frame)} samples, {len(trends)} series, {args.runs} runs; "
            f"{regressions} regressions flagged (injected: {injected}); "
            f"exit {status}; HTML {len(page) / 1e6:.1f} MB\n"
            + "".join(f"  {name:<16} {seconds:6.2f} s\n" for name, seconds in timings.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
