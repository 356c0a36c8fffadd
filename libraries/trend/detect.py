"""Change detection for trend series: jumpavg's minimum-description-length grouping.

jumpavg (FD.io CSIT) splits a series of runs into groups, choosing the split that needs the fewest
bits to encode under a "each group is one normal distribution" model, and labels each group
``regression`` / ``progression`` / ``normal`` by comparing its average with the previous group's.

:func:`classify_batch` computes exactly that grouping (same cost function as
``jumpavg.BitCountingStats``, same search as ``jumpavg.classify``), vectorised with numpy over
many series at once: ``jumpavg.classify`` is O(n^2) in pure Python (0.5 s for one 250-run
series), too slow for hundreds of series. :func:`classify_with_jumpavg` runs the library's own
classes and is the reference the unit tests compare against (``--engine jumpavg`` in the CLI).

Each run is fed as one sample: average = the run's median, stdev = the spread of its trials,
size 1. The trial spread thus widens a group's stdev, so noisy runs need a bigger jump to split.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import jumpavg
import numpy as np

SBPS = 12.0
"""Significant bits per sample: jumpavg's default resolution (unit = max / (2**13 - 1))."""


@dataclass(frozen=True)
class Run:
    """One run of a series: ``avg`` (the run's value), ``stdev`` of its trials, ``peak`` (max)."""

    avg: float
    stdev: float = 0.0
    peak: float | None = None


@dataclass(frozen=True)
class Group:
    """A jumpavg group: runs ``start``..``end`` (inclusive), their ``avg``, and ``label``.

    ``label`` is jumpavg's comment: ``"normal"`` for the first group, else ``"regression"`` when
    the average went down from the previous group and ``"progression"`` when it went up.
    """

    start: int
    end: int
    avg: float
    label: str


def _labels(starts: list[int], ends: list[int], avgs: list[float]) -> list[Group]:
    groups: list[Group] = []
    previous = avgs[0] if avgs else 0.0
    for start, end, avg in zip(starts, ends, avgs, strict=True):
        label = "normal"
        if avg < previous:
            label = "regression"
        elif avg > previous:
            label = "progression"
        groups.append(Group(start, end, avg, label))
        previous = avg
    return groups


def _prepare(runs: Sequence[Run]) -> tuple[np.ndarray, np.ndarray, float, float]:
    """Shift a series so that every value is >= 0 (jumpavg's model needs that).

    Returns the shifted averages, the stdevs, the shifted maximum and the shift.
    """
    avg = np.array([r.avg for r in runs], dtype=float)
    sd = np.array([r.stdev for r in runs], dtype=float)
    peak = np.array([r.avg if r.peak is None else max(r.peak, r.avg) for r in runs], dtype=float)
    low = float(min(avg.min(), 0.0))
    return avg - low, sd, float(peak.max() - low), low


def classify_batch(series: Sequence[Sequence[Run]]) -> list[list[Group]]:
    """Group every series like ``jumpavg.classify`` would; returns one group list per series.

    Series may have different lengths (each is padded to the longest, padding never influences
    the groups of the real runs). A constant-zero series is one ``normal`` group.
    """
    results: list[list[Group] | None] = [None] * len(series)
    work: list[int] = []
    for index, runs in enumerate(series):
        if not runs:
            results[index] = []
        else:
            work.append(index)
    if not work:
        return [r or [] for r in results]
    length = max(len(series[i]) for i in work)
    count = len(work)
    avg = np.zeros((count, length))
    sd = np.zeros((count, length))
    max_value = np.zeros(count)
    lows = np.zeros(count)
    for row, index in enumerate(work):
        a, s, peak, lows[row] = _prepare(series[index])
        avg[row, : len(a)] = a
        avg[row, len(a):] = a[-1]
        sd[row, : len(s)] = s
        max_value[row] = peak
    max_value = np.where(max_value > 0, max_value, 1.0)
    unit = max_value / (2.0 ** (SBPS + 1.0) - 1.0)
    avg /= unit[:, None]
    sd /= unit[:, None]
    top = max_value / unit  # max in units: 2**13 - 1
    choice, group_avg, _ = _search(avg, sd, top)
    for row, index in enumerate(work):
        n = len(series[index])
        starts: list[int] = []
        ends: list[int] = []
        avgs: list[float] = []
        end = n - 1
        while end >= 0:
            start = int(choice[row, end])
            starts.append(start)
            ends.append(end)
            avgs.append(float(group_avg[row, end]))
            end = start - 1
        starts.reverse()
        ends.reverse()
        avgs.reverse()
        avgs = [a * float(unit[row]) + float(lows[row]) for a in avgs]
        results[index] = _labels(starts, ends, avgs)
    return [r or [] for r in results]


def _search(avg: np.ndarray, sd: np.ndarray, top: np.ndarray
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The jumpavg search over all series at once (values already in units).

    Returns ``choice[s, i]``: start of the last group of the best grouping of runs 0..i,
    ``group_avg[s, i]``: that group's average, and ``best[s, i]``: its cost in bits.
    Processing group starts ``j`` in ascending order reproduces jumpavg's tie-breaking
    (earliest start wins; a new group at ``i`` wins ties).
    """
    count, length = avg.shape
    zero = np.zeros((count, 1))
    c1 = np.concatenate([zero, np.cumsum(avg, axis=1)], axis=1)
    c2 = np.concatenate([zero, np.cumsum(avg * avg + sd * sd, axis=1)], axis=1)
    best = np.full((count, length), np.inf)
    choice = np.zeros((count, length), dtype=np.int64)
    group_avg = np.zeros((count, length))
    sizes = np.arange(1, length + 1, dtype=float)
    log_size = np.log2(sizes * (sizes + 1))
    lgam = np.array([math.lgamma((n - 1) / 2) if n > 1 else 0.0 for n in range(1, length + 1)])
    sphere_const = (math.log(2) + math.log(math.pi) * (sizes - 1) / 2 - lgam
                    + np.log(sizes) * (sizes - 2) / 2) / math.log(2)
    top_c = top[:, None]
    stdev_norm = np.log2(1 - 1 / (top_c + 2))
    for j in range(length):
        n = length - j
        size = sizes[:n]
        mean = (c1[:, j + 1:] - c1[:, j: j + 1]) / size
        var = (c2[:, j + 1:] - c2[:, j: j + 1]) / size - mean * mean
        stdev = np.sqrt(np.maximum(var, 0.0))
        bits = np.broadcast_to(log_size[:n], (count, n)).copy()
        if j == 0:
            bits += np.log2(top_c + 1)
        else:
            prev = group_avg[:, j - 1: j]
            norm = prev * prev - (prev - 1) * top_c + top_c * top_c / 2
            bits -= np.log2((np.abs(mean - prev) + 1) / norm)
            bits += best[:, j - 1: j]
        multi = size >= 2
        extra = (np.log2((stdev + 1) * (stdev + 2)) + stdev_norm + sphere_const[:n]
                 + np.log2(stdev + 1) * (size - 2))
        bits += np.where(multi, extra, 0.0)
        # Diagonal (a new group starting at j) wins ties; later ends need a strict improvement.
        take = bits <= best[:, j:]
        take[:, 1:] = bits[:, 1:] < best[:, j + 1:]
        best[:, j:] = np.where(take, bits, best[:, j:])
        choice[:, j:] = np.where(take, j, choice[:, j:])
        group_avg[:, j:] = np.where(take, mean, group_avg[:, j:])
    return choice, group_avg, best


def classify_with_jumpavg(runs: Sequence[Run]) -> list[Group]:
    """Reference implementation with jumpavg's own classes (slow: pure Python, O(n^2))."""
    if not runs:
        return []
    avg, sd, max_value, low = _prepare(runs)
    max_value = max_value if max_value > 0 else 1.0
    values = [jumpavg.AvgStdevStats(size=1, avg=float(a), stdev=float(s))
              for a, s in zip(avg, sd, strict=True)]
    unit = max_value / (2.0 ** (SBPS + 1.0) - 1.0)
    record = jumpavg.BitCountingGroupList(max_value=max_value, unit=unit)
    open_lists: list[jumpavg.BitCountingGroupList] = []
    for value in values:
        new_open = record.copy_fast().append_group_of_runs([value])
        record = new_open
        for old_open in open_lists:
            old_open.append_run_to_to_last_group(value)
            if old_open.bits < record.bits:
                record = old_open
        open_lists.append(new_open)
    starts, ends, avgs = [], [], []
    position = 0
    for group in record:
        starts.append(position)
        position += len(group)
        ends.append(position - 1)
        avgs.append(group.stats.avg + low)
    return _labels(starts, ends, avgs)


def spread_groups(groups: Sequence[Group], judged: np.ndarray,
                  values: np.ndarray | None = None) -> list[Group]:
    """The ``groups`` of a series' judged samples (indexes among them) as groups of all its
    samples, ``judged`` saying which are judged (False: an excluded night, drawn only). An
    excluded sample joins the group of the judged one before it (the first group, before any):
    it is drawn on that level's line, never part of its average. No judged sample: one
    ``normal`` group over all, at the median of ``values``."""
    judged = np.asarray(judged, bool)
    if judged.all():
        return list(groups)
    if not groups:
        middle = float(np.median(values)) if values is not None and len(values) else 0.0
        return [Group(0, len(judged) - 1, middle, "normal")] if len(judged) else []
    index = np.flatnonzero(judged)
    starts = [0, *(int(index[g.start]) for g in groups[1:])]
    ends = [*(s - 1 for s in starts[1:]), len(judged) - 1]
    return [Group(start, end, g.avg, g.label)
            for start, end, g in zip(starts, ends, groups, strict=True)]
