"""A duet's two run reports link each other (libraries.report.duet_links): side b's page says
the verdicts are on side a's and links it; side a's links side b's run."""

from __future__ import annotations

import json
import re
from pathlib import Path

from libraries.ab import duet_run
from libraries.report.duet_links import DUET_FILE, duet_banner, duet_note, duet_peer
from libraries.report.run_report import render_run_report, summary_text


def _run(folder: Path, start: str, status: str = "SKIP") -> Path:
    folder.mkdir(parents=True)
    (folder / "run.json").write_text(json.dumps({"run_id": folder.name, "start_time": start}))
    (folder / "tests.jsonl").write_text(json.dumps(
        {"test_id": "3node/tcp_term/1s-kernel-tcp-term", "name": "1s-kernel-tcp-term",
         "status": status, "message": "duet A/B: side b's run measured beside side a's"})
        + "\n")
    return folder


def test_each_side_links_the_other_sides_run_of_the_same_duet(tmp_path: Path):
    duet = tmp_path / "duet"
    duet.mkdir()
    assert duet_run.write_duet_file(duet, "/x/ab.yaml").name == DUET_FILE == duet_run.DUET_FILE
    a = _run(duet / "a" / "20261129-030000-aaaa", "2026-11-29T03:00:00+00:00", "PASS")
    _run(duet / "b" / "20261128-010000-old0", "2026-11-28T01:00:00+00:00")  # an earlier duet
    b = _run(duet / "b" / "20261129-030001-bbbb", "2026-11-29T03:00:01+00:00")
    assert duet_peer(a).link == "../../b/20261129-030001-bbbb/run-report.html"
    assert duet_peer(b).link == "../../a/20261129-030000-aaaa/run-report.html"
    page = render_run_report(b)
    assert re.search(r"Duet A/B, side b: the verdicts are on side a's page: <a href=\""
                     r"\.\./\.\./a/20261129-030000-aaaa/run-report\.html\">", page)
    assert "side b's run: <a href=\"../../b/20261129-030001-bbbb/run-report.html\">" in \
        render_run_report(a)
    summary = summary_text(b)
    assert "**Duet A/B, side b: the verdicts are on side a's page: [side a's run report](" \
        "../../a/20261129-030000-aaaa/run-report.html).**" in summary
    # RUN_ID given: the side's folder is the run directory
    _run(tmp_path / "d2" / "a", "2026-11-29T03:00:00+00:00")
    _run(tmp_path / "d2" / "b", "2026-11-29T03:00:00+00:00")
    duet_run.write_duet_file(tmp_path / "d2", "/x/ab.yaml")
    assert duet_peer(tmp_path / "d2" / "b").link == "../a/run-report.html"


def test_a_run_of_no_duet_has_no_banner(tmp_path: Path):
    run = _run(tmp_path / "results" / "20261129-030000-aaaa", "2026-11-29T03:00:00+00:00")
    assert duet_peer(run) is None and duet_banner(run) == "" and duet_note(run) == ""
    (tmp_path / "results" / "b").mkdir()  # folders named like sides, no duet.json
    assert duet_peer(run) is None
