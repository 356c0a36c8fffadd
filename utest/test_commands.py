"""The command lines keep their wave-3 spellings: each old spelling runs the command at its new
home (``libraries.report``, ``libraries.report.run``, ``libraries.history.ingest``,
``libraries.nightly``), whose ``--help`` names the new spelling."""

from __future__ import annotations

import subprocess
import sys

import pytest

SPELLINGS = [
    ("libraries.trend", "python -m libraries.report"),
    ("libraries.trend.report", "python -m libraries.report.run"),
    ("libraries.trend.ingest", "python -m libraries.history.ingest"),
    ("libraries.trend.nightly", "python -m libraries.nightly"),
    ("libraries.report", "python -m libraries.report"),
    ("libraries.nightly", "python -m libraries.nightly"),
]


@pytest.mark.parametrize(("module", "prog"), SPELLINGS, ids=[m for m, _ in SPELLINGS])
def test_a_command_answers_under_its_old_and_new_spelling(module: str, prog: str):
    done = subprocess.run([sys.executable, "-m", module, "--help"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"usage: {prog} ")


def test_an_old_spelling_passes_its_arguments_and_exit_status_through(tmp_path):
    done = subprocess.run([sys.executable, "-m", "libraries.trend", str(tmp_path / "none")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "no such file or directory" in done.stderr
