"""Records files under bad conditions: a full disk while writing, a line that is not UTF-8,
a "file" that never ends, a broken line in a run's records: every error names file (and
line), nothing is written halfway, the run report still describes the run."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from libraries.report import trend_command
from libraries.report.run_report import render_run_report
from libraries.results import records
from libraries.results.records import RecordError, append_record, iter_records, read_lines

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "runs"
REAL = (FIXTURES / "full-3node" / "records.jsonl").read_text().splitlines()


def _real(index: int = 0) -> dict:
    return json.loads(REAL[index])


@pytest.fixture
def tiny_fs(tmp_path):
    """A 16 KiB tmpfs (root only), unmounted afterwards."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mount = tmp_path / "tiny"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", str(mount)], check=True)
    yield mount
    subprocess.run(["umount", str(mount)], check=True)


def _fill(mount: Path, leave: int) -> None:
    """Fill ``mount`` until about ``leave`` bytes stay free."""
    stat = os.statvfs(mount)
    free = stat.f_bavail * stat.f_frsize
    (mount / "ballast").write_bytes(b"x" * max(0, free - leave))


def test_a_record_that_does_not_fit_leaves_no_partial_line(tiny_fs):
    path = tiny_fs / "records.jsonl"
    first = _real(0)
    first["telemetry"] = {"unavailable": "trimmed: a small record"}
    append_record(path, first)
    kept = path.read_bytes()
    _fill(tiny_fs, leave=4096)
    big = _real(1)
    assert len(json.dumps(big)) > 8192  # a real record with telemetry: bigger than what is left
    with pytest.raises(RecordError, match=rf"{path}: the record for {big['test_id']} not "
                                          r"written \(No space left on device\)"):
        append_record(path, big)
    assert path.read_bytes() == kept  # cut back: the earlier record intact, no partial line
    assert [r["test_id"] for r in iter_records(path)] == [first["test_id"]]


def test_a_device_that_takes_nothing_is_named():
    with pytest.raises(RecordError, match=r"^/dev/full: the record for .* not written \(No "
                                          r"space left on device\)"):
        append_record(Path("/dev/full"), _real(0))


def test_reading_a_device_that_never_ends_is_refused_at_once():
    with pytest.raises(RecordError, match=r"^/dev/full: not a regular file"):
        list(read_lines(Path("/dev/full")))


def test_a_line_without_end_is_refused_naming_the_line(tmp_path, monkeypatch):
    monkeypatch.setattr(records, "MAX_LINE_BYTES", 1000)
    path = tmp_path / "records.jsonl"
    path.write_text(REAL[0][:900] + "\n" + "x" * 5000)
    lines = read_lines(path)
    assert next(lines)[0] == 1
    with pytest.raises(RecordError, match=rf"{path}:2: line longer than 1000 bytes"):
        next(lines)


def test_a_line_that_is_not_utf8_names_file_and_line(tmp_path, capsys):
    run = tmp_path / "20261122-030000-ab12"
    run.mkdir()
    path = run / "records.jsonl"
    path.write_bytes(REAL[0].encode() + b"\n" + REAL[1].encode()[:50] + b"\xff\xfe"
                     + REAL[1].encode()[50:] + b"\n")
    assert trend_command.main([str(tmp_path)]) == 2
    assert f"{path}:2: not valid UTF-8 (byte 50 of the line: " in capsys.readouterr().err


def test_the_run_report_describes_a_run_with_an_unreadable_record(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(FIXTURES / "full-3node", run)
    lines = (run / "records.jsonl").read_text().splitlines()
    lines[1] = lines[1][: len(lines[1]) // 2]  # cut short, as a full disk used to leave it
    (run / "records.jsonl").write_text("\n".join(lines) + "\n")
    page = render_run_report(run)
    assert "Records that could not be read" in page
    assert f"{run / 'records.jsonl'}:2: not valid JSON" in page
    assert json.loads(lines[0])["name"] in page  # the readable records are all there
    assert json.loads(lines[2])["name"] in page


@pytest.mark.e2e
def test_a_run_whose_record_does_not_fit_fails_that_test_and_reports_the_run(tmp_path,
                                                                             tiny_fs):
    """The issue's run: tcp_term *passed* with its 14 KB record cut at 4,096 bytes, and the
    loss showed only as a warning that the run report could not be written."""
    _fill(tiny_fs, leave=4096)
    out = tmp_path / "out"
    out.mkdir()
    (out / "records.jsonl").symlink_to(tiny_fs / "records.jsonl")
    run = subprocess.run(
        [os.sys.executable, "-m", "robot", "-d", str(out), "-v", "RUN_ID:full",
         "-v", "TOPOLOGY:3node", "-v", "TRIALS:1", "-v", "DURATION:1", "-v", "WARMUP:0",
         "-t", "1s-kernel-tcp-term", "--console", "dotted", "tests/tcp_term/kernel.robot"],
        cwd=Path(__file__).resolve().parent.parent, capture_output=True, text=True,
        timeout=300, check=False)
    assert run.returncode == 1, run.stdout[-2000:]
    lost = (f"{out / 'records.jsonl'}: the record for 3node/tcp_term/1s-kernel-tcp-term not "
            "written (No space left on device)")
    assert lost in run.stdout
    assert (tiny_fs / "records.jsonl").read_bytes() == b""  # no partial line
    closing = run.stdout.split("Failed tests (1):\n", 1)[1]  # the run's last words
    assert closing.startswith("  Kernel.1s-kernel-tcp-term: ") and lost in closing
    page = (out / "run-report.html").read_text()
    assert "Tests without a record" in page and lost in page
