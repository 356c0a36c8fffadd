"""How close each floor sits to what a testbed measures: the floors check's judgement.

Given the records of a few healthy runs on one testbed and a criteria file, every criterion that
judged a recorded test is set against the end of the metric's interval nearest to it, over
all runs: a floor (``min``) against the lowest interval low end, a ceiling (``max``) against
the highest high end (each run's interval from its record, or from its trials for records
older than intervals). ``headroom`` is how far that end lies beyond the bound, as a share of
it; a bound with less than ``near`` (20 %) of headroom is ``near`` (a busy day may fail it),
one the measured end does not clear is ``fails`` (a healthy build already fails it or is
inconclusive against it). A ceiling on a percentage lost (a tracer's overhead) counts its
headroom on what remains (100 - the value), where that metric's noise is.
``benchmarks/floors_check.py`` runs the cases and prints the table.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from libraries.results.criteria import CriteriaFile
from libraries.results.inference import DEFAULT_ALPHA, median_interval

NEAR = 0.2
Status = Literal["ok", "near", "fails"]


@dataclass(frozen=True)
class FloorCheck:
    """One criterion against one test's runs: ``medians`` and ``ends`` (the interval end
    nearest the bound) per run, the ``worst`` of those ends, its ``headroom`` beyond the bound
    (share of the end; None for a bound of 0 met exactly) and the ``status``."""

    index: int
    test: str
    topology: str
    stack: str
    metric: str
    op: str
    bound: float
    unit: str
    medians: tuple[float, ...]
    ends: tuple[float, ...]
    worst: float
    headroom: float | None
    status: Status
    basis: str

    def row(self) -> list[str]:
        """The table row: test, metric, bound, runs, medians, worst end, headroom, status."""
        medians = (f"{min(self.medians):.4g}" if len(set(self.medians)) == 1
                   else f"{min(self.medians):.4g}-{max(self.medians):.4g}")
        room = "-" if self.headroom is None else f"{self.headroom:+.0%}"
        return [self.test, self.stack, self.metric, f"{self.op} {self.bound:g}",
                str(len(self.medians)), medians, f"{self.worst:.4g}", room, self.status,
                f"criteria.{self.index}: {self.basis}"]


HEADER = ["test", "stack", "metric", "bound", "runs", "medians", "worst end", "headroom",
          "status", "criterion (basis)"]


def _end(metric: dict[str, Any], op: str) -> float:
    """The interval end of one run's metric nearest the bound: low for a floor, high for a
    ceiling (from the recorded interval, else from the trials)."""
    interval = metric.get("interval")
    if not isinstance(interval, dict) or interval.get("low") is None:
        trials = metric.get("trials") or [metric["value"]]
        computed = median_interval([float(t) for t in trials], DEFAULT_ALPHA)
        interval = {"low": computed.low, "high": computed.high}
    return float(interval["low"] if op == ">=" else interval["high"])


def _status(op: str, bound: float, worst: float, near: float,
            share: bool = False) -> tuple[float | None, Status]:
    """Headroom and status; for a ``share`` (a percentage lost, like a tracer's overhead: the
    noise is in what remains, 100 - value) the headroom of a ceiling is counted on what
    remains: 90 % against a measured 83 % leaves the remaining 17 % room to fall by 41 %."""
    if op == ">=":
        if worst < bound:
            return (worst - bound) / worst if worst else None, "fails"
        headroom = (worst - bound) / worst if worst else None
    else:
        scale = (100.0 - worst) if share else worst
        if worst > bound:
            return (bound - worst) / scale if scale else None, "fails"
        headroom = None if scale == 0 else (bound - worst) / scale
    return headroom, "near" if headroom is not None and headroom < near else "ok"


def check_floors(records: Iterable[dict[str, Any]], criteria: CriteriaFile,
                 near: float = NEAR) -> list[FloorCheck]:
    """Every (criterion, test) pair the records give, judged as the module docstring says;
    ordered fails, near, ok, then by test. A criterion on a metric a record lacks is left out
    (the run itself failed or recorded it as unavailable)."""
    runs: dict[tuple[int, str], list[dict[str, Any]]] = defaultdict(list)
    for record in records:
        for index, criterion in enumerate(criteria.criteria):
            if criterion.applies(record["case"], record["stack"],
                                 record.get("parameters") or {}, record["topology"]) and \
                    criterion.metric in record.get("metrics", {}):
                runs[(index, record["test_id"])].append(record)
    checks = []
    for (index, test_id), found in runs.items():
        criterion = criteria.criteria[index]
        op, bound = (">=", criterion.min) if criterion.min is not None else ("<=", criterion.max)
        assert bound is not None
        metrics = [r["metrics"][criterion.metric] for r in found]
        ends = tuple(_end(m, op) for m in metrics)
        worst = min(ends) if op == ">=" else max(ends)
        share = metrics[0].get("unit") == "%" and op == "<=" and bound <= 100
        headroom, status = _status(op, bound, worst, near, share)
        basis = criterion.basis
        said = ("no basis" if basis is None else f"unmeasured: {basis.unmeasured}"
                if basis.unmeasured else f"{basis.low or basis.high:g} ({basis.source})")
        checks.append(FloorCheck(index, test_id, found[0]["topology"], found[0]["stack"],
                                 criterion.metric, op, bound, metrics[0].get("unit", ""),
                                 tuple(float(m["value"]) for m in metrics), ends, worst,
                                 headroom, status, " ".join(said.split())))
    order = {"fails": 0, "near": 1, "ok": 2}
    return sorted(checks, key=lambda c: (order[c.status], c.test, c.metric))
