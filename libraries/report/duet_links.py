"""A duet's two run reports link to each other: side b's page says the verdicts are on side
a's page and links it; side a's page links side b's run.

A duet (``python -m libraries.ab.duet_run COMPARISON -d DIR -- ...``) runs side a in
``DIR/a`` and side b in ``DIR/b`` and describes itself in ``DIR/duet.json``
(:data:`libraries.ab.duet_run.DUET_FILE`: the report does not import the launcher's layer).
A run directory is that side's folder (``-v RUN_ID`` given) or a folder in it (one per run,
named by its run id); the other side's run is the one in the other folder whose start is
nearest this run's (both start together; a folder reused by several duets holds several).
"""

from __future__ import annotations

import html
import json
import os
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

DUET_FILE = "duet.json"
"""The duet's description in its output folder (the launcher's ``DUET_FILE``)."""
PAGE = "run-report.html"


@dataclass(frozen=True)
class DuetPeer:
    """This run's side of a duet and the other side's run report (relative to this run's
    directory; None when the other side's run is not found)."""

    side: str
    peer: str
    link: str | None
    duet_dir: Path


def _start(run_dir: Path) -> datetime | None:
    try:
        return datetime.fromisoformat(json.loads((run_dir / "run.json").read_text())
                                      ["start_time"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _runs_in(folder: Path) -> list[Path]:
    """The run directories of one side's folder: itself, else its sub-folders with a run."""
    def is_run(path: Path) -> bool:
        return any((path / name).is_file() for name in ("run.json", "tests.jsonl",
                                                        "records.jsonl"))
    if is_run(folder):
        return [folder]
    return sorted(p for p in folder.iterdir() if p.is_dir() and is_run(p)) \
        if folder.is_dir() else []


def _nearest(runs: list[Path], mine: datetime | None) -> Path | None:
    """The run that started nearest ``mine``; without start times the last (run ids sort by
    their start)."""
    if not runs:
        return None
    if mine is None:
        return runs[-1]

    def distance(run: Path) -> float:
        start = _start(run)
        try:
            return abs((start - mine).total_seconds()) if start else float("inf")
        except TypeError:  # one with a time zone, one without
            return float("inf")
    return min(reversed(runs), key=distance)


def duet_peer(run_dir: Path) -> DuetPeer | None:
    """The duet ``run_dir`` belongs to (None when it is no duet side's run)."""
    run_dir = run_dir.resolve()
    for duet_dir in (run_dir.parent, run_dir.parent.parent):
        try:
            sides = json.loads((duet_dir / DUET_FILE).read_text())["sides"]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        relative = run_dir.relative_to(duet_dir).parts
        side = next((key for key, folder in sides.items() if relative[0] == folder), None)
        if side not in ("a", "b"):
            continue
        peer = "b" if side == "a" else "a"
        runs = _runs_in(duet_dir / sides[peer])
        chosen = _nearest(runs, _start(run_dir))
        link = os.path.relpath(chosen / PAGE, run_dir) if chosen else None
        return DuetPeer(side, peer, link, duet_dir)
    return None


def duet_banner(run_dir: Path) -> str:
    """The page's line about its duet (empty for any other run)."""
    found = duet_peer(run_dir)
    if found is None:
        return ""
    where = (f'<a href="{html.escape(found.link)}">side {found.peer}\'s run report</a>'
             if found.link else f"side {found.peer}'s run in "
             f"<code>{html.escape(str(found.duet_dir / found.peer))}</code>")
    if found.side == "b":
        return ('<p class="duet"><b>Duet A/B, side b: the verdicts are on side a\'s page: '
                f"{where}.</b> This run measured beside side a's, which recorded and judged "
                "every test; its measured tests end skipped here.</p>\n")
    return ('<p class="duet"><b>Duet A/B, side a</b>: this run measured beside side b\'s and '
            f"judged every test (the verdicts below); side b's run: {where}.</p>\n")


def duet_note(run_dir: Path) -> str:
    """The summary's line about its duet (Markdown; empty for any other run)."""
    found = duet_peer(run_dir)
    if found is None:
        return ""
    where = f"[side {found.peer}'s run report]({found.link})" if found.link else \
        f"side {found.peer}'s run in `{found.duet_dir / found.peer}`"
    if found.side == "b":
        return (f"**Duet A/B, side b: the verdicts are on side a's page: {where}.** This run "
                "measured beside it; its measured tests end skipped here.")
    return f"Duet A/B, side a: the verdicts are here; side b's run: {where}."
