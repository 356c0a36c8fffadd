"""The run report's A/B section: the comparison file with what each side sets (its nginx
directives, sysctls, environment, binaries: the file's content, one line a setting), per A/B
test both sides (names, what they set, the versions of what they change, each side's median
with its interval), the change candidate / baseline with its
interval and verdict, the rounds, looks and switch cost, and a chart of the per-round ratios
with the change, its interval and the margin drawn over them."""

from __future__ import annotations

import html
from typing import Any

import plotly.graph_objects as go

from libraries.report.profile_section import profile_section
from libraries.report.run_charts import title_layout
from libraries.results.family import tests_statement
from libraries.results.headline import figure as figure_text

METRIC_COLOURS = ["#c0504d", "#4f81bd", "#9bbb59", "#8064a2"]
"""Each compared metric's points and change line (a rate and its cost told apart)."""
VERDICT_CLASS = {"regression": "fail", "progression": "pass", "no change": "pass",
                 "inconclusive": "no_criteria"}


def ratio_chart(record: dict[str, Any]) -> go.Figure | None:
    """Per-round ratios b / a of each compared metric of an A/B record (None otherwise)."""
    block = record.get("ab")
    if not block:
        return None
    margin = block["rounds"].get("margin", 0.0)
    traces: list[Any] = []
    shapes: list[dict[str, Any]] = []
    for number, (metric, comparison) in enumerate(block["metrics"].items()):
        ratios = comparison["ratios"]
        colour = METRIC_COLOURS[number % len(METRIC_COLOURS)]
        traces.append(go.Scatter(x=list(range(1, len(ratios) + 1)), y=ratios,
                                 mode="markers+lines", name=f"{metric} b / a",
                                 line={"width": 1, "color": colour}, marker={"size": 7}))
        if comparison.get("low") is not None and comparison.get("high") is not None:
            shapes.append({"type": "rect", "xref": "paper", "x0": 0, "x1": 1, "yref": "y",
                           "y0": comparison["low"], "y1": comparison["high"],
                           "fillcolor": colour, "opacity": 0.15, "line": {"width": 0}})
        shapes.append({"type": "line", "xref": "paper", "x0": 0, "x1": 1, "yref": "y",
                       "y0": comparison["change"], "y1": comparison["change"],
                       "line": {"color": colour, "width": 2}})
    for level, dash in ((1.0, "solid"), (1.0 - margin, "dash"), (1.0 + margin, "dash")):
        shapes.append({"type": "line", "xref": "paper", "x0": 0, "x1": 1, "yref": "y",
                       "y0": level, "y1": level, "line": {"color": "#555", "dash": dash,
                                                          "width": 1}})
    figure = go.Figure(traces)
    figure.update_layout(
        **title_layout(f"{record['name']}: {block['sides']['b']['name']} / "
                       f"{block['sides']['a']['name']} per round (line: the change, band: its "
                       f"interval, dashed: +-{margin:.0%})", bottom=50),
        shapes=shapes, xaxis_title="round (each in a random order: A B or B A)",
        yaxis_title="candidate / baseline")
    return figure


def change_lines(changes: Any, path: tuple[str, ...] = ()) -> list[str]:
    """What a side of a comparison sets (its record's ``changes``: the comparison file's
    ``tools``, ``vpp``, ``nginx``, ``startup``, ``vcl``, ``sysctl``, ``env``), one line per
    setting: ``sysctl dut net.ipv4.tcp_rmem = 4096 4096 4096``, ``nginx proxy server:
    access_log off;``, ``env nginx OPENSSL_ia32cap = ~0x200000200000000``."""
    if isinstance(changes, dict):
        return [line for key, value in changes.items()
                for line in change_lines(value, (*path, str(key)))]
    if isinstance(changes, list | tuple):
        return [f"{' '.join(path)}: {' '.join(str(item) for item in changes)}"]
    return [f"{' '.join(path)} = {changes}"]


def side_changes(side: dict[str, Any]) -> str:
    """A side's settings in one line (``; `` between them): what the topology has where it
    sets nothing, ``(not recorded)`` for a record made before sides kept them."""
    if "changes" not in side:
        return "(not recorded)"
    return "; ".join(change_lines(side["changes"])) or "as the topology has it"


def _side(record: dict[str, Any], key: str, metric: str) -> str:
    side = record["ab"]["sides"][key]
    versions = "; ".join(f"{node}: " + ", ".join(f"{t} {v}" for t, v in tools.items())
                         for node, tools in side.get("versions", {}).items())
    figures = (record.get("evidence", {}).get("sides", {}).get(key, {})
               .get("metrics", {}).get(metric))
    shown = ""
    if figures:
        interval = figures.get("interval") or {}
        shown = f"{figure_text(figures['value'])} {figures['unit']}"
        if interval.get("level") is not None:
            shown += f" [{figure_text(interval['low'])}, {figure_text(interval['high'])}]"
    return (f"<b>{html.escape(side['name'])}</b> {html.escape(shown)}"
            f"<br><small>sets: {html.escape(side_changes(side))}</small>"
            + (f"<br><small>{html.escape(versions)}</small>" if versions else ""))


def _row(record: dict[str, Any], test: dict[str, Any] | None, link: str) -> str:
    block = record["ab"]
    rounds, switch = block["rounds"], block["switch"]
    cells = []
    for metric, c in block["metrics"].items():
        change = f"{c['change_pct']:+.1f} %"
        if c.get("low") is not None:
            change += f" [{(c['low'] - 1) * 100:+.1f}, {(c['high'] - 1) * 100:+.1f}]"
        cells.append(
            f"<tr><td>{html.escape(record['name'])}</td><td>{html.escape(metric)}</td>"
            f"<td>{_side(record, 'a', metric)}</td><td>{_side(record, 'b', metric)}</td>"
            f"<td>{html.escape(change)}</td>"
            f'<td class="{VERDICT_CLASS.get(c["verdict"], "")}">{html.escape(c["verdict"])}'
            f"</td><td>{rounds['run']} rounds, looks {rounds['looks']}<br>"
            f"{html.escape(rounds['stopped'])}</td>"
            f"<td>{switch['count']} x {switch.get('median_s') or 0:.2f} s</td>"
            f"<td>{html.escape((test or {}).get('message') or '')}</td><td>{link}</td></tr>")
    return "".join(cells)


def run_family(records: list[dict[str, Any]], family: dict[str, Any] | None = None) -> str:
    """What the run's A/B verdicts spent (:func:`libraries.results.family.tests_statement`):
    every A/B metric of the run is a series judged at its share of its test's ``ALPHA`` (a
    false regression at most half of it; records before costs: at the whole); ``family``: a
    nightly's (its ``run.json``), whose share the sum is held against. A record without its
    ``ALPHA`` is counted apart, never given one."""
    levels, unrecorded = [], 0
    for record in records:
        alpha = record["ab"]["rounds"].get("alpha")
        for metric in record["ab"]["metrics"].values():
            own = metric.get("alpha", alpha)  # its share of ALPHA (a cost beside a rate)
            if own is None:
                unrecorded += 1
            else:
                levels.append(float(own) / 2)
    return tests_statement(levels, family, unrecorded)


def _comparison(block: dict[str, Any]) -> str:
    """The comparison file of an A/B block: its name, path and sha, and what each side sets
    (the file's content, not only its name)."""
    comparison, sides = block["comparison"], block["sides"]
    parts = [f"<b>{key} {html.escape(sides[key]['name'])}</b>: "
             f"{html.escape(side_changes(sides[key]))}" for key in ("a", "b")]
    return (f"{html.escape(comparison['name'])} (<code>{html.escape(comparison['path'])}"
            f"</code>, sha256 {html.escape(comparison['sha256'][:12])}): "
            + "; ".join(parts))


def ab_section(records: list[dict[str, Any]], tests: dict[str, dict[str, Any]],
               charts: list[str], link: Any, family: dict[str, Any] | None = None) -> str:
    """The section of the A/B records (empty when there are none); ``link(test)`` gives the
    log link of a test, ``charts`` collects the charts' JSON as the page draws them;
    ``family``: a nightly's night family (``run.json``), else None."""
    if not records:
        return ""
    blocks = []
    for record in records:
        figure = ratio_chart(record)
        if figure is not None:
            charts.append(figure.to_json())
            blocks.append(f'<div class="chart" id="chart-ab-{len(charts)}"></div>')
    about = "; ".join(_comparison(block) for block in
                      {r["ab"]["comparison"]["sha256"]: r["ab"] for r in records}.values())
    rows = "".join(_row(r, tests.get(r["test_id"]), link(tests.get(r["test_id"])))
                   for r in records)
    return ('<section class="case" id="case-ab"><h2>A/B</h2>'
            f"<p>Comparison: {about}.</p>"
            '<p class="note">Each round measures both sides back to '
            "back, in an order drawn per round; the change is the Hodges-Lehmann median of "
            "the per-round ratios candidate / baseline, with its signed-rank interval at the "
            "looks' level."
            "</p>" + f"<p>{html.escape(run_family(records, family))}.</p>" + "".join(blocks)
            + "<table><tr><th>test</th><th>metric</th><th>baseline (a)</th><th>candidate (b)"
              "</th><th>change [interval]</th><th>verdict</th><th>rounds</th><th>switches</th>"
              "<th>message</th><th></th></tr>" + rows + "</table>"
            + "".join(profile_section(r) for r in records) + "</section>")
