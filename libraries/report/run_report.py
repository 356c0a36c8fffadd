"""One run at a glance: ``<run dir>/run-report.html``, self-contained and offline.

Per case (tcp_term, ssl_proxy, ebpf_stream, sslsniff): the variants side by side as bars (the
median, labelled, its interval as whiskers, filled by its criterion's outcome) with every trial
as a point and each criterion's bound a dashed line, one chart per rate unit (requests/s,
Gbit/s, ...: :mod:`libraries.report.run_charts`); then a table per test: stack, figures,
ratios, verdict with its criteria, and a link into Robot's log.html at that test; then,
folded, each test's CPU telemetry per variant and node (per-core table like mpstat,
per-process CPU) where recorded, and the CPU profiles (flame graphs, their differential)
where the test took them.
Tests that recorded nothing (skipped, failed before measuring) are listed with Robot's status
and message. A duet side's page links the other side's (:mod:`libraries.report.duet_links`:
side b's says its verdicts are on side a's). Where the page's intervals stand at several
confidence levels, one line says why (:mod:`libraries.report.confidence`). The results
listener writes the page at the end of every run; for any run directory::

    python -m libraries.report.run_report results/20261122-020000-1a2b [--output page.html]

Inputs in the run directory: ``records.jsonl`` (the records), ``tests.jsonl`` (one line per
test from the listener: status, message, log anchor; absent for runs made before it existed)
and ``run.json``.
"""

from __future__ import annotations

import argparse
import html
import json
import os
import sys
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from plotly.offline import get_plotlyjs

from libraries.history.load import TESTS_FILE
from libraries.report.ab_section import ab_section
from libraries.report.confidence import confidence_note
from libraries.report.duet_links import duet_banner, duet_note
from libraries.report.latency_curves import capacity_chart
from libraries.report.profile_section import profile_section
from libraries.report.run_charts import CONFIG, bar_chart
from libraries.report.run_summary import SUMMARY, render_summary
from libraries.results.headline import figure as figure_text
from libraries.results.records import RecordError, find_record_files, iter_records, read_lines
from libraries.results.telemetry_block import format_cpu_table, shared_kernels

RUN_REPORT = "run-report.html"
"""The run report's file name: not Robot's report.html, which shares the directory when the
run id is given (``-v RUN_ID``, the nightly runner)."""


def is_rate(unit: str) -> bool:
    """Rates (requests/s, Gbit/s, ...) are drawn as variant bars; other metrics (ratios, %,
    ms, counts) go to the table."""
    return unit.endswith("/s")

_STYLE = """
body { font-family: sans-serif; margin: 1em 2em; color: #222; }
object.flame { width: 100%; min-height: 420px; border: 1px solid #ddd; }
table { border-collapse: collapse; font-size: 13px; margin: 0.5em 0 1em 0; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #eee; }
td.PASS, td.pass { color: #070; font-weight: bold; }
td.FAIL, td.fail { color: #a00; font-weight: bold; }
td.SKIP, td.no_criteria { color: #a60; }
section.case { margin-top: 1.5em; border-top: 2px solid #ccc; }
div.chart { height: 360px; max-width: 1100px; }
p.note { font-size: 12px; color: #555; max-width: 70em; }
details { font-size: 12px; }
p.duet { background: #fff8e0; border: 1px solid #e0c060; padding: 6px 10px; max-width: 70em; }
"""


_BARS = ('<p class="note">Bars: the median of each variant\'s trials (labelled), '
         "its interval as whiskers, filled green, red or amber where a criterion passed, failed "
         "or could not decide (pale where none judges it); points: every trial; dashed line: "
         "the criterion's bound. Variants of one test were measured interleaved in the same "
         "run, so their ratios are the portable figures.</p>\n")
"""The bars' caption, on a page with bars only."""


def load_tests(run_dir: Path) -> list[dict[str, Any]]:
    """Every ``tests.jsonl`` under ``run_dir`` (pabot and per-topology runs write one per
    output folder), log links made relative to ``run_dir``; ValueError naming a bad line."""
    tests = []
    for path in sorted(run_dir.rglob(TESTS_FILE)):
        for number, line in read_lines(path):
            try:
                entry = json.loads(line)
            except ValueError as error:
                raise ValueError(f"{path}:{number}: not JSON ({error}): {line[:200]!r}"
                                 ) from None
            if not isinstance(entry, dict) or "test_id" not in entry or "status" not in entry:
                raise ValueError(f"{path}:{number}: expected an object with test_id and "
                                 f"status, got {line[:200]!r}")
            if entry.get("log"):
                entry["log"] = os.path.relpath(path.parent / entry["log"], run_dir)
            tests.append(entry)
    return tests


def _load_run(run_dir: Path, problems: list[str]
              ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict]:
    """Records, tests and run metadata of ``run_dir``; a record line that cannot be read is
    described in ``problems`` and skipped: the report still describes the run."""
    if not run_dir.is_dir():
        raise ValueError(f"{run_dir}: no such directory")
    records = [record for path in find_record_files([run_dir])
               for record in iter_records(path, problems)]
    tests = load_tests(run_dir)
    if not records and not tests and not problems:
        raise ValueError(f"{run_dir}: no records.jsonl or {TESTS_FILE}: not a run directory")
    run_file = run_dir / "run.json"
    try:
        run = json.loads(run_file.read_text()) if run_file.is_file() else {}
    except ValueError as error:
        raise ValueError(f"{run_file}: not JSON: {error}") from None
    return records, tests, run


def _log_link(test: dict[str, Any] | None) -> str:
    if not test or not test.get("log"):
        return ""
    return f'<a href="{html.escape(test["log"])}#{html.escape(test["robot_id"])}">log</a>'


def _interval(entry: dict[str, Any]) -> str:
    """`` [low, high] 94%`` of a metric's or criterion's interval (empty without one)."""
    interval = entry.get("interval")
    if not interval or interval.get("level") is None:
        return ""
    return (f" [{figure_text(interval['low'])}, {figure_text(interval['high'])}] "
            f"{interval['level']:.0%}")


def _criteria_text(record: dict[str, Any]) -> str:
    lines = []
    for c in record.get("criteria", []):
        outcome = c.get("outcome") or ("pass" if c["passed"] else "fail")
        if c.get("per_trial"):  # a correctness check: the trials that broke it
            broken = c.get("violations") or []
            rounds = ", ".join(str(v["round"]) for v in broken[:8]) + \
                (", ..." if len(broken) > 8 else "")
            lines.append(f"{outcome.upper()} {c['metric']} {c['op']} "
                         f"{figure_text(c['required'])} in every trial" if not broken else
                         f"{outcome.upper()} {c['metric']} {c['op']} "
                         f"{figure_text(c['required'])}: broken in {len(broken)} of "
                         f"{c.get('trials', '?')} trials (rounds {rounds}; worst "
                         f"{figure_text(c['measured'])})")
            continue
        lines.append(f"{outcome.upper()} {c['metric']} {figure_text(c['measured'])}"
                     f"{_interval(c)} {c['op']} {figure_text(c['required'])}")
    rounds = record.get("rounds")
    if rounds and rounds["run"] > rounds["planned"]:
        lines.append(f"{rounds['run']} trials ({rounds['planned']} planned): "
                     f"{rounds['stopped']}")
    return "<br>".join(html.escape(line) for line in lines) or "not judged"


def _metric_cells(record: dict[str, Any]) -> str:
    """Rates and ratios first (with the median's interval and its confidence); every other
    metric (efficiency, latency, counts) folded."""
    main, more = [], []
    for name, metric in record["metrics"].items():
        spread = _interval(metric)
        if not spread and len(metric.get("trials") or ()) == 1:
            spread = " (one value)"  # a capacity, a latency pass: no interval to give
        elif not spread and metric.get("cv") is not None:
            spread = f", cv {metric['cv']:.0%}"  # a record written before intervals
        text = html.escape(f"{name} {figure_text(metric['value'])} {metric['unit']}{spread}")
        (main if is_rate(metric["unit"]) or metric["unit"] == "ratio" else more).append(text)
    folded = (f"<details><summary>{len(more)} more</summary>{'<br>'.join(more)}</details>"
              if more else "")
    return "<br>".join(main) + folded


def _telemetry(record: dict[str, Any]) -> str:
    """The record's CPU tables per variant and node (mpstat-like), folded; or why there are
    none."""
    block = record.get("telemetry")
    if not block:
        return ""
    title = f"CPU telemetry of {html.escape(record['name'])}"
    if "unavailable" in block:
        return (f"<details><summary>{title}: unavailable</summary>"
                f"<pre>{html.escape(block['unavailable'])}</pre></details>")
    same_kernel = {node: group[0] for group in shared_kernels(block) for node in group[1:]}
    parts = []
    for variant, data in block.get("variants", {}).items():
        tables = [format_cpu_table(node, summary, same_kernel.get(node))
                  for node, summary in data["nodes"].items()]
        parts.append(f"<b>{html.escape(variant)}</b><pre>"
                     f"{html.escape(chr(10).join(tables))}</pre>")
    return f"<details><summary>{title} (median of the measured trials)</summary>" + \
        "".join(parts) + "</details>"


def _case_section(case: str, records: list[dict[str, Any]],
                  tests: dict[str, dict[str, Any]], charts: list[str]) -> str:
    rows = []
    for record in records:
        test = tests.get(record["test_id"])
        status = test["status"] if test else record["verdict"]
        message = (test or {}).get("message") or ""
        rows.append(
            f"<tr><td>{html.escape(record['name'])}</td><td>{html.escape(record['stack'])}</td>"
            f'<td class="{html.escape(status)}">{html.escape(status)}</td>'
            f"<td>{_metric_cells(record)}</td><td>{_criteria_text(record)}</td>"
            f"<td>{html.escape(message)}</td><td>{_log_link(test)}</td></tr>")
    blocks = []
    units = sorted({metric["unit"] for record in records
                    for metric in record["metrics"].values() if is_rate(metric["unit"])})
    figures = [bar_chart(case, unit, records) for unit in units]
    figures += [capacity_chart(record) for record in records]
    for figure in figures:
        if figure is not None:
            div = f"chart-{case}-{len(charts)}"
            charts.append(figure.to_json())
            blocks.append(f'<div class="chart" id="{div}"></div>')
    return (f'<section class="case" id="case-{html.escape(case)}"><h2>{html.escape(case)}</h2>'
            + "".join(blocks)
            + "<table><tr><th>test</th><th>stack</th><th>status</th><th>metrics (median of "
              "trials [its interval] confidence)</th><th>criteria</th><th>message</th>"
              "<th></th></tr>"
            + "".join(rows) + "</table>"
            + "".join(_telemetry(r) + profile_section(r) for r in records)
            + "</section>")


def _unrecorded(tests: list[dict[str, Any]], recorded: set[str]) -> str:
    rows = [f"<tr><td>{html.escape(t['name'])}</td><td>{html.escape(t.get('suite', ''))}</td>"
            f'<td class="{html.escape(t["status"])}">{html.escape(t["status"])}</td>'
            f"<td>{html.escape(t.get('message') or '')}</td><td>{_log_link(t)}</td></tr>"
            for t in tests if t["test_id"] not in recorded]
    if not rows:
        return ""
    return ("<section class=\"case\"><h2>Tests without a record</h2><table><tr><th>test</th>"
            "<th>suite</th><th>status</th><th>message</th><th></th></tr>" + "".join(rows)
            + "</table></section>")


def _labs(pool: Any) -> str:
    """The lab pool of a nightly run: where each suite ran, labs left out and why."""
    if not isinstance(pool, dict):
        return ""
    rows = [f"<tr><td>{html.escape(str(suite))}</td><td>{html.escape(' -> '.join(labs))}</td>"
            "</tr>" for suite, labs in sorted(pool.get("suites", {}).items())]
    out = [f"<tr><td>{html.escape(str(lab))}</td><td class=\"FAIL\">{html.escape(when)}: "
           f"{html.escape(str(reason))}</td></tr>"
           for when, key in (("left out before the run", "excluded"),
                             ("taken out during the run", "disabled"))
           for lab, reason in sorted(pool.get(key, {}).items())]
    return ('<section class="case"><h2>Labs</h2>'
            f"<p>Pool: {html.escape(', '.join(pool.get('labs', [])) or 'no lab')}</p>"
            "<table><tr><th>suite</th><th>lab(s)</th></tr>" + "".join(rows) + "</table>"
            + ("<table><tr><th>lab</th><th>out of the pool</th></tr>" + "".join(out)
               + "</table>" if out else "") + "</section>\n")


def _unreadable(problems: list[str]) -> str:
    if not problems:
        return ""
    items = "".join(f"<li>{html.escape(problem)}</li>" for problem in problems)
    return ("<section class=\"case\"><h2>Records that could not be read</h2><p class=\"note\">"
            "These lines are skipped here; the trend tool refuses the file until they are "
            f"repaired or removed.</p><ul>{items}</ul></section>\n")


def render_run_report(run_dir: Path) -> str:
    """The HTML page of the run in ``run_dir``."""
    problems: list[str] = []
    records, tests, run = _load_run(run_dir, problems)
    by_case: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for record in records:
        if not record.get("ab"):
            by_case[record["case"]].append(record)
    latest_tests = {t["test_id"]: t for t in tests}
    charts: list[str] = []
    sections = [_case_section(case, by_case[case], latest_tests, charts)
                for case in sorted(by_case)]
    sections.insert(0, ab_section([r for r in records if r.get("ab")], latest_tests, charts,
                                  _log_link, run.get("family")))
    statuses = [t["status"] for t in latest_tests.values()]
    counts = ", ".join(f"{statuses.count(s)} {s.lower()}" for s in ("PASS", "FAIL", "SKIP")
                       if s in statuses) or f"{len(records)} record(s)"
    run_id = run.get("run_id") or (records[0]["run_id"] if records else run_dir.name)
    log = next((t["log"] for t in tests if t.get("log")), None)
    log_link = f' &middot; <a href="{html.escape(log)}">log.html</a>' if log else ""
    nav = " &middot; ".join(f'<a href="#case-{html.escape(c)}">{html.escape(c)}</a>'
                            for c in (["ab"] if any(r.get("ab") for r in records) else [])
                            + sorted(by_case))
    meta = ", ".join(f"{k} {html.escape(str(run[k]))}" for k in
                     ("topology", "project_revision", "host", "start_time") if run.get(k))
    charts_json = ("[" + ",".join(charts) + "]").replace("</", "<\\/")  # safe in <script>
    draw = (f"const CHARTS = {charts_json};\n"
            "document.querySelectorAll('div.chart').forEach((div, i) => Plotly.newPlot(div, "
            f"CHARTS[i].data, CHARTS[i].layout, {json.dumps(CONFIG)}));\n")
    plain = [r for r in records if not r.get("ab")]
    caption = _BARS if any(is_rate(m["unit"]) for r in plain for m in r["metrics"].values()) \
        else ""
    why = confidence_note(records)
    notes = caption + (f'<p class="note">{html.escape(why)}</p>\n' if why else "")
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>Run {html.escape(run_id)}</title><style>{_STYLE}</style>\n"
        f'<script type="text/javascript">{get_plotlyjs()}</script></head>\n<body>\n'
        f"<h1>Run {html.escape(run_id)}</h1>\n{duet_banner(run_dir)}"
        f"<p>{counts}{log_link}<br>{meta}</p>\n"
        f"<p>{nav}</p>\n" + notes
        + _labs(run.get("pool")) + _unreadable(problems) + "\n".join(sections)
        + _unrecorded(tests, {r["test_id"] for r in records})
        + f"\n<script>{draw}</script>\n</body></html>\n")


def write_run_report(run_dir: Path, output: Path | None = None) -> Path:
    """Write the run report of ``run_dir`` (default ``<run_dir>/run-report.html``); its path."""
    target = output or run_dir / RUN_REPORT
    target.write_text(render_run_report(run_dir), encoding="utf-8")
    return target


def summary_text(run_dir: Path, heading: str = "#") -> str:
    """The Markdown summary of the run in ``run_dir`` (:mod:`libraries.report.run_summary`),
    its title at ``heading``'s level."""
    records, tests, run = _load_run(run_dir, [])
    run_id = run.get("run_id") or (records[0]["run_id"] if records else run_dir.name)
    log = next((t["log"] for t in tests if t.get("log")), None)
    return render_summary(records, tests, run, run_id, log,
                          RUN_REPORT if (run_dir / RUN_REPORT).is_file() else None, heading,
                          duet_note(run_dir))


def write_summary(run_dir: Path) -> Path:
    """Write ``<run_dir>/summary.md``; its path."""
    target = run_dir / SUMMARY
    target.write_text(summary_text(run_dir), encoding="utf-8")
    return target


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m libraries.report.run_report RUN_DIR...``: exit 0, or 2 on bad input. Each run
    directory's ``summary.md`` is rewritten too (not with ``--output``)."""
    parser = argparse.ArgumentParser(
        prog="python -m libraries.report.run_report",
        description="Write run-report.html and summary.md of one or more run dirs.")
    parser.add_argument("run_dirs", nargs="+", type=Path, help="results/<run-id> directories")
    parser.add_argument("--output", type=Path, help="page to write (one run dir only)")
    args = parser.parse_args(argv)
    if args.output and len(args.run_dirs) > 1:
        parser.error("--output takes one run directory")
    for run_dir in args.run_dirs:
        try:
            print(write_run_report(run_dir, args.output))
            if not args.output:
                print(write_summary(run_dir))
        except (OSError, ValueError, RecordError) as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
