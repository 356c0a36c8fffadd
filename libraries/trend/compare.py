"""Compare two runs test by test (CSIT's per-patch idea): change with the trial spread.

A change is *significant* when both hold:

* the trial ranges ``[min, max]`` of the two runs do not overlap, and
* the relative change of the medians exceeds the threshold
  ``max(5 %, 2 x CV_A, 2 x CV_B, 2 x sqrt(2) x run-to-run CV)``.

CV_A / CV_B are the trials' coefficients of variation within each run. Trials of one run share
the machine's state, so they understate the run-to-run noise (4-13 % on the lab machines); when
the series has at least :data:`MIN_HISTORY` runs in the store (DuckDB), its robust
run-to-run CV (1.4826 x median absolute deviation / median) enters the threshold too, scaled by
sqrt(2) because the difference of two noisy runs is compared.

A significant change in the metric's bad direction (down for ``higher_is_better``, up for
``lower_is_better``) is a regression; ``python -m libraries.trend --compare`` then exits 3.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from libraries.results.records import RecordError
from libraries.trend.analysis import (
    EXIT_OK,
    EXIT_REGRESSION,
    format_percent,
    format_value,
    markdown_table,
    select_tests,
    text_table,
)
from libraries.trend.load import load_records
from libraries.trend.store import Store

MIN_CHANGE = 0.05
"""Smallest relative change that can be significant (5 %)."""
CV_FACTOR = 2.0
"""A change must also exceed this many times the larger coefficient of variation."""
MIN_HISTORY = 5
"""Runs of a series needed before its run-to-run noise is estimated."""


@dataclass(frozen=True)
class Side:
    """One run's figure for a series: median ``value``, trial range ``low``..``high``, ``cv``."""

    run_id: str
    value: float
    low: float
    high: float
    cv: float


@dataclass(frozen=True)
class Change:
    """Change of one (test, metric) from run A to run B.

    ``change_pct`` is None when A's value is 0; ``threshold_pct`` is the rule's threshold;
    ``verdict`` is ``regression``, ``progression``, ``not significant``, ``only in A`` or
    ``only in B`` (then the missing side is None).
    """

    test_id: str
    metric: str
    unit: str
    direction: str
    a: Side | None
    b: Side | None
    change_pct: float | None
    threshold_pct: float
    verdict: str


def run_to_run_cv(history: pd.DataFrame) -> dict[tuple[str, str], float]:
    """Robust run-to-run CV per (test, metric) with at least :data:`MIN_HISTORY` runs."""
    noise: dict[tuple[str, str], float] = {}
    for key, rows in history.groupby(["test_id", "metric"]):
        values = rows["value"]
        median = float(values.median())
        if len(values) >= MIN_HISTORY and median:
            mad = float((values - median).abs().median())
            noise[(str(key[0]), str(key[1]))] = 1.4826 * mad / abs(median)
    return noise


def judge(direction: str, a: Side, b: Side, noise_cv: float = 0.0
          ) -> tuple[float | None, float, str]:
    """(change %, threshold %, verdict) for B against A under the module's rule."""
    threshold = max(MIN_CHANGE, CV_FACTOR * max(a.cv, b.cv),
                    CV_FACTOR * math.sqrt(2) * noise_cv) * 100.0
    if a.value == 0:
        return None, threshold, "not significant"
    change = (b.value - a.value) / abs(a.value) * 100.0
    overlap = a.low <= b.high and b.low <= a.high
    if overlap or abs(change) <= threshold:
        return change, threshold, "not significant"
    worse = change < 0 if direction == "higher_is_better" else change > 0
    return change, threshold, "regression" if worse else "progression"


def _sides(frame: pd.DataFrame) -> dict[tuple[str, str], tuple[Side, str, str]]:
    latest = frame.sort_values("start_time", kind="stable").groupby(["test_id", "metric"]).last()
    return {
        (str(key[0]), str(key[1])): (
            Side(str(row.run_id), float(row.value), float(row.low), float(row.high),
                 float(row.cv)),
            str(row.unit), str(row.direction))
        for key, row in latest.iterrows()
    }


def compare_frames(frame_a: pd.DataFrame, frame_b: pd.DataFrame,
                   noise: dict[tuple[str, str], float] | None = None) -> list[Change]:
    """Per (test, metric) changes from A to B: regressions first, then by test and metric.

    ``noise`` maps (test, metric) to its run-to-run CV (see :func:`run_to_run_cv`).
    """
    noise = noise or {}
    sides_a, sides_b = _sides(frame_a), _sides(frame_b)
    changes: list[Change] = []
    for key in sorted(sides_a.keys() | sides_b.keys()):
        a, b = sides_a.get(key), sides_b.get(key)
        unit, direction = (b or a)[1:]  # type: ignore[index]
        if a is None or b is None:
            verdict = "only in B" if a is None else "only in A"
            changes.append(Change(*key, unit, direction, a and a[0], b and b[0], None, 0.0,
                                  verdict))
            continue
        change, threshold, verdict = judge(direction, a[0], b[0], noise.get(key, 0.0))
        changes.append(Change(*key, unit, direction, a[0], b[0], change, threshold, verdict))
    rank = {"regression": 0, "progression": 1}
    return sorted(changes, key=lambda c: (rank.get(c.verdict, 2), c.test_id, c.metric))


def _cell(side: Side | None, unit: str) -> str:
    if side is None:
        return "-"
    return (f"{format_value(side.value, unit)} [{format_value(side.low)}.."
            f"{format_value(side.high)}] cv {side.cv * 100:.1f}%")


HEADER = ["test", "metric", "A median [min..max]", "B median [min..max]", "change", "threshold",
          "verdict"]


def change_rows(changes: Sequence[Change]) -> list[list[str]]:
    """Table rows for :data:`HEADER`."""
    return [
        [c.test_id, c.metric, _cell(c.a, c.unit), _cell(c.b, c.unit),
         format_percent(c.change_pct), f"{c.threshold_pct:.1f}%" if c.a and c.b else "-",
         c.verdict]
        for c in changes
    ]


def resolve_run(spec: str, store: Store) -> pd.DataFrame:
    """Samples of run ``spec``: a run directory (read from its records), or a run id in the
    store."""
    path = Path(spec)
    if path.is_dir():
        frame = load_records([path])
        if frame.empty:
            raise RecordError(f"{path}: no records.jsonl with records (expected a run directory)")
        return frame
    frame = store.frame("run_id = ?", [spec])
    if frame.empty:
        raise RecordError(f"run {spec!r}: no records with this run id in {store.root} "
                          "(expected a run id or a run directory)")
    return frame


def store_noise(store: Store, keys: set[tuple[str, str]]) -> dict[tuple[str, str], float]:
    """:func:`run_to_run_cv` of the series ``keys`` over the whole stored history (in DuckDB:
    median and median absolute deviation per series)."""
    if not keys:
        return {}
    tests = sorted({test for test, _ in keys})
    rows = store.query(
        "WITH s AS (SELECT test_id, metric, value FROM samples WHERE list_contains(?, test_id)),"
        " m AS (SELECT test_id, metric, median(value) AS med, count(*) AS n FROM s GROUP BY ALL)"
        " SELECT s.test_id, s.metric, any_value(m.n) AS n, any_value(m.med) AS med,"
        " median(abs(s.value - m.med)) AS mad FROM s JOIN m USING (test_id, metric)"
        " GROUP BY ALL", [tests])
    return {(row.test_id, row.metric): 1.4826 * row.mad / abs(row.med)
            for row in rows.itertuples()
            if (row.test_id, row.metric) in keys and row.n >= MIN_HISTORY and row.med}


def run_compare(store: Store, run_a: str, run_b: str, tests: Sequence[str],
                markdown: Path | None) -> int:
    """Print the comparison table; exit status 3 when any change is a significant regression."""
    frame_a = select_tests(resolve_run(run_a, store), tests)
    frame_b = select_tests(resolve_run(run_b, store), tests)
    keys = {(str(t), str(m)) for frame in (frame_a, frame_b)
            for t, m in zip(frame["test_id"], frame["metric"], strict=True)}
    noise = store_noise(store, keys)
    changes = compare_frames(frame_a, frame_b, noise)
    rows = change_rows(changes)
    sys.stdout.write(f"A = {run_a}\nB = {run_b}\n" + text_table(HEADER, rows))
    if markdown:
        markdown.parent.mkdir(parents=True, exist_ok=True)
        markdown.write_text(f"# Comparison\n\nA = `{run_a}`, B = `{run_b}`\n\n"
                            + markdown_table(HEADER, rows), encoding="utf-8")
    regressions = [f"{c.test_id} [{c.metric}]" for c in changes if c.verdict == "regression"]
    if regressions:
        sys.stderr.write(f"significant regression in {len(regressions)} series: "
                         f"{', '.join(regressions)}\n")
        return EXIT_REGRESSION
    return EXIT_OK
