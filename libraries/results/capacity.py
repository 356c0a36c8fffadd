"""Capacity under a latency SLO: the highest offered rate a path sustains for a whole trial with
the achieved rate at least 99 % of the offered one, no error, and p99 latency within the SLO.

The search tolerates noisy trials (the idea of FD.io CSIT's MLRsearch, made small):

1. **bracket**: from a start rate, double while probes pass (halve while they fail) until one
   passing and one failing rate enclose the capacity;
2. **narrow**: probe the geometric middle of the bracket until the failing rate is within the
   asked relative precision of the passing one;
3. **confirm**: probe the passing end again, ``confirm`` more times; a single failure there
   makes it the new failing end and the search steps down and narrows again, so the reported
   capacity passed every probe made at it.

It stops at the precision or when the time budget is spent (the capacity is then the best
confirmed rate so far, the precision reached says how good it is). A rate above the search
range that still passes is reported as a lower bound. Every probe is kept.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

ACHIEVED_SHARE = 0.99


@dataclass(frozen=True)
class Probe:
    """One constant-rate trial: ``rate`` offered (requests/s), ``achieved`` (successful
    responses per second of the trial), latency ``p50_ms``/``p99_ms``, ``errors``, ``seconds``
    it took; ``passed`` and ``why`` are set by the search against the SLO."""

    rate: float
    achieved: float
    p50_ms: float | None
    p99_ms: float | None
    errors: int
    seconds: float
    passed: bool = False
    why: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def as_record(self) -> dict[str, Any]:
        """The record's form of the probe."""
        return {"rate": self.rate, "achieved": self.achieved, "p50_ms": self.p50_ms,
                "p99_ms": self.p99_ms, "errors": self.errors, "seconds": self.seconds,
                "passed": self.passed, "why": self.why, **self.extra}


@dataclass(frozen=True)
class SearchSettings:
    """``slo_p99_ms``; the ``start`` rate and the range ``low``..``high`` (requests/s); the
    relative ``precision`` to stop at; ``confirm`` repeats at the final rate; ``max_seconds``
    for the whole search."""

    slo_p99_ms: float
    start: float
    low: float = 1.0
    high: float = 10_000_000.0
    precision: float = 0.05
    confirm: int = 2
    max_seconds: float = 300.0

    def __post_init__(self) -> None:
        for name in ("slo_p99_ms", "start", "low", "high", "max_seconds"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or \
                    not math.isfinite(value) or value <= 0:
                raise ValueError(f"capacity search {name}: expected a positive number, "
                                 f"got {value!r}")
        if self.high <= self.low:
            raise ValueError(f"capacity search range: the top ({self.high:g} requests/s) must "
                             f"be above the bottom ({self.low:g})")
        if not 0.0 < self.precision < 1.0:
            raise ValueError(f"capacity search precision: expected a fraction in (0, 1), e.g. "
                             f"0.05; got {self.precision!r}")
        if not isinstance(self.confirm, int) or self.confirm < 0:
            raise ValueError(f"capacity search confirm: expected a count >= 0, got "
                             f"{self.confirm!r}")


@dataclass
class SearchResult:
    """The search's outcome: ``capacity`` (the highest rate that passed every probe at it;
    None when even the bottom of the range failed), ``failing`` (the lowest rate that failed,
    None when none did), ``precision`` reached (failing / capacity - 1), every ``probe``, and
    why it ``stopped``."""

    capacity: float | None
    failing: float | None
    precision: float | None
    probes: list[Probe]
    stopped: str

    def as_record(self) -> dict[str, Any]:
        """The record's evidence form."""
        return {"capacity": self.capacity, "failing": self.failing,
                "precision": self.precision, "stopped": self.stopped,
                "probes": [p.as_record() for p in self.probes]}


def judge_probe(probe: Probe, slo_p99_ms: float) -> Probe:
    """``probe`` with ``passed``/``why`` set against the SLO."""
    reasons = []
    if probe.errors:
        reasons.append(f"{probe.errors} errors")
    if probe.achieved < ACHIEVED_SHARE * probe.rate:
        reasons.append(f"achieved {probe.achieved:.0f} < {ACHIEVED_SHARE:.0%} of "
                       f"{probe.rate:.0f} requests/s")
    if probe.p99_ms is None:
        reasons.append("no p99 latency")
    elif probe.p99_ms > slo_p99_ms:
        reasons.append(f"p99 {probe.p99_ms:.3g} ms > SLO {slo_p99_ms:g} ms")
    return Probe(probe.rate, probe.achieved, probe.p50_ms, probe.p99_ms, probe.errors,
                 probe.seconds, not reasons, "; ".join(reasons), probe.extra)


class CapacitySearch:
    """One search, stepped from outside: :meth:`next_rate` says what to probe (None once it
    stopped), :meth:`add` takes the probe; several searches can so be interleaved probe by
    probe."""

    def __init__(self, settings: SearchSettings, clock: Callable[[], float] = time.monotonic):
        self.settings = settings
        self.clock = clock
        self.started = clock()
        self.probes: list[Probe] = []
        self.passing: float | None = None
        self.failing: float | None = None
        self.stopped: str | None = None
        self._confirming: tuple[float, int] | None = None  # (rate, probes still to pass)

    def _out_of_time(self) -> bool:
        spent = self.clock() - self.started
        per_probe = spent / len(self.probes) if self.probes else 0.0
        return spent + per_probe > self.settings.max_seconds

    def _narrow_enough(self) -> bool:
        return (self.passing is not None and self.failing is not None
                and self.failing <= self.passing * (1 + self.settings.precision))

    def _stop(self, why: str) -> None:
        self.stopped = why

    def next_rate(self) -> float | None:
        """The rate to probe next, or None when the search is over (see :attr:`stopped`)."""
        if self.stopped is None and self._out_of_time():
            self._stop("time budget spent")
        if self.stopped is not None:
            return None
        s = self.settings
        if self.passing is None and self.failing is None:
            return min(max(s.start, s.low), s.high)
        if self.failing is None:
            assert self.passing is not None
            if self.passing >= s.high:
                self._stop("passes at the top of the search range")
                return None
            return min(self.passing * 2, s.high)
        if self.passing is None:
            if self.failing <= s.low:
                self._stop("fails at the bottom of the search range")
                return None
            return max(self.failing / 2, s.low)
        if not self._narrow_enough():
            return math.sqrt(self.passing * self.failing)
        if self._confirming is None or self._confirming[0] != self.passing:
            self._confirming = (self.passing, s.confirm)
        if self._confirming[1] <= 0:
            self._stop("precision reached and confirmed")
            return None
        return self.passing

    def add(self, probe: Probe) -> Probe:
        """Judge ``probe`` against the SLO and move the bracket; returns it judged."""
        result = judge_probe(probe, self.settings.slo_p99_ms)
        self.probes.append(result)
        rate = result.rate
        if result.passed:
            self.passing = rate if self.passing is None else max(self.passing, rate)
            if self._confirming is not None and self._confirming[0] == rate:
                self._confirming = (rate, self._confirming[1] - 1)
        else:
            self.failing = rate if self.failing is None else min(self.failing, rate)
            if self.passing is not None and self.passing >= rate:
                # a rate at or above a failing one is no longer trusted: fall back to the
                # best rate that passed below it (None: bracket downwards again)
                below = [p.rate for p in self.probes if p.passed and p.rate < rate]
                self.passing = max(below) if below else None
        return result

    def result(self) -> SearchResult:
        """Where the search stands (final once :meth:`next_rate` returned None)."""
        precision = None
        if self.passing is not None and self.failing is not None:
            precision = self.failing / self.passing - 1
        return SearchResult(self.passing, self.failing, precision, list(self.probes),
                            self.stopped or "still searching")


def search_capacity(run: Callable[[float], Probe], settings: SearchSettings,
                    clock: Callable[[], float] = time.monotonic) -> SearchResult:
    """Search the capacity with ``run(rate) -> Probe`` (see the module docstring)."""
    search = CapacitySearch(settings, clock)
    while (rate := search.next_rate()) is not None:
        search.add(run(rate))
    return search.result()


_DURATION = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(us|µs|ms|s)\s*$")
_UNIT_MS = {"us": 0.001, "µs": 0.001, "ms": 1.0, "s": 1000.0}
DEFAULT_SLO = "10ms"
DEFAULT_RANGE = "100..1000000"


def parse_slo(value: object, where: str = "-v LATENCY_SLO") -> float:
    """A latency SLO (``10ms``, ``2.5 ms``, ``0.5s``, ``800us``) in milliseconds; ``ValueError``
    naming ``where`` for anything but a positive duration."""
    match = _DURATION.match(str(value)) if isinstance(value, str | int | float) else None
    milliseconds = float(match.group(1)) * _UNIT_MS[match.group(2)] if match else 0.0
    if not match or milliseconds <= 0:
        raise ValueError(f"{where}:{value}: expected a positive duration such as 10ms, 2.5ms "
                         f"or 0.5s, got {value!r}")
    return milliseconds


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
