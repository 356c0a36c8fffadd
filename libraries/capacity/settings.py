"""The ``-v`` settings of the capacity searches: the latency goals (``LATENCY_SLO``), the
range and MLRsearch's knobs, the windows of the miss curve (``CAPACITY_*``), as one
:class:`SearchSettings`; parsed with the shared helpers of :mod:`libraries.results.settings`,
in their error style (a ``ValueError`` naming the variable, the value and what was
expected). Every setting is listed in :mod:`libraries.results.registry`. Pure: it reads values
it is handed, never a node, a file or Robot itself.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from libraries.results.settings import Lookup, number, whole

DEFAULT_SLO = "10ms"
DEFAULT_RANGE = "1000..1000000"
_DURATION = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(us|µs|ms|s)\s*$")
_GOAL = re.compile(r"^\s*p(\d+(?:\.\d+)?)\s*<=\s*(.+)$")
_UNIT_MS = {"us": 0.001, "µs": 0.001, "ms": 1.0, "s": 1000.0}


def parse_duration_ms(value: object, where: str, given: object = None) -> float:
    """A duration (``10ms``, ``2.5 ms``, ``0.5s``, ``800us``) in milliseconds; ``ValueError``
    naming ``where`` and the ``given`` value (default: ``value``) for anything but a positive
    duration."""
    match = _DURATION.match(str(value)) if isinstance(value, str | int | float) else None
    milliseconds = float(match.group(1)) * _UNIT_MS[match.group(2)] if match else 0.0
    if not match or milliseconds <= 0:
        raise ValueError(f"{where}:{value if given is None else given}: expected a positive "
                         f"duration such as 10ms, 2.5ms or 0.5s, got {value!r}")
    return milliseconds


def parse_slo(value: object, where: str = "-v LATENCY_SLO") -> float:
    """The p99 limit of a plain SLO (``10ms``) in milliseconds (the latency pass's yardstick)."""
    return parse_duration_ms(value, where)


@dataclass(frozen=True)
class LatencyGoal:
    """``quantile`` of the requests within ``limit_ms`` (``p99 <= 10 ms``: 0.99, 10.0)."""

    quantile: float
    limit_ms: float

    @property
    def loss_ratio(self) -> float:
        """MLRsearch's goal loss ratio: the share of requests allowed over the limit."""
        return round(1.0 - self.quantile, 12)

    @property
    def name(self) -> str:
        """``p99<=10ms``: the goal as written, and its key in records."""
        return f"p{self.quantile * 100:g}<={self.limit_ms:g}ms"


def parse_goals(value: object, where: str = "-v LATENCY_SLO") -> tuple[LatencyGoal, ...]:
    """Latency goals from ``p99<=10ms,p50<=1ms`` (a bare duration ``10ms`` is ``p99<=10ms``);
    ``ValueError`` naming ``where`` and the bad part."""
    goals: list[LatencyGoal] = []
    for part in str(value).split(","):
        match = _GOAL.match(part)
        if match is None:
            goals.append(LatencyGoal(0.99, parse_duration_ms(part.strip(), where, value)))
            continue
        percent = float(match.group(1))
        if not 0.0 < percent < 100.0:
            raise ValueError(f"{where}:{value}: percentile p{match.group(1)}: expected above 0 "
                             f"and below 100, e.g. p99")
        goals.append(LatencyGoal(round(percent / 100.0, 12),
                                 parse_duration_ms(match.group(2).strip(), where, value)))
    if len({g.name for g in goals}) != len(goals):
        raise ValueError(f"{where}:{value}: a goal is given twice")
    return tuple(goals)


def parse_range(value: object, where: str = "-v CAPACITY_RANGE") -> tuple[float, float]:
    """A search range ``bottom..top`` in requests/s (``100..500000``); ``ValueError`` naming
    ``where`` when it is not two positive numbers with the top above the bottom."""
    parts = str(value).split("..")
    try:
        low, high = (float(p) for p in parts)
    except ValueError:
        raise ValueError(f"{where}:{value}: expected bottom..top in requests/s, e.g. "
                         f"100..500000, got {value!r}") from None
    if not (math.isfinite(low) and math.isfinite(high)) or low <= 0:
        raise ValueError(f"{where}:{value}: expected positive rates, got {value!r}")
    if high <= low:
        raise ValueError(f"{where}:{value}: the top ({high:g} requests/s) must be above the "
                         f"bottom ({low:g})")
    return low, high


@dataclass(frozen=True)
class SearchSettings:
    """What every search is asked: the ``goals``; the range ``low``..``high`` (requests/s);
    MLRsearch's ``exceed_ratio`` (the share of the trial time that may fail a goal's loss
    ratio at a load still counted as a lower bound), ``initial_duration`` and
    ``final_duration`` of a trial (s), the ``duration_sum`` of final trials that decides a
    load, and the relative ``width`` between the bounds it stops at; ``max_seconds``: each
    search's own budget (the time of its trials, overheads included); ``confirm_seconds``:
    the length of the trial that confirms the figure over all its requests
    (:mod:`libraries.capacity.confirm`; 0: MLRsearch's knee is reported unconfirmed);
    ``verify_seconds``: one more window of that length at each figure, counted in its miss
    curve when as long as the others (0: none); ``miss_share`` (of windows missing at the
    figure), ``windows`` (per path), ``holdout``: :mod:`libraries.capacity.confirm`."""

    goals: tuple[LatencyGoal, ...]
    low: float = 100.0
    high: float = 1_000_000.0
    exceed_ratio: float = 0.5
    initial_duration: float = 0.5
    final_duration: float = 1.0
    duration_sum: float = 8.0
    width: float = 0.02
    max_seconds: float = 60.0
    confirm_seconds: float = 30.0
    verify_seconds: float = 0.0
    miss_share: float = 0.1
    windows: int = 12
    holdout: int = 0

    def __post_init__(self) -> None:
        if not self.goals:
            raise ValueError("capacity search: expected at least one latency goal")
        for name in ("low", "high", "initial_duration", "final_duration", "duration_sum",
                     "max_seconds"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or \
                    not math.isfinite(value) or value <= 0:
                raise ValueError(f"capacity search {name}: expected a positive number, "
                                 f"got {value!r}")
        if self.high <= self.low:
            raise ValueError(f"capacity search range: the top ({self.high:g} requests/s) must "
                             f"be above the bottom ({self.low:g})")
        for name in ("confirm_seconds", "verify_seconds"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or \
                    not math.isfinite(value) or value < 0:
                raise ValueError(f"capacity search {name}: expected 0 (none) or a positive "
                                 f"number of seconds, got {value!r}")
        if not 0.0 < self.miss_share < 0.5:
            raise ValueError(f"capacity search miss_share: expected (0, 0.5): {self.miss_share!r}")
        if not 0.0 <= self.exceed_ratio < 1.0:
            raise ValueError(f"capacity search exceed_ratio: expected a fraction in [0, 1), "
                             f"e.g. 0.5; got {self.exceed_ratio!r}")
        if not 0.0 < self.width < 1.0:
            raise ValueError(f"capacity search width: expected a fraction in (0, 1), e.g. "
                             f"0.02; got {self.width!r}")
        if self.final_duration < self.initial_duration:
            final, initial = self.final_duration, self.initial_duration
            raise ValueError(f"capacity search trial durations: the final ({final:g} s) must be"
                             f" at least the initial ({initial:g})")
        if self.duration_sum < self.final_duration:
            raise ValueError(f"capacity search duration_sum ({self.duration_sum:g} s): expected"
                             f" at least the final trial duration ({self.final_duration:g})")

    @property
    def limits(self) -> tuple[float, ...]:
        """The distinct latency limits (ms), first goal's first: one search each."""
        return tuple(dict.fromkeys(g.limit_ms for g in self.goals))

    def as_record(self) -> dict[str, Any]:
        """The record's form."""
        return {"goals": [g.name for g in self.goals], "range": [self.low, self.high],
                "exceed_ratio": self.exceed_ratio, "initial_duration_s": self.initial_duration,
                "final_duration_s": self.final_duration, "duration_sum_s": self.duration_sum,
                "relative_width": self.width, "max_seconds": self.max_seconds,
                "confirm_seconds": self.confirm_seconds, "verify_seconds": self.verify_seconds,
                "miss_share": self.miss_share, "windows": self.windows, "holdout": self.holdout,
                "controller": "MLRsearch 1.2.1 (FD.io CSIT, PyPI)"}


VARIABLES = {"goals": "LATENCY_SLO", "range": "CAPACITY_RANGE",
             "exceed_ratio": "CAPACITY_EXCEED_RATIO", "durations": "CAPACITY_TRIAL_DURATION",
             "duration_sum": "CAPACITY_DURATION_SUM", "width": "CAPACITY_WIDTH",
             "max_seconds": "CAPACITY_BUDGET", "confirm_seconds": "CAPACITY_CONFIRM",
             "verify_seconds": "CAPACITY_VERIFY", "miss_share": "CAPACITY_MISS_SHARE",
             "windows": "CAPACITY_WINDOWS", "holdout": "CAPACITY_HOLDOUT"}
"""The Robot variable (``-v NAME:value``) behind each setting."""


DEFAULTS: dict[str, object] = {"goals": DEFAULT_SLO, "range": DEFAULT_RANGE,
                               "exceed_ratio": 0.5, "durations": "0.5..1", "duration_sum": 8,
                               "width": 0.02, "max_seconds": 60, "confirm_seconds": 30,
                               "verify_seconds": 0, "miss_share": 0.1, "windows": 12,
                               "holdout": 0}


def capacity_settings_from_variables(lookup: Lookup) -> SearchSettings:
    """:func:`parse_settings` of the Robot variables ``lookup(name, default)`` gives."""
    return parse_capacity_settings(*(lookup(VARIABLES[key], default)
                                     for key, default in DEFAULTS.items()))


def parse_capacity_settings(goals: object = DEFAULT_SLO, search_range: object = DEFAULT_RANGE,
                   exceed_ratio: object = 0.5, durations: object = "0.5..1",
                   duration_sum: object = 8, width: object = 0.02, max_seconds: object = 60,
                   confirm_seconds: object = 30, verify_seconds: object = 0,
                   miss_share: object = 0.1, windows: object = 12,
                   holdout: object = 0) -> SearchSettings:
    """The settings from Robot variables (see :data:`VARIABLES`); ``durations`` is
    ``initial..final`` seconds or one duration for both. ``ValueError`` names the variable."""
    low, high = parse_range(search_range, f"-v {VARIABLES['range']}")
    parts = str(durations).split("..")
    if len(parts) > 2:
        raise ValueError(f"-v {VARIABLES['durations']}:{durations}: expected initial..final "
                         "seconds (0.5..1) or one duration (1)")
    values: dict[str, Any] = {
        "goals": parse_goals(goals, f"-v {VARIABLES['goals']}"), "low": low, "high": high,
        "initial_duration": number(VARIABLES["durations"], parts[0]),
        "final_duration": number(VARIABLES["durations"], parts[-1])}
    given = {"exceed_ratio": exceed_ratio, "duration_sum": duration_sum, "width": width,
             "max_seconds": max_seconds, "confirm_seconds": confirm_seconds,
             "verify_seconds": verify_seconds, "miss_share": miss_share}
    values.update((key, number(VARIABLES[key], value)) for key, value in given.items())
    values.update(windows=whole(VARIABLES["windows"], windows, 6, "windows per path"),
                  holdout=whole(VARIABLES["holdout"], holdout, 0, "held-out windows"))
    try:
        return SearchSettings(**values)
    except ValueError as error:
        key = next((k for k in given if f" {k}" in str(error)),
                   "durations" if "duration" in str(error) else "range")
        given.update(durations=durations, range=search_range)
        raise ValueError(f"-v {VARIABLES[key]}:{given[key]}: {error}") from None
