"""Notes on A/B series that started anew: the comparison file changed, or a file a side names
(a binary, a library, a VPP folder) was replaced at the same path, or a shared library one of
them loads changed (:mod:`libraries.ab.fingerprint`). Each such series is a new one in the
history; its note on the dashboard says what changed (a library by its file name and the
binary that loads it) and since when."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import pandas as pd

from libraries.trend.analysis import SeriesTrend

AB_SERIES = re.compile(r"^(?P<test>.*) \[A/B (?P<name>.*) (?P<sha>[0-9a-f]{1,12})"
                       r"(?: files:(?P<files>[0-9a-f]{12}))?\]$")
"""An A/B series' test id (:func:`libraries.history.ab_series.ab_series_suffix`)."""


def _first_time(trend: SeriesTrend) -> int:
    """The series' first sample's start, µs since the epoch (UTC)."""
    if trend.history is not None and len(trend.history.t):
        return int(trend.history.t[0])
    return int(pd.Timestamp(trend.samples["start_time"].iloc[0]).value // 1000)


def _when(micros: int) -> str:
    """``2026-11-28 07:20 UTC``: to the minute, so two series started on one day (a binary
    replaced between two runs of a day) are told apart."""
    return datetime.fromtimestamp(micros / 1e6, UTC).strftime("%Y-%m-%d %H:%M UTC")


def _files(trend: SeriesTrend, row: int) -> dict[str, Any]:
    """The sides' hashed files of one of the series' rows (``{}`` without any), with
    ``loaded_by`` (:func:`libraries.history.ab_series.files_text`) when it has libraries."""
    if "files" not in trend.samples.columns or not len(trend.samples):
        return {}
    text = trend.samples["files"].iloc[row]
    return json.loads(text) if isinstance(text, str) and text else {}


def _changed_files(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """Per file that differs, ``a dut:/opt/nginx-ref/sbin/nginx 3f2a1b0c -> 9b1c22d0``, or for
    a library one of its named entries loads, ``a libssl.so.3 (dut:/usr/lib/.../libssl.so.3,
    a library loaded by dut:/opt/nginx-ref/sbin/nginx) 3f2a1b0c -> 9b1c22d0``. A side whose
    earlier row keyed no library at all (recorded before libraries were keyed) gets one
    ``a: now also keyed by the 9 libraries its files load`` for its new libraries."""
    changed = []
    for side in sorted((set(before) | set(after)) - {"loaded_by"}):
        old, new = before.get(side, {}), after.get(side, {})
        old_by = before.get("loaded_by", {}).get(side, {})
        by = {**old_by, **after.get("loaded_by", {}).get(side, {})}
        first = [] if old_by else [path for path in new if path in by and path not in old]
        for path in sorted((set(old) | set(new)) - set(first)):
            if old.get(path) != new.get(path):
                changed.append(f"{side} {_entry(path, by)}{old.get(path, 'none')[:8]} -> "
                               f"{new.get(path, 'none')[:8]}")
        if first:
            changed.append(f"{side}: now also keyed by the {len(first)} libraries its files "
                           "load")
    return changed


def _entry(path: str, loaded_by: dict[str, list[str]]) -> str:
    """``dut:/opt/ref/nginx `` for a named file; for a library, its file name first:
    ``libssl.so.3 (dut:/usr/lib/.../libssl.so.3, a library loaded by dut:/opt/ref/nginx) ``."""
    if path not in loaded_by:
        return f"{path} "
    return (f"{path.rsplit('/', 1)[-1]} ({path}, a library loaded by "
            f"{', '.join(loaded_by[path])}) ")


def comparison_changes(trends: Sequence[SeriesTrend]) -> dict[str, str]:
    """test id -> a note for every A/B series that started anew against an earlier series of
    the same test and comparison name: another comparison file (``new comparison file since
    2026-11-20 02:00 UTC; before: 3f2a...``) or the same file whose sides' files changed
    (``files changed since 2026-11-20 02:00 UTC: a dut:/opt/nginx-ref/sbin/nginx 3f2a1b0c ->
    9b1c22d0``; a library named by its file name and what loads it:
    :func:`_changed_files`). Series are ordered by their first sample's time, not its day."""
    started: dict[tuple[str, str], dict[tuple[str, str], tuple[int, SeriesTrend]]] = \
        defaultdict(dict)
    for trend in trends:
        found = AB_SERIES.match(trend.test_id)
        if found:
            key = (found["sha"], found["files"] or "")
            day = _first_time(trend)
            known = started[(found["test"], found["name"])].get(key)
            if known is None or day < known[0]:
                started[(found["test"], found["name"])][key] = (day, trend)
    notes = {}
    for trend in trends:
        found = AB_SERIES.match(trend.test_id)
        if not found:
            continue
        series = started[(found["test"], found["name"])]
        mine = series[(found["sha"], found["files"] or "")][0]
        earlier = sorted((day, key, other) for key, (day, other) in series.items()
                         if day < mine)
        if not earlier:
            continue
        if earlier[-1][1][0] != found["sha"]:
            notes[trend.test_id] = (f"new comparison file since {_when(mine)}; before: "
                                    + ", ".join(f"{key[0]} (from {_when(day)})"
                                                for day, key, _ in earlier))
            continue
        changed = _changed_files(_files(earlier[-1][2], -1), _files(trend, 0))
        notes[trend.test_id] = (f"files changed since {_when(mine)}: "
                                + ("; ".join(changed) or "a file a side names"))
    return notes


def notes_markdown(notes: dict[str, str]) -> str:
    """trend.md's section naming every A/B series that started anew and why ("" for none)."""
    if not notes:
        return ""
    return "\n## A/B series started anew\n\n" + "".join(
        f"- {test}: {note}\n" for test, note in sorted(notes.items()))
