"""``hoststack-perf COMMAND [ARGS...]``: the project's commands under one name.

Each command is the ``python -m libraries...`` entry point it names (which keeps working),
called in this process with the arguments after the command; ``hoststack-perf COMMAND --help``
shows that command's own help, and its exit code is this one's (:data:`EXIT_CODES`).
``ab`` is the one command of its own: it runs Robot Framework with ``-v AB:<comparison file>``
(a sequential A/B run: both sides on one testbed, in rounds of random order), becoming the
``robot`` process, so its exit code, console and Ctrl-C are Robot's.

Bad input has one exit code, :data:`BAD_INPUT` (252, Robot's own code for invalid data or
options), in ``ab``, ``duet``, ``nightly`` and ``bisect``: a bad option, a bad ``-v`` setting,
topology, comparison, reference or builds file, or a binary a comparison names that is absent
is refused before anything is measured (``ab``, ``duet`` and ``nightly`` check the settings,
the topology and the comparison file in this process before a Robot run starts:
:mod:`libraries.cases.input_checks`), so a CI job tells "my input is wrong" from failed tests
(1-250) and from a regression. ``hoststack-perf --version`` prints the project's version;
with no arguments, as with ``--help``, it lists its commands and exits 0 (an unknown one: 2).

This module imports nothing of the project at import time: a command's module is imported by
name when the command runs (``utest/test_layers.py``: the entry point sits above every layer).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.metadata
import io
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

BAD_INPUT = 252
"""The exit code of bad input in ``ab``, ``duet``, ``nightly`` and ``bisect`` (Robot's "invalid
test data or command line options"; never a count of failed tests, nor a regression)."""


@dataclass(frozen=True)
class Command:
    """A command: the entry point it runs (``module:function``, called with the arguments),
    the ``python -m`` spelling it stands for, one line of help and one example."""

    name: str
    target: str
    module: str
    summary: str
    example: str = ""

    def entry(self) -> Callable[[list[str]], int | None]:
        """The entry point's function (its module imported now)."""
        module, function = self.target.split(":")
        return getattr(importlib.import_module(module), function)


COMMANDS: tuple[Command, ...] = (
    Command("ab", "libraries.cli:ab", "robot -v AB:FILE",
            "run suites as A/B tests of a comparison file's two sides (robot -v AB:FILE)",
            "hoststack-perf ab topologies/examples/ab-nginx-knob.yaml -v TOPOLOGY:3node "
            "-t 1kb-10c-kernel-ssl-proxy tests/ssl_proxy"),
    Command("duet", "libraries.ab.duet_run:main", "libraries.ab.duet_run",
            "run an A/B comparison as a duet: both sides at once, each on its own testbed",
            "hoststack-perf duet topologies/examples/ab-sysctl.yaml -d results/duet -- "
            "-v TOPOLOGY:3node -t 1s-kernel-tcp-term tests/tcp_term/kernel.robot"),
    Command("nightly", "libraries.nightly.nightly_run:main", "libraries.nightly",
            "the nightly job: run the suites (against a pinned reference), store, trend, gate",
            "hoststack-perf nightly --topology 3node --suites tests/tcp_term -- "
            "-v EXTENDED:no"),
    Command("bisect", "libraries.bisect.bisect_command:main", "libraries.bisect",
            "find the build that changed a test's figure, by A/B runs between builds",
            "hoststack-perf bisect --topology 3node --test 1kb-10c-kernel-ssl-proxy "
            "--builds builds.yaml   (builds.yaml: your builds, oldest first)"),
    Command("trend", "libraries.report.trend_command:main", "libraries.report",
            "trend dashboard and gate over the history; --compare two runs",
            "hoststack-perf trend results --html results/trend.html"),
    Command("report", "libraries.report.run_report:main", "libraries.report.run_report",
            "write run-report.html (and summary.md) of run directories",
            "hoststack-perf report results/<run-id>"),
    Command("ingest", "libraries.history.ingest:main", "libraries.history.ingest",
            "store runs' records in the columnar history",
            "hoststack-perf ingest results --store results/history"),
    Command("testbed", "libraries.testbed.provision:main", "libraries.testbed",
            "build, inspect or remove a local namespace testbed (up | down | status)",
            "hoststack-perf testbed up 3node"),
    Command("leftovers", "libraries.testbed.leftovers:main", "libraries.testbed.leftovers",
            "check that a finished run left no namespace, process or file",
            "hoststack-perf leftovers results/<run-id>/output.xml"),
)
"""Every command, in the order ``--help`` lists them."""

_ROBOT = {
    0: "every test passed (or was skipped)",
    1: "1 to 249: that many tests failed",
    250: "250 or more tests failed",
    251: "help or version printed",
    252: "invalid test data or command line options",
    253: "stopped by the user (Ctrl-C)",
    255: "unexpected internal error",
}
EXIT_CODES: dict[str, dict[int, str]] = {
    "ab": {**_ROBOT, 1: "1 to 249: that many tests failed (an A/B regression fails its test)",
           BAD_INPUT: "bad input, refused before robot started: bad options, a bad -v setting, "
                      "topology or comparison file, a binary a side names that is absent, -v "
                      "AB given twice; or (Robot's) invalid test data"},
    "duet": {**{code: f"side a's run: {text}" for code, text in _ROBOT.items()},
             1: "side a's run: 1 to 249 tests failed; where side a's run exits 0 and side b's "
                "does not: side b's code (a failure only side b saw)",
             BAD_INPUT: "bad input, refused before either run started (as ab's 252); or side "
                        "a's run: invalid test data"},
    "bisect": {
        0: "no regression between the ends beyond the margin (or only progressions)",
        BAD_INPUT: "bad input: refused before anything was measured",
        3: "culprit found, and every other range proven clear of a regression beyond the "
           "margin: build by build, or only end to end where the result says so (a -/+ pair "
           "of steps could hide inside such a range)",
        4: "could not decide: no culprit found, and an end or a range stayed undecided",
        5: "culprit found, but some ranges stayed undecided (another step may hide there: see "
           "the undecided ranges)",
    },
    "trend": {
        0: "no series regressed (--compare: no significant regression)",
        2: "bad input: an unreadable or invalid record (file and line), a damaged Parquet "
           "file, no records; also bad options (argparse)",
        3: "the newest sample of some series is a regression (--compare: a significant "
           "regression)",
    },
    "report": {0: "the run report(s) written",
               2: "bad input: not a run directory, an unreadable tests.jsonl or run.json; "
                  "also bad options"},
    "ingest": {0: "stored (or nothing new)",
               2: "a run could not be stored (file and line named); also bad options"},
    "testbed": {0: "up, down, or the status shown (a real lab: nothing to build)",
                1: "status: no local testbed (of that topology)",
                2: "a bad topology or a node error (named); also bad options"},
    "leftovers": {0: "the run left nothing",
                  1: "the run left namespaces, processes or files (listed)",
                  2: "the output.xml is unreadable; also bad options"},
}
"""Every command's exit codes and what each means (for the documentation); the nightly's are
its own (:func:`exit_codes`)."""

HELP_LISTS_EXIT_CODES = frozenset({"ab", "bisect"})
"""Commands whose own ``--help`` lists their exit codes; after the others' help
``hoststack-perf COMMAND --help`` prints them from :data:`EXIT_CODES` (and drops a line of
their own that summed them up: ``exit status: ...``)."""


def version() -> str:
    """The installed package's version (pyproject.toml), else ``git describe``, else unknown."""
    try:
        return importlib.metadata.version("hoststack-perf")
    except importlib.metadata.PackageNotFoundError:
        pass
    try:
        done = subprocess.run(["git", "describe", "--tags", "--always", "--dirty"],
                              cwd=Path(__file__).resolve().parent, capture_output=True,
                              text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return done.stdout.strip() if done.returncode == 0 and done.stdout.strip() else "unknown"


SPHINX_ROLE = re.compile(r":(?:mod|func|class|meth|data|attr|exc|obj):`~?([^`]+)`")


def plain(text: str) -> str:
    """``text`` (help drawn from a docstring) without reStructuredText markup: ``:func:`x```
    -> ``x()``, other roles -> their target, double back-quotes dropped."""
    return SPHINX_ROLE.sub(lambda m: m.group(1) + "()" * m.group(0).startswith(":func:"),
                           text).replace("``", "")


def exit_codes(name: str) -> dict[int, str]:
    """The exit codes of command ``name`` and what each means: :data:`EXIT_CODES`, the
    nightly's from the module that writes them in a night's summary (imported only now)."""
    if name == "nightly":
        return dict(importlib.import_module("libraries.nightly.night_summary").GATE)
    return EXIT_CODES[name]


def exit_codes_text(name: str) -> str:
    """The exit codes of command ``name``, as a help epilog lists them."""
    return f"exit codes (hoststack-perf {name}):\n" + "\n".join(
        f"  {code:3}  {text}" for code, text in sorted(exit_codes(name).items()))


def exit_codes_markdown() -> str:
    """A Markdown section per command: its exit codes and their meaning."""
    parts = []
    for command in COMMANDS:
        rows = [f"| {code} | {text.replace('|', chr(92) + '|')} |"
                for code, text in sorted(exit_codes(command.name).items())]
        parts.append(f"## hoststack-perf {command.name}\n\n{command.summary} (`python -m "
                     f"{command.module}`)\n\n| exit | meaning |\n|---|---|\n"
                     + "\n".join(rows) + "\n")
    return "\n".join(parts)


def _parser() -> argparse.ArgumentParser:
    width = max(len(c.name) for c in COMMANDS)
    listing = "\n".join(f"  {c.name:{width}}  {c.summary}" for c in COMMANDS)
    parser = argparse.ArgumentParser(
        prog="hoststack-perf", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Host-stack and proxy performance: the project's commands.",
        epilog=f"commands:\n{listing}\n\n'hoststack-perf COMMAND --help' shows a command's "
               "own help, an example and its exit codes; each is also 'python -m <module>' "
               f"(see the docs). Bad input to ab, duet, nightly or bisect exits {BAD_INPUT}.\n\n"
               f"example:\n  {COMMANDS[0].example}")
    parser.add_argument("--version", action="version", version=f"hoststack-perf {version()}")
    parser.add_argument("command", choices=[c.name for c in COMMANDS], metavar="COMMAND",
                        help="one of: " + ", ".join(c.name for c in COMMANDS))
    parser.add_argument("args", nargs=argparse.REMAINDER, help="the command's own arguments")
    return parser


def run(argv: Sequence[str]) -> int:
    """Run ``argv`` (``COMMAND ARGS...``) in this process; the command's exit code (a
    ``SystemExit`` of its argument parser, e.g. for ``--help``, is returned as its code)."""
    parser = _parser()
    try:
        if not argv or argv[0] in ("-h", "--help"):
            parser.print_help()
            return 0
        args = parser.parse_args(argv[:1])
        command = next(c for c in COMMANDS if c.name == args.command)
        if command.name != "ab" and _asks_help(argv[1:]):  # ab: robot's after the file
            return _help(command, list(argv[1:]))
        if command.name in ("duet", "nightly") and _refused(command.name, list(argv[1:])):
            return BAD_INPUT
        code = command.entry()(list(argv[1:]))
    except SystemExit as stop:
        return _code(stop)
    return code or 0


def _refused(name: str, args: list[str]) -> bool:
    """Whether ``duet`` or ``nightly`` ``args`` are bad input (each problem printed)."""
    cut = args.index("--") if "--" in args else len(args)
    given, robot = args[:cut], args[cut + 1:]
    if name == "duet":
        options = importlib.import_module("libraries.ab.duet_run").parse(args)
        comparison, topologies = options.comparison, ()
    else:
        try:
            options = importlib.import_module("libraries.nightly.arguments").parser("").parse_args(
                given)
        except SystemExit as stop:  # argparse's usage error (printed): bad input
            if stop.code != 2:
                raise
            return True
        comparison, topologies = None, options.pool or options.topology
    problems = importlib.import_module("libraries.cases.input_checks").run_problems(
        robot, comparison, topologies)
    for problem in problems:
        print(f"hoststack-perf {name}: error: {problem}", file=sys.stderr)
    return bool(problems)


def _code(stop: SystemExit) -> int:
    """The exit code of an argument parser's ``SystemExit`` (a message: printed, 1)."""
    if stop.code is None or isinstance(stop.code, int):
        return stop.code or 0
    print(stop.code, file=sys.stderr)
    return 1


def _help(command: Command, args: list[str]) -> int:
    """``hoststack-perf COMMAND --help``: the command's own help under the name it was called
    by (``usage: hoststack-perf nightly ...``, not ``python -m libraries.nightly``), then its
    exit codes unless that help lists them (:data:`HELP_LISTS_EXIT_CODES`)."""
    shown = io.StringIO()
    try:
        with contextlib.redirect_stdout(shown):
            code = command.entry()(args) or 0
    except SystemExit as stop:
        code = _code(stop)
    text = plain(renamed_usage(shown.getvalue(), f"python -m {command.module}",
                               f"hoststack-perf {command.name}"))
    text = text.replace(f"python -m {command.module} ", f"hoststack-perf {command.name} ")
    if code == 0 and "example:" not in text and command.example:
        text = text.rstrip("\n") + f"\n\nexample:\n  {command.example}\n"
    if code == 0 and command.name not in HELP_LISTS_EXIT_CODES:
        text = re.sub(r"\n\nexit status:[^\n]*(\n[^\n]+)*", "", text)
        text = text.rstrip("\n") + f"\n\n{exit_codes_text(command.name)}\n"
    print(text, end="")
    return code


def renamed_usage(text: str, old: str, new: str) -> str:
    """``text`` (an argparse help) with its usage's program ``old`` named ``new``, the usage's
    wrapped lines re-indented under the new name."""
    head = f"usage: {old} "
    if not text.startswith(head):
        return text
    usage, _, rest = text.partition("\n\n")
    first, *wrapped = usage.split("\n")
    indent = " " * len(f"usage: {new} ")
    lines = [f"usage: {new} {first[len(head):]}"]
    lines += [indent + line[len(head):] if line[:len(head)].isspace() else line
              for line in wrapped]
    return "\n".join(lines) + ("\n\n" + rest if rest or text.endswith("\n\n") else "")


def _asks_help(args: Sequence[str]) -> bool:
    """Whether ``args`` ask the command for its help (before a ``--``: after it they are
    robot's)."""
    before = args[:list(args).index("--")] if "--" in args else args
    return any(arg in ("-h", "--help") for arg in before)


# -- ab ----------------------------------------------------------------------------------------


def ab_command(argv: Sequence[str], python: str = sys.executable) -> tuple[list[str], bool]:
    """The Robot command of ``hoststack-perf ab [--print] COMPARISON [--] ROBOT ARGS...`` and
    whether it is only to be printed (``--print``);
    ``SystemExit`` with the reason (:func:`ab` exits :data:`BAD_INPUT` with it) for a missing
    comparison file, no suites, robot arguments that set ``AB`` themselves, or what
    :func:`libraries.cases.input_checks.run_problems` finds wrong with the settings, the
    topology or the comparison file (a binary it names that is absent; with ``--print`` too:
    a printed command is one that would run)."""
    parser = argparse.ArgumentParser(
        prog="hoststack-perf ab", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Run suites as A/B tests: robot -v AB:COMPARISON ROBOT ARGS. Every "
                    "measuring test compares the file's side a (baseline) and side b "
                    "(candidate) in rounds of random order on one testbed; see the docs' A/B "
                    "page and the AB_* settings.",
        epilog=f"example:\n  {COMMANDS[0].example}\n\nexit codes (Robot's, and 252 for bad "
               "input):\n" + "\n".join(f"  {code:3}  {text}"
                                       for code, text in sorted(EXIT_CODES["ab"].items())))
    parser.add_argument("--print", action="store_true", dest="print_only",
                        help="print the robot command instead of running it (after the "
                        "same checks of its settings, topology and comparison file)")
    parser.add_argument("comparison", help="the comparison file (YAML: sides a and b)")
    parser.add_argument("robot_args", nargs=argparse.REMAINDER,
                        help="robot's options and the suites to run (after an optional --)")
    options = parser.parse_args(argv)
    rest = list(options.robot_args)
    if rest[:1] == ["--"]:
        rest = rest[1:]

    def refuse(why: str) -> None:
        parser.print_usage(sys.stderr)
        raise SystemExit(f"hoststack-perf ab: error: {why}") from None

    if not Path(options.comparison).is_file():
        refuse(f"{options.comparison}: no such comparison file")
    if not rest:
        refuse("give robot's options and the suites to run after the comparison file, e.g. "
               "tests/ssl_proxy")
    for flag, value in zip(rest, [*rest[1:], ""], strict=True):
        given = value if flag in ("-v", "--variable") else \
            flag.removeprefix("--variable=") if flag.startswith("--variable=") else ""
        if given.split(":", 1)[0] == "AB":
            refuse(f"{flag} {value}: the comparison file is the first argument; -v AB is "
                   "set from it")
    problems = importlib.import_module("libraries.cases.input_checks").run_problems(
        rest, options.comparison)
    if problems:
        refuse("\n".join(problems))
    command = [python, "-m", "robot", "--variable",
               f"AB:{Path(options.comparison).resolve()}", *rest]
    return command, options.print_only


def ab(argv: list[str]) -> int:
    """``hoststack-perf ab``: become ``robot -v AB:...`` (or print it with ``--print``)."""
    try:
        command, print_only = ab_command(argv)
    except SystemExit as stop:
        if isinstance(stop.code, str):
            print(stop.code, file=sys.stderr)
            return BAD_INPUT
        if stop.code == 2:  # argparse's bad options: Robot's code for them, not "2 failed"
            return BAD_INPUT
        raise
    if print_only:
        print(shlex.join(command))
        return 0
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(command[0], command)  # noqa: S606  (Robot's own process, code and signals)
    return 255  # not reached


def main(argv: Sequence[str] | None = None) -> int:
    """The console script ``hoststack-perf``."""
    return run(list(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    sys.exit(main())
