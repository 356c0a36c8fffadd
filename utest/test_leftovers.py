"""The check that a finished run left nothing (CI's e2e job runs it after the suites)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from libraries.testbed.leftovers import leftovers, main, run_prefixes, run_started

OUTPUT = ('<?xml version="1.0" encoding="UTF-8"?>\n<robot generator="Robot 7.5" '
          'generated="2026-11-28T03:09:58.123456" rpa="false" schemaversion="5">\n'
          '<msg>started nginx -p /tmp/hoststack-hr62053/dut/proxy</msg>'
          '<msg>@@hoststack-hdrplot not a folder</msg></robot>')


def test_the_run_is_known_by_its_folders_prefixes_and_its_start():
    assert run_prefixes(OUTPUT) == {"hr62053"}
    assert run_started(OUTPUT) == time.mktime((2026, 11, 28, 3, 9, 58, 0, 0, -1))
    with pytest.raises(ValueError, match="not a Robot output file"):
        run_started("<html>not robot</html>")


def _prefix() -> str:
    return "hz" + uuid.uuid4().hex[:6]


def test_a_run_folder_left_in_tmp_is_named():
    prefix = _prefix()
    folder = Path(f"/tmp/hoststack-{prefix}")
    folder.mkdir()
    try:
        assert leftovers({prefix}, since=time.time()) == [str(folder)]
    finally:
        shutil.rmtree(folder)
    assert leftovers({prefix}, since=time.time()) == []


@pytest.mark.integration
def test_a_process_naming_the_run_is_named_and_the_command_exits_1(tmp_path, capsys):
    prefix = _prefix()
    output = tmp_path / "output.xml"
    output.write_text(OUTPUT.replace("hr62053", prefix))
    # One process that never forks: `sh -c` forks its command, and a child caught between
    # fork and exec still shows sh's command line after sh is killed (seen under load).
    naming = f"/tmp/hoststack-{prefix}/x"
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", naming])
    try:
        assert main([str(output), "--settle", "0"]) == 1
        printed = capsys.readouterr().out
        assert f"process {sleeper.pid}: {sys.executable} -c import time; time.sleep(60) {naming}" \
            in printed
    finally:
        sleeper.kill()
        sleeper.wait(timeout=10)
    assert main([str(output), "--settle", "0"]) == 0
    assert "nothing left by the run's 1 testbed(s)" in capsys.readouterr().out


def test_an_unreadable_output_is_exit_2(tmp_path, capsys):
    assert main([str(tmp_path / "missing.xml")]) == 2
    assert "missing.xml" in capsys.readouterr().err
