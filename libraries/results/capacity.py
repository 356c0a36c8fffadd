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


class _Search:
    def __init__(self, run: Callable[[float], Probe], settings: SearchSettings,
                 clock: Callable[[], float]):
        self.run = run
        self.settings = settings
        self.clock = clock
        self.started = clock()
        self.probes: list[Probe] = []
        self.passing: float | None = None
        self.failing: float | None = None

    def out_of_time(self) -> bool:
        spent = self.clock() - self.started
        per_probe = spent / len(self.probes) if self.probes else 0.0
        return spent + per_probe > self.settings.max_seconds

    def probe(self, rate: float) -> bool:
        rate = min(max(rate, self.settings.low), self.settings.high)
        result = judge_probe(self.run(rate), self.settings.slo_p99_ms)
        self.probes.append(result)
        if result.passed:
            self.passing = rate if self.passing is None else max(self.passing, rate)
        else:
            self.failing = rate if self.failing is None else min(self.failing, rate)
            if self.passing is not None and self.passing >= rate:
                # a rate at or above a failing one is no longer trusted: fall back to the
                # best rate that passed below it (None: bracket downwards again)
                below = [p.rate for p in self.probes if p.passed and p.rate < rate]
                self.passing = max(below) if below else None
        return result.passed

    def narrow_enough(self) -> bool:
        return (self.passing is not None and self.failing is not None
                and self.failing <= self.passing * (1 + self.settings.precision))


def search_capacity(run: Callable[[float], Probe], settings: SearchSettings,
                    clock: Callable[[], float] = time.monotonic) -> SearchResult:
    """Search the capacity with ``run(rate) -> Probe`` (see the module docstring)."""
    search = _Search(run, settings, clock)
    rate = settings.start
    stopped = None
    while stopped is None:
        if search.out_of_time():
            stopped = "time budget spent"
            break
        if search.passing is None or search.failing is None:  # bracket
            if search.passing is None and search.failing is None:
                nxt = rate
            elif search.failing is None:
                if search.passing >= settings.high:
                    stopped = "passes at the top of the search range"
                    break
                nxt = search.passing * 2
            else:
                if search.failing <= settings.low:
                    stopped = "fails at the bottom of the search range"
                    break
                nxt = search.failing / 2
            search.probe(nxt)
            continue
        if not search.narrow_enough():  # narrow
            search.probe(math.sqrt(search.passing * search.failing))
            continue
        confirmed = True  # confirm
        candidate = search.passing
        for _ in range(settings.confirm):
            if search.out_of_time():
                stopped = "time budget spent"
                break
            if not search.probe(candidate):
                confirmed = False
                break
        if stopped is None and confirmed:
            stopped = "precision reached and confirmed"
    precision = None
    if search.passing is not None and search.failing is not None:
        precision = search.failing / search.passing - 1
    return SearchResult(search.passing, search.failing, precision, search.probes, stopped)
