"""Every command in README.md is run: here, for real where it is cheap, or by the test or job
named in :data:`COVERED` (issue 54: "every command in it run by a test or the e2e job").

A command is a line of a code block, or an inline code span starting with ``.venv/bin/``
(what a reader pastes). :data:`COVERED` maps each one, word for word, to where it runs:

* ``here:<test>``: a test of this module runs it, taking it from this table;
* ``utest/<file>.py::<test>``: that test runs it or what it becomes;
* ``tox:<env>``: that tox environment runs it (``tox:e2e``: the Robot suites for real, in CI);
* ``ci:<line>``: ``.ci/run`` runs that line.

A README command that is not in the table, or an entry that names a test, environment or line
that does not exist, fails; so does a Robot command the e2e job does not run (another topology,
a suite outside its own). The reader's own files (``reference.yaml``, ``builds.yaml``,
``topologies/lab.yaml``) and ``<run-id>`` are stood in for by :data:`STAND_INS`.
"""

from __future__ import annotations

import ast
import configparser
import functools
import re
import shlex
import shutil
import sys
from pathlib import Path

import pytest
import yaml
from robot.conf import RobotSettings
from robot.run import RobotFramework
from robot.running import builder as robot_builder

from libraries import cli
from libraries.ab.comparison import load_comparison
from libraries.bisect import bisect_command as bisect_cli
from libraries.bisect.comparison_run import RobotComparisons
from libraries.cases import registry
from libraries.results.trial_settings import parse_plan, parse_switch
from libraries.testbed.topology_file import load_topology

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
UTEST = REPO / "utest"
FIXTURES = UTEST / "fixtures"

COVERED: dict[str, tuple[str, ...]] = {
    # quick start
    "./setup.sh": ("ci:./setup.sh",),
    ".venv/bin/robot -v TOPOLOGY:3node -d results tests": ("tox:e2e", "here:test_robot_commands"),
    ".venv/bin/tox p": ("ci:.venv/bin/tox p",),
    # running by suite and tag
    ".venv/bin/robot -v TOPOLOGY:3node -d results tests/ssl_proxy":
        ("tox:e2e", "here:test_robot_commands"),
    ".venv/bin/robot -v TOPOLOGY:3node -i KERNEL -e MTLS -d results tests":
        ("tox:e2e", "here:test_robot_commands"),
    ".venv/bin/robot -v TOPOLOGY:3node -t 1kb-10c-kernel-ssl-proxy -d results tests":
        ("tox:e2e", "here:test_robot_commands"),
    ".venv/bin/robot -v TOPOLOGY:3node -v EXTENDED:yes -d results tests":
        ("tox:e2e", "here:test_robot_commands"),
    ".venv/bin/robot -v TOPOLOGY:3node -v TRIALS:5 -v DURATION:30 -v WARMUP:5 -d results tests":
        ("tox:e2e", "here:test_robot_commands"),
    # reading a result
    ".venv/bin/hoststack-perf report results/<run-id>": ("here:test_report_and_trend",),
    # the regression workflow
    ".venv/bin/hoststack-perf --help": ("here:test_help",),
    ".venv/bin/hoststack-perf ab topologies/examples/ab-openssl-aesni.yaml -v TOPOLOGY:3node -t "
    "1kb-10c-kernel-ssl-proxy -d results tests/ssl_proxy": (
        "here:test_ab", "here:test_robot_commands",
        "utest/test_comparison.py::test_a_side_sees_the_topology_with_its_binaries_environment_"
        "and_vpp"),
    ".venv/bin/hoststack-perf ab topologies/examples/ab-nginx-builds.yaml -v TOPOLOGY:3node -d "
    "results tests/ssl_proxy": (
        "here:test_ab", "here:test_robot_commands",
        "utest/test_ab_e2e.py::test_an_nginx_knob_restarts_only_the_proxy_and_an_aa_check_is_no_finding",
        "utest/test_ab_e2e.py::test_builds_of_a_tool_the_test_does_not_run_are_skipped_not_judged"),
    ".venv/bin/hoststack-perf nightly --topology 3node --reference reference.yaml --suites tests": (
        "here:test_nightly",
        "utest/test_nightly_reference.py::test_the_nightly_runs_every_suite_against_the_reference",
        "utest/test_lab_pool.py::test_nightly_spreads_suites_over_two_labs_and_leaves_the_down_lab_out"),
    ".venv/bin/hoststack-perf bisect --topology 3node --test 1kb-10c-kernel-ssl-proxy --builds "
    "builds.yaml": (
        "here:test_bisect",
        "utest/test_bisect.py::test_each_comparison_is_a_robot_ab_run_of_the_test_with_the_two_builds"),
    ".venv/bin/hoststack-perf trend results/ --html results/trend.html":
        ("here:test_report_and_trend",),
    # on a real lab: the admin-built lab, every suite, as a sudo user and as root
    ".venv/bin/robot -v TOPOLOGY:topologies/lab.yaml -d results tests/smoke": (
        "here:test_robot_commands",
        "utest/test_reallab_e2e.py::test_every_suite_passes_or_skips_and_leaves_the_lab_as_it_was"),
    ".venv/bin/robot -v TOPOLOGY:topologies/lab.yaml -d results tests": (
        "here:test_robot_commands",
        "utest/test_reallab_e2e.py::test_every_suite_passes_or_skips_and_leaves_the_lab_as_it_was"),
    # what each job checks; the documentation site (mkdocs serve builds what build builds)
    ".venv/bin/tox -e fast": ("tox:fast",),
    ".venv/bin/mkdocs serve": ("utest/test_docs.py::test_the_site_builds_strictly_with_every_"
                               "generated_page",),
    ".venv/bin/mkdocs build --strict -d site": (
        "tox:docs", "utest/test_docs.py::test_the_site_builds_strictly_with_every_generated_page"),
}
"""Every README command and where it runs."""

REFERENCE = """\
name: nginx-1.30.4-ref
tools: {dut: {nginx: /opt/nginx-ref/sbin/nginx}, server: {nginx: /opt/nginx-ref/sbin/nginx}}
"""
BUILDS = """\
builds:
  - {name: r1}
  - {name: r2, nginx: {proxy: {server: ["access_log /dev/null combined;"]}}}
"""
STAND_INS = {"reference.yaml": REFERENCE, "builds.yaml": BUILDS,
             "topologies/lab.yaml": (REPO / "topologies/examples/lab-3node.yaml").read_text()}
"""The reader's own files the README names, written as the docs describe them."""
RUN_ID = "kernel-3node"  # utest/fixtures/runs/kernel-3node: a real run's files


def readme_commands(text: str) -> list[str]:
    """The commands of a README: every line of its code blocks (4-space indented after a
    blank line, or fenced; ``cmd && cmd`` is two, a trailing ``# comment`` is dropped) and
    every inline code span starting with ``.venv/bin/``, in order, each once."""
    found: list[str] = []
    block, fenced, previous = False, False, ""
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
            continue
        block = (fenced or line.startswith("    ")) and (block or fenced or not previous.strip())
        if block and line.strip():
            command = re.sub(r"\s+#.*$", "", line.strip())
            found += [part.strip() for part in command.split("&&")]
        elif not block:
            found += re.findall(r"`(\.venv/bin/[^`]+)`", line)
        previous = line
    return list(dict.fromkeys(found))


def commands_run_by(test: str) -> list[str]:
    """The README commands this module's ``test`` runs (from :data:`COVERED`)."""
    commands = [command for command, where in COVERED.items() if f"here:{test}" in where]
    assert commands, f"COVERED names no command for here:{test}"
    return commands


def stand_in(command: str, folder: Path) -> list[str]:
    """``command``'s words, the reader's own files written into ``folder`` and named there."""
    words = shlex.split(command.replace("<run-id>", RUN_ID))
    for name, text in STAND_INS.items():
        if name in words or any(word.endswith(f":{name}") for word in words):
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_text(text)
    return words


def script_args(command: str, folder: Path) -> list[str]:
    """The arguments of a ``.venv/bin/hoststack-perf`` command (its stand-ins in ``folder``)."""
    words = stand_in(command, folder)
    assert words[0] == ".venv/bin/hoststack-perf", command
    return words[1:]


# -- the table ---------------------------------------------------------------------------------


def test_the_readme_commands_are_found() -> None:
    text = "intro `.venv/bin/x --help` and `robot` (a name)\n\n    ./a && .venv/bin/b c  # why\n" \
           "    .venv/bin/d\n- a list\n  `plain`\n\n```\n.venv/bin/e\n```\n"
    assert readme_commands(text) == [".venv/bin/x --help", "./a", ".venv/bin/b c",
                                     ".venv/bin/d", ".venv/bin/e"]
    commands = readme_commands(README.read_text())
    assert ".venv/bin/hoststack-perf trend results/ --html results/trend.html" in commands
    assert "./setup.sh" in commands and ".venv/bin/mkdocs serve" in commands


def test_every_readme_command_is_run_here_or_by_a_named_test_or_job() -> None:
    commands = readme_commands(README.read_text())
    uncovered = [command for command in commands if command not in COVERED]
    assert uncovered == [], "README commands that nothing runs: add each to COVERED with " \
        "the test or job that runs it"
    assert sorted(set(COVERED) - set(commands)) == [], "COVERED names commands README lacks"


def _tests_in(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}


def _tox() -> configparser.ConfigParser:
    config = configparser.ConfigParser(interpolation=None)
    config.read(REPO / "tox.ini")
    return config


def test_every_test_job_and_line_the_table_names_exists() -> None:
    here, tox = _tests_in(Path(__file__)), _tox()
    ci = (REPO / ".ci" / "run").read_text().splitlines()
    for command, places in COVERED.items():
        assert places, command
        for place in places:
            kind, _, what = place.partition(":")
            if kind == "here":
                assert what in here, f"{command}: no test {what} in this module"
            elif kind == "tox":
                assert tox.has_option(f"testenv:{what}", "commands"), f"{command}: no {place}"
            elif kind == "ci":
                assert what in ci, f"{command}: .ci/run has no line {what!r}"
            else:
                file, _, test = place.partition("::")
                assert test in _tests_in(REPO / file), f"{command}: no {place}"


def test_ci_runs_the_jobs_the_readme_names() -> None:
    # ./setup.sh (.ci/run) installs the project in .venv: .venv/bin/hoststack-perf exists
    assert re.search(r"^\.venv/bin/pip install [^\n]*-e \.$", (REPO / "setup.sh").read_text(),
                     re.MULTILINE)
    tox = _tox()
    envlist = [env.strip() for env in tox.get("tox", "envlist").split(",")]
    assert {"unit", "e2e", "docs"} <= set(envlist)  # what `tox p` (.ci/run) runs
    assert "mkdocs build --strict" in tox.get("testenv:docs", "commands")
    # `tox -e fast` runs a subset of what unit runs in CI: the tests that start no process
    assert tox.get("testenv:fast", "commands").endswith(
        'pytest -q -n 2 -m "not integration" {posargs}')
    assert "pytest -q -n 2 {posargs}" in tox.get("testenv:unit", "commands")


# -- robot commands: what the e2e job runs, the tests they select, the settings they give ------


def robot_options(command: str) -> tuple[dict, list[str]]:
    """Robot's own reading of a robot command's options and data sources."""
    words = shlex.split(command)
    assert words[0].endswith("robot"), command
    return RobotFramework().parse_arguments(words[1:])


def _variables(options: dict) -> dict[str, str]:
    return dict(value.split(":", 1) for value in options.get("variable", []))


def e2e_command() -> tuple[dict, list[str]]:
    line = _tox().get("testenv:e2e", "commands").strip().removeprefix("nice -n 19 ")
    line = line.replace("{toxinidir}/", "").replace("{env:TOPOLOGY:3node}", "3node") \
        .replace("{posargs:tests}", "tests")
    return robot_options(line)


def test_the_e2e_job_runs_every_robot_command_the_table_gives_it() -> None:
    e2e, e2e_suites = e2e_command()
    e2e_vars = _variables(e2e)
    assert e2e_vars["EXTENDED"] == "yes" and not e2e.get("include") and not e2e.get("test")
    given = [command for command, places in COVERED.items() if "tox:e2e" in places]
    assert len(given) >= 6
    for command in given:
        options, suites = robot_options(command)
        assert _variables(options)["TOPOLOGY"] == e2e_vars["TOPOLOGY"], command
        for suite in suites:
            assert any(Path(suite).is_relative_to(mine) for mine in e2e_suites), command


@functools.cache
def _suite(*sources: str):
    return robot_builder.TestSuiteBuilder().build(*(str(REPO / source) for source in sources))


def test_robot_commands(tmp_path: Path) -> None:
    """Robot reads each command's options, its suites exist and its selection picks tests;
    every ``-v`` is a registered setting and its value is one the project accepts (the
    topology and comparison files load, the trial plan and switches parse)."""
    known = {setting.name for setting in registry.SETTINGS}
    for command in commands_run_by("test_robot_commands"):
        words = stand_in(command.replace(".venv/bin/hoststack-perf ab ",
                                         ".venv/bin/robot -v AB:"), tmp_path)
        options, sources = RobotFramework().parse_arguments(words[1:])
        suite = _suite(*sources).deepcopy()
        suite.configure(**RobotSettings(options).suite_config)  # DataError: no test selected
        assert suite.test_count > 0, command
        given = _variables(options)
        assert set(given) <= known, f"{command}: unknown settings {set(given) - known}"
        topology_name = given["TOPOLOGY"]
        topology = load_topology(str(tmp_path / topology_name)
                                 if topology_name in STAND_INS else topology_name)
        if "AB" in given:
            assert load_comparison(REPO / given["AB"], topology).title, command
        parse_plan(given.get("TRIALS", 5), given.get("DURATION", 2), given.get("WARMUP", 1))
        if "EXTENDED" in given:
            assert parse_switch("EXTENDED", given["EXTENDED"])


# -- hoststack-perf commands, run here ------------------------------------------------------


def test_help(capsys: pytest.CaptureFixture[str]) -> None:
    (command,) = commands_run_by("test_help")
    assert cli.main(script_args(command, Path())) == 0
    out = capsys.readouterr().out
    assert all(f"  {c.name} " in out for c in cli.COMMANDS)


def test_ab(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``hoststack-perf ab FILE ARGS`` is the robot run test_ab_e2e makes (robot -v AB:FILE
    ARGS): ``--print`` shows it without running it, after the checks a run makes. The first
    example needs nothing but setup; the second, a candidate build the README says to make
    first: without it, the bad-input exit naming the side's binary, as the README says."""
    first, builds = commands_run_by("test_ab")
    for command in (first, builds):
        args = script_args(command, tmp_path)
        assert args[0] == "ab"
        candidate = yaml.safe_load((REPO / args[1]).read_text())["b"].get("tools", {})
        absent = [path for tools in candidate.values() for path in tools.values()
                  if not Path(path).is_file()]
        code = cli.main(["ab", "--print", *args[1:]])
        out, err = capsys.readouterr()
        if command == first or not absent:
            assert code == 0, err
            assert shlex.split(out) == [sys.executable, "-m", "robot", "--variable",
                                        f"AB:{(REPO / args[1]).resolve()}", *args[2:]]
        else:
            assert code == cli.BAD_INPUT and out == ""
            assert f"b.tools.dut.nginx: {absent[0]}: no such file" in err


def test_report_and_trend(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                          capsys: pytest.CaptureFixture[str]) -> None:
    """On a results folder holding one real run's files: the run's report and summary, then
    the trend dashboard over the folder (one run: nothing to flag, exit 0)."""
    shutil.copytree(FIXTURES / "runs" / RUN_ID, tmp_path / "results" / RUN_ID)
    monkeypatch.chdir(tmp_path)
    report, trend = commands_run_by("test_report_and_trend")
    assert cli.main(script_args(report, tmp_path)) == 0
    run = tmp_path / "results" / RUN_ID
    assert "<html" in (run / "run-report.html").read_text()[:500].lower()
    assert (run / "summary.md").read_text().startswith("#")
    assert cli.main(script_args(trend, tmp_path)) == 0
    assert "plotly" in (tmp_path / "results" / "trend.html").read_text()
    assert "1s-kernel-tcp-term" in capsys.readouterr().out


def test_nightly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                 capsys: pytest.CaptureFixture[str]) -> None:
    """The README's nightly with ``--dry-run``: the reference is read and the plan is the
    suites run as A/B tests of the reference against today (the run itself, with a fake robot:
    test_nightly_reference; for real on two labs: test_lab_pool)."""
    (command,) = commands_run_by("test_nightly")
    (tmp_path / "tests").symlink_to(REPO / "tests")
    monkeypatch.chdir(tmp_path)
    assert cli.main([*script_args(command, tmp_path), "--dry-run"]) == 0
    out = capsys.readouterr().out
    robot = shlex.split(next(line for line in out.splitlines() if "robot" in line))
    assert "TOPOLOGY:3node" in robot and Path(robot[-1]).resolve() == REPO / "tests"
    comparison = Path(next(word.split(":", 1)[1] for word in robot if word.startswith("AB:")))
    assert comparison.name == "reference-comparison.yaml"
    written = yaml.safe_load(out.split(f"# {comparison}:\n", 1)[1])
    assert written["a"] == yaml.safe_load(REFERENCE) and written["b"] == {"name": "today"}


@pytest.mark.integration
def test_bisect(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                capsys: pytest.CaptureFixture[str]) -> None:
    """The README's bisect over two builds, every comparison a robot A/B run of the test;
    robot is test_bisect's stand-in, which records the A/A figure of a real A/B record (the
    real robot A/B run: test_ab_e2e)."""
    from utest.test_bisect import FAKE_ROBOT  # noqa: PLC0415  (that module's stand-in)

    (command,) = commands_run_by("test_bisect")
    script = tmp_path / "robot.py"
    script.write_text(FAKE_ROBOT)
    fixture = FIXTURES / "records" / "ab_record.json"
    monkeypatch.setattr(bisect_cli, "RobotComparisons", functools.partial(
        RobotComparisons, robot=(sys.executable, str(script), str(fixture))))
    monkeypatch.chdir(tmp_path)
    assert cli.main(script_args(command, tmp_path)) == 0  # no regression between the ends
    out = capsys.readouterr().out
    assert "no regression between r1 and r2: no change" in out
    (made,) = (tmp_path / "results" / "bisect").glob("*/01-r1-vs-r2/argv.json")
    args = yaml.safe_load(made.read_text())["args"]
    assert "TOPOLOGY:3node" in args and args[args.index("-t") + 1] == "1kb-10c-kernel-ssl-proxy"
