"""``hoststack-perf``: every command dispatches to its entry point, with its help and exit code."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from libraries import cli
from libraries.ab import duet_run
from libraries.bisect.bisection import BAD_INPUT as BISECT_BAD_INPUT
from libraries.bisect.bisection import EXIT_CODES as BISECT
from libraries.nightly import nightly_run
from libraries.trend import analysis

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "topologies" / "examples" / "ab-aa.yaml"


def test_the_console_script_is_declared():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert project["project"]["scripts"] == {"hoststack-perf": "libraries.cli:main"}


def test_help_lists_every_command_with_one_line(capsys):
    assert cli.run(["--help"]) == 0
    out = capsys.readouterr().out
    for command in cli.COMMANDS:
        assert re.search(rf"^  {command.name} +{re.escape(command.summary)}$", out, re.M)
    assert cli.run([]) == 0


@pytest.mark.parametrize("command", cli.COMMANDS, ids=lambda c: c.name)
def test_each_command_shows_its_own_help(command, capsys):
    assert cli.run([command.name, "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: ")
    assert command.module.split(":")[0] in out or command.name in out


@pytest.mark.parametrize("command", cli.COMMANDS, ids=lambda c: c.name)
def test_each_command_runs_the_python_m_entry_point(command):
    module = importlib.import_module(command.target.split(":")[0])
    assert command.entry() is getattr(module, command.target.split(":")[1])
    if command.name != "ab":  # python -m <module> runs the same function, or the command
        main = ROOT.joinpath(*command.module.split("."))
        source = (main / "__main__.py" if main.is_dir() else main.with_suffix(".py")).read_text()
        function = command.target.split(":")[1]
        dispatched = f'sys.argv.insert(1, "{command.name}")\n    runpy.run_module(' \
                     '"libraries.cli", run_name="__main__", alter_sys=True)'
        assert f"import {function}" in source or f"sys.exit({function}())" in source or \
            dispatched in source


@pytest.mark.parametrize("command", cli.COMMANDS, ids=lambda c: c.name)
def test_each_commands_help_lists_its_exit_codes_once(command, capsys):
    """``hoststack-perf COMMAND --help`` ends with the command's exit codes (its own help's
    list for ab and bisect, else the console script's), each meaning once."""
    assert cli.run([command.name, "--help"]) == 0
    out = capsys.readouterr().out
    for code, meaning in cli.exit_codes(command.name).items():
        assert out.count(meaning) == 1, (code, meaning)
        assert re.search(rf"^ +{code} +{re.escape(meaning)}$", out, re.M), (code, meaning)
    printed = f"exit codes (hoststack-perf {command.name}):" in out
    assert printed is (command.name not in cli.HELP_LISTS_EXIT_CODES)


@pytest.mark.parametrize("command", cli.COMMANDS, ids=lambda c: c.name)
def test_each_commands_help_names_it_as_it_was_called(command, capsys):
    assert cli.run([command.name, "--help"]) == 0
    usage = capsys.readouterr().out.split("\n\n")[0].splitlines()
    assert usage[0].startswith(f"usage: hoststack-perf {command.name} [-h]")
    indent = " " * len(f"usage: hoststack-perf {command.name} ")
    assert all(line.startswith(indent) and line[len(indent)] != " " for line in usage[1:])
    assert "python -m" not in "\n".join(usage)


def test_a_usage_is_renamed_and_its_wrapped_lines_follow_the_new_name():
    text = "usage: python -m x.y [-h] [--a A]\n" + " " * 21 + "[--b B]\n\ndoes it\n"
    assert cli.renamed_usage(text, "python -m x.y", "hp z") == \
        "usage: hp z [-h] [--a A]\n" + " " * 12 + "[--b B]\n\ndoes it\n"
    assert cli.renamed_usage("usage: other [-h]\n", "python -m x.y", "hp z") == \
        "usage: other [-h]\n"


def test_only_a_help_request_before_robots_arguments_lists_the_exit_codes(capsys):
    assert cli._asks_help(["--help"]) and cli._asks_help(["--suites", "tests", "-h"])
    assert not cli._asks_help(["--topology", "3node", "--", "--help"])
    assert not cli._asks_help([])
    # ab: a --help after the comparison file is robot's
    assert cli.run(["ab", "--print", str(EXAMPLE), "tests", "--help"]) == 0
    assert capsys.readouterr().out.rstrip().endswith(f"AB:{EXAMPLE.resolve()} tests --help")


def test_an_exit_code_passes_through(tmp_path, capsys):
    # the leftovers check of an unreadable output.xml exits 2; report of a non-run dir 2
    assert cli.run(["leftovers", str(tmp_path / "missing.xml")]) == 2
    assert cli.run(["report", str(tmp_path)]) == 2
    assert "not a run directory" in capsys.readouterr().err
    empty = tmp_path / "results"
    empty.mkdir()
    assert cli.run(["ingest", str(empty), "--store", str(tmp_path / "history")]) == 0


def test_an_unknown_command_is_a_usage_error(capsys):
    assert cli.run(["frob"]) == 2
    assert "invalid choice: 'frob'" in capsys.readouterr().err


def test_every_command_has_its_exit_codes():
    names = [c.name for c in cli.COMMANDS]
    assert set(names) == {*cli.EXIT_CODES, "nightly"}  # the nightly's are its own
    assert all(0 in cli.exit_codes(name) for name in names)
    text = cli.exit_codes_markdown()
    assert text.count("## hoststack-perf ") == len(cli.COMMANDS)
    assert "| 3 | the newest sample of some series is a regression" in text


def test_the_exit_codes_agree_with_the_commands_own():
    assert cli.EXIT_CODES["bisect"] == BISECT
    assert {nightly_run.EXIT_OK, nightly_run.EXIT_TESTS_FAILED, nightly_run.EXIT_BAD_RECORDS,
            nightly_run.EXIT_REGRESSION, nightly_run.EXIT_RUN_ERROR,
            nightly_run.EXIT_BAD_INPUT} == \
        set(cli.exit_codes("nightly"))
    assert {analysis.EXIT_OK, analysis.EXIT_BAD_INPUT, analysis.EXIT_REGRESSION} == \
        set(cli.EXIT_CODES["trend"])
    assert "regression" in cli.exit_codes("nightly")[3]
    assert "interrupted" in cli.exit_codes("nightly")[4]


def test_ab_is_robot_with_the_comparison_file():
    command, printed = cli.ab_command([str(EXAMPLE), "--", "-v", "TOPOLOGY:1node",
                                       "tests/tcp_term"], python="py")
    assert command == ["py", "-m", "robot", "--variable", f"AB:{EXAMPLE.resolve()}",
                       "-v", "TOPOLOGY:1node", "tests/tcp_term"]
    assert not printed
    assert cli.ab_command(["--print", str(EXAMPLE), "tests"], python="py") == \
        (["py", "-m", "robot", "--variable", f"AB:{EXAMPLE.resolve()}", "tests"], True)


def test_ab_prints_its_command_and_refuses_what_robot_would_misread(tmp_path, capsys):
    assert cli.run(["ab", "--print", str(EXAMPLE), "tests/ssl_proxy"]) == 0
    assert f"-m robot --variable AB:{EXAMPLE.resolve()} tests/ssl_proxy" in \
        capsys.readouterr().out
    assert cli.run(["ab", str(tmp_path / "none.yaml"), "tests"]) == 252
    assert "none.yaml: no such comparison file" in capsys.readouterr().err
    assert cli.run(["ab", str(EXAMPLE)]) == 252
    assert "the suites to run" in capsys.readouterr().err
    assert cli.run(["ab", str(EXAMPLE), "-v", "AB:other.yaml", "tests"]) == 252
    assert "-v AB is set from it" in capsys.readouterr().err
    assert cli.run(["ab", str(EXAMPLE), "--variable=AB:x", "tests"]) == 252
    assert cli.run(["ab"]) == 252  # argparse's usage error, in Robot's code


SPHINX = re.compile(r"``|:(mod|func|class|meth|data|attr):`")


@pytest.mark.parametrize("command", cli.COMMANDS, ids=lambda c: c.name)
def test_each_commands_help_has_one_example_and_no_sphinx_markup(command, capsys):
    assert cli.run([command.name, "--help"]) == 0
    out = capsys.readouterr().out
    assert out.count("example:") == 1
    example = out.split("example:\n", 1)[1].splitlines()[0].strip()
    assert example.startswith(f"hoststack-perf {command.name} ")
    assert not SPHINX.search(out), SPHINX.search(out)
    assert "exit status:" not in out  # a command's own summary of its codes: listed once
    for word in example.split():  # the files an example names are in the repository
        if word.startswith(("topologies/", "tests/")):
            assert (ROOT / word).exists(), word


def test_help_text_from_a_docstring_loses_its_markup():
    assert cli.plain("Ingest ``records.jsonl`` (:mod:`libraries.history.store`, "
                     ":func:`~x.y`, :data:`Z`)") == \
        "Ingest records.jsonl (libraries.history.store, x.y(), Z)"


def test_duet_and_bisect_help_say_what_they_take(capsys):
    assert cli.run(["duet", "--help"]) == 0
    out = capsys.readouterr().out
    assert "COMPARISON -- ROBOT_ARGS" in out and "after --" in out
    assert cli.run(["bisect", "--help"]) == 0
    assert "--builds YAML" in capsys.readouterr().out
    assert cli.run(["testbed", "--help"]) == 0
    out = capsys.readouterr().out
    assert all(f"  {action} " in out for action in ("up", "down", "status"))
    assert "the default" in out


def test_version_and_no_arguments(capsys):
    with pytest.raises(SystemExit) as stop:
        cli._parser().parse_args(["--version"])
    assert stop.value.code == 0
    assert re.fullmatch(r"hoststack-perf \S+\n", capsys.readouterr().out)
    assert cli.run(["--version"]) == 0
    assert capsys.readouterr().out.startswith("hoststack-perf ")
    assert cli.version() != "unknown"
    assert cli.run([]) == 0
    out = capsys.readouterr().out
    assert all(f"  {c.name} " in out for c in cli.COMMANDS) and "example:" in out


def test_bad_input_has_one_code_in_ab_duet_nightly_and_bisect():
    assert cli.BAD_INPUT == nightly_run.EXIT_BAD_INPUT == BISECT_BAD_INPUT == duet_run.BAD_INPUT
    assert cli.BAD_INPUT > 250  # never a count of failed tests
    for name in ("ab", "duet", "nightly", "bisect"):
        codes = cli.exit_codes(name)
        assert "bad input" in codes[cli.BAD_INPUT]
        assert not any("bad" in text and "option" in text for code, text in codes.items()
                       if code != cli.BAD_INPUT), name


@pytest.fixture
def no_robot(monkeypatch):
    """Fail a test that would start a Robot run (ab execs it, duet and nightly start it)."""
    def started(*args, **kwargs):
        raise AssertionError(f"a run was started: {args}")

    monkeypatch.setattr(cli.os, "execv", started)
    monkeypatch.setattr(duet_run.subprocess, "Popen", started)
    monkeypatch.setattr(nightly_run.subprocess, "Popen", started)
    monkeypatch.setattr(nightly_run, "execute", started)


def _absent_binary(tmp_path):
    path = tmp_path / "ab-absent.yaml"
    path.write_text(f"a: {{name: now}}\nb: {{name: new, tools: {{dut: {{nginx: "
                    f"{tmp_path}/absent/nginx}}}}}}\n")
    return path


@pytest.mark.parametrize(("args", "says"), [
    (["-v", "DURATION:2s"], "-v DURATION:2s: expected whole seconds"),
    (["-v", "TOPOLOGY:nowhere"], "nowhere.yaml: cannot read topology"),
    (["-v", "AB_LOOK:0"], "AB_LOOK"),
    (["-v", "CAPACITY_RANGE:9..1"], "CAPACITY_RANGE"),
])
def test_ab_refuses_bad_input_before_robot_starts(no_robot, args, says, capsys):
    assert cli.run(["ab", str(EXAMPLE), *args, "tests/tcp_term"]) == cli.BAD_INPUT
    assert says in capsys.readouterr().err


def test_ab_refuses_an_absent_binary_and_a_bad_topology_key(no_robot, tmp_path, capsys):
    comparison = _absent_binary(tmp_path)
    assert cli.run(["ab", str(comparison), "tests/tcp_term"]) == cli.BAD_INPUT
    assert f"b.tools.dut.nginx: {tmp_path}/absent/nginx: no such file" in \
        capsys.readouterr().err
    topology = tmp_path / "bad.yaml"
    topology.write_text((ROOT / "topologies" / "1node.yaml").read_text() + "\nfrobnicate: 1\n")
    assert cli.run(["ab", str(EXAMPLE), "-v", f"TOPOLOGY:{topology}", "tests"]) == \
        cli.BAD_INPUT
    assert "frobnicate: unknown key" in capsys.readouterr().err


def test_duet_refuses_bad_input_before_either_run_starts(no_robot, tmp_path, capsys):
    assert cli.run(["duet", str(EXAMPLE), "--", "-v", "DURATION:2s", "tests"]) == \
        cli.BAD_INPUT
    assert "-v DURATION:2s" in capsys.readouterr().err
    assert cli.run(["duet", str(_absent_binary(tmp_path)), "--", "tests"]) == cli.BAD_INPUT
    assert cli.run(["duet", str(EXAMPLE)]) == cli.BAD_INPUT  # no robot args: not "2 failed"
    assert cli.run(["duet", str(tmp_path / "none.yaml"), "--", "tests"]) == cli.BAD_INPUT
    assert "no such comparison file" in capsys.readouterr().err
    with pytest.raises(SystemExit) as stop:
        duet_run.main([str(EXAMPLE), "--bogus", "--", "tests"])  # python -m: argparse's exit
    assert stop.value.code == cli.BAD_INPUT


def test_nightly_refuses_bad_input_before_anything_runs(no_robot, tmp_path, capsys):
    results = ["--results", str(tmp_path / "results")]
    assert cli.run(["nightly", *results, "--topology", "nowhere"]) == cli.BAD_INPUT
    assert cli.run(["nightly", *results, "--", "-v", "DURATION:2s"]) == cli.BAD_INPUT
    assert "-v DURATION:2s" in capsys.readouterr().err
    assert cli.run(["nightly", *results, "--bogus"]) == cli.BAD_INPUT
    assert nightly_run.main([*results, "--topology", "nowhere"]) == cli.BAD_INPUT  # python -m
    assert nightly_run.main([*results, "--bogus"]) == cli.BAD_INPUT
    assert not (tmp_path / "results").exists()


def test_bisect_refuses_bad_input_with_the_same_code(tmp_path, capsys):
    assert cli.run(["bisect", "--topology", "3node", "--test", "1kb-10c-kernel-ssl-proxy",
                    "--builds", str(tmp_path / "none.yaml")]) == cli.BAD_INPUT
    assert "none.yaml" in capsys.readouterr().err
    assert cli.run(["bisect", "--topology", "3node"]) == cli.BAD_INPUT


def test_bisect_refuses_robots_bad_settings_as_ab_does(tmp_path, capsys, monkeypatch):
    """Every comparison is a robot run of these settings: one it would refuse is bad input
    before anything is measured (it was a failed comparison per pair of builds)."""
    builds = tmp_path / "builds.yaml"
    builds.write_text("builds:\n  - {name: r1}\n  - {name: r2, nginx: {proxy: {server: "
                      "['access_log /dev/null combined;']}}}\n")
    monkeypatch.setattr("libraries.bisect.bisect_command.RobotComparisons", None)  # nothing may run
    args = ["bisect", "--topology", "3node", "--test", "1kb-10c-kernel-ssl-proxy",
            "--builds", str(builds), "--results", str(tmp_path / "out"), "--"]
    assert cli.run([*args, "-v", "EXTENDED:maybe"]) == cli.BAD_INPUT
    assert "-v EXTENDED:maybe" in capsys.readouterr().err
    assert cli.run([*args, "-v", "JUDGE:some"]) == cli.BAD_INPUT
    assert "JUDGE" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@pytest.mark.integration
def test_python_m_libraries_cli_help_in_a_process():
    done = subprocess.run([sys.executable, "-m", "libraries.cli", "--help"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0
    assert "nightly" in done.stdout and "bisect" in done.stdout
    done = subprocess.run([sys.executable, "-m", "libraries.cli", "trend", "--nope"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2


def test_ab_print_runs_nothing_but_refuses_bad_input_first(no_robot, tmp_path, capsys):
    comparison = _absent_binary(tmp_path)
    assert cli.run(["ab", "--print", str(comparison), "tests"]) == cli.BAD_INPUT
    out, err = capsys.readouterr()
    assert out == "" and f"b.tools.dut.nginx: {tmp_path}/absent/nginx: no such file" in err
    assert cli.run(["ab", "--print", str(EXAMPLE), "-v", "DURATION:2s", "tests"]) == \
        cli.BAD_INPUT
    assert "-v DURATION:2s" in capsys.readouterr().err
    assert cli.run(["ab", "--print", str(EXAMPLE), "tests"]) == 0
    assert f"AB:{EXAMPLE.resolve()}" in capsys.readouterr().out


def test_python_m_nightly_checks_robots_settings_as_hoststack_perf_does(no_robot, tmp_path):
    results = ["--results", str(tmp_path / "results")]
    assert nightly_run.main([*results, "--", "-v", "DURATION:2s", "tests"]) == cli.BAD_INPUT
    assert nightly_run.main([*results, "--", "-v", "EXTENDED:maybe"]) == cli.BAD_INPUT
    assert not (tmp_path / "results").exists()


@pytest.mark.integration
def test_python_m_duet_run_refuses_bad_input_as_hoststack_perf_duet_does(tmp_path):
    done = subprocess.run([sys.executable, "-m", "libraries.ab.duet_run", str(EXAMPLE),
                           "-d", str(tmp_path / "duet"), "--", "-v", "DURATION:2s", "tests"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == cli.BAD_INPUT, done.stderr
    assert "hoststack-perf duet: error: -v DURATION:2s" in done.stderr
    assert not (tmp_path / "duet").exists()


def test_the_checked_settings_are_robots_last_word():
    preflight = importlib.import_module("libraries.cases.input_checks")
    args = ["-v", "DURATION:2s", "--variable", "DURATION:3", "--variable=TRIALS:7", "tests"]
    assert preflight.robot_variables(args) == {"DURATION": "3", "TRIALS": "7"}
    assert preflight.run_problems(args) == []
    assert preflight.run_problems(["--variable=TRIALS:0", "tests"]) == \
        ["-v TRIALS:0: expected an integer >= 1, got '0'"]
