"""Floors check: how close each criterion sits to what a testbed measures on a healthy build.

    python -m benchmarks.floors_check --topology 3node [--runs 3] [--include KERNEL]
                                      [--exclude CAPACITY] [--test NAME ...] [--suite tests ...]
                                      [--criteria FILE] [--out DIR] [-- EXTRA ROBOT ARGS]
    python -m benchmarks.floors_check --records results/ [...] [--criteria FILE]

Runs the chosen tests ``--runs`` times with ``robot`` (each run in ``<out>/run-N``, the
suites' own trials; extra robot arguments after ``--``), or reads the records of earlier runs
(``--records``: a lab's nightly results), then sets every criterion that judged a recorded
test against the end of its interval nearest to the bound over all runs
(:mod:`libraries.results.floors`): ``fails`` where a healthy build does not clear it, ``near``
where less than 20 % of headroom is left, ``ok`` otherwise. Prints a markdown table; exit 0
when every bound is ``ok``, 1 when some bound is ``near`` or ``fails``, 2 on bad input.

Run it on a new lab before its first nightly, and on a VPP lab with ``--include VPP``: a bound
it flags needs a lower floor (with its basis in ``topologies/criteria.yaml``), or a look at
the lab.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from libraries.results.criteria import DEFAULT_CRITERIA, CriteriaError, load_criteria
from libraries.results.floors import HEADER, NEAR, FloorCheck, check_floors
from libraries.results.records import RecordError, find_record_files, iter_records

REPO = Path(__file__).resolve().parent.parent


def robot_command(args: argparse.Namespace, out: Path) -> list[str]:
    """One robot run of the chosen tests into ``out``."""
    command = [str(Path(sys.executable).parent / "robot"), "--outputdir", str(out),
               "--console", "dotted", "--variable", f"TOPOLOGY:{args.topology}",
               "--variable", f"CRITERIA:{args.criteria}"]
    for tag in args.include:
        command += ["--include", tag]
    for tag in args.exclude:
        command += ["--exclude", tag]
    for name in args.test:
        command += ["--test", name]
    return command + list(args.robot_args) + [str(REPO / s) for s in args.suite]


def run_tests(args: argparse.Namespace) -> list[Path]:
    """Run the tests ``args.runs`` times; the output folders."""
    folders = []
    for number in range(1, args.runs + 1):
        out = args.out / f"run-{number}"
        command = robot_command(args, out)
        started = time.monotonic()
        done = subprocess.run(command, cwd=REPO, timeout=args.timeout, check=False)
        sys.stderr.write(f"run {number}/{args.runs}: robot exit {done.returncode} in "
                         f"{time.monotonic() - started:.0f} s ({out})\n")
        if done.returncode >= 251:
            raise RuntimeError(f"robot could not run ({done.returncode}): {' '.join(command)}")
        folders.append(out)
    return folders


def markdown(checks: Sequence[FloorCheck], near: float) -> str:
    """The table, with a line that says what the statuses mean."""
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(check.row()) + " |" for check in checks]
    counts = {s: sum(c.status == s for c in checks) for s in ("fails", "near", "ok")}
    lines.append("")
    lines.append(f"{counts['fails']} fail, {counts['near']} near (headroom < {near:.0%} of the "
                 f"measured end), {counts['ok']} ok; worst end = the lowest interval low end "
                 "over the runs (a ceiling: the highest high end)")
    return "\n".join(lines) + "\n"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.floors_check",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--topology", default="3node", help="testbed (default 3node)")
    parser.add_argument("--runs", type=int, default=3, help="robot runs (default 3)")
    parser.add_argument("--suite", nargs="+", default=["tests"], help="suites (default tests)")
    parser.add_argument("--include", action="append", default=[], metavar="TAG")
    parser.add_argument("--exclude", action="append", default=[], metavar="TAG")
    parser.add_argument("--test", action="append", default=[], metavar="NAME")
    parser.add_argument("--criteria", type=Path, default=DEFAULT_CRITERIA)
    parser.add_argument("--records", nargs="+", type=Path, metavar="DIR",
                        help="judge the records under these folders instead of running")
    parser.add_argument("--out", type=Path, default=REPO / "results" / "floors-check")
    parser.add_argument("--near", type=float, default=NEAR,
                        help="headroom below which a bound is near (default 0.2)")
    parser.add_argument("--timeout", type=float, default=7200, help="per robot run (s)")
    parser.add_argument("--markdown", type=Path, help="also write the table here")
    parser.add_argument("robot_args", nargs="*", help="after --: more robot arguments")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns the exit status."""
    args = _parser().parse_args(argv)
    if args.runs < 1:
        sys.stderr.write(f"error: --runs {args.runs}: expected 1 or more\n")
        return 2
    try:
        criteria = load_criteria(args.criteria)
        folders = args.records or run_tests(args)
        problems: list[str] = []
        records = [r for f in find_record_files(folders) for r in iter_records(f, problems)]
    except (CriteriaError, RecordError, RuntimeError, OSError) as error:
        sys.stderr.write(f"error: {error}\n")
        return 2
    for problem in problems:
        sys.stderr.write(f"error: {problem}\n")
    if not records:
        sys.stderr.write(f"error: no records under {', '.join(map(str, folders))}\n")
        return 2
    checks = check_floors(records, criteria, args.near)
    table = markdown(checks, args.near)
    sys.stdout.write(table)
    if args.markdown:
        args.markdown.write_text(table, encoding="utf-8")
    return 0 if all(c.status == "ok" for c in checks) and not problems else 1


if __name__ == "__main__":
    sys.exit(main())
