"""The night's ``summary.md`` (in the run folder, replacing the run's own): the gate's exit
code and what it means, each suite run's, the merge's and the trend tool's exit codes, the
series the gate found regressed or pending (from the ``trend.md`` the trend tool wrote), then
the run's own summary (:func:`libraries.report.run_report.summary_text`: its tests, links to the run
report and the log), with relative links to the dashboard and the trend summary. Short enough
for a CI job summary.
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path
from typing import Any

from libraries.report.run_report import summary_text
from libraries.report.run_summary import LISTED, SUMMARY
from libraries.results.records import RecordError

LOG = logging.getLogger(__name__)

GATE = {
    0: "the suites passed and no series regressed",
    1: "tests failed (a Robot exit 1-250, or the merge of the outputs failed)",
    2: "the records are bad (the trend tool's exit 2)",
    3: "the newest sample of some series is a regression (with --reference: a confirmed "
       "step of the ratio to the reference)",
    4: "a suite run could not run or was interrupted (Robot exit >= 251, a missing command,"
       " a timeout), or no lab of the pool passed its pre-flight",
    252: "bad input, refused before anything ran: bad options, a bad -v setting after --, "
         "topology, --reference, --series or --duet",
}
"""What each exit code of the nightly means (``hoststack-perf nightly``)."""
FLAGGED = ("regression", "pending")
"""The series a night's summary lists (the trend summary has the rest)."""
_CELL = re.compile(r"(?<!\\)\|")


def flagged_series(trend_markdown: str) -> list[list[str]]:
    """The rows of the trend tool's Markdown table (test, metric, last value, trend average,
    change, interval check, classification) classed regression or pending, regressions
    first; ``ValueError`` when the text has no such table."""
    rows = [[cell.strip() for cell in _CELL.split(line.strip())[1:-1]]
            for line in trend_markdown.splitlines() if line.lstrip().startswith("|")]
    if len(rows) < 2 or rows[0][-1] != "classification":
        raise ValueError("no trend table (test ... classification) in the trend summary")
    found = [row for row in rows[2:] if row and row[-1] in FLAGGED]
    return sorted(found, key=lambda row: FLAGGED.index(row[-1]))


def _link(text: str, target: Path, run_dir: Path) -> str:
    return f"[{text}]({os.path.relpath(target, run_dir)})" if target.is_file() else ""


def render_night_summary(run_id: str, codes: dict[str, Any], trend_markdown: str | None,
                         run_summary: str, links: list[str]) -> str:
    """The Markdown of a night: ``codes`` (``status``, ``run_codes``, ``merge_code``,
    ``trend_code``: the runner's outcome), the trend tool's ``trend_markdown`` (None: not
    written), the run's own ``run_summary`` (title at ``##``), ``links`` (Markdown)."""
    status = int(codes.get("status", 0))
    parts = [f"run on {name} {code}" for name, code in codes.get("run_codes", {}).items()] \
        or ["no run started"]
    parts += [f"{what} {codes[key]}" for key, what in
              (("merge_code", "merge"), ("trend_code", "trend tool")) if codes.get(key) is not None]
    lines = [f"# Nightly {run_id}: exit {status}", "", " · ".join(x for x in links if x), "",
             f"Gate: **exit {status}**: {GATE.get(status, 'unknown exit code')}.", "",
             f"Exit codes: {', '.join(parts)}.", ""]
    try:
        series = flagged_series(trend_markdown) if trend_markdown is not None else None
    except ValueError as error:
        series, why = None, str(error)
    else:
        why = "the trend summary was not written"
    if series is None:
        lines += [f"Series: not judged ({why}).", ""]
    else:
        counts = {kind: sum(row[-1] == kind for row in series) for kind in FLAGGED}
        lines += [f"## Series: {counts['regression']} regression(s), {counts['pending']} "
                  "pending", ""]
        if series:
            lines += ["| test | metric | last value | change | interval check | class |",
                      "|---|---|---|---|---|---|"]
            lines += [f"| {' | '.join(row[i] for i in (0, 1, 2, 4, 5, 6))} |"
                      for row in series[:LISTED]]
            if len(series) > LISTED:
                lines.append(f"- ... and {len(series) - LISTED} more (see the trend summary)")
            lines.append("")
    return "\n".join([*lines, run_summary.rstrip(), ""])


def write_night_summary(run_dir: Path, run_id: str, codes: dict[str, Any], html: Path,
                        markdown: Path) -> Path | None:
    """Write ``<run_dir>/summary.md`` for the night (its path; None, with a warning, when
    the run folder cannot be read)."""
    try:
        run_summary = summary_text(run_dir, "##")
    except (OSError, ValueError, RecordError) as error:
        run_summary = f"## Run {run_id}\n\nnot summarised: {error}\n"
    try:
        trend = markdown.read_text(encoding="utf-8") if markdown.is_file() else None
        links = [_link("trend dashboard", html, run_dir),
                 _link("trend summary", markdown, run_dir)]
        target = run_dir / SUMMARY
        target.write_text(render_night_summary(run_id, codes, trend, run_summary, links),
                          encoding="utf-8")
    except OSError as error:
        LOG.warning("summary.md not written: %s", error)
        return None
    return target
