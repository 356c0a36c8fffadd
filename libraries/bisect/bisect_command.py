"""From "this got slower" to the build that did it::

    python -m libraries.bisect --topology 3node --test 1kb-10c-kernel-ssl-proxy \\
        --builds builds.yaml [--metric rps] [--results results/bisect] \\
        [--max-rounds N] [--budget S] [--margin 3] [--inside 2] [-- -v DURATION:2 ...]

``--builds`` lists the builds oldest first (:mod:`libraries.bisect.builds`); ``--test`` is a
test name, ``<case>/<name>`` or a record's test id. Everything is checked before anything is
measured: the topology, the test, the builds file against the topology, and on a local
topology every binary a build names (it exists and answers its version command, unless a build
command can make it). Then every build is hashed on a testbed brought up for it and taken down
(:mod:`libraries.bisect.identity`: builds that are the same files need no comparison; where
that fails, each comparison's record tells). Then the ends are compared; a regression between
them is bisected (:mod:`libraries.bisect.bisection`), each comparison one Robot A/B run
(:mod:`libraries.bisect.comparison_run`) in ``<results>/<bisect id>/NN-<a>-vs-<b>/``, and up to
``--inside`` comparisons look inside ranges proven clear only end to end. The result goes to
``bisect.json``, ``bisect.html`` and ``summary.md`` there, and to the exit code
(:data:`libraries.bisect.bisection.EXIT_CODES`, listed by ``--help``; the last line printed and
``exit_meaning`` say what it means for the run: which ranges are clear only end to end):

    0 no regression between the ends beyond --margin (or only progressions)
    252 bad input: refused before anything was measured (bad options, a file, the test, a
      binary absent, a bad -v setting after --, settings whose second attempt could not
      decide; Robot's code for bad options, the same in hoststack-perf ab, duet and nightly)
    3 a culprit found (the last good and first bad build, printed), and every other stretch
      of the range proven clear of a regression beyond the margin: build by build, or only
      end to end where the result says so (a -/+ pair of steps could hide inside)
    4 could not decide: no culprit, and an end or a range stayed undecided
    5 a culprit found, but some ranges stayed undecided (listed: another step may be there)
"""

from __future__ import annotations

import argparse
import itertools
import secrets
import sys
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path

from libraries.ab.ab_settings import (
    AB_BUDGET,
    AB_MARGIN,
    AB_MAX_ROUNDS,
    ab_settings_from_variables,
    check_ab_plan,
)
from libraries.bisect.bisect_summary import clear_line
from libraries.bisect.bisection import BAD_INPUT, EXIT_CODES, INSIDE, Compare, bisect
from libraries.bisect.builds import check_builds, load_builds, make_build
from libraries.bisect.comparison_run import MARGIN_PCT, RobotComparisons, _safe, find_test
from libraries.bisect.identity import Identities, hash_before
from libraries.bisect.outcome import Outcome
from libraries.bisect.report import clear_entries, write_report
from libraries.cases.input_checks import run_problems
from libraries.results.trial_settings import DURATION, TRIALS, WARMUP, parse_plan
from libraries.testbed.errors import TopologyError
from libraries.testbed.topology_file import load_topology


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m libraries.bisect",
        description="Find the build that changed a test's figure by A/B comparisons.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="exit codes:\n" + "\n".join(f"  {code:3}  {meaning}"
                                            for code, meaning in sorted(EXIT_CODES.items())))
    parser.add_argument("--topology", required=True, help="topology name or file (the "
                        "testbed; the builds override its binaries, VPP installs, ...)")
    parser.add_argument("--test", required=True, help="test name, <case>/<name> or test id")
    parser.add_argument("--builds", required=True, type=Path, metavar="YAML",
                        help="a YAML file of the builds, oldest first: 'builds: [{name: 1.25.0,"
                        " tools: {dut: {nginx: /opt/nginx-1.25.0/sbin/nginx}}}, ...]', or a "
                        "'template:' over 'revisions:' (see the docs' bisect page)")
    parser.add_argument("--metric", help="metric to follow (default: the test's first A/B "
                        "metric, e.g. rps or throughput; cost: the CPU per unit of work the "
                        "test judges beside it, e.g. traced_cost of an sslsniff test)")
    parser.add_argument("--results", type=Path, default=Path("results/bisect"),
                        help="parent folder of this bisection's folder")
    parser.add_argument("--max-rounds", type=int, default=int(AB_MAX_ROUNDS.default),
                        help="A/B rounds of a first attempt (doubled for a second; default "
                        f"AB_MAX_ROUNDS's, {AB_MAX_ROUNDS.default})")
    parser.add_argument("--budget", type=float, default=float(AB_BUDGET.default),
                        help="A/B seconds of a first attempt (doubled for a second; default "
                        f"AB_BUDGET's, {AB_BUDGET.default})")
    parser.add_argument("--margin", type=float, default=MARGIN_PCT, metavar="PCT",
                        help="a change within +-PCT %% is no change (default "
                        f"{MARGIN_PCT:g}: a step to find "
                        "must be clearly larger, e.g. 5 %%; the A/B runs' own default of "
                        f"{AB_MARGIN.default} %% "
                        "leaves a build pair without a change undecided for hundreds of rounds "
                        "on a noisy machine)")
    parser.add_argument("--inside", type=int, default=INSIDE, metavar="N",
                        help="comparisons to spend, once the culprits are found, looking "
                        f"inside ranges proven clear only end to end (default {INSIDE}; 0: "
                        "none; the result names every range left clear only end to end)")
    parser.add_argument("robot_args", nargs="*", help="after --: extra robot arguments")
    return parser


def _robot_variables(robot_args: Sequence[str]) -> dict[str, str]:
    """The ``-v NAME:VALUE`` (``--variable``) settings among the extra Robot arguments."""
    found: dict[str, str] = {}
    for flag, value in itertools.pairwise(robot_args):
        if flag in ("-v", "--variable") and ":" in value:
            name, _, given = value.partition(":")
            found[name] = given
    for arg in robot_args:
        if arg.startswith("--variable=") and ":" in arg:
            name, _, given = arg.removeprefix("--variable=").partition(":")
            found[name] = given
    return found


def _attempt_problem(rounds: int, budget: float, margin: float,
                     variables: dict[str, str]) -> str | None:
    """Why the A/B run of an attempt with ``rounds`` and ``budget`` could not decide (its
    suite set-up would refuse it), or None."""
    values: dict[str, object] = {**variables, "AB_MAX_ROUNDS": rounds, "AB_BUDGET": budget,
                                 "AB_MARGIN": margin}
    try:
        settings = ab_settings_from_variables(values.get)
        check_ab_plan(settings, parse_plan(*(s.read(values.get)
                                             for s in (TRIALS, DURATION, WARMUP))))
    except ValueError as error:
        return str(error)
    return None


def attempts_problems(max_rounds: int, budget: float, margin: float,
                      robot_args: Sequence[str]) -> list[str]:
    """Why the first or the second attempt of a comparison (``--max-rounds`` and
    ``--budget``, doubled for the second) could not decide, naming the option and the
    limit; empty when both can. Checked before anything is measured: a second attempt whose
    first look could never decide fails every comparison at its suite set-up."""
    variables = _robot_variables(robot_args)
    problems = []
    for attempt in (1, 2):
        why = _attempt_problem(max_rounds * attempt, budget * attempt, margin, variables)
        if why is None:
            continue
        fits = [m for m in range(max_rounds, 0, -1)
                if _attempt_problem(m, budget, margin, variables) is None
                and _attempt_problem(2 * m, 2 * budget, margin, variables) is None]
        limit = (f"give --max-rounds at most {fits[0]}" if fits else
                 "give a larger --budget (AB_BUDGET of a first attempt)" if "AB_BUDGET" in why
                 else "no --max-rounds fits these -v settings")
        problems.append(f"--max-rounds {max_rounds} --budget {budget:g}: the "
                        f"{'first' if attempt == 1 else 'second'} attempt of a comparison "
                        f"({max_rounds * attempt} rounds, {budget * attempt:g} s) could not "
                        f"decide: {why}; {limit}")
        break
    return problems


def _refusals(args: argparse.Namespace) -> list[str]:
    """Why the options are refused before anything runs (empty: they are fine)."""
    if args.max_rounds < 1 or args.budget <= 0 or not 0 < args.margin < 100 or args.inside < 0:
        return ["--max-rounds and --budget must be positive, --inside not negative, --margin a "
                "percentage in (0, 100)"]
    if any("AB_MARGIN:" in arg for arg in args.robot_args):
        return ["give the A/B margin with --margin, not -v AB_MARGIN"]
    # robot's -v settings as every comparison's run reads them (hoststack-perf ab's checks)
    settings = run_problems([*args.robot_args, "-v", f"TOPOLOGY:{args.topology}"])
    return settings or attempts_problems(args.max_rounds, args.budget, args.margin,
                                         args.robot_args)


def _say(line: str) -> None:
    print(line, flush=True)


def announced(compare: Compare, names: Sequence[str],
              say: Callable[[str], None] = _say) -> Compare:
    """``compare`` saying each comparison as it starts and as it ends (its verdict, interval,
    rounds and minutes: :meth:`Outcome.describe`), numbered as the folders are: a bisection
    runs for many minutes between its first line and its result."""
    numbers = itertools.count(1)

    def run(a: int, b: int, attempt: int) -> Outcome:
        pair = f"comparison {next(numbers)}: {names[a]} vs {names[b]}" + \
            (f" (attempt {attempt})" if attempt > 1 else "")
        say(f"{pair}: running")
        outcome = compare(a, b, attempt)
        say(f"{pair}: {outcome.describe()}")
        return outcome

    return run


def main(argv: Sequence[str] | None = None) -> int:
    """Run a bisection; the exit code of the module docstring."""
    try:
        args = _parser().parse_args(argv)
    except SystemExit as stop:  # argparse's usage error (2): bad input's one code
        if stop.code != 2:
            raise
        return BAD_INPUT
    try:
        topology = load_topology(args.topology)
        test = find_test(args.test)
        builds = load_builds(args.builds, topology)
    except (TopologyError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return BAD_INPUT
    problems, missing = check_builds(builds, topology)
    if problems:
        print("error: " + "\n".join(problems), file=sys.stderr)
        return BAD_INPUT
    refused = _refusals(args)
    if refused:
        print("error: " + "\n".join(refused), file=sys.stderr)
        return BAD_INPUT
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    out = (args.results / f"{stamp}-{secrets.token_hex(2)}").resolve()
    # Robot runs from the repository: a topology given as a file keeps pointing at it
    where = Path(args.topology)
    topology_arg = str(where.resolve()) if where.is_file() else args.topology
    identities = Identities(builds.sides)
    print(f"bisect: {hash_before(builds, topology, identities)}")
    compare = RobotComparisons(topology=topology_arg, test=test, builds=builds, out=out,
                               metric=args.metric, max_rounds=args.max_rounds,
                               margin_pct=args.margin, budget_s=args.budget,
                               extra=tuple(args.robot_args), identities=identities)

    def available(index: int) -> bool | str:
        if index not in missing:
            return True
        why = make_build(builds, index, out / "builds" / f"{_safe(builds.names[index])}.log")
        if why is not None:
            print(f"build {builds.names[index]}: skipped: {why}", file=sys.stderr)
        return True if why is None else why

    print(f"bisect {builds.title}: {len(builds.sides)} builds, test {test.case}/{test.name} "
          f"on {args.topology}; comparisons in {out}")
    try:
        result = bisect(len(builds.sides), announced(compare, builds.names), available,
                        args.margin, identities.same, args.inside)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return BAD_INPUT
    meta = {"title": builds.title, "builds_file": str(args.builds), "topology": args.topology,
            "test": f"{test.case}/{test.name}", "metric": args.metric,
            "max_rounds": args.max_rounds, "margin_pct": args.margin, "budget_s": args.budget,
            "robot_args": list(args.robot_args)}
    json_path, html_path = write_report(out, result, builds.names, meta)
    names = builds.names
    for culprit in result.culprits:
        o = culprit.outcome
        print(f"{o.verdict}: last good {names[culprit.good]}, first bad {names[culprit.bad]}: "
              f"{o.change_pct:+.1f} % [{o.low_pct:+.1f}, {o.high_pct:+.1f}] after {o.rounds} "
              f"rounds" if o.change_pct is not None and o.low_pct is not None
              and o.high_pct is not None else f"{o.verdict}: {names[culprit.good]} -> "
              f"{names[culprit.bad]}")
    for a, b, why in result.undecided:
        print(f"undecided between {names[a]} and {names[b]}: {why}")
    if result.culprits:
        for entry in clear_entries(result, names, args.margin):
            print(f"clear: {clear_line(entry).replace('`', '')}")
    for index, why in result.skipped.items():
        print(f"skipped build {names[index]}: {why}")
    if not result.culprits and not result.undecided and result.ends is not None:
        ends = result.ends
        beyond = (f" {ends.change_pct:+.1f} % [{ends.low_pct:+.1f}, {ends.high_pct:+.1f}]: none "
                  f"beyond the {args.margin:g} % margin" if ends.verdict == "inconclusive"
                  and None not in (ends.change_pct, ends.low_pct, ends.high_pct) else "")
        print(f"no regression between {names[0]} and {names[-1]}: {ends.verdict}{beyond}")
    print(f"{len(result.comparisons)} comparisons, {result.minutes:.1f} min: {json_path}, "
          f"{html_path}")
    print(f"exit {result.exit_code}: {result.meaning(names)}")
    return result.exit_code
