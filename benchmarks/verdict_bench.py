"""The instrument's own figures: false alarms on A/A pairs, detection of real slowdowns on A/B
pairs, and the minimum detectable effect (MDE), per case, at CI and at nightly settings.

    python -m benchmarks.verdict_bench collect ssl_proxy --settings ci --pairs 20 \\
        --slowdown cpu:0.55 --out results/bench/verdict.jsonl
    python -m benchmarks.verdict_bench analyze results/bench/verdict.jsonl [--pairing all]
    python -m benchmarks.verdict_bench placement --runs 8 --out results/bench/placement.jsonl

``collect`` runs the case's test under robot again and again on the local 3node testbed,
alternating an unslowed run (A) with a slowed one (B, each ``--slowdown`` in turn; see
:mod:`benchmarks.verdict_runs`) and appends every record to ``--out`` (so a session can be
resumed or extended). ``analyze`` judges, with the same verdict the trend tool gives
(:func:`libraries.results.verdict.ab_verdict`):

* A/A pairs: each A run against the next A run (a false alarm is any regression or
  progression);
* A/B pairs: each B run against the A run before it (a detection is a regression); the true
  slowdown of a level is the Hodges-Lehmann change of its B runs' medians against all A runs'
  medians, with its interval;
* MDE: the smallest slowdown detected in >= 90 % of pairs when the later run of every A/A
  pair is slowed by it synthetically (its trials scaled), on a grid of 1 % steps.

The run-to-run CV that widens each verdict's interval comes from the A runs not in the pair,
as a nightly's history would give it.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from benchmarks.verdict_runs import CASES, run_once
from libraries.results.inference import change_interval
from libraries.results.verdict import ab_verdict, run_to_run_cv

SETTINGS = {
    "ci": {"trials": 5, "duration": 2, "warmup": 1, "max_trials": 5},
    "nightly": {"trials": 5, "duration": 30, "warmup": 5, "max_trials": 5},
}
DETECTION = 0.9


def collect(case_name: str, settings: str, pairs: int, slowdowns: list[str], out: Path,
            topology: str, label: str = "") -> None:
    """Append ``pairs`` rounds of A (unslowed) and each slowdown's B run to ``out``."""
    case = CASES[case_name]
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        criteria = Path(scratch) / "criteria.yaml"
        criteria.write_text("version: 1\ncriteria: []\n")  # judged here, not by criteria
        runs = Path(scratch) / "runs"
        done = sum(1 for _ in _read(out)) if out.is_file() else 0
        for index in range(pairs):
            for slowdown in [None, *slowdowns]:
                name = f"r{done:05d}"
                done += 1
                record = run_once(case, {**SETTINGS[settings], "topology": topology},
                                  runs / name, slowdown, criteria)
                record["bench"].update({"case": case_name, "round": index,
                                        "settings": f"{settings}/{label}" if label
                                        else settings})
                with out.open("a") as stream:
                    stream.write(json.dumps(record) + "\n")
                values = {m: record["metrics"][m]["value"] for m in case.metrics}
                print(f"{case_name} {settings} round {index + 1}/{pairs} "
                      f"{slowdown or 'A'}: {values} {record['bench']['applied']}",
                      flush=True)


def _read(path: Path) -> Iterable[dict[str, Any]]:
    with path.open() as stream:
        for line in stream:
            if line.strip():
                yield json.loads(line)


def _trials(record: dict[str, Any], metric: str) -> list[float]:
    return record["metrics"][metric]["trials"]


def _medians(records: list[dict[str, Any]], metric: str) -> list[float]:
    return [record["metrics"][metric]["value"] for record in records]


def _noise(history: list[dict[str, Any]], metric: str) -> float | None:
    return run_to_run_cv(_medians(history, metric))


def _judge(a: dict[str, Any], b: dict[str, Any], metric: str, history: list[dict[str, Any]],
           scale: float = 1.0) -> str:
    direction = a["metrics"][metric]["direction"]
    later = [v * scale for v in _trials(b, metric)]
    return ab_verdict(_trials(a, metric), later, direction,
                      noise=_noise(history, metric)).verdict


def analyse(records: list[dict[str, Any]], pairing: str = "next") -> list[dict[str, Any]]:
    """One row per (case, settings, metric): A/A false alarms, per slowdown its true size
    and detection rate, and the MDE. ``pairing`` ``next``: each A run with the next A run, each
    B run with the A run before it (independent pairs); ``all``: every two A runs and every
    (A, B) (more pairs from few long runs, not independent: the rates are estimates over the
    runs' combinations)."""
    rows = []
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for record in records:
        groups.setdefault((record["bench"]["case"], record["bench"]["settings"]),
                          []).append(record)
    for (case_name, settings), group in sorted(groups.items()):
        a_runs = [r for r in group if not r["bench"]["slowdown"]]
        levels = sorted({r["bench"]["slowdown"] for r in group if r["bench"]["slowdown"]})
        for metric in CASES[case_name].metrics:
            rows.append(_row(case_name, settings, metric, group, a_runs, levels, pairing))
    return rows


def _row(case_name: str, settings: str, metric: str, group: list[dict[str, Any]],
         a_runs: list[dict[str, Any]], levels: list[str], pairing: str) -> dict[str, Any]:
    pairs = list(itertools.combinations(a_runs, 2) if pairing == "all"
                 else itertools.pairwise(a_runs))
    others = [[r for r in a_runs if r is not x and r is not y] for x, y in pairs]
    verdicts = [_judge(x, y, metric, h) for (x, y), h in zip(pairs, others, strict=True)]
    row: dict[str, Any] = {
        "case": case_name, "settings": settings, "metric": metric, "a_runs": len(a_runs),
        "aa_pairs": len(pairs),
        "false_alarms": sum(v in ("regression", "progression") for v in verdicts),
        "aa_no_change": sum(v == "no change" for v in verdicts),
        "aa_inconclusive": sum(v == "inconclusive" for v in verdicts),
        "within_cv": statistics.median(r["metrics"][metric]["cv"] or 0.0 for r in a_runs)
        if a_runs else None,
        "run_cv": run_to_run_cv(_medians(a_runs, metric)),
        "levels": [],
    }
    for level in levels:
        detected = total = 0
        b_medians = []
        for index, record in enumerate(group):
            if record["bench"]["slowdown"] != level:
                continue
            if pairing == "all":
                befores = a_runs
            else:
                before = next((r for r in reversed(group[:index])
                               if not r["bench"]["slowdown"]), None)
                befores = [] if before is None else [before]
            for before in befores:
                history = [r for r in a_runs if r is not before]
                total += 1
                detected += _judge(before, record, metric, history) == "regression"
            b_medians.append(record["metrics"][metric]["value"])
        true = change_interval(_medians(a_runs, metric), b_medians) if b_medians else None
        row["levels"].append({
            "slowdown": level, "pairs": total, "detected": detected,
            "true_pct": true.pct if true else None,
            "true_interval": (true.low_pct, true.high_pct) if true else None})
    row["mde_pct"] = _mde(pairs, others, metric)
    return row


def _mde(pairs: list[tuple[dict[str, Any], dict[str, Any]]], others: list[list[dict]],
         metric: str) -> float | None:
    if not pairs:
        return None
    direction = pairs[0][0]["metrics"][metric]["direction"]
    for step in range(1, 60):
        effect = step / 100.0
        scale = 1.0 - effect if direction != "lower_is_better" else 1.0 + effect
        hits = sum(_judge(x, y, metric, h, scale) == "regression"
                   for (x, y), h in zip(pairs, others, strict=True))
        if hits >= DETECTION * len(pairs):
            return float(step)
    return None


def table(rows: list[dict[str, Any]]) -> str:
    """The markdown table of :func:`analyse`'s rows."""
    lines = ["| case | settings | metric | A runs | trial CV | run-to-run CV | A/A false "
             "alarms | slowdown: true change [interval], detected | MDE |",
             "|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        levels = "; ".join(
            f"{lv['slowdown']}: {lv['true_pct']:+.1f}% [{lv['true_interval'][0]:+.1f}, "
            f"{lv['true_interval'][1]:+.1f}], {lv['detected']}/{lv['pairs']}"
            if lv["true_interval"] and lv["true_interval"][0] is not None
            else f"{lv['slowdown']}: {lv['detected']}/{lv['pairs']}"
            for lv in row["levels"]) or "-"
        run_cv = "-" if row["run_cv"] is None else f"{row['run_cv']:.1%}"
        within = "-" if row["within_cv"] is None else f"{row['within_cv']:.1%}"
        mde = "-" if row["mde_pct"] is None else f"{row['mde_pct']:.0f}%"
        lines.append(f"| {row['case']} | {row['settings']} | {row['metric']} | {row['a_runs']}"
                     f" | {within} | {run_cv} | {row['false_alarms']}/{row['aa_pairs']} "
                     f"({row['aa_inconclusive']} inconclusive) | {levels} | {mde} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """``collect``, ``analyze`` (see the module docstring)."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.verdict_bench")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("collect")
    run.add_argument("case", choices=sorted(CASES))
    run.add_argument("--settings", choices=sorted(SETTINGS), default="ci")
    run.add_argument("--pairs", type=int, default=20)
    run.add_argument("--slowdown", action="append", default=[])
    run.add_argument("--topology", default="3node")
    run.add_argument("--out", type=Path, required=True)
    run.add_argument("--label", default="", help="kept with the settings (e.g. a placement)")
    report = sub.add_parser("analyze")
    report.add_argument("files", nargs="+", type=Path)
    report.add_argument("--json", action="store_true")
    report.add_argument("--pairing", choices=("next", "all"), default="next",
                        help="next: independent consecutive pairs; all: every combination")
    report.add_argument("--exclude", action="append", default=[], metavar="RUN_ID",
                        help="leave out a run (e.g. one that shared the machine with other "
                             "work); repeatable")
    args = parser.parse_args(argv)
    if args.command == "collect":
        collect(args.case, args.settings, args.pairs, args.slowdown, args.out, args.topology,
                args.label)
        return 0
    records = [record for path in args.files for record in _read(path)
               if record["run_id"] not in args.exclude]
    rows = analyse(records, args.pairing)
    sys.stdout.write(json.dumps(rows, indent=2) + "\n" if args.json else table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
