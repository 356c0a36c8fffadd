"""Tests of libraries.keywords.progress: per-trial console lines, verbose console only."""

from __future__ import annotations

import io
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from robot.output.console.dotted import DottedConsole
from robot.output.console.verbose import VerboseConsole

from libraries.keywords.progress import (
    ConsoleProgress,
    console_line,
    describe_result,
    verbose_console,
)
from libraries.results.adaptive import run_interleaved
from libraries.results.measurement import AllObservers
from libraries.results.plan import TrialPlan


def _console() -> tuple[VerboseConsole, io.StringIO]:
    out = io.StringIO()
    console = VerboseConsole(width=60, colors="OFF", markers="OFF", stdout=out, stderr=out)
    console.info("1kb-10c-kernel-ssl-proxy", "")
    return console, out


def test_a_trial_line_sits_between_two_copies_of_the_test_name():
    console, out = _console()
    progress = ConsoleProgress(console, clock=iter([0.0, 10.0]).__next__)
    progress.trial_finished("proxy", 2, 5, SimpleNamespace(requests_per_second=15321.0))
    lines = out.getvalue().split("\n")
    assert lines[0].startswith("1kb-10c-kernel-ssl-proxy ")
    assert lines[1] == "  proxy trial 2/5: 15.3k req/s"
    assert lines[2].startswith("1kb-10c-kernel-ssl-proxy ")  # the status goes after it


def test_lines_closer_than_the_interval_are_dropped():
    console, out = _console()
    times = iter([0.0, 1.0, 2.9, 3.1])
    progress = ConsoleProgress(console, clock=times.__next__, min_interval=3.0)
    for number in range(1, 5):
        progress.trial_finished("iperf3", number, 4, SimpleNamespace(gbps=14.21))
    printed = [line for line in out.getvalue().split("\n") if "trial" in line]
    assert printed == ["  iperf3 trial 1/4: 14.2 Gbit/s", "  iperf3 trial 4/4: 14.2 Gbit/s"]


def test_nothing_is_printed_without_a_verbose_console(capsys):
    progress = ConsoleProgress(console=None)
    progress._console = None  # e.g. --console dotted: verbose_console() gave None
    progress.trial_finished("proxy", 1, 3, SimpleNamespace(requests_per_second=1.0))
    assert capsys.readouterr().out == ""


def test_the_active_console_kind_is_recognised(monkeypatch):
    out = io.StringIO()
    monkeypatch.setattr("robot.output.LOGGER._Logger__console",
                        DottedConsole(width=60, colors="OFF", stdout=out, stderr=out))
    assert verbose_console() is None
    verbose = VerboseConsole(width=60, colors="OFF", stdout=out, stderr=out)
    monkeypatch.setattr("robot.output.LOGGER._Logger__console", verbose)
    assert verbose_console() is verbose
    # as Robot 7 registers it: wrapped in a listener facade
    monkeypatch.setattr("robot.output.LOGGER._Logger__console",
                        SimpleNamespace(listener=verbose))
    assert verbose_console() is verbose


def test_results_are_described_by_their_headline_figure():
    assert describe_result(SimpleNamespace(requests_per_second=812.3)) == "812 req/s"
    assert describe_result(SimpleNamespace(gbps=9.357)) == "9.36 Gbit/s"
    assert describe_result(object()) == "done"


def test_all_observers_wrap_in_order_and_unwrap_in_reverse():
    calls = []

    class Recorder:
        def __init__(self, name):
            self.name = name

        def trial_started(self, variant, round_number, total):
            calls.append(("start", self.name, variant, round_number, total))

        def trial_finished(self, variant, round_number, total, result):
            calls.append(("finish", self.name, variant, round_number, result))

    plan = TrialPlan(trials=2, duration=1, warmup=1)
    results, _ = run_interleaved({"a": lambda t: t.seconds * 10}, plan,
                                 AllObservers(Recorder("progress"), Recorder("cpu")))
    assert results == {"a": [10, 10]}
    assert calls[:4] == [("start", "progress", "a", 1, 2), ("start", "cpu", "a", 1, 2),
                         ("finish", "cpu", "a", 1, 10), ("finish", "progress", "a", 1, 10)]
    assert len(calls) == 8  # the warm-up is not observed


def _robot(*options: str) -> str:
    fixture = Path(__file__).parent / "fixtures" / "progress"
    done = subprocess.run([sys.executable, "-m", "robot", "--output", "NONE", "--report", "NONE",
                           "--log", "NONE", "--pythonpath", str(fixture), *options,
                           str(fixture / "progress.robot")],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@pytest.mark.integration
def test_a_real_robot_run_prints_one_line_per_measured_trial():
    out = _robot()
    lines = [line.strip() for line in out.splitlines() if "trial" in line and "/2:" in line]
    assert lines == ["direct trial 1/2: 18.3k req/s", "proxy trial 1/2: 15.3k req/s",
                     "direct trial 2/2: 18.3k req/s", "proxy trial 2/2: 15.3k req/s"]
    assert re.search(r"Trials Report Progress\s+\| PASS \|", out)  # the status keeps its name


@pytest.mark.integration
def test_dotted_and_quiet_consoles_stay_quiet():
    for console in ("dotted", "quiet"):
        assert "trial 1/2" not in _robot("--console", console)


def test_a_long_steps_line_is_printed_at_once_on_the_verbose_console_only(monkeypatch):
    console, out = _console()
    monkeypatch.setattr("robot.output.LOGGER._Logger__console", console)
    console_line("proxy capacity window 1: 9k req/s for 30 s: held p99<=10ms")
    console_line("proxy capacity window 2: 9.5k req/s for 30 s: missed p99<=10ms")  # unthrottled
    lines = out.getvalue().split("\n")
    assert lines[1:4:2] == ["  proxy capacity window 1: 9k req/s for 30 s: held p99<=10ms",
                            "  proxy capacity window 2: 9.5k req/s for 30 s: missed p99<=10ms"]
    dotted = io.StringIO()
    monkeypatch.setattr("robot.output.LOGGER._Logger__console",
                        DottedConsole(width=60, colors="OFF", stdout=dotted, stderr=dotted))
    console_line("not printed")
    assert dotted.getvalue() == ""
