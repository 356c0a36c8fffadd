"""A test's CPU profiles in the run report: each profile's flame graph, the differential one of
two (A/B sides a -> b, or a plain run's two variants) and the functions whose share of the
DUT's CPU changed most, led by the hint (the frame that grew beyond sampling noise with its
caller chain, "no function changed beyond noise", or that the CPU profile does not explain the
change). The graphs are SVG files in the run folder (``profiles/<test>/``,
interactive: click to zoom, search), shown in place with ``<object>``."""

from __future__ import annotations

import html
from typing import Any


def _graph(path: str, caption: str) -> str:
    quoted = html.escape(path)
    return (f'<figure><object class="flame" data="{quoted}" type="image/svg+xml"></object>'
            f'<figcaption>{html.escape(caption)} (<a href="{quoted}">open</a>)</figcaption>'
            "</figure>")


def _changes(diff: dict[str, Any], key: str, what: str) -> str:
    first, second = html.escape(diff["from"]), html.escape(diff["to"])
    rows = "".join(
        f"<tr><td>{html.escape(c['function'])}</td><td>{c['a_ms']:.1f} ms, {c['a_pct']:.1f} %"
        f"</td><td>{c['b_ms']:.1f} ms, {c['b_pct']:.1f} %</td><td>{c['points']:+.2f}</td></tr>"
        for c in diff.get(key, []))
    return (f"<table><tr><th>function ({what})</th><th>{first}</th><th>{second}</th>"
            f"<th>share change (points)</th></tr>{rows}</table>") if rows else ""


def profile_section(record: dict[str, Any]) -> str:
    """The record's profiles, folded (empty when it has none)."""
    block = record.get("evidence", {}).get("profile")
    if not block:
        return ""
    title = f"CPU profile of {html.escape(record['name'])}"
    spent = block.get("seconds_spent")
    took = f" The profiling took {spent:.0f} s after the measured trials." if spent else ""
    parts = [f'<p class="note">{html.escape(block.get("note", ""))}.{took}</p>']
    for label, why in block.get("unavailable", {}).items():
        parts.append(f"<p>No profile of {html.escape(label)}: {html.escape(why)}</p>")
    for label, entry in block.get("profiles", {}).items():
        processes = ", ".join(f"{name} {ms:.0f} ms" for name, ms in
                              entry.get("processes_ms", {}).items())
        parts.append(_graph(entry["svg"], f"{label} ({entry['variant']}): {entry['cpu_ms']:.0f}"
                                          f" ms of CPU on {entry['node']} in "
                                          f"{entry['seconds']} s: {processes}"))
        for name, share in entry.get("unresolved", {}).items():
            parts.append(f"<p>{html.escape(label)}: {share:.0%} of the samples were in "
                         f"{html.escape(name)} without a symbol (a stripped binary: its own "
                         "functions show as one frame; its libraries and the kernel still "
                         "resolve)</p>")
    diff = block.get("diff")
    if diff:
        hint = (diff.get("hint") or {}).get("text")
        if hint:
            parts.append(f'<p class="hint"><b>{html.escape(diff["from"])} -> '
                         f'{html.escape(diff["to"])}:</b> {html.escape(hint)}</p>')
        if diff.get("svg"):
            parts.append(_graph(diff["svg"], f"differential {diff['from']} -> {diff['to']}: "
                                f"widths of {diff['to']}, red where it spends a larger "
                                "share, blue a smaller"))
        parts.append(_changes(diff, "inclusive", "with what it called"))
        parts.append(_changes(diff, "changes", "on CPU itself"))
    return f"<details><summary>{title}</summary>{''.join(parts)}</details>"
