"""Trend analysis of result series: jumpavg groups, newest-sample classification, tables.

One series per (test id, metric), ordered by the records' start time. jumpavg groups each series
(:mod:`libraries.trend.detect`); the newest sample is a *regression* (or *progression*) when the
group it belongs to moved the wrong (right) way against the previous group, taking the metric's
direction into account, that group started within the newest ``recent`` samples, and the
interval of the change agrees (:mod:`libraries.trend.interval_check`).

The series of an A/B test's ratio (``ab_rps_ratio``: the nightly against a pinned reference)
is judged by :mod:`libraries.trend.ratio` (a step tested at each night, from the third); each
side's own figure in that series (``rps [b: today]``) is drawn, never gated.
"""

from __future__ import annotations

import fnmatch
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from libraries.history.ab_series import is_ratio_metric, is_side_metric
from libraries.results.family import NIGHT_LEVEL, TEST_SHARE, gate_alpha
from libraries.results.verdict import AbResult
from libraries.trend.detect import (
    Group,
    Run,
    classify_batch,
    classify_with_jumpavg,
    spread_groups,
)
from libraries.trend.interval_check import confirm_change
from libraries.trend.newest import Youth, pending, youth
from libraries.trend.ratio import find_steps, newest_step, segments

LOG = logging.getLogger(__name__)

EXIT_OK = 0
EXIT_BAD_INPUT = 2
EXIT_REGRESSION = 3

ORDER = {"regression": 0, "pending": 1, "progression": 2, "normal": 3}
"""``pending``: an A/B ratio series whose newest night moved beyond the margin, which the gate
cannot confirm before the next night (:func:`libraries.trend.newest.pending`)."""


@dataclass(frozen=True)
class SeriesTrend:
    """The trend of one (test, metric) series.

    Fields: ``test_id``, ``metric``, ``unit``, ``direction``; ``samples`` (the series' rows of
    :func:`libraries.history.load.load_records`, oldest first); ``groups`` (jumpavg groups, labels
    in value terms: ``regression`` = went down); ``anomalies`` (sample index -> ``regression`` /
    ``progression`` in the metric's terms, at the first sample of each changed group);
    ``classification`` of the newest sample; ``last_value``; ``trend_avg`` (average of the
    newest sample's group); ``change_pct``: for a flagged regression/progression the change
    since the established level (the confirmation's), else the newest value against
    ``trend_avg``;
    ``confirmation``: when jumpavg's newest group moved, the verdict of its trials against the
    previous group's (:mod:`libraries.trend.interval_check`), without which no change is flagged.
    """

    test_id: str
    metric: str
    unit: str
    direction: str
    samples: pd.DataFrame
    groups: tuple[Group, ...]
    anomalies: dict[int, str]
    classification: str
    last_value: float
    trend_avg: float
    change_pct: float | None
    history: History | None = None
    confirmation: AbResult | None = None
    pending: AbResult | None = None
    """An A/B ratio series' newest night beyond the margin that the gate cannot confirm yet
    (classification ``pending``)."""
    excluded: str = ""
    """Why the newest night was not judged (a failed, invalid or partial night), else empty."""
    young: Youth | None = None
    """An A/B ratio series whose newest level is younger than the gate's baseline: what it
    flags now (:func:`libraries.trend.newest.youth`)."""

    @property
    def key(self) -> str:
        """``test_id [metric]``: the series' name in tables and charts."""
        return f"{self.test_id} [{self.metric}]"

    @property
    def size(self) -> int:
        """Samples in the series (``samples`` may hold only the newest of them)."""
        return len(self.history.t) if self.history is not None else len(self.samples)


@dataclass(frozen=True)
class History:
    """Every sample of a series as arrays, oldest first (when ``samples`` holds only the
    newest rows, e.g. from the store's change-detection cache): ``t`` (µs since the epoch,
    UTC), ``value``, ``low``, ``high``. Group and anomaly positions index these."""

    t: Any
    value: Any
    low: Any
    high: Any


def _in_metric_terms(label: str, direction: str) -> str:
    """Turn a value-terms label (went down / up) into the metric's regression / progression."""
    if direction == "lower_is_better" and label != "normal":
        return "progression" if label == "regression" else "regression"
    return label


def _percent(new: float, old: float) -> float | None:
    return (new - old) / abs(old) * 100.0 if old else None


def judge(key: tuple[str, str], rows: pd.DataFrame, groups: Sequence[Group], recent: int,
          min_samples: int, history: History | None = None,
          alpha: float = NIGHT_LEVEL, nights: pd.DataFrame | None = None) -> SeriesTrend:
    """The trend of one series from its jumpavg ``groups``: ``rows`` are its samples, oldest
    first (with ``history``: its newest samples, ``history`` holding all of them); ``alpha``:
    an A/B ratio series' level on this night (the night's level over its ratio series,
    :func:`ratio_alpha`); ``nights``: an A/B ratio series' every night (``value``,
    ``stdev``, ``excluded``) when ``rows`` holds only the newest, so its steps are found
    walking the whole series, as from the full table. A newest sample that is ``excluded``
    (a failed, invalid or partial night) is never flagged."""
    size = len(history.t) if history is not None else len(rows)
    direction = str(rows["direction"].iloc[-1])
    if is_ratio_metric(key[1], str(rows["unit"].iloc[-1])):
        return _judge_ratio(key, rows, size, history, alpha, nights)
    excluded = _excluded(rows)
    if is_side_metric(key[1]) or excluded:
        min_samples = size + 1  # one side's own figure: shown beside the ratio, never gated
    # A series shorter than min_samples is not judged: no markers either (jumpavg splits any
    # two different values, so a 2-run chart would show a "change" at every second sample).
    anomalies = {
        group.start: _in_metric_terms(group.label, direction)
        for group in groups[1:] if group.label != "normal"
    } if size >= min_samples else {}
    last = groups[-1]
    last_value = float(rows["value"].iloc[-1])
    classification = "normal"
    change = _percent(last_value, last.avg)
    confirmation = None
    if len(groups) > 1 and last.start >= size - recent and size >= min_samples:
        classification = anomalies.get(last.start, "normal")
        change = _percent(last.avg, groups[-2].avg)
        if classification != "normal":
            confirmation = confirm_change(rows, size, groups, recent, direction)
            if confirmation is None or confirmation.verdict != classification:
                classification = "normal"  # jumpavg's step is not clear of the noise
            else:
                change = confirmation.pct  # from the established level, not a split step
    return SeriesTrend(
        test_id=key[0], metric=key[1], unit=str(rows["unit"].iloc[-1]), direction=direction,
        samples=rows, groups=tuple(groups), anomalies=anomalies,
        classification=classification, last_value=last_value, trend_avg=last.avg,
        change_pct=change, history=history, confirmation=confirmation, excluded=excluded,
    )


def judged_mask(rows: pd.DataFrame) -> np.ndarray:
    """Which of ``rows`` are judged: not ``excluded`` (a failed, invalid or partial night,
    :func:`libraries.history.load.excluded_reason`; drawn, never a baseline)."""
    if "excluded" not in rows.columns:
        return np.ones(len(rows), bool)
    return rows["excluded"].fillna("").astype(str).to_numpy() == ""


def _excluded(rows: pd.DataFrame) -> str:
    """Why the newest row is not judged (its ``excluded`` column), else ``""``."""
    if "excluded" not in rows.columns:
        return ""
    value = rows["excluded"].iloc[-1]
    return "" if value is None or pd.isna(value) else str(value)


def _judge_ratio(key: tuple[str, str], rows: pd.DataFrame, size: int,
                 history: History | None, alpha: float,
                 nights: pd.DataFrame | None) -> SeriesTrend:
    """The trend of an A/B ratio series (:mod:`libraries.trend.ratio`): its steps over every
    night (``nights``, else ``rows`` when they are the whole series); the groups are its
    levels between the steps."""
    direction = str(rows["direction"].iloc[-1])
    whole = rows.reset_index(drop=True) if nights is None else nights.reset_index(drop=True)
    if len(whole) != size:
        raise ValueError(f"{key[0]} [{key[1]}]: {len(whole)} nights to walk, expected the "
                         f"series' {size}")
    steps = find_steps(whole, direction, alpha=alpha)
    values = whole["value"].to_numpy(float)
    own = segments(values, steps, 0, direction)
    flagged = newest_step(steps, size)
    confirmation = flagged.result if flagged is not None else None
    waiting = pending(whole, steps, direction, alpha=alpha)
    classification = confirmation.verdict if confirmation is not None else \
        "pending" if waiting is not None else "normal"
    return SeriesTrend(
        test_id=key[0], metric=key[1], unit=str(rows["unit"].iloc[-1]), direction=direction,
        samples=rows, groups=tuple(own),
        anomalies={s.start: s.result.verdict for s in steps},
        classification=classification,
        last_value=float(values[-1]), trend_avg=own[-1].avg,
        change_pct=confirmation.pct if confirmation is not None else
        waiting.pct if waiting is not None else _percent(float(values[-1]), own[-1].avg),
        history=history, confirmation=confirmation, pending=waiting,
        excluded=_excluded(rows), young=youth(whole, steps, alpha))


def ratio_alpha(series: Sequence[tuple[str, str, pd.DataFrame]],
                level: float = NIGHT_LEVEL) -> tuple[float, int]:
    """Each A/B ratio series' two-sided level on tonight's gate and how many series share
    it: the gate's share of the night's family-wise ``level`` (:mod:`libraries.results.family`)
    over the ratio series whose newest sample is from tonight's run (the newest of all).
    ``series``: ``(metric, unit, rows)`` of every series, rows oldest first."""
    if not series:
        return level, 0
    newest = max(series, key=lambda s: s[2]["start_time"].iloc[-1])[2]["run_id"].iloc[-1]
    judged = sum(is_ratio_metric(metric, unit) and rows["run_id"].iloc[-1] == newest
                 for metric, unit, rows in series)
    return gate_alpha(level, judged), judged


def family_statement(trends: Sequence[SeriesTrend], level: float = NIGHT_LEVEL) -> str:
    """``"N A/B ratio series judged by the gate ..."``: what the gate spent of the night's
    family-wise level (Bonferroni: each series at a false regression of ``alpha / 2``); the
    night's A/B tests' own spend is the run report's to state (they ran at the ``AB_ALPHA``
    the nightly gave them, which this history does not keep)."""
    alpha, judged = ratio_alpha([(t.metric, t.unit, t.samples) for t in trends], level)
    if not judged:
        return ""
    return (f"{judged} A/B ratio series judged by the gate at {alpha / 2:.3g} each: "
            f"{judged * alpha / 2:.3g} of the night's family-wise level {level:g} "
            f"(Bonferroni), the gate's share; the night's A/B tests were given the other "
            f"{TEST_SHARE * level:g}, and what they spent is stated in the night's run report")


def rank(trends: Sequence[SeriesTrend]) -> list[SeriesTrend]:
    """Regressions first, then progressions, then normal series; by test and metric."""
    return sorted(trends, key=lambda t: (ORDER[t.classification], t.test_id, t.metric))


def analyse(frame: pd.DataFrame, recent: int = 5, engine: str = "fast",
            min_samples: int = 5) -> list[SeriesTrend]:
    """Classify every series of ``frame`` (the table of ``load_records`` or
    ``Store.frame``); regressions first, then progressions, then by name.

    A series with fewer than ``min_samples`` samples is never flagged: jumpavg splits any two
    different values, so a gate on the second night would flag half the tests.
    """
    if frame.empty:
        return []
    ordered = frame.sort_values(["start_time", "run_id"], kind="stable")
    keys: list[tuple[str, str]] = []
    parts: list[pd.DataFrame] = []
    for key, rows in ordered.groupby(["test_id", "metric"], sort=True):
        keys.append((str(key[0]), str(key[1])))
        parts.append(rows.reset_index(drop=True))
    judged = [judged_mask(rows) for rows in parts]
    series = [
        [Run(avg=a, stdev=s, peak=h) for a, s, h in
         zip(rows["value"].tolist(), rows["stdev"].tolist(), rows["high"].tolist(), strict=True)]
        for rows in (rows[mask] for rows, mask in zip(parts, judged, strict=True))
    ]
    if engine == "jumpavg":
        found = [classify_with_jumpavg(runs) if runs else [] for runs in series]
    else:
        found = classify_batch(series)
    # excluded nights (failed, invalid, partial) never enter jumpavg's levels; drawn on them
    grouped = [spread_groups(g, mask, rows["value"].to_numpy(float))
               for g, mask, rows in zip(found, judged, parts, strict=True)]
    alpha, _ = ratio_alpha([(k[1], str(rows["unit"].iloc[-1]), rows)
                            for k, rows in zip(keys, parts, strict=True)])
    trends = [judge(k, rows, g, recent, min_samples, alpha=alpha)
              for k, rows, g in zip(keys, parts, grouped, strict=True)]
    return rank(trends)


def select_tests(frame: pd.DataFrame, patterns: Sequence[str]) -> pd.DataFrame:
    """Rows whose test id matches any glob ``pattern`` (case-insensitive, Robot ``--test``
    style; a pattern without wildcards matches as a substring)."""
    if not patterns:
        return frame
    globs = [p if any(c in p for c in "*?[") else f"*{p}*" for p in patterns]
    ids = frame["test_id"].drop_duplicates()
    wanted = {
        test for test in ids
        if any(fnmatch.fnmatchcase(test.lower(), glob.lower()) for glob in globs)
    }
    return frame[frame["test_id"].isin(wanted)]


def format_value(value: float | None, unit: str = "") -> str:
    """A number with 4 significant digits and SI prefix for large values (``12.35 G bit/s``)."""
    if value is None:
        return "-"
    for factor, prefix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor * 10:
            return f"{value / factor:.4g} {prefix}{unit}".rstrip()
    return f"{value:.4g} {unit}".rstrip()


def format_percent(value: float | None) -> str:
    """``+12.3%`` / ``-4.0%`` / ``-`` (no baseline)."""
    return "-" if value is None else f"{value:+.1f}%"


def confirmation_text(trend: SeriesTrend) -> str:
    """The interval check of a jumpavg step: ``-20.1% [-25.3%, -14.0%] regression`` (the
    verdict of the trials), or ``-`` when the newest group did not move; a pending night:
    ``-13.6% [-16.0%, -11.1%] pending: confirmed or cleared by the next night``; an excluded
    newest night: ``not judged: <why>``; an A/B ratio series with a young newest level and
    nothing else to say: what it flags now (:class:`libraries.trend.newest.Youth`)."""
    if trend.excluded:
        return f"not judged: {trend.excluded}"
    if trend.confirmation is None and trend.pending is None and trend.young is not None:
        return trend.young.text()
    result = trend.confirmation
    if result is None and trend.pending is not None:
        interval = trend.pending.interval_pct
        shown = "" if interval is None else f" [{interval[0]:+.1f}%, {interval[1]:+.1f}%]"
        return (f"{format_percent(trend.pending.pct)}{shown} pending "
                f"{trend.pending.verdict}: confirmed or cleared by the next night")
    if result is None:
        return "-"
    interval = result.interval_pct
    shown = "" if interval is None else f" [{interval[0]:+.1f}%, {interval[1]:+.1f}%]"
    return f"{format_percent(result.pct)}{shown} {result.verdict}"


def summary_rows(trends: Sequence[SeriesTrend]) -> list[list[str]]:
    """Rows of the summary table: test, metric, last value, trend average, change, the
    interval check of the change, class."""
    return [
        [t.test_id, t.metric, format_value(t.last_value, t.unit),
         format_value(t.trend_avg, t.unit), format_percent(t.change_pct),
         confirmation_text(t), t.classification]
        for t in trends
    ]


SUMMARY_HEADER = ["test", "metric", "last value", "trend average", "change",
                  "interval check", "classification"]


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A GitHub-flavoured markdown table (``|`` in cells escaped)."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def text_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A plain aligned text table for the terminal."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    return "\n".join(
        "  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
        for row in [header, *rows]
    ) + "\n"


def markdown_summary(trends: Sequence[SeriesTrend], family: str = "") -> str:
    """The markdown summary: counts, the night's family-wise statement (``family``, see
    :func:`family_statement`), then the table (regressions first)."""
    counts = {c: sum(t.classification == c for t in trends) for c in ORDER}
    head = (f"# Performance trend\n\n{len(trends)} series: {counts['regression']} regression(s),"
            f" {counts['progression']} progression(s), {counts['normal']} normal,"
            f" {counts['pending']} pending (beyond the margin on the newest night, confirmed or"
            " cleared by the next).\n\n" + (f"{family}.\n\n" if family else ""))
    return head + markdown_table(SUMMARY_HEADER, summary_rows(trends))
