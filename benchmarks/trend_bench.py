"""Benchmark: trend dashboard and gate from the columnar history, 100k to 10M samples.

    python -m benchmarks.trend_bench [--size 100k 1m 10m] [--real RUNS] [--keep DIR]

Per size (``tests x runs`` series of one metric; a sample = one metric of one test in one
run): 100k = 400 x 250, 1m = 2,000 x 500, 10m = 2,000 x 5,000. The history is written
straight into a store (Parquet, the ingest's own writer: JSON lines of 10M samples would be
5 GB), except for 100k, which is written as ``records.jsonl`` files and ingested like old
results directories. Then one more night is written as ``records.jsonl`` and timed:

* ``JSON load/classify/html`` (100k only): the path of earlier versions, every records file
  parsed and every series searched on every run, for comparison;
* ``cold ingest``: old results folders stored (100k only: the others are written as Parquet);
* ``cold search``: the first trend run over the history (the change-detection cache is built: every
  series searched in full; once per store);
* ``ingest night``: storing the new night (JSON lines -> Parquet), as the nightly runner does;
* ``scan results``: ``python -m libraries.report RESULTS_DIR`` looking for runs not yet stored
  (every records file listed; only new ones are read);
* ``classify``: the cache brought up to the store (mapped, the new night read, every series
  extended by its new sample, a new generation written);
* ``load``: the current cache mapped, the newest samples' rows read, every series judged;
* ``html``: the dashboard (page + side files);
* ``end to end``: ``python -m libraries.report --store S --html OUT`` in a fresh process, the
  nightly's gate, with its peak resident memory.

``--real RUNS`` does the same with real records: RUNS copies of a real full 3node run
(``utest/fixtures/runs/full-3node``: 18 records of ~17 KB with telemetry), ingested from JSON.
The machine is shared and small (2 cores): repeat and take medians (``--repeat``). With
``--keep DIR`` of an earlier run, a size whose history exists there only times new nights.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa

from libraries.history.ingest import ingest
from libraries.history.load import load_records
from libraries.history.store import SCHEMA, Store
from libraries.report.dashboard import render_dashboard, write_dashboard
from libraries.trend.analysis import analyse
from libraries.trend.gate import analyse_store
from libraries.trend.series import refresh

T0 = datetime(2012, 1, 1, 2, 0, tzinfo=UTC)
SIZES = {"100k": (400, 250), "1m": (2000, 500), "10m": (2000, 5000)}
REAL_RUN = Path(__file__).resolve().parent.parent / "utest" / "fixtures" / "runs" / "full-3node"


def run_id(run: int) -> str:
    return f"{T0 + timedelta(days=run):%Y%m%d-%H%M%S}-{run:04x}"


def night(levels: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One night's 3 trials per test: 5 % run-to-run noise, 1 % within a run."""
    run_level = rng.normal(levels, levels * 0.05)
    return run_level[:, None] + rng.normal(0, 1, (len(levels), 3)) * levels[:, None] * 0.01


def write_store_run(store: Store, tests: int, run: int, trials: np.ndarray) -> None:
    when = T0 + timedelta(days=run)
    rid = run_id(run)
    ids = [f"lab-{'ab'[t % 2]}/tcp_term/test-{t:04d}" for t in range(tests)]
    value = np.median(trials, axis=1)
    columns = {
        "test_id": ids, "metric": ["throughput"] * tests, "unit": ["bit/s"] * tests,
        "direction": ["higher_is_better"] * tests, "value": value, "low": trials.min(1),
        "high": trials.max(1), "stdev": trials.std(1, ddof=1),
        "cv": trials.std(1, ddof=1) / trials.mean(1), "trials": np.full(tests, 3, np.int32),
        "run_id": [rid] * tests,
        "start_time": pa.array([when + timedelta(seconds=t) for t in range(tests)],
                               pa.timestamp("us", tz="UTC")),
        "versions": ["dut: kernel 6.1.0, nginx 1.22.1"] * tests, "revision": ["0123abcd"] * tests,
        "verdict": ["no_criteria"] * tests, "case": ["tcp_term"] * tests,
        "stack": ["kernel"] * tests, "topology": [i.split("/")[0] for i in ids],
        "log": [f"/results/{rid}/log.html#s1-s1-t{t}" for t in range(tests)],
        "file": [f"/results/{rid}/records.jsonl"] * tests,
        "line": np.arange(1, tests + 1, dtype=np.int32), "lab": [i.split("/")[0] for i in ids],
        "test_key": [i.split("/", 1)[1] for i in ids], "trial_values": list(trials),
        "ci_low": pa.nulls(tests, pa.float64()), "ci_high": pa.nulls(tests, pa.float64()),
        "ci_level": pa.nulls(tests, pa.float64()), "ci_method": pa.nulls(tests, pa.string()),
        "schema_version": np.full(tests, 2, np.int16), "parameters": ["{}"] * tests,
    }
    store.write_run(rid, f"{when:%Y-%m}", pa.table(columns, schema=SCHEMA), 1, [])


def write_json_run(results: Path, tests: int, run: int, trials: np.ndarray) -> None:
    when = T0 + timedelta(days=run)
    rid = run_id(run)
    lines = []
    for t in range(tests):
        values = trials[t].tolist()
        mean = statistics.fmean(values)
        stdev = statistics.stdev(values)
        lab = f"lab-{'ab'[t % 2]}"
        lines.append(json.dumps({
            "schema_version": 1, "run_id": rid, "test_id": f"{lab}/tcp_term/test-{t:04d}",
            "suite": "Tcp Term", "name": f"test-{t:04d}", "tags": ["TCP_TERM"],
            "topology": lab, "stack": "kernel", "case": "tcp_term", "parameters": {},
            "start_time": (when + timedelta(seconds=t)).isoformat(), "duration_s": 10.0,
            "metrics": {"throughput": {
                "unit": "bit/s", "value": statistics.median(values), "trials": values,
                "min": min(values), "max": max(values), "mean": mean, "stdev": stdev,
                "cv": stdev / mean, "direction": "higher_is_better"}},
            "criteria": [], "verdict": "no_criteria",
            "versions": {"dut": {"kernel": "6.1.0", "nginx": "1.22.1"}}}))
    (results / rid).mkdir(parents=True)
    (results / rid / "records.jsonl").write_text("\n".join(lines) + "\n")


def write_real_run(results: Path, run: int, rng: random.Random) -> None:
    """A copy of the real run with a new run id, dates moved and every figure scaled a bit."""
    rid = run_id(run)
    shift = timedelta(days=run)
    factor = rng.gauss(1.0, 0.03)
    lines = []
    for line in (REAL_RUN / "records.jsonl").read_text().splitlines():
        record = json.loads(line)
        record["run_id"] = rid
        start = datetime.fromisoformat(record["start_time"]) - datetime(2026, 1, 1, tzinfo=UTC)
        record["start_time"] = (T0 + shift + start % timedelta(days=1)).isoformat()
        for metric in record["metrics"].values():
            for key in ("value", "min", "max", "mean", "stdev"):
                if key in metric:
                    metric[key] *= factor
            metric["trials"] = [v * factor for v in metric["trials"]]
        lines.append(json.dumps(record))
    (results / rid).mkdir(parents=True)
    (results / rid / "records.jsonl").write_text("\n".join(lines) + "\n")
    shutil.copy(REAL_RUN / "tests.jsonl", results / rid / "tests.jsonl")


def end_to_end(store: Store, html: Path) -> tuple[float, float, int]:
    """Seconds, peak RSS (MiB) and exit status of the gate + dashboard in a new process."""
    start = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-m", "libraries.report", "--store",
                                str(store.root), "--html", str(html)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    elapsed = time.perf_counter() - start
    process.returncode = os.waitstatus_to_exitcode(status)
    return elapsed, usage.ru_maxrss / 1024, process.returncode


def measure_night(store: Store, results: Path, work: Path, add_night) -> dict[str, float]:
    """Add one night as JSON lines, then time every phase of tonight's gate + dashboard."""
    timings: dict[str, float] = {}
    add_night()
    newest = max(p for p in results.iterdir() if p.is_dir())
    start = time.perf_counter()
    report = ingest([newest], store)  # as the nightly runner stores its run
    timings["ingest night"] = time.perf_counter() - start
    assert report.stored and not report.errors, report
    start = time.perf_counter()
    ingest([results], store)  # as python -m libraries.report results/ looks for new runs
    timings["scan results"] = time.perf_counter() - start
    start = time.perf_counter()
    _, update = refresh(store)  # map the cache, read the new night, extend, write
    timings["classify"] = time.perf_counter() - start
    assert update.added == 1, update
    start = time.perf_counter()
    result = analyse_store(store)  # cache current: map it, read the newest rows, judge
    timings["load"] = time.perf_counter() - start
    start = time.perf_counter()
    dashboard = write_dashboard(result.trends, work / "trend.html", runs=result.runs)
    timings["html"] = time.perf_counter() - start
    timings["page MB"] = len(dashboard.page.encode()) / 1e6
    timings["side MB"] = sum(len(t.encode()) for t in dashboard.files.values()) / 1e6
    timings["regressions"] = sum(t.classification == "regression" for t in result.trends)
    add_night()
    ingest([results], store)
    seconds, rss, status = end_to_end(store, work / "cli.html")
    timings["end to end"] = seconds
    timings["peak RSS MiB"] = rss
    timings["exit"] = status
    return timings


def bench_size(name: str, work: Path, repeat: int) -> dict[str, float]:
    tests, runs = SIZES[name]
    rng = np.random.default_rng(1)
    levels = rng.uniform(1e3, 1e10, tests)
    store = Store(work / "history")
    results = work / "results"
    if store.runs():  # --keep of an earlier run: time new nights on that history
        return _more_nights(store, results, work, tests, levels, rng, repeat)
    results.mkdir(parents=True)
    start = time.perf_counter()
    for run in range(runs):
        trials = night(levels, rng)
        if name == "100k":
            write_json_run(results, tests, run, trials)
        else:
            write_store_run(store, tests, run, trials)
    generated = time.perf_counter() - start
    before = {}
    if name == "100k":  # the JSON-only path of earlier versions, for comparison
        start = time.perf_counter()
        frame = load_records([results])
        before["JSON load"] = time.perf_counter() - start
        start = time.perf_counter()
        trends = analyse(frame)
        before["JSON classify"] = time.perf_counter() - start
        start = time.perf_counter()
        (work / "json.html").write_text(render_dashboard(trends))
        before["JSON html"] = time.perf_counter() - start
        del frame, trends
    start = time.perf_counter()
    if name == "100k":
        ingest([results], store)
    ingested = time.perf_counter() - start
    start = time.perf_counter()
    analyse_store(store)
    cold = time.perf_counter() - start
    counter = [runs]

    def add_night() -> None:  # every 50th test drops 20 % from now on
        step = np.where(np.arange(tests) % 50 == 0, 0.8, 1.0)
        write_json_run(results, tests, counter[0], night(levels * step, rng))
        counter[0] += 1
    nights = [measure_night(store, results, work, add_night) for _ in range(repeat)]
    summary = {key: statistics.median(n[key] for n in nights) for key in nights[0]}
    return {"samples": tests * runs, "generate": generated, **before, "cold ingest": ingested,
            "cold search": cold, **summary}


def _more_nights(store: Store, results: Path, work: Path, tests: int, levels: np.ndarray,
                 rng: np.random.Generator, repeat: int) -> dict[str, float]:
    counter = [len(store.runs())]

    def add_night() -> None:
        step = np.where(np.arange(tests) % 50 == 0, 0.8, 1.0)
        write_json_run(results, tests, counter[0], night(levels * step, rng))
        counter[0] += 1
    nights = [measure_night(store, results, work, add_night) for _ in range(repeat)]
    summary = {key: statistics.median(n[key] for n in nights) for key in nights[0]}
    return {"samples": tests * len(store.runs()), **summary}


def bench_real(runs: int, work: Path, repeat: int) -> dict[str, float]:
    rng = random.Random(2)  # noqa: S311 (test data)
    results = work / "results"
    results.mkdir(parents=True)
    for run in range(runs):
        write_real_run(results, run, rng)
    size = sum(p.stat().st_size for p in results.rglob("records.jsonl"))
    store = Store(work / "history")
    start = time.perf_counter()
    ingest([results], store)
    ingested = time.perf_counter() - start
    start = time.perf_counter()
    analyse_store(store)
    cold = time.perf_counter() - start
    counter = [runs]

    def add_night() -> None:
        write_real_run(results, counter[0], rng)
        counter[0] += 1
    nights = [measure_night(store, results, work, add_night) for _ in range(repeat)]
    summary = {key: statistics.median(n[key] for n in nights) for key in nights[0]}
    samples = len(store.frame("run_id = ?", [run_id(0)])) * runs
    return {"samples": samples, "JSON MB": size / 1e6, "cold ingest": ingested,
            "cold search": cold, **summary}


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print one table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", nargs="*", choices=list(SIZES), default=["100k", "1m"])
    parser.add_argument("--real", type=int, default=0, metavar="RUNS")
    parser.add_argument("--repeat", type=int, default=3, help="nights timed (median)")
    parser.add_argument("--keep", type=Path, help="work here and keep the files")
    args = parser.parse_args(argv)
    rows = {}
    with tempfile.TemporaryDirectory(prefix="trend-bench-") as scratch:
        base = args.keep or Path(scratch)
        for name in args.size:
            rows[name] = bench_size(name, base / name, args.repeat)
            sys.stdout.write(f"{name}: {json.dumps(rows[name])}\n")
            sys.stdout.flush()
        if args.real:
            rows[f"real x{args.real}"] = bench_real(args.real, base / "real", args.repeat)
    keys = list(dict.fromkeys(k for row in rows.values() for k in row))
    sys.stdout.write(f"{'':<16}" + "".join(f"{name:>14}" for name in rows) + "\n")
    for key in keys:
        cells = "".join(f"{row[key]:>14.3g}" if key in row else f"{'-':>14}"
                        for row in rows.values())
        sys.stdout.write(f"{key:<16}{cells}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
