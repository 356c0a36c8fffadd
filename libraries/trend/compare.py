"""Compare two runs test by test (CSIT's per-patch idea): the change with its interval and a
four-way verdict.

For every (test, metric) in both runs the verdict is :func:`libraries.results.verdict.ab_verdict`
on the two runs' trials: the Hodges-Lehmann change of B against A with its exact Mann-Whitney
interval at ``1 - alpha`` (``--alpha``, default 0.05), widened by the series' run-to-run CV
when the history holds at least :data:`~libraries.results.verdict.MIN_HISTORY` runs of it;
**regression** / **progression** when the interval lies wholly on one side of no change and
the change is at least the margin (``--margin``, default 5 %), **no change** when the interval
lies within the margin, **inconclusive** otherwise (too few trials: 5 per run are the fewest
that give an interval at alpha 0.05). A regression is in the metric's terms: down for
``higher_is_better``, up for ``lower_is_better``; ``python -m libraries.report --compare``
then exits 3. The false-alarm and detection rates of this verdict on this machine are measured
by ``benchmarks/verdict_bench.py`` (``benchmarks/README.md``).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from libraries.history.load import load_records
from libraries.history.store import Store
from libraries.results.inference import DEFAULT_ALPHA, check_alpha
from libraries.results.records import RecordError
from libraries.results.verdict import DEFAULT_MARGIN, MIN_HISTORY, AbResult, ab_verdict
from libraries.trend.analysis import (
    EXIT_OK,
    EXIT_REGRESSION,
    format_percent,
    format_value,
    markdown_table,
    select_tests,
    text_table,
)


@dataclass(frozen=True)
class Side:
    """One run's figure for a series: its ``run_id``, median ``value``, the median's interval
    ``low``..``high`` (None: a record without one) and every trial."""

    run_id: str
    value: float
    low: float | None
    high: float | None
    trials: tuple[float, ...]


@dataclass(frozen=True)
class Change:
    """Change of one (test, metric) from run A to run B: both sides (None: only in the other
    run), the :class:`AbResult` (None then too) and the ``verdict``: ``regression``,
    ``progression``, ``no change``, ``inconclusive``, ``only in A`` or ``only in B``."""

    test_id: str
    metric: str
    unit: str
    direction: str
    a: Side | None
    b: Side | None
    result: AbResult | None
    verdict: str


def _side(row: pd.Series) -> Side:
    low, high = row.get("ci_low"), row.get("ci_high")
    trials = row.get("trial_values")
    return Side(str(row["run_id"]), float(row["value"]),
                None if low is None or pd.isna(low) else float(low),
                None if high is None or pd.isna(high) else float(high),
                tuple(float(v) for v in trials) if trials is not None else (float(row["value"]),))


def _sides(frame: pd.DataFrame) -> dict[tuple[str, str], tuple[Side, str, str]]:
    latest = frame.sort_values("start_time", kind="stable").groupby(["test_id", "metric"]).last()
    return {(str(key[0]), str(key[1])): (_side(row), str(row["unit"]), str(row["direction"]))
            for key, row in latest.iterrows()}


def compare_frames(frame_a: pd.DataFrame, frame_b: pd.DataFrame,
                   noise: dict[tuple[str, str], float] | None = None,
                   alpha: float = DEFAULT_ALPHA, margin: float = DEFAULT_MARGIN) -> list[Change]:
    """Per (test, metric) changes from A to B: regressions first, then by test and metric.

    ``noise`` maps (test, metric) to its run-to-run CV (:func:`store_noise`).
    """
    noise = noise or {}
    sides_a, sides_b = _sides(frame_a), _sides(frame_b)
    changes: list[Change] = []
    for key in sorted(sides_a.keys() | sides_b.keys()):
        a, b = sides_a.get(key), sides_b.get(key)
        unit, direction = (b or a)[1:]  # type: ignore[index]
        if a is None or b is None:
            verdict = "only in B" if a is None else "only in A"
            changes.append(Change(*key, unit, direction, a and a[0], b and b[0], None, verdict))
            continue
        try:
            result = ab_verdict(a[0].trials, b[0].trials, direction, alpha, noise.get(key),
                                margin)
        except ValueError:  # e.g. a zero among the trials: no change as a ratio
            changes.append(Change(*key, unit, direction, a[0], b[0], None, "inconclusive"))
            continue
        changes.append(Change(*key, unit, direction, a[0], b[0], result, result.verdict))
    rank = {"regression": 0, "progression": 1}
    return sorted(changes, key=lambda c: (rank.get(c.verdict, 2), c.test_id, c.metric))


def _cell(side: Side | None, unit: str) -> str:
    if side is None:
        return "-"
    if side.low is None or side.high is None:
        return f"{format_value(side.value, unit)} ({len(side.trials)} trials)"
    return (f"{format_value(side.value, unit)} [{format_value(side.low)}, "
            f"{format_value(side.high)}]")


def _change(result: AbResult | None) -> str:
    if result is None:
        return "-"
    interval = result.interval_pct
    text = format_percent(result.pct)
    if interval is not None:
        text += f" [{interval[0]:+.1f}%, {interval[1]:+.1f}%]"
    return text


HEADER = ["test", "metric", "A median [interval]", "B median [interval]",
          "change [interval]", "run noise", "verdict"]


def change_rows(changes: Sequence[Change]) -> list[list[str]]:
    """Table rows for :data:`HEADER`."""
    return [
        [c.test_id, c.metric, _cell(c.a, c.unit), _cell(c.b, c.unit), _change(c.result),
         "-" if c.result is None or c.result.noise is None else f"{c.result.noise:.1%}",
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
                markdown: Path | None, alpha: float = DEFAULT_ALPHA,
                margin: float = DEFAULT_MARGIN) -> int:
    """Print the comparison table; exit status 3 when any change is a regression."""
    try:
        alpha = check_alpha(alpha, "--alpha")
    except ValueError as error:
        raise RecordError(str(error)) from None
    if not 0.0 <= margin < 1.0:
        raise RecordError(f"--margin: expected a percentage in [0, 100), got {margin * 100:g}")
    frame_a = select_tests(resolve_run(run_a, store), tests)
    frame_b = select_tests(resolve_run(run_b, store), tests)
    keys = {(str(t), str(m)) for frame in (frame_a, frame_b)
            for t, m in zip(frame["test_id"], frame["metric"], strict=True)}
    noise = store_noise(store, keys)
    changes = compare_frames(frame_a, frame_b, noise, alpha, margin)
    rows = change_rows(changes)
    test = (f"verdicts: Hodges-Lehmann change of the trials, Mann-Whitney interval at "
            f"{1 - alpha:.0%}, widened by each series' run-to-run CV (run noise) when its "
            f"history has {MIN_HISTORY} runs; margin {margin:.0%}")
    sys.stdout.write(f"A = {run_a}\nB = {run_b}\n{test}\n" + text_table(HEADER, rows))
    if markdown:
        markdown.parent.mkdir(parents=True, exist_ok=True)
        markdown.write_text(f"# Comparison\n\nA = `{run_a}`, B = `{run_b}`\n\n{test}\n\n"
                            + markdown_table(HEADER, rows), encoding="utf-8")
    regressions = [f"{c.test_id} [{c.metric}]" for c in changes if c.verdict == "regression"]
    if regressions:
        sys.stderr.write(f"regression in {len(regressions)} series: "
                         f"{', '.join(regressions)}\n")
        return EXIT_REGRESSION
    return EXIT_OK
