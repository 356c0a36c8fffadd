"""A/B runs checked as an instrument: false alarms of A/A tests, detection of small real
slowdowns applied to side b only, and the smallest change detected at 90 % power against the
minutes a test takes.

    python -m benchmarks.ab_bench collect --case ssl_proxy --side aa --runs 40 --out aa-ssl.jsonl
    python -m benchmarks.ab_bench collect --case ssl_proxy --side burn:0.06 --runs 30 --out b.jsonl
    python -m benchmarks.ab_bench collect --case ssl_proxy --side burn:0.06 --runs 3 --truth \\
        --out truth.jsonl                # long runs (80 rounds, one look): the true size
    python -m benchmarks.ab_bench collect --case tcp_term --side pause:0.05 --duet --runs 20 \
        --out duet-b.jsonl               # both sides at once (python -m libraries.ab.duet_run)
    python -m benchmarks.ab_bench analyze aa-ssl.jsonl b.jsonl truth.jsonl [--mde aa-ssl.jsonl]
    python -m benchmarks.ab_bench rates --aa aa-ssl.jsonl      # or --sd 0.029 (simulated)

Each run is one A/B test under ``robot -v AB:<file>`` with the suite's defaults (looks every 10
rounds up to 60, margin 1 %, budget 600 s) and no profiling trial (``-v PROFILE:off``: the
minutes are the verdict's), the comparison file written here:

* ``aa``: side b is the same binary reached by another path (a symlink to the topology's nginx
  or iperf3 on the DUT): every switch restarts it, as a real comparison would, and nothing
  else differs;
* ``burn:<share>``: side b's binary is a wrapper that starts, beside the real one and in its
  process group (so it stops with it), a CPU burner pinned to the DUT process's core and busy
  ``share`` of every 10 ms: a small slowdown of side b only, applied from outside, whose true
  size is measured by ``--truth`` runs (80 rounds, judged once);
* ``pause:<share>[:<period ms>]``: side b's binary is a wrapper beside which a loop stops it
  and its children (SIGSTOP) ``share`` of every period (default 10 ms): a slowdown of side b
  alone even when both sides run at once (``--duet``), where a burner on the shared core
  would slow both;
* ``rmem:<bytes>``: side b caps the DUT's ``net.ipv4.tcp_rmem`` maximum (a real knob, per
  network namespace, so a duet's two testbeds hold both values at once);
* ``window:<bytes>`` (tcp_term): side b's load generator runs an iperf3 whose client asks for
  that socket buffer (``-w``, applied at both ends of the transfer): a build with a smaller
  window, which a topology can plant (the nightly benchmark's tonight) where a sysctl cannot;
* ``weight:<fraction>[:<node>]``: side b's binary (on the DUT, or ``node``: ``tg`` weights
  the load generator) runs in a CPU cgroup of its own at ``fraction`` of the default CPU
  weight: slower only where it competes for its core, as in a duet, where side a's process on
  the same core gets the rest (a CPU-bound side b at 0.97: about 3 %).

``analyze`` prints per file the verdicts (false alarms: regression or progression in an A/A
file; detections: regression in a slowed one), the changes measured, rounds and minutes per
test, and with ``--mde`` the minimum detectable slowdown at 90 % power for each number of
rounds, from the A/A files' per-round ratios (resampled, shifted, judged by the suite's own
looks). ``rates`` gives the share of tests called a regression at true changes of 0 to 5 %
(the margin's guarantee and the power it costs): from A/A files' rounds, or from normal
per-round noise of a given spread (``--sd``). A/A rounds are resampled by sign: a draw takes
one A/A test's rounds in their order, centred on the median of all, and flips each one's sign
by a coin, which is exact where a coin chose each round's order (or, in a duet, which run held
which side): each round's log ratio is then as likely with either sign. Drawing rounds with
replacement instead repeats rounds, which narrows the signed-rank interval below what the
rounds justify: on the same 8 duet A/A tests of ssl_proxy a true -1 % read a regression in
11.8 % of draws with replacement, 0.7 % with sign flips (the margin's guarantee: 2.5 %).
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
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.slowdowns import bench_cgroups_removed, burner, pauser, weighted, windowed
from libraries.ab.ab_settings import declared_ab_settings
from libraries.ab.rounds import judge_at_looks
from libraries.results.plan import AbSettings

REPO = Path(__file__).resolve().parent.parent
CASES = {
    "ssl_proxy": ("tests/ssl_proxy/kernel.robot", "1kb-10c-kernel-ssl-proxy", "nginx",
                  "/usr/sbin/nginx", "rps"),
    "tcp_term": ("tests/tcp_term/kernel.robot", "1s-kernel-tcp-term", "iperf3",
                 "/usr/bin/iperf3", "throughput"),
}
def comparison(case: str, side: str, folder: Path) -> Path:
    """Write the comparison file of ``side`` (``aa``, ``burn:``, ``pause:``, ``weight:`` or
    ``rmem:``, see the module) for ``case``."""
    _, _, tool, binary, _ = CASES[case]
    kind, _, given = side.partition(":")
    if kind == "aa":
        candidate = folder / f"{tool}-same"
        if not candidate.exists():
            candidate.symlink_to(binary)
        text = (f"name: A/A via another path to {binary}\naa: true\na: {{name: {tool}}}\n"
                f"b:\n  name: {tool}-symlink\n  tools: {{dut: {{{tool}: {candidate}}}}}\n")
    elif kind == "rmem":
        limit = int(given)
        text = (f"name: DUT tcp_rmem max {limit} bytes\na: {{name: kernel-default}}\nb:\n"
                f"  name: rmem-{limit}\n  sysctl: {{dut: {{net.ipv4.tcp_rmem: "
                f"\"4096 131072 {limit}\"}}}}\n")
    else:  # side b runs the tool through a wrapper that slows it
        node = "dut"
        if kind == "pause":
            share, _, period = given.partition(":")
            candidate = pauser(folder, tool, binary, float(share), float(period or 10))
            title = f"{tool} stopped {float(share):.1%} of every {period or 10} ms"
        elif kind == "window":
            if tool != "iperf3":
                raise SystemExit(f"--side {side}: a window is an iperf3 client's (tcp_term)")
            node, candidate = "tg", windowed(folder, tool, binary, int(given))
            title = f"tg's {tool} client with a {int(given)}-byte window"
        elif kind == "weight":
            fraction, _, node = given.partition(":")
            node = node or "dut"
            candidate = weighted(folder, tool, binary, float(fraction))
            title = f"{node}'s {tool} at {float(fraction):g} of the CPU weight"
        else:
            candidate = burner(folder, tool, binary, float(given))
            title = f"{tool} with {float(given):.0%} of its core taken"
        text = (f"name: {title}\na: {{name: {tool}}}\nb:\n  name: {candidate.name}\n"
                f"  tools: {{{node}: {{{tool}: {candidate}}}}}\n")
    path = folder / f"{case}-{side.replace(':', '-')}.yaml"
    path.write_text(text)
    return path


def collect(case: str, side: str, runs: int, out: Path, truth: bool,
            max_rounds: int | None = None, duet: bool = False) -> None:
    """Append ``runs`` A/B records of ``case`` with ``side`` to ``out`` (``max_rounds``: the
    tests' ``AB_MAX_ROUNDS``, else the suite's default; ``duet``: both sides at once, each on
    its own testbed, through ``python -m libraries.ab.duet_run``)."""
    suite, test, *_ = CASES[case]
    out.parent.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix="ab-bench-", dir="/tmp"))
    path = comparison(case, side, folder)
    extra = ["-v", "AB_LOOK:80", "-v", "AB_MAX_ROUNDS:80", "-v", "AB_BUDGET:3000"] \
        if truth else []
    if max_rounds and not truth:
        extra = ["-v", f"AB_MAX_ROUNDS:{max_rounds}"]
    kept = False
    for index in range(runs):
        run_dir = folder / f"run{index:03d}"
        started = time.monotonic()
        robot = ["-v", f"RUN_ID:ab{index}", "-v",
                 f"CRITERIA:{REPO / 'utest/fixtures/criteria/none.yaml'}", "-v",
                 "PROFILE:off", *extra, "--console", "none", "--log", "NONE", "--report",
                 "NONE", "-t", test, suite]
        command = [sys.executable, "-m", "libraries.ab.duet_run", str(path), "-d",
                   str(run_dir), "--", *robot] if duet else \
            [sys.executable, "-m", "robot", "-d", str(run_dir), "-v", f"AB:{path}", *robot]
        subprocess.run(command, cwd=REPO, timeout=3600, check=False,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        bench_cgroups_removed()
        record = keep_record(run_dir, duet, out, {
            "case": case, "side": side, "truth": truth, "duet": duet,
            "wall_s": time.monotonic() - started})
        if record is None:
            print(f"run {index + 1}/{runs}: no record (see {run_dir})", flush=True)
            kept = True
            continue
        block = record["ab"]
        metric = rate_metric(block)
        print(f"run {index + 1}/{runs}: {block['verdict']} {metric['change_pct']:+.2f} % after "
              f"{block['rounds']['run']} rounds in {time.monotonic() - started:.0f} s",
              flush=True)
    if not kept:  # the comparison file and wrappers; a run without a record keeps them all
        shutil.rmtree(folder)


def keep_record(run_dir: Path, duet: bool, out: Path,
                bench: dict[str, Any]) -> dict[str, Any] | None:
    """The A/B record of one benchmark run in ``run_dir`` (side a's in a ``duet``) with
    ``bench`` added, appended to ``out`` and the run's folder removed; None (the folder kept
    for a look) when the run wrote no record."""
    records = run_dir / "a" / "records.jsonl" if duet else run_dir / "records.jsonl"
    if not records.is_file():
        return None
    record = json.loads(records.read_text().splitlines()[-1])
    record["bench"] = bench
    with out.open("a") as stream:
        stream.write(json.dumps(record) + "\n")
    shutil.rmtree(run_dir)  # its record is in ``out`` now
    return record


def _records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def rate_metric(block: dict[str, Any]) -> dict[str, Any]:
    """The A/B block's rate (its first metric that is not a cost: a record of issue 61 on
    judges the cost per request beside it)."""
    return next(m for m in block["metrics"].values() if not m.get("cost"))


def _log_ratios(record: dict[str, Any]) -> np.ndarray:
    """The per-round log ratios of a record's compared rate."""
    return np.log(rate_metric(record["ab"])["ratios"])


def summary(path: Path) -> str:
    """One markdown row of the A/B records in ``path`` (the per-round spread: the standard
    deviation of a test's per-round log ratios, what its interval's width follows)."""
    records = _records(path)
    verdicts = [r["ab"]["verdict"] for r in records]
    changes = [rate_metric(r["ab"])["change_pct"] for r in records]
    rounds = [r["ab"]["rounds"]["run"] for r in records]
    minutes = [(r["bench"]["wall_s"] if "bench" in r else r["duration_s"]) / 60
               for r in records]  # a nightly_bench night's record: the test's own time
    spreads = [100 * float(np.std(_log_ratios(r), ddof=1)) for r in records]
    bench = records[0].get("bench") or {"case": records[0]["case"], "side": path.stem,
                                        "truth": False}
    counts = ", ".join(f"{verdicts.count(v)} {v}" for v in
                       ("regression", "progression", "no change", "inconclusive")
                       if v in verdicts)
    return (f"| {bench['case']} | {bench['side']}{' (truth)' if bench['truth'] else ''}"
            f"{' duet' if bench.get('duet') else ''} | "
            f"{len(records)} | {counts} | {statistics.median(changes):+.2f} % "
            f"({min(changes):+.1f} to {max(changes):+.1f}) | {statistics.median(rounds):.0f} "
            f"({min(rounds)}-{max(rounds)}) | {statistics.median(spreads):.1f} % "
            f"({min(spreads):.1f}-{max(spreads):.1f}) | {statistics.median(minutes):.1f} "
            f"({max(minutes):.1f}) |")


def mde(paths: list[Path], settings: AbSettings, draws: int = 400, seed: int = 5) -> str:
    """The slowdown detected in 90 % of tests for each ``AB_MAX_ROUNDS`` (looks every
    ``settings.look`` rounds up to it, each at alpha / looks): a draw is one A/A test's rounds
    resampled by sign (:func:`sign_flips`: a noisy test stays noisy), shifted down by the
    slowdown and judged as the suite would."""
    records = [r for p in paths for r in _records(p)]
    sample = sign_flips([_log_ratios(r) for r in records])
    per_round = statistics.median(r["bench"]["wall_s"] / max(1, r["ab"]["rounds"]["run"])
                                  for r in records)
    rng = np.random.default_rng(seed)
    lines = ["| AB_MAX_ROUNDS | minutes per test (at most) | slowdown detected in 90 % |",
             "|---|---|---|"]
    for rounds in range(settings.look, settings.max_rounds + 1, settings.look):
        limited = declared_ab_settings(margin=settings.margin, alpha=settings.alpha,
                                       look=settings.look, max_rounds=rounds,
                                       budget_s=settings.budget_s)
        found = None
        for slowdown in np.arange(0.005, 0.2, 0.0025):
            hits = sum(judge_at_looks(np.exp(sample(rng, rounds) + np.log(1 - slowdown)),
                                      limited)[0] == "regression" for _ in range(draws))
            if hits >= 0.9 * draws:
                found = slowdown
                break
        shown = f"{found:.1%}" if found is not None else "> 20 %"
        lines.append(f"| {rounds} | {rounds * per_round / 60:.1f} | {shown} |")
    return "\n".join(lines) + "\n"


SHIFTS = (0.0, -0.01, -0.015, -0.02, -0.03, -0.05)


def rates(sampler: Any, settings: AbSettings, draws: int = 600, seed: int = 7) -> str:
    """Per true change in :data:`SHIFTS`, the share of ``draws`` tests judged a regression by
    the suite's looks; ``sampler(rng, n)`` gives ``n`` per-round log ratios of an A/A test."""
    rng = np.random.default_rng(seed)
    cells = []
    for shift in SHIFTS:
        called = 0
        for _ in range(draws):
            logs = sampler(rng, settings.max_rounds) + np.log(1 + shift)
            called += judge_at_looks(np.exp(logs), settings)[0] == "regression"
        cells.append(f"{called / draws:.1%}")
    return " | ".join(cells)


def sign_flips(runs: list[np.ndarray]) -> Any:
    """The sampler of :func:`rates` over A/A tests' per-round log ratios ``runs``: one test's
    rounds (at most ``n``, in their order), centred on the median of all, each sign flipped by
    a coin (see the module)."""
    centre = float(np.median(np.concatenate(runs)))
    centred = [logs - centre for logs in runs]

    def sample(rng: np.random.Generator, n: int) -> np.ndarray:
        logs = centred[rng.integers(len(centred))][:n]
        return logs * rng.choice((-1.0, 1.0), len(logs))
    return sample


def main(argv: list[str] | None = None) -> int:
    """Collect or analyse (see the module docstring)."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.ab_bench")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("collect")
    run.add_argument("--case", choices=sorted(CASES), required=True)
    run.add_argument("--side", required=True,
                     help="aa, burn:<share of a core>, pause:<share of the time>[:<ms>], "
                          "rmem:<bytes>, window:<bytes> or "
                          "weight:<fraction of the CPU weight>[:<node>]")
    run.add_argument("--duet", action="store_true",
                     help="both sides at once, each on its own testbed (duet_run)")
    run.add_argument("--runs", type=int, default=10)
    run.add_argument("--truth", action="store_true", help="80 rounds judged once")
    run.add_argument("--max-rounds", type=int, default=None, help="AB_MAX_ROUNDS of each test")
    run.add_argument("--out", type=Path, required=True)
    look = commands.add_parser("analyze")
    look.add_argument("files", nargs="+", type=Path)
    look.add_argument("--mde", nargs="*", type=Path, default=[])
    share = commands.add_parser("rates")
    share.add_argument("--aa", nargs="*", type=Path, default=[], help="A/A records files")
    share.add_argument("--sd", nargs="*", type=float, default=[],
                       help="per-round spread of log ratios (simulated normal noise)")
    args = parser.parse_args(argv)
    if args.command == "rates":
        settings = declared_ab_settings()
        sys.stdout.write("| noise | " + " | ".join(f"{x:+.1%}" for x in SHIFTS) + " |\n|---|"
                         + "---|" * len(SHIFTS) + "\n")
        for sd in args.sd:
            sys.stdout.write(f"| normal, sd {sd:.1%} | " + rates(
                lambda rng, n, sd=sd: rng.normal(0.0, sd, n), settings) + " |\n")
        for path in args.aa:
            sys.stdout.write(f"| {path.name} (A/A rounds, signs flipped) | " + rates(
                sign_flips([_log_ratios(r) for r in _records(path)]), settings) + " |\n")
        return 0
    if args.command == "collect":
        collect(args.case, args.side, args.runs, args.out, args.truth, args.max_rounds,
                args.duet)
        return 0
    sys.stdout.write("| case | side b | tests | verdicts | change (median, range) | rounds | "
                     "per-round spread (median, range) | minutes per test (max) |\n"
                     "|---|---|---|---|---|---|---|---|\n")
    for path in args.files:
        sys.stdout.write(summary(path) + "\n")
    if args.mde:
        sys.stdout.write("\n" + mde(args.mde, declared_ab_settings()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
