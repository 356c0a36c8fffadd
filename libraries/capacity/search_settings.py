"""The ``-v`` settings of the capacity searches: the latency goals (``LATENCY_SLO``), the
range and MLRsearch's knobs, the windows of the miss curve (``CAPACITY_*``), as one
:class:`SearchSettings`; parsed with the shared helpers of :mod:`libraries.results.trial_settings`,
in their error style (a ``ValueError`` naming the variable, the value and what was
expected). Each setting is declared once here (:data:`DECLARED`: default, parser, meaning,
its field); :mod:`libraries.cases.registry` collects them. Pure: it reads values
it is handed, never a node, a file or Robot itself.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from libraries.results.trial_settings import (
    SWITCH_TEXT,
    Lookup,
    Setting,
    number,
    parse_switch,
    whole,
)

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
    figure), ``windows`` (per path), ``holdout``: :mod:`libraries.capacity.confirm`. No
    defaults here: a run's are the settings' declarations (:data:`SEARCH`,
    :func:`parse_capacity_settings`)."""

    goals: tuple[LatencyGoal, ...]
    low: float
    high: float
    exceed_ratio: float
    initial_duration: float
    final_duration: float
    duration_sum: float
    width: float
    max_seconds: float
    confirm_seconds: float
    verify_seconds: float
    miss_share: float
    windows: int
    holdout: int

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


_CAPACITY = ("suite set-up (Check Measurement Settings): "
             "libraries.capacity.search_settings.capacity_settings_from_variables")


def _durations(value: object) -> tuple[float, float]:
    """``initial..final`` seconds, or one duration for both."""
    parts = str(value).split("..")
    if len(parts) > 2:
        raise ValueError(f"-v {CAPACITY_TRIAL_DURATION.name}:{value}: expected initial..final "
                         "seconds (0.5..1) or one duration (1)")
    return (number(CAPACITY_TRIAL_DURATION.name, parts[0]),
            number(CAPACITY_TRIAL_DURATION.name, parts[-1]))


LATENCY_SLO = Setting(
    "LATENCY_SLO", "p99<=10ms", parse_goals, "capacity.goals",
    "p99<=10ms[,p50<=2ms]; a bare duration (10ms) is p99<=10ms; units us, ms, s", "The latency "
    "goals of a capacity search: the highest rate where each quantile stays within its limit; "
    "the first goal's limit is the latency pass's yardstick.", "capacity",
    _CAPACITY + ", and the latency pass: libraries.cases.ssl_proxy")
CAPACITY_RANGE = Setting(
    "CAPACITY_RANGE", "1000..1000000", parse_range, "capacity.low, capacity.high",
    "bottom..top in requests/s, positive, top above bottom", "The rates MLRsearch searches "
    "between.", "capacity", _CAPACITY)
CAPACITY_EXCEED_RATIO = Setting(
    "CAPACITY_EXCEED_RATIO", "0.5", lambda v: number("CAPACITY_EXCEED_RATIO", v),
    "capacity.exceed_ratio", "a fraction in [0, 1)", "MLRsearch's exceed ratio: the share of "
    "trial time that may miss a goal at a rate still counted as a lower bound.", "capacity",
    _CAPACITY)
CAPACITY_TRIAL_DURATION = Setting(
    "CAPACITY_TRIAL_DURATION", "0.5..1", _durations,
    "capacity.initial_duration, capacity.final_duration", "initial..final seconds (final >= "
    "initial), or one duration for both", "MLRsearch's trial durations: short trials first, "
    "the final duration decides.", "capacity", _CAPACITY)
CAPACITY_DURATION_SUM = Setting(
    "CAPACITY_DURATION_SUM", "8", lambda v: number("CAPACITY_DURATION_SUM", v),
    "capacity.duration_sum", "seconds >= the final trial duration", "Seconds of final trials "
    "that decide a rate.", "capacity", _CAPACITY)
CAPACITY_WIDTH = Setting(
    "CAPACITY_WIDTH", "0.02", lambda v: number("CAPACITY_WIDTH", v), "capacity.width",
    "a fraction in (0, 1)", "The relative width between the bounds at which a search stops.",
    "capacity", _CAPACITY)
CAPACITY_BUDGET = Setting(
    "CAPACITY_BUDGET", "60", lambda v: number("CAPACITY_BUDGET", v), "capacity.max_seconds",
    "seconds > 0", "Each search's own time budget (its trials, overheads included).",
    "capacity", _CAPACITY)
CAPACITY_CONFIRM = Setting(
    "CAPACITY_CONFIRM", "30", lambda v: number("CAPACITY_CONFIRM", v),
    "capacity.confirm_seconds", "0 (none) or seconds > 0", "Length of the windows placed from "
    "the knee to confirm the figure over all their requests (0: the knee is reported "
    "unconfirmed).", "capacity", _CAPACITY)
CAPACITY_VERIFY = Setting(
    "CAPACITY_VERIFY", "0", lambda v: number("CAPACITY_VERIFY", v), "capacity.verify_seconds",
    "0 (none) or seconds > 0", "One more window of this length at each figure, counted in its "
    "miss curve when as long as the others.", "capacity", _CAPACITY)
CAPACITY_MISS_SHARE = Setting(
    "CAPACITY_MISS_SHARE", "0.1", lambda v: number("CAPACITY_MISS_SHARE", v),
    "capacity.miss_share", "a fraction in (0, 0.5)", "The figure is the rate where a window "
    "misses a goal with at most this probability (from the windows' miss curve).",
    "capacity", _CAPACITY)
CAPACITY_WINDOWS = Setting(
    "CAPACITY_WINDOWS", "12", lambda v: whole("CAPACITY_WINDOWS", v, 6, "windows per path"),
    "capacity.windows", "an integer >= 6", "Confirmation windows per path.", "capacity",
    _CAPACITY)
CAPACITY_HOLDOUT = Setting(
    "CAPACITY_HOLDOUT", "0", lambda v: whole("CAPACITY_HOLDOUT", v, 0, "held-out windows"),
    "capacity.holdout", "an integer >= 0", "Extra windows at each recorded figure, never "
    "counted in its miss curve: how often a window there misses, against the curve's interval "
    "(a check for benchmarks).", "capacity", _CAPACITY)
CAPACITY_SHARED_CORES = Setting(
    "CAPACITY_SHARED_CORES", "no", lambda v: parse_switch("CAPACITY_SHARED_CORES", v),
    "shared_cores", SWITCH_TEXT, "Search the capacity of a VPP row even where VPP's cores are "
    "shared with other processes (skipped otherwise), with a warning naming them.", "capacity",
    _CAPACITY + "; used by the capacity test, stack vpp, plain runs: libraries.cases.capacity")

SEARCH = {"goals": LATENCY_SLO, "search_range": CAPACITY_RANGE,
          "exceed_ratio": CAPACITY_EXCEED_RATIO, "durations": CAPACITY_TRIAL_DURATION,
          "duration_sum": CAPACITY_DURATION_SUM, "width": CAPACITY_WIDTH,
          "max_seconds": CAPACITY_BUDGET, "confirm_seconds": CAPACITY_CONFIRM,
          "verify_seconds": CAPACITY_VERIFY, "miss_share": CAPACITY_MISS_SHARE,
          "windows": CAPACITY_WINDOWS, "holdout": CAPACITY_HOLDOUT}
"""Each argument of :func:`parse_capacity_settings` -> its setting."""
VARIABLES = {key: setting.name for key, setting in SEARCH.items()}
"""The Robot variable (``-v NAME:value``) behind each argument."""
DECLARED = (*SEARCH.values(), CAPACITY_SHARED_CORES)
"""The capacity settings, in the reference page's order."""


def capacity_settings_from_variables(lookup: Lookup) -> SearchSettings:
    """:func:`parse_capacity_settings` of the Robot variables ``lookup(name, default)`` gives."""
    return parse_capacity_settings(**{key: lookup(setting.name, setting.default)
                                      for key, setting in SEARCH.items()})


def parse_capacity_settings(**given: object) -> SearchSettings:
    """The settings from Robot variables, by argument (see :data:`SEARCH`; one not given: its
    setting's default); ``durations`` is ``initial..final`` seconds or one duration for both.
    ``ValueError`` names the variable."""
    unknown = set(given) - set(SEARCH)
    if unknown:
        raise TypeError(f"parse_capacity_settings: no setting {sorted(unknown)}")
    raw = {key: given.get(key, setting.default) for key, setting in SEARCH.items()}
    low, high = parse_range(raw["search_range"], f"-v {VARIABLES['search_range']}")
    initial, final = _durations(raw["durations"])
    values: dict[str, Any] = {
        "goals": parse_goals(raw["goals"], f"-v {VARIABLES['goals']}"), "low": low,
        "high": high, "initial_duration": initial, "final_duration": final}
    plain = ("exceed_ratio", "duration_sum", "width", "max_seconds", "confirm_seconds",
             "verify_seconds", "miss_share", "windows", "holdout")
    values.update((key, SEARCH[key].parse(raw[key])) for key in plain)
    try:
        return SearchSettings(**values)
    except ValueError as error:
        key = next((k for k in plain if f" {k}" in str(error)),
                   "durations" if "duration" in str(error) else "search_range")
        raise ValueError(f"-v {VARIABLES[key]}:{raw[key]}: {error}") from None
