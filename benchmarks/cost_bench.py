"""Cost per request against throughput as A/B evidence (issue 61): the same A/B runs judged on
both, quiet and beside two ``nice -n 19`` burners, in sequential and duet A/B tests.

    python -m benchmarks.cost_bench --quick       # one small cell (~2 minutes): it works
    python -m benchmarks.cost_bench grid          # issue 61's grid (about 12-16 hours)
    python -m benchmarks.cost_bench grid --modes duet-burners sequential-burners --runs 10
    python -m benchmarks.cost_bench collect --side aa --runs 20 --out aa-seq.jsonl
    python -m benchmarks.cost_bench collect --side regex:12 --burners 2 --duet --runs 20 \\
        --out r12-duet-burn.jsonl
    python -m benchmarks.cost_bench collect --side regex:12 --truth --runs 2 --out truth.jsonl
    python -m benchmarks.cost_bench analyze aa-seq.jsonl r12-duet-burn.jsonl ...
    python -m benchmarks.cost_bench rates aa-seq.jsonl aa-duet-burn.jsonl   # from A/A rounds

Each run is one A/B test of ``1kb-10c-kernel-ssl-proxy`` under ``robot -v AB:<file>`` (or the
duet launcher, ``--duet``) with the suite's defaults (looks every 10 rounds up to 60, margin
1 %, budget 600 s, both throughput and the proxy's CPU per request judged at half of ALPHA
each) and no profiling trial; the comparison file is written here:

* ``aa``: side b is the same nginx reached by another path (a symlink): every switch restarts
  the proxy, as a real comparison would, and nothing else differs;
* ``regex:<n>``: side b's proxy evaluates, on every request, a ``map`` of ``n`` regular
  expressions that never match against the request's ``$request_id`` (``set`` in its server
  block): real work per request, added by nginx itself, whose size grows with ``n`` and is
  measured, not assumed (``--truth``: 60 rounds judged once). ``$request_id`` draws 16
  random bytes per request, which alone costs about 10 % here: this knob does not go below;
* ``uri-regex:<n>``: the same ``map`` and ``set`` over ``$uri`` (no random bytes), ``n``
  expressions that never match ``/1kb``: about 1.5 % for the ``map`` and ``set`` plus
  0.1 % an expression on this VM (2026-11-29);
* ``headers:<n>``: ``n`` short ``add_header`` lines in side b's server block (each response
  carries n more headers through TLS): about 0.15 % a header up to 6 on this VM, from 0,
  then a step (16 headers: +13 %): steady small work only up to about 6;
* ``split``: the issue's knob: a ``split_clients`` and a ``map`` per request (about 7.7 % of
  the proxy's CPU per request in issue 61's records).

``--test tcp-term`` runs ``aa`` on ``1s-kernel-tcp-term`` instead (iperf3 on the kernel stack:
side b is tg's iperf3 reached by a symlink; its rate is ``throughput``, its cost the iperf3
server's CPU per GB received, which leaves out the kernel's softirq work): whether cost is the
steadier metric there too. The table's rate columns are the test's rate (``rps`` unless the
side cell names another).

``--burners N`` runs N busy loops at ``nice -n 19`` beside the whole cell (a build on a shared
machine). ``analyze`` prints, per file: tests, per metric (throughput, cost) the verdicts (false
regressions in an A/A file: a regression on any metric; detections: regression), the median
change and the per-round spread (standard deviation of a test's per-round log ratios); the
same change and spread of the kernel's cost (``kernel_cost``: the DUT cores' system + softirq
time per request, recorded beside, not judged: which of the two the evidence supports), the
foreign share of the DUT's cores, the rounds and the minutes per test. ``rates`` replays A/A
rounds (signs flipped by a coin, as in ``benchmarks/ab_bench.py``) shifted by true changes of
0 to 5 % through the suite's looks at the level a two-metric test gives each metric: the share
of tests called a regression, for cost and throughput side by side, and so the smallest
change called in 90 % of tests.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.ab_bench import keep_record, sign_flips
from libraries.ab.ab_settings import declared_ab_settings
from libraries.ab.rounds import judge_at_looks
from libraries.results.plan import AbSettings

REPO = Path(__file__).resolve().parent.parent
TESTS = {"ssl-proxy": ("tests/ssl_proxy/kernel.robot", "1kb-10c-kernel-ssl-proxy"),
         "tcp-term": ("tests/tcp_term/kernel.robot", "1s-kernel-tcp-term")}
"""``--test``: the suite and test of each benchmarked case. The planted knobs are nginx's
(ssl-proxy only); an A/A test runs on either (tcp-term: iperf3 on the kernel stack, its cost
the iperf3 server's CPU per GB received, the kernel's softirq work not in it)."""
NGINX = "/usr/sbin/nginx"
IPERF3 = "/usr/bin/iperf3"
SHIFTS = (0.0, 0.01, 0.02, 0.03, 0.05)
"""True changes (b costs more, b is slower) the ``rates`` table replays."""


MAPS = {"regex": ("$request_id", '"~[g-z]{{{n}}}" m{i};', 200,
                   "the proxy evaluates a map of regular expressions per request"),
        "uri-regex": ("$uri", '"~q{{{n}}}x" u{i};', 400,
                      "the proxy tries a map of regular expressions on the URI per request")}
"""A map knob: the variable it reads, one rule (``n`` = index + 1), the most rules, its name."""


def _map_side(kind: str, count: int, side: str) -> str:
    """The comparison of a map knob ``kind`` with ``count`` never-matching expressions."""
    variable, rule, most, title = MAPS[kind]
    if not 1 <= count <= most:
        raise SystemExit(f"--side {side}: 1 to {most} regular expressions")
    rules = " ".join(rule.format(n=i + 1, i=i) for i in range(count))
    return (f"name: {title}\na: {{name: nginx}}\nb:\n"
            f"  name: {kind}-{count}\n  nginx: {{proxy: {{http: ['map {variable} "
            f"$cost_probe {{ {rules} default none; }}'], server: ['set $cost_seen "
            "$cost_probe;']}}\n")


def comparison(side: str, folder: Path, test: str = "ssl-proxy") -> Path:
    """The comparison file of ``side`` (``aa``, ``regex:<n>``, ``uri-regex:<n>``,
    ``headers:<n>``, ``split``: see the module) for ``test`` (:data:`TESTS`)."""
    kind, _, given = side.partition(":")
    if test == "tcp-term":
        if kind != "aa":
            raise SystemExit(f"--side {side} --test tcp-term: only aa (the knobs are nginx's)")
        same = folder / "iperf3-same"
        if not same.exists():
            same.symlink_to(IPERF3)
        text = (f"name: A/A via another path to {IPERF3}\naa: true\na: {{name: iperf3}}\n"
                f"b:\n  name: iperf3-symlink\n  tools: {{tg: {{iperf3: {same}}}}}\n")
    elif kind == "aa":
        same = folder / "nginx-same"
        if not same.exists():
            same.symlink_to(NGINX)
        text = (f"name: A/A via another path to {NGINX}\naa: true\na: {{name: nginx}}\n"
                f"b:\n  name: nginx-symlink\n  tools: {{dut: {{nginx: {same}}}}}\n")
    elif kind in ("regex", "uri-regex"):
        text = _map_side(kind, int(given), side)
    elif kind == "headers":
        count = int(given)
        if not 1 <= count <= 60:  # the test allows about 1 KiB of headers a response
            raise SystemExit(f"--side {side}: 1 to 60 response headers")
        lines = ", ".join(f"'add_header X-C{i} {i};'" for i in range(count))
        text = ("name: the proxy adds response headers per request\n"
                "a: {name: nginx}\nb:\n"
                f"  name: headers-{count}\n  nginx: {{proxy: {{server: ["
                f"{lines}]}}}}\n")
    elif kind == "split":
        text = ("name: the proxy adds a split_clients and a map per request\n"
                "a: {name: nginx}\nb:\n  name: split-map\n  nginx: {proxy: {http: ["
                "'split_clients \"${remote_addr}${request_id}\" $cost_half { 50% a; * b; }', "
                "'map $cost_half $cost_seen_map { a 1; default 0; }'], server: ['set "
                "$cost_seen $cost_seen_map;']}}\n")
    else:
        raise SystemExit(f"--side {side}: expected aa, regex:<n>, uri-regex:<n>, "
                         "headers:<n> or split")
    path = folder / f"cost-{side.replace(':', '-')}.yaml"
    path.write_text(text)
    return path


@contextmanager
def burners(count: int) -> Iterator[None]:
    """``count`` busy loops at ``nice -n 19`` for the duration (killed after, by their pid)."""
    started = [subprocess.Popen(["nice", "-n", "19", "sh", "-c", "while :; do :; done"],
                                start_new_session=True) for _ in range(count)]
    try:
        yield
    finally:
        for process in started:
            process.kill()
            process.wait()


def robot_command(path: Path, run_dir: Path, index: int, duet: bool, extra: list[str],
                  test: str = "ssl-proxy") -> list[str]:
    """One A/B test's command: robot with ``-v AB`` or the duet launcher."""
    suite, name = TESTS[test]
    robot = ["-v", f"RUN_ID:cost{index}", "-v", "TOPOLOGY:3node", "-v",
             f"CRITERIA:{REPO / 'utest/fixtures/criteria/none.yaml'}", "-v", "PROFILE:off",
             *extra, "--console", "none", "--log", "NONE", "--report", "NONE", "-t", name,
             suite]
    if duet:
        return [sys.executable, "-m", "libraries.ab.duet_run", str(path), "-d", str(run_dir),
                "--", *robot]
    return [sys.executable, "-m", "robot", "-d", str(run_dir), "-v", f"AB:{path}", *robot]


def collect(side: str, runs: int, out: Path, *, duet: bool = False, burn: int = 0,
            truth: bool = False, extra: list[str] | None = None, test: str = "ssl-proxy"
            ) -> list[dict[str, Any]]:
    """Append ``runs`` A/B records of ``side`` of ``test`` to ``out`` (``truth``: 60 rounds
    judged once) and return them; ``extra``: more robot variables (``-v AB_MAX_ROUNDS:10``)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix="cost-bench-", dir="/tmp"))
    path = comparison(side, folder, test)
    variables = list(extra or [])
    if truth:
        variables += ["-v", "AB_LOOK:60", "-v", "AB_MAX_ROUNDS:60", "-v", "AB_BUDGET:3000"]
    found, kept = [], False
    with burners(burn):
        for index in range(runs):
            run_dir = folder / f"run{index:03d}"
            started = time.monotonic()
            subprocess.run(robot_command(path, run_dir, index, duet, variables, test), cwd=REPO,
                           timeout=3600, check=False, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
            record = keep_record(run_dir, duet, out, {
                "side": side, "test": test, "duet": duet, "burners": burn, "truth": truth,
                "wall_s": time.monotonic() - started})
            if record is None:
                print(f"run {index + 1}/{runs}: no record (see {run_dir})", flush=True)
                kept = True
                continue
            found.append(record)
            print(f"run {index + 1}/{runs}: {line(record)}", flush=True)
    if not kept:
        shutil.rmtree(folder)
    return found


def metrics_of(record: dict[str, Any]) -> tuple[str, str]:
    """The test's rate (its first judged metric that is not a cost: ``rps``, ``throughput``)
    and ``cost``."""
    judged = record["ab"]["metrics"]
    rate = next((name for name, entry in judged.items() if not entry.get("cost")), "rps")
    return rate, "cost"


def line(record: dict[str, Any]) -> str:
    """``regression after 10 rounds: rps -1.2 % [-4.0, +1.5] inconclusive, cost +4.9 % ...``"""
    block = record["ab"]
    shown = []
    for name in metrics_of(record):
        entry = block["metrics"].get(name)
        if entry is None:
            shown.append(f"{name} not judged")
            continue
        low, high = entry.get("low"), entry.get("high")
        bounds = (f" [{(low - 1) * 100:+.1f}, {(high - 1) * 100:+.1f}]"
                  if low is not None and high is not None else "")
        shown.append(f"{name} {entry['change_pct']:+.1f} %{bounds} {entry['verdict']}")
    return (f"{block['verdict']} after {block['rounds']['run']} rounds in "
            f"{record['bench']['wall_s']:.0f} s: " + ", ".join(shown))


def records_of(path: Path) -> list[dict[str, Any]]:
    return [json.loads(text) for text in path.read_text().splitlines() if text.strip()]


def spread(entry: dict[str, Any]) -> float:
    """The per-round spread of one metric of one test: stdev of its log ratios, in %."""
    logs = np.log(np.asarray(entry["ratios"], float))
    return 100 * float(np.std(logs, ddof=1)) if logs.size > 1 else float("nan")


def side_logs(record: dict[str, Any], metric: str) -> np.ndarray:
    """Per-round log ratios b / a of a metric both sides measured but the test did not judge
    (``kernel_cost``: the DUT cores' system + softirq time per request), from each side's
    trials in round order (a duet's merged round by round)."""
    sides = (record.get("evidence") or {}).get("sides") or {}
    try:
        a, b = (np.asarray(sides[s]["metrics"][metric]["trials"], float) for s in "ab")
    except KeyError:
        return np.asarray([])
    return np.log(b / a) if a.size == b.size and np.all(a > 0) else np.asarray([])


def _kernel(records: list[dict[str, Any]]) -> list[str]:
    """The kernel cost's median change and per-round spread over the tests, and the median
    foreign share of the DUT's cores (the larger side's)."""
    logs = [x for x in (side_logs(r, "kernel_cost") for r in records) if x.size > 1]
    shares = [max(float(side.get("foreign_load", {}).get("share_pct", 0.0))
                  for side in r["ab"]["sides"].values()) for r in records]
    if not logs:
        return ["-", "-", f"{statistics.median(shares):.0f} %"]
    return [f"{100 * (np.exp(statistics.median(float(np.median(x)) for x in logs)) - 1):+.2f} %",
            f"{statistics.median(100 * float(np.std(x, ddof=1)) for x in logs):.2f} %",
            f"{statistics.median(shares):.0f} %"]


def summary(path: Path) -> str:
    """One markdown row per file (see the module)."""
    records = records_of(path)
    bench = records[0].get("bench", {})
    cells = []
    for name in metrics_of(records[0]):
        entries = [r["ab"]["metrics"][name] for r in records if name in r["ab"]["metrics"]]
        if not entries:
            cells += ["not judged"] * 3
            continue
        verdicts = [e["verdict"] for e in entries]
        counts = ", ".join(f"{verdicts.count(v)} {v}" for v in
                           ("regression", "progression", "no change", "inconclusive")
                           if v in verdicts)
        cells += [counts, f"{statistics.median(e['change_pct'] for e in entries):+.2f} %",
                  f"{statistics.median(spread(e) for e in entries):.2f} %"]
    cells += _kernel(records)
    false = sum(r["ab"]["verdict"] == "regression" for r in records)
    rounds = [r["ab"]["rounds"]["run"] for r in records]
    minutes = [r["bench"]["wall_s"] / 60 for r in records if "bench" in r]
    mode = ("duet" if bench.get("duet") else "sequential") + \
        (f", {bench['burners']} burners" if bench.get("burners") else ", quiet")
    case = "" if bench.get("test", "ssl-proxy") == "ssl-proxy" else \
        f" ({bench['test']}: {metrics_of(records[0])[0]})"
    return (f"| {bench.get('side', path.stem)}{' (truth)' if bench.get('truth') else ''}{case} | "
            f"{mode} | {len(records)} | " + " | ".join(cells) +
            f" | {false} | {statistics.median(rounds):.0f} | "
            f"{statistics.median(minutes) if minutes else float('nan'):.1f} |")


HEADER = ("| side b | mode | tests | rate verdicts | rate change | rate spread | cost verdicts | "
          "cost change | cost spread | kernel cost change | kernel cost spread | foreign "
          "share | tests failed (regression on any) | rounds | minutes |\n"
          "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")


def rates(paths: list[Path], settings: AbSettings, draws: int = 400, seed: int = 11) -> str:
    """Per A/A file and metric, the share of tests called a regression at each true change in
    :data:`SHIFTS` (see the module), each metric at its half of the looks' level."""
    rng = np.random.default_rng(seed)
    lines = ["| A/A rounds | metric | " + " | ".join(f"{s:+.0%}" for s in SHIFTS) + " |",
             "|---|---|" + "---|" * len(SHIFTS)]
    for path in paths:
        records = records_of(path)
        for name in metrics_of(records[0]):
            runs = [np.log(np.asarray(r["ab"]["metrics"][name]["ratios"], float))
                    for r in records if name in r["ab"]["metrics"]]
            runs = [logs for logs in runs if logs.size >= settings.max_rounds]
            if not runs:
                lines.append(f"| {path.name} | {name} | (no test of {settings.max_rounds} "
                             "rounds) |")
                continue
            sample = sign_flips(runs)
            direction = "lower_is_better" if name == "cost" else "higher_is_better"
            cells = []
            for shift in SHIFTS:
                worse = np.log(1 + shift) if name == "cost" else np.log(1 - shift)
                called = sum(judge_at_looks(np.exp(sample(rng, settings.max_rounds) + worse),
                                            settings, direction, metrics=2)[0] == "regression"
                             for _ in range(draws))
                cells.append(f"{called / draws:.1%}")
            lines.append(f"| {path.name} | {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


PLANTED = ("headers:6", "uri-regex:4", "uri-regex:9", "uri-regex:30")
"""About 1, 2, 3 and 5 % of the proxy's CPU per request, sized by hand on this VM in duets
beside two burners (60 rounds: +1.0, +2.2, +2.6, +4.6 %, benchmarks/README.md;
``regex:<n>`` starts at about 10 %); the grid's truth runs measure them again."""
MODES = {"sequential-quiet": (False, 0), "sequential-burners": (False, 2),
         "duet-quiet": (True, 0), "duet-burners": (True, 2)}


def grid(folder: Path, runs: int, truth_runs: int, aa_runs: int, modes: list[str],
         sides: tuple[str, ...] = PLANTED) -> list[Path]:
    """Issue 61's grid: per mode, ``aa_runs`` A/A tests of 60 rounds judged once (their
    rounds feed ``rates``: false regressions and detection at the suite's looks), each
    planted side's true size (``truth_runs`` tests of 60 rounds) and ``runs`` A/B tests with
    the suite's looks; one records file per cell in ``folder``. Returns the files."""
    files = []
    for mode in modes:
        duet, burn = MODES[mode]
        for side in ("aa", *sides):
            planned = ((True, aa_runs),) if side == "aa" else ((True, truth_runs), (False, runs))
            for truth, count in planned:
                if not count:
                    continue
                path = folder / f"{side.replace(':', '')}-{mode}{'-truth' if truth else ''}.jsonl"
                collect(side, count, path, duet=duet, burn=burn, truth=truth)
                files.append(path)
    return files


def smallest_called(paths: list[Path], share: float = 0.9) -> str:
    """Per mode, the smallest planted cost (its truth runs' median change) called a regression
    on cost in at least ``share`` of its tests, and the same on throughput."""
    cells: dict[tuple[str, str], dict[str, Any]] = {}
    for path in paths:
        records = records_of(path)
        bench = records[0].get("bench", {})
        mode = ("duet" if bench.get("duet") else "sequential") + \
            (", burners" if bench.get("burners") else ", quiet")
        cell = cells.setdefault((mode, bench.get("side", path.stem)), {})
        if bench.get("truth"):
            cell["size"] = statistics.median(r["ab"]["metrics"]["cost"]["change_pct"]
                                             for r in records if "cost" in r["ab"]["metrics"])
        else:
            for name, key in zip(metrics_of(records[0]), ("rate", "cost"), strict=True):
                verdicts = [r["ab"]["metrics"].get(name, {}).get("verdict") for r in records]
                cell[key] = verdicts.count("regression") / len(verdicts)
    lines = ["| mode | smallest cost called in 90 % on cost | on throughput |", "|---|---|---|"]
    for mode in sorted({m for m, _ in cells}):
        found = []
        for name in ("cost", "rate"):
            sized = sorted((c["size"], side) for (m, side), c in cells.items()
                           if m == mode and side != "aa" and "size" in c and
                           c.get(name, 0.0) >= share)
            found.append(f"{sized[0][1]} (+{sized[0][0]:.1f} %)" if sized else "none")
        lines.append(f"| {mode} | {found[0]} | {found[1]} |")
    return "\n".join(lines) + "\n"


QUICK = ["-v", "AB_LOOK:10", "-v", "AB_MAX_ROUNDS:10", "-v", "DURATION:2", "-v", "WARMUP:1"]


def quick(out: Path) -> int:
    """One small cell: a sequential A/B test of ``regex:40`` quiet, 10 rounds of 2 s."""
    found = collect("regex:40", 1, out, extra=QUICK)
    if not found:
        return 1
    sys.stdout.write("\n" + HEADER + summary(out) + "\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.cost_bench")
    parser.add_argument("--quick", action="store_true", help="one small cell (~2 minutes)")
    parser.add_argument("--out", type=Path, default=Path("results/bench/cost-quick.jsonl"),
                        help="records file of --quick")
    commands = parser.add_subparsers(dest="command")
    run = commands.add_parser("collect")
    run.add_argument("--side", required=True,
                     help="aa, regex:<n>, uri-regex:<n>, headers:<n> or split")
    run.add_argument("--runs", type=int, default=10)
    run.add_argument("--duet", action="store_true", help="both sides at once (duet_run)")
    run.add_argument("--burners", type=int, default=0, help="busy loops at nice 19 beside")
    run.add_argument("--truth", action="store_true", help="60 rounds judged once")
    run.add_argument("--max-rounds", type=int, help="AB_MAX_ROUNDS of each test")
    run.add_argument("--test", choices=sorted(TESTS), default="ssl-proxy",
                     help="the case (tcp-term: A/A only)")
    run.add_argument("--out", type=Path, required=True)
    look = commands.add_parser("analyze")
    look.add_argument("files", nargs="+", type=Path)
    share = commands.add_parser("rates")
    share.add_argument("files", nargs="+", type=Path, help="A/A records files")
    whole = commands.add_parser("grid", help="issue 61's grid, then its tables")
    whole.add_argument("--dir", type=Path, default=Path("results/bench/cost"))
    whole.add_argument("--runs", type=int, default=10, help="A/B tests per planted cell")
    whole.add_argument("--truth-runs", type=int, default=2,
                       help="60-round tests sizing each planted cost")
    whole.add_argument("--aa-runs", type=int, default=6, help="60-round A/A tests per mode")
    whole.add_argument("--modes", nargs="+", choices=sorted(MODES), default=sorted(MODES))
    whole.add_argument("--sides", nargs="+", default=list(PLANTED))
    args = parser.parse_args(argv)
    if args.quick:
        return quick(args.out)
    if args.command == "collect":
        extra = ["-v", f"AB_MAX_ROUNDS:{args.max_rounds}"] if args.max_rounds else []
        collect(args.side, args.runs, args.out, duet=args.duet, burn=args.burners,
                truth=args.truth, extra=extra, test=args.test)
        return 0
    if args.command == "grid":
        args.files = grid(args.dir, args.runs, args.truth_runs, args.aa_runs, args.modes,
                          tuple(args.sides))
        sys.stdout.write(rates([p for p in args.files if p.name.startswith("aa-")],
                               declared_ab_settings()) + "\n")
    if args.command in ("analyze", "grid"):
        sys.stdout.write(HEADER + "".join(summary(p) + "\n" for p in args.files) + "\n"
                         + smallest_called(args.files))
        return 0
    if args.command == "rates":
        sys.stdout.write(rates(args.files, declared_ab_settings()))
        return 0
    parser.error("give --quick or a command (collect, analyze, rates)")
    return 2


if __name__ == "__main__":
    sys.exit(main())
