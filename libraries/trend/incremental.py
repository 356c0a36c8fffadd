"""jumpavg's grouping kept as a resumable state, so a new run costs O(n) instead of O(n^2).

jumpavg's search (:func:`libraries.trend.detect._search`) is a dynamic programme over the
ends of a series: the best grouping of runs ``0..i`` is the cheapest of "best grouping of
``0..j-1`` plus one group ``j..i``" over every ``j``. Its table for a prefix never depends on
later runs, so a series that gained runs at its end only needs the new ends computed, each
against the stored table (:func:`extend`). The table is in the series' units (its maximum /
8191, after shifting negative series up): a run that raises the maximum or lowers the minimum
below zero changes the units, and the series is searched again in full (:func:`build`).

The arithmetic is the batch search's, operation for operation, so a resumed state groups a
series exactly as a full search does (``utest/test_series_cache.py`` checks both).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from libraries.trend.detect import SBPS, Group, _labels, _search

CHUNK_CELLS = 4_000_000
"""A full search handles series in chunks of at most this many (series x runs) cells."""


@dataclass(frozen=True)
class Scale:
    """A series' units: ``max_value`` (shifted maximum, 1.0 when not positive), ``low``
    (the shift: the minimum when negative, else 0)."""

    max_value: float
    low: float

    @classmethod
    def of(cls, value: np.ndarray, high: np.ndarray) -> Scale:
        """The scale jumpavg uses for runs with averages ``value`` and trial maxima ``high``."""
        low = float(min(value.min(), 0.0))
        peak = float(np.maximum(high, value).max() - low)
        return cls(peak if peak > 0 else 1.0, low)

    @property
    def unit(self) -> float:
        return self.max_value / (2.0 ** (SBPS + 1.0) - 1.0)


@dataclass
class GroupState:
    """The search table of one series: per end ``i`` the cost ``best[i]`` of the best
    grouping of runs ``0..i``, the start ``choice[i]`` of its last group and that group's
    average ``group_avg[i]`` (in units of ``scale``)."""

    scale: Scale
    best: np.ndarray
    choice: np.ndarray
    group_avg: np.ndarray

    def __len__(self) -> int:
        return len(self.best)

    def truncated(self, length: int) -> GroupState:
        """The state of the first ``length`` runs (valid whatever came after them)."""
        return GroupState(self.scale, self.best[:length], self.choice[:length],
                          self.group_avg[:length])

    def groups(self) -> list[Group]:
        """The jumpavg groups of the whole series, labelled like :func:`classify_batch`."""
        starts: list[int] = []
        ends: list[int] = []
        avgs: list[float] = []
        end = len(self) - 1
        while end >= 0:
            start = int(self.choice[end])
            starts.append(start)
            ends.append(end)
            avgs.append(float(self.group_avg[end]))
            end = start - 1
        unit = self.scale.unit
        return _labels(starts[::-1], ends[::-1], [a * unit + self.scale.low for a in avgs[::-1]])


def _units(value: np.ndarray, stdev: np.ndarray, scale: Scale) -> tuple[np.ndarray, np.ndarray]:
    unit = scale.unit
    return (value - scale.low) / unit, stdev / unit


def build(series: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray]]) -> list[GroupState]:
    """Full search of every ``(value, stdev, high)`` series (batched, in chunks)."""
    states: list[GroupState] = []
    index = 0
    while index < len(series):
        chunk = [series[index]]
        longest = len(series[index][0])
        while index + len(chunk) < len(series):
            candidate = max(longest, len(series[index + len(chunk)][0]))
            if candidate * (len(chunk) + 1) > CHUNK_CELLS:
                break
            longest = candidate
            chunk.append(series[index + len(chunk)])
        states += _build_chunk(chunk, longest)
        index += len(chunk)
    return states


def _build_chunk(chunk: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray]],
                 length: int) -> list[GroupState]:
    count = len(chunk)
    avg = np.zeros((count, length))
    sd = np.zeros((count, length))
    scales = []
    for row, (value, stdev, high) in enumerate(chunk):
        scale = Scale.of(value, high)
        scales.append(scale)
        # Shift first, then divide by the unit: the batch search's order of operations.
        avg[row, : len(value)] = value - scale.low
        avg[row, len(value):] = avg[row, len(value) - 1]
        sd[row, : len(stdev)] = stdev
    units = np.array([s.unit for s in scales])
    avg /= units[:, None]
    sd /= units[:, None]
    top = np.array([s.max_value for s in scales]) / units
    choice, group_avg, best = _search(avg, sd, top)
    return [GroupState(scale, best[row, : len(chunk[row][0])].copy(),
                       choice[row, : len(chunk[row][0])].astype(np.int32),
                       group_avg[row, : len(chunk[row][0])].copy())
            for row, scale in enumerate(scales)]


@dataclass(frozen=True)
class Tables:
    """Per group size ``n`` (1..length): ``sizes``, ``log_size`` and ``sphere_const`` terms
    of jumpavg's cost, computed as the batch search computes them."""

    sizes: np.ndarray
    log_size: np.ndarray
    sphere_const: np.ndarray

    @classmethod
    def upto(cls, length: int) -> Tables:
        sizes = np.arange(1, length + 1, dtype=float)
        lgam = np.array([math.lgamma((n - 1) / 2) if n > 1 else 0.0
                         for n in range(1, length + 1)])
        sphere_const = (math.log(2) + math.log(math.pi) * (sizes - 1) / 2 - lgam
                        + np.log(sizes) * (sizes - 2) / 2) / math.log(2)
        return cls(sizes, np.log2(sizes * (sizes + 1)), sphere_const)


def extend(state: GroupState, value: np.ndarray, stdev: np.ndarray,
           tables: Tables | None = None) -> GroupState:
    """The state of the whole series ``value``/``stdev`` from the state of its first
    ``len(state)`` runs (same scale: the caller checks :meth:`Scale.of`). ``tables`` (at
    least as long as the series) saves recomputing them for every series."""
    avg, sd = _units(value, stdev, state.scale)
    top = state.scale.max_value / state.scale.unit
    total = len(avg)
    done = len(state)
    if tables is None or len(tables.sizes) < total:
        tables = Tables.upto(total)
    sizes, log_size, sphere_const = tables.sizes, tables.log_size, tables.sphere_const
    c1 = np.concatenate([[0.0], np.cumsum(avg)])
    c2 = np.concatenate([[0.0], np.cumsum(avg * avg + sd * sd)])
    best = np.empty(total)
    choice = np.empty(total, dtype=np.int32)
    group_avg = np.empty(total)
    best[:done], choice[:done], group_avg[:done] = state.best, state.choice, state.group_avg
    stdev_norm = np.log2(1 - 1 / (top + 2))
    first_bits = np.log2(top + 1)
    for end in range(done, total):
        starts = np.arange(end + 1)
        size = sizes[end - starts]
        mean = (c1[end + 1] - c1[starts]) / size
        var = (c2[end + 1] - c2[starts]) / size - mean * mean
        spread = np.sqrt(np.maximum(var, 0.0))
        bits = log_size[end - starts].copy()
        bits[0] += first_bits
        if end > 0:
            prev = group_avg[starts[1:] - 1]
            norm = prev * prev - (prev - 1) * top + top * top / 2
            bits[1:] -= np.log2((np.abs(mean[1:] - prev) + 1) / norm)
            bits[1:] += best[starts[1:] - 1]
        extra = (np.log2((spread + 1) * (spread + 2)) + stdev_norm + sphere_const[end - starts]
                 + np.log2(spread + 1) * (size - 2))
        bits += np.where(size >= 2, extra, 0.0)
        # Earlier starts win ties among themselves; a new group at ``end`` wins ties.
        pick = int(np.argmin(bits[:end])) if end else 0
        if end and bits[end] <= bits[pick]:
            pick = end
        best[end], choice[end], group_avg[end] = bits[pick], pick, mean[pick]
    return GroupState(state.scale, best, choice, group_avg)
