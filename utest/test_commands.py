"""Each command answers at its home (``libraries.report``, ``libraries.report.run_report``,
``libraries.history.ingest``, ``libraries.nightly``), whose ``--help`` names that spelling; the
wave-3 spellings (``libraries.trend``, ``.trend.report``, ``.trend.ingest``, ``.trend.nightly``)
are gone."""

from __future__ import annotations

import subprocess
import sys

import pytest

SPELLINGS = [
    ("libraries.report", "python -m libraries.report"),
    ("libraries.report.run_report", "python -m libraries.report.run_report"),
    ("libraries.history.ingest", "python -m libraries.history.ingest"),
    ("libraries.nightly", "python -m libraries.nightly"),
]


@pytest.mark.parametrize(("module", "prog"), SPELLINGS, ids=[m for m, _ in SPELLINGS])
def test_a_command_answers_at_its_home(module: str, prog: str):
    done = subprocess.run([sys.executable, "-m", module, "--help"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"usage: {prog} ")


@pytest.mark.parametrize("module", ["libraries.trend", "libraries.trend.report",
                                    "libraries.trend.ingest", "libraries.trend.nightly"])
def test_an_old_spelling_is_no_command(module: str):
    done = subprocess.run([sys.executable, "-m", module, "--help"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode != 0
    assert f"No module named {module}" in done.stderr or "cannot be directly executed" in \
        done.stderr, done.stderr


def test_a_command_passes_its_arguments_and_exit_status_through(tmp_path):
    done = subprocess.run([sys.executable, "-m", "libraries.report", str(tmp_path / "none")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "no such file or directory" in done.stderr
