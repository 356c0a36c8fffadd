"""The nightly against a pinned reference, checked as an instrument (issue 37): real nightly
sequences with a slowdown planted from night k on, then detection and false-alarm rates and the
smallest change caught from many sequences resampled from the recorded nights.

    python -m benchmarks.nightly_bench run --nights 6 --slow-from 4 --out /tmp/seq1
    python -m benchmarks.nightly_bench run --nights 1 --plain --out /tmp/plain   # no reference
    python -m benchmarks.nightly_bench run --duet --max-rounds 0 --nights 6 --slow-from 4 \
        --out /tmp/duet1       # both sides at once (libraries.nightly --duet), A/B defaults
    python -m benchmarks.nightly_bench show /tmp/seq1 /tmp/seq2
    python -m benchmarks.nightly_bench resample --case ssl_proxy --aa a.jsonl ... \\
        --slowed s.jsonl ...

``run``: each night is one ``python -m libraries.nightly --reference`` run of
``1kb-10c-kernel-ssl-proxy`` and ``1s-kernel-tcp-term`` (``AB_MAX_ROUNDS`` 30, no profile, no
floors) into one results folder and history, as a lab would run it night after night. The
reference is the Debian nginx and iperf3 reached through symlinks (so each switch restarts
them, as a real reference build would be); tonight's build is the topology (``3node`` with its
DUT's nginx and iperf3 replaced from night ``--slow-from`` on by the A/B benchmark's burner
wrappers, :func:`benchmarks.slowdowns.burner`: a 3 % (ssl_proxy) and 3.5 % (tcp_term) busy share
of the DUT's core, the known slowdowns of benchmarks/README.md). After each night the gate's
classification of every ratio series is read from the history and written to
``nights.jsonl``, with the night's exit code and minutes; each night's records also go to
``<case>-aa.jsonl`` / ``<case>-slowed.jsonl`` for ``resample``.

``run --duet``: the nights run ``libraries.nightly --duet`` (the reference and tonight at once,
each on a namespace testbed of its own). A burner on the shared core would slow both sides, so
tonight's slowed tools are wrappers that slow tonight's testbed alone (:data:`DUET_SLOWED`).
``--max-rounds 0`` keeps the A/B defaults.

``resample``: sequences of nights drawn from recorded A/B records (the ``run`` files above or
``benchmarks.ab_bench collect`` files: the same measurement, side b / side a per round): A/A
nights first, slowed nights from night k on; each prefix judged by the gate's own rule
(:mod:`libraries.trend.ratio`). Detection: flagged on night k or k+1. False alarms: flagged
A/A nights over all judged A/A nights (all-A/A sequences). The smallest change caught: the A/A
nights' ratios shifted down from night k by 2 to 20 %: the share flagged within 2 nights at each,
and the smallest that reaches 90 %.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from benchmarks.ab_bench import CASES
from benchmarks.slowdowns import bench_cgroups_removed, burner, weighted, windowed
from libraries.history.store import Store
from libraries.trend.gate import analyse_store
from libraries.trend.ratio import find_steps, newest_step

REPO = Path(__file__).resolve().parent.parent
BURN_SHARES = {"ssl_proxy": 0.03, "tcp_term": 0.035}
"""Tonight's burner share of the DUT's core per case in a sequential night (measured -3.41 %
and -5.32 %, benchmarks/README.md)."""
DUET_SLOWED = {"ssl_proxy": ("dut", "weight", 0.97), "tcp_term": ("tg", "window", 163840)}
"""Per case, tonight's slowed tool in a duet night: the node, the wrapper and its value. The
DUT's nginx at 0.97 of the CPU weight (:func:`benchmarks.slowdowns.weighted`); the load
generator's iperf3 client asking for a smaller window (:func:`benchmarks.slowdowns.windowed`):
iperf3 hardly slows at a lower CPU weight (server at 0.85: -1.0 %; client at 0.9: -0.9 %).
The measured truths are in benchmarks/README.md (``ab_bench collect --duet --truth``)."""
TOOL_LINES = {"dut": ("    tools: {nginx: nginx, iperf3: iperf3,", ("nginx", "iperf3")),
              "tg": ("    tools: {wrk: wrk, iperf3: iperf3,", ("wrk", "iperf3"))}
"""Per node, the start of its tools line in topologies/3node.yaml that a night's topology
rewrites, and the tools that start names."""


def prepare(out: Path, duet: bool = False) -> tuple[Path, Path, Path]:
    """The reference file, tonight's normal topology and its slowed twin (DUT burners, or for
    a ``duet`` the wrappers of :data:`DUET_SLOWED`), written in ``out``."""
    tools = out / "bin"
    tools.mkdir(parents=True, exist_ok=True)
    reference: dict[str, dict[str, str]] = {"dut": {}, "tg": {}}
    normal = {node: {t: t for t in names} for node, (_, names) in TOOL_LINES.items()}
    slowed = {node: dict(names) for node, names in normal.items()}
    for case, (_suite, _test, tool, binary, _metric) in CASES.items():
        node, kind, value = DUET_SLOWED[case] if duet else ("dut", "burn", BURN_SHARES[case])
        link = tools / f"{tool}-ref"
        if not link.exists():
            link.symlink_to(binary)
        for place in sorted({"dut", node}):
            reference[place][tool] = str(link)
        wrapper = {"weight": weighted, "window": windowed, "burn": burner}[kind]
        slowed[node][tool] = str(wrapper(tools, tool, binary, value))
    ref = out / "reference.yaml"
    ref.write_text("name: debian-ref\ntools:\n" + "".join(
        f"  {node}: {{" + ", ".join(f"{t}: {p}" for t, p in paths.items()) + "}\n"
        for node, paths in reference.items() if paths))
    text = (REPO / "topologies/3node.yaml").read_text()
    paths = []
    for name, tools_of in (("normal", normal), ("slowed", slowed)):
        night = text
        for node, (start, _names) in TOOL_LINES.items():
            if start not in night:
                raise SystemExit(f"topologies/3node.yaml: no line {start!r} to rewrite")
            night = night.replace(start, "    tools: {" + ", ".join(
                f"{t}: {p}" for t, p in tools_of[node].items()) + ",")
        path = out / f"3node-{name}.yaml"
        path.write_text(night)
        paths.append(path)
    return ref, paths[0], paths[1]


def ratio_series(store: Store) -> dict[str, dict[str, Any]]:
    """The gate's view of every ratio series of ``store``: case -> classification, change,
    the newest night's ratio and interval."""
    found = {}
    for trend in analyse_store(store, tests=()).trends:
        if not trend.metric.startswith("ab_"):
            continue
        row = trend.samples.iloc[-1]
        case = next((c for c, t in CASES.items() if t[1] in trend.test_id), trend.test_id)
        found[case] = {"series": trend.test_id, "metric": trend.metric,
                       "classification": trend.classification, "change_pct": trend.change_pct,
                       "nights": trend.size, "ratio": float(row["value"]),
                       "low": float(row["ci_low"]), "high": float(row["ci_high"])}
    return found


def run(out: Path, nights: int, slow_from: int, max_rounds: int, plain: bool,
        duet: bool = False) -> None:
    """Run ``nights`` nightly runs (see the module) into ``out``."""
    ref, normal, slowed = prepare(out, duet)
    rounds = ("-v", f"AB_MAX_ROUNDS:{max_rounds}") if max_rounds else ()
    results = out / "results"
    for night in range(1, nights + 1):
        slow = slow_from > 0 and night >= slow_from
        command = [sys.executable, "-m", "libraries.nightly", "--results", str(results),
                   "--topology", str(slowed if slow else normal), "--suites",
                   *(str(REPO / t[0]) for t in CASES.values()),
                   *([] if plain else ["--reference", str(ref)]),
                   *(["--duet"] if duet else []), "--",
                   *(x for t in CASES.values() for x in ("-t", t[1])), "-v", "PROFILE:off",
                   *rounds, "-v",
                   f"CRITERIA:{REPO / 'utest/fixtures/criteria/none.yaml'}",
                   "--console", "none"]
        started = time.monotonic()
        done = subprocess.run(command, cwd=REPO, timeout=3600, check=False,
                              capture_output=True, text=True)
        minutes = (time.monotonic() - started) / 60
        if duet:
            bench_cgroups_removed()
        newest = max(results.glob("2*/"), key=lambda p: p.name)
        written = newest / "a" / "records.jsonl" if duet else newest / "records.jsonl"
        records = [json.loads(line) for line in written.read_text().splitlines()
                   if line.strip()] if written.is_file() else []
        for record in records:
            case = record["case"]
            with (out / f"{case}-{'slowed' if slow else 'aa'}.jsonl").open("a") as stream:
                stream.write(json.dumps(record) + "\n")
        entry = {"night": night, "slowed": slow, "exit": done.returncode,
                 "minutes": round(minutes, 2), "run": newest.name, "records": len(records),
                 "gate": ratio_series(Store(results / "history")) if not plain else {}}
        with (out / "nights.jsonl").open("a") as stream:
            stream.write(json.dumps(entry) + "\n")
        gate = "; ".join(f"{case} {g['ratio']:.4f} [{g['low']:.4f}, {g['high']:.4f}] "
                         f"{g['classification']}" for case, g in entry["gate"].items())
        print(f"night {night}{' (slowed)' if slow else ''}: exit {done.returncode}, "
              f"{minutes:.1f} min; {gate}", flush=True)
        if done.returncode >= 4:
            print(done.stderr[-3000:], flush=True)


def show(folders: list[Path]) -> str:
    """A markdown table of the real sequences' nights."""
    lines = ["| sequence | night | side b | ssl_proxy today/reference [interval] | gate | "
             "tcp_term today/reference [interval] | gate | exit | minutes |",
             "|---|---|---|---|---|---|---|---|---|"]
    for folder in folders:
        for line in (folder / "nights.jsonl").read_text().splitlines():
            night = json.loads(line)
            cells = []
            for case in CASES:
                g = night["gate"].get(case)
                cells += ["-", "-"] if g is None else [
                    f"{(g['ratio'] - 1) * 100:+.2f} % [{(g['low'] - 1) * 100:+.1f}, "
                    f"{(g['high'] - 1) * 100:+.1f}]", g["classification"]]
            lines.append(f"| {folder.name} | {night['night']} | "
                         f"{'slowed' if night['slowed'] else 'as reference'} | "
                         + " | ".join(cells) + f" | {night['exit']} | {night['minutes']} |")
    return "\n".join(lines) + "\n"


def _nights(paths: list[Path]) -> list[dict[str, Any]]:
    """Each A/B record of ``paths`` as a night: its per-round ratios and direction."""
    found = []
    for path in paths:
        for line in path.read_text().splitlines():
            if not line.strip():
                continue
            record = json.loads(line)
            if "ab" not in record:
                continue
            metric = next(m for m in record["ab"]["metrics"].values() if not m.get("cost"))
            found.append({"ratios": np.asarray(metric["ratios"], float),
                          "direction": metric["direction"]})
    return found


def _frame(nights: list[dict[str, Any]], shifts: list[float]) -> pd.DataFrame:
    rows = []
    for night, shift in zip(nights, shifts, strict=True):
        ratios = night["ratios"] * (1.0 + shift)
        rows.append({"value": float(np.median(ratios)),
                     "stdev": float(np.std(ratios, ddof=1) / np.sqrt(len(ratios))),
                     "trial_values": ratios.tolist()})
    return pd.DataFrame(rows)


def flags(nights: list[dict[str, Any]], shifts: list[float]) -> list[str]:
    """The gate's classification after each night of a sequence (from its third)."""
    frame = _frame(nights, shifts)
    direction = nights[0]["direction"]
    found = []
    for count in range(1, len(frame) + 1):
        step = newest_step(find_steps(frame.iloc[:count], direction), count)
        found.append("normal" if step is None else step.result.verdict)
    return found


def rates(aa: list[dict[str, Any]], slowed: list[dict[str, Any]], draws: int,
          rng: np.random.Generator, length: int = 8) -> dict[str, Any]:
    """Detection within 2 nights with the slowed nights from a random night k (3..6), and
    false alarms per judged A/A night (all-A/A sequences of ``length`` nights)."""
    detected = 0
    for _ in range(draws):
        k = int(rng.integers(3, 7))
        picked = [aa[i] for i in rng.integers(len(aa), size=k - 1)] + \
            [slowed[i] for i in rng.integers(len(slowed), size=2)]
        detected += "regression" in flags(picked, [0.0] * len(picked))[k - 1:]
    alarms = judged = 0
    for _ in range(draws):
        picked = [aa[i] for i in rng.integers(len(aa), size=length)]
        found = flags(picked, [0.0] * length)[2:]
        judged += len(found)
        alarms += sum(f != "normal" for f in found)
    return {"detected": detected / draws, "false_alarms": alarms / judged, "draws": draws}


CHANGES = (0.02, 0.03, 0.05, 0.08, 0.10, 0.15, 0.20)
"""Slowdowns planted in resampled A/A nights (the detection curve)."""


def detection(aa: list[dict[str, Any]], change: float, draws: int,
              rng: np.random.Generator) -> float:
    """The share of sequences whose A/A nights, shifted down by ``change`` from a random night
    k (3..6), are flagged on night k or k + 1."""
    hits = 0
    for _ in range(draws):
        k = int(rng.integers(3, 7))
        picked = [aa[i] for i in rng.integers(len(aa), size=k + 1)]
        shifts = [0.0] * (k - 1) + [-change, -change]
        hits += "regression" in flags(picked, shifts)[k - 1:]
    return hits / draws


def smallest_change(aa: list[dict[str, Any]], draws: int, rng: np.random.Generator
                    ) -> tuple[float | None, dict[float, float]]:
    """The smallest of :data:`CHANGES` flagged within 2 nights in 90 % of sequences (None: none
    of them), and the detection at each."""
    curve = {change: detection(aa, change, draws, rng) for change in CHANGES}
    return next((c for c, share in curve.items() if share >= 0.9), None), curve


def main(argv: list[str] | None = None) -> int:
    """Run, show or resample (see the module docstring)."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.nightly_bench")
    commands = parser.add_subparsers(dest="command", required=True)
    go = commands.add_parser("run")
    go.add_argument("--out", type=Path, required=True)
    go.add_argument("--nights", type=int, default=6)
    go.add_argument("--slow-from", type=int, default=0, help="first slowed night (0: none)")
    go.add_argument("--max-rounds", type=int, default=30, help="0: the A/B default")
    go.add_argument("--plain", action="store_true", help="no reference (today's nightly)")
    go.add_argument("--duet", action="store_true", help="the reference and tonight at once")
    table = commands.add_parser("show")
    table.add_argument("folders", nargs="+", type=Path)
    sample = commands.add_parser("resample")
    sample.add_argument("--case", required=True)
    sample.add_argument("--aa", nargs="+", type=Path, required=True)
    sample.add_argument("--slowed", nargs="+", type=Path, required=True)
    sample.add_argument("--draws", type=int, default=400)
    sample.add_argument("--seed", type=int, default=37)
    args = parser.parse_args(argv)
    if args.command == "run":
        if args.duet and args.plain:
            parser.error("--duet needs a reference: not with --plain")
        run(args.out, args.nights, args.slow_from, args.max_rounds, args.plain, args.duet)
    elif args.command == "show":
        sys.stdout.write(show(args.folders))
    else:
        rng = np.random.default_rng(args.seed)
        aa, slowed = _nights(args.aa), _nights(args.slowed)
        found = rates(aa, slowed, args.draws, rng)
        smallest, curve = smallest_change(aa, args.draws // 2, rng)
        sys.stdout.write(
            f"| {args.case} | {len(aa)} | {len(slowed)} | {found['detected']:.1%} | "
            f"{found['false_alarms']:.1%} | "
            f"{'none up to 20 %' if smallest is None else f'{smallest:.0%}'} | "
            + ", ".join(f"{c:.0%}: {share:.0%}" for c, share in curve.items()) + " |\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
