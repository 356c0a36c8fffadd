"""Summary of repeated measurement trials: median, min, max, mean, sample stdev, CV.

A measuring test runs N trials of D seconds and keeps every trial; :func:`summarize` turns the
trial values into a :class:`TrialSummary` that the JSON record and the criteria check use.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class TrialSummary:
    """Statistics of one metric over the trials of a test.

    Fields: ``values`` (every trial, in run order), ``unit`` (e.g. ``"req/s"``, ``"bit/s"``),
    ``median``, ``minimum``, ``maximum``, ``mean``, ``stdev`` (sample standard deviation, n-1
    denominator; 0.0 for a single trial) and ``cv`` (coefficient of variation, stdev / mean;
    ``None`` when the mean is 0, where it is undefined).
    """

    values: tuple[float, ...]
    unit: str
    median: float
    minimum: float
    maximum: float
    mean: float
    stdev: float
    cv: float | None

    @property
    def count(self) -> int:
        """Number of trials."""
        return len(self.values)

    def as_dict(self) -> dict[str, object]:
        """Plain-JSON form for result records (``values`` as a list)."""
        return {
            "values": list(self.values),
            "unit": self.unit,
            "median": self.median,
            "minimum": self.minimum,
            "maximum": self.maximum,
            "mean": self.mean,
            "stdev": self.stdev,
            "cv": self.cv,
        }


def summarize(values: Iterable[float], unit: str) -> TrialSummary:
    """Summarise trial ``values`` measured in ``unit``.

    Raises ``ValueError`` for an empty input, and for a value that is not a finite real number
    (a NaN or a string would silently poison every statistic).
    """
    trials: list[float] = []
    for index, value in enumerate(values):
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(
                f"trial {index} of {unit!r}: expected a number, got {value!r}"
            )
        if not math.isfinite(value):
            raise ValueError(f"trial {index} of {unit!r}: expected a finite number, got {value!r}")
        trials.append(float(value))
    if not trials:
        raise ValueError(f"cannot summarise {unit!r}: no trial values (expected at least one)")
    mean = statistics.fmean(trials)
    stdev = statistics.stdev(trials) if len(trials) > 1 else 0.0
    return TrialSummary(
        values=tuple(trials),
        unit=unit,
        median=statistics.median(trials),
        minimum=min(trials),
        maximum=max(trials),
        mean=mean,
        stdev=stdev,
        cv=stdev / abs(mean) if mean != 0 else None,
    )
