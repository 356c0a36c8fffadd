"""A run's ``summary.md``: short enough for a CI job summary or a pull-request comment.

The status counts, every failed test with its whole message, what each A/B comparison's
side b sets, every A/B test with its change, interval and verdict, the skipped tests grouped
by reason, and relative links to ``run-report.html`` and Robot's ``log.html``. Written
beside the run report at the end of every run (:func:`libraries.report.run_report.write_summary`);
the nightly and the bisection write their own (:mod:`libraries.nightly.night_summary`,
:mod:`libraries.bisect.bisect_summary`). Pure: it renders what it is given.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from libraries.report.ab_section import side_changes

SUMMARY = "summary.md"
"""The summary's file name, beside ``run-report.html``."""
LISTED = 20
"""At most this many failed tests and A/B rows are listed; the rest are counted."""


def whole_message(message: str | None) -> str:
    """A test's whole message, never cut (issue 63: a failure cut mid-sentence at 200
    characters): its lines joined with `` / ``, up to a ``| measured:`` headline (the figures,
    which the run report shows), safe in a Markdown list item or table cell."""
    lines = [" ".join(line.split()) for line in (message or "").splitlines()]
    text = " / ".join(line for line in lines if line)
    text = text.split(" | measured: ")[0].strip() or "(no message)"
    return text.replace("|", "\\|")


def _more(count: int, what: str) -> list[str]:
    return [f"- ... and {count} more {what} (see the run report)"] if count > 0 else []


def _pct(value: Any) -> str:
    return f"{(value - 1) * 100:+.1f}" if isinstance(value, int | float) else "?"


def ab_rows(records: Sequence[dict[str, Any]], tests: dict[str, dict[str, Any]]
            ) -> list[str]:
    """One Markdown table row per A/B test and metric: test, sides, change [interval],
    verdict, the test's status."""
    rows = []
    for record in records:
        block = record["ab"]
        sides = f"{block['sides']['a']['name']} -> {block['sides']['b']['name']}"
        status = (tests.get(record["test_id"]) or {}).get("status", record.get("verdict", "?"))
        for metric, c in block["metrics"].items():
            change = f"{c['change_pct']:+.1f} %" if c.get("change_pct") is not None else "-"
            if c.get("low") is not None and c.get("high") is not None:
                change += f" [{_pct(c['low'])}, {_pct(c['high'])}]"
            rows.append(f"| {record['name']} | {metric} | {sides} | {change} | "
                        f"{c.get('verdict', '?')} | {status} |")
    return rows


def render_summary(records: Sequence[dict[str, Any]], tests: Sequence[dict[str, Any]],
                   run: dict[str, Any], run_id: str, log: str | None,
                   report: str | None = "run-report.html", heading: str = "#",
                   note: str = "") -> str:
    """The Markdown summary of one run: ``records`` (its records), ``tests`` (the lines of
    ``tests.jsonl``, the latest per test id counted), ``run`` (``run.json``), links to
    ``report`` and ``log`` (relative; None: not linked). ``heading`` is the title's level
    (``##`` when embedded in another summary); ``note``: a paragraph under the links (a duet
    side's pointer to the other side's page)."""
    latest = {t["test_id"]: t for t in tests}
    statuses = Counter(t["status"] for t in latest.values())
    counts = ", ".join(f"{statuses[s]} {word}" for s, word in
                       (("FAIL", "failed"), ("PASS", "passed"), ("SKIP", "skipped"))
                       if statuses[s]) or (f"{len(records)} record(s), no test lines"
                                           if records else "no tests")
    sub = heading + "#"
    links = [f"[run report]({report})" if report else "", f"[log]({log})" if log else ""]
    about = [f"{key} {str(run[key])[:12] if key == 'project_revision' else run[key]}"
             for key in ("topology", "project_revision", "host") if run.get(key)]
    lines = [f"{heading} Run {run_id}: {counts}", "",
             " · ".join(x for x in [*links, *about] if x), "", *([note, ""] if note else [])]
    failed = [t for t in latest.values() if t["status"] == "FAIL"]
    if failed:
        lines += [f"{sub} Failed ({len(failed)})", ""]
        lines += [f"- `{t['name']}` ({t['test_id'].rsplit('/', 1)[0]}): "
                  f"{whole_message(t.get('message'))}" for t in failed[:LISTED]]
        lines += [*_more(len(failed) - LISTED, "failed tests"), ""]
    ab = [r for r in records if r.get("ab")]
    if ab:
        rows = ab_rows(ab, latest)
        names = sorted({r["ab"]["comparison"]["name"] for r in ab})
        sets = {r["ab"]["comparison"]["sha256"]: r["ab"]["sides"]["b"] for r in ab}
        lines += [f"{sub} A/B ({len(ab)} tests; comparison {', '.join(names)})", "",
                  *[f"- side b `{side['name']}` sets: {side_changes(side)}"
                    for side in sets.values()], "",
                  "| test | metric | a -> b | change [interval] | verdict | status |",
                  "|---|---|---|---|---|---|", *rows[:LISTED],
                  *_more(len(rows) - LISTED, "A/B rows"), ""]
    skipped = Counter(whole_message(t.get("message")) for t in latest.values()
                      if t["status"] == "SKIP")
    if skipped:
        lines += [f"{sub} Skipped ({sum(skipped.values())})", ""]
        lines += [f"- {count} x {reason}" for reason, count in skipped.most_common(LISTED)]
        lines += [*_more(len(skipped) - LISTED, "reasons"), ""]
    return "\n".join(lines).rstrip() + "\n"
