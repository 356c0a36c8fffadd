"""Pass criteria: versioned YAML (``topologies/criteria.yaml``) evaluated against measurements.

Each entry names a case, a metric and a bound (``min`` or ``max``). ``topologies`` limits an
absolute floor to the testbeds it was set for; an entry without it is portable (ratios,
error counts). ``when`` limits it to tests whose parameters (and ``stack``) match, e.g.
``{file_size: 64kb}`` or ``{stack: vpp}`` (``null`` matches a parameter that is not set).

A floor says where its number comes from (``basis``): the low end of what a healthy build
measured (``low``, with its ``source``), or that nobody has measured it (``unmeasured``, the
reason). The file's ``margin`` (version 2) is how far below a measured low end every floor
must sit (``min <= (1 - margin) * low``): a floor inside the noise of a healthy build would turn
a nightly red for nothing, so such a file is refused when it is read.

A criterion on one of a case's correctness metrics (``errors``: the catalogue's
``correctness``) is a correctness check, not a statistic: it holds in every measured trial or
fails naming the trials that broke it (:mod:`libraries.results.correctness`); it is never
inconclusive and never asks for more rounds. Every other bound is judged on the median's
interval, with three outcomes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from libraries.results.catalogue import CASES
from libraries.results.correctness import (
    TrialViolation,
    describe_violations,
    trial_violations,
    worst,
)
from libraries.results.headline import figure
from libraries.results.inference import Interval
from libraries.results.measurement import Measurement
from libraries.testbed.errors import HostStackError, TopologyError
from libraries.testbed.topology import TOPOLOGY_DIR

DEFAULT_CRITERIA = TOPOLOGY_DIR / "criteria.yaml"


class CriteriaError(HostStackError):
    """The criteria file is unreadable or invalid (names file and entry)."""


class Basis(BaseModel):
    """Where a bound's number comes from: the ``low`` (for a floor) or ``high`` (for a
    ceiling) end of what a healthy build measured, with its ``source``; or ``unmeasured``:
    why there is no such figure (the bound then stays as loose as it was)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    low: float | None = Field(default=None, gt=0)
    high: float | None = Field(default=None, gt=0)
    source: str = ""
    unmeasured: str | None = None

    @model_validator(mode="after")
    def _measured_or_not(self) -> Basis:
        measured = self.low is not None or self.high is not None
        if measured == (self.unmeasured is not None):
            raise ValueError("expected a measured 'low' or 'high' with its 'source', or "
                             "'unmeasured' with the reason")
        if measured and not self.source.strip():
            raise ValueError("a measured basis needs its 'source' (where the figure comes "
                             "from)")
        return self


class Criterion(BaseModel):
    """One bound on one metric of one case."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    case: str
    metric: str
    min: float | None = None
    max: float | None = None
    topologies: list[str] | None = None
    when: dict[str, str | int | float | bool | None] = Field(default_factory=dict)
    basis: Basis | None = None
    note: str = ""

    @model_validator(mode="after")
    def _one_bound(self) -> Criterion:
        if (self.min is None) == (self.max is None):
            raise ValueError("expected exactly one of 'min' or 'max'")
        if self.basis is not None and self.min is not None and self.basis.high is not None:
            raise ValueError("basis: a floor (min) rests on the measured 'low' end")
        if self.basis is not None and self.max is not None and self.basis.low is not None:
            raise ValueError("basis: a ceiling (max) rests on the measured 'high' end")
        return self

    @property
    def per_trial(self) -> bool:
        """True for a correctness check (a bound on one of the case's correctness metrics):
        it holds in every measured trial, not on the median."""
        return self.case in CASES and CASES[self.case].is_correctness(self.metric)

    def applies_to(self, measurement: Measurement, topology: str) -> bool:
        """True when case, topology and ``when`` parameters match."""
        if self.case != measurement.case:
            return False
        if self.topologies is not None and topology not in self.topologies:
            return False
        return self.applies(measurement.case, measurement.stack, measurement.parameters,
                            topology)

    def applies(self, case: str, stack: str, parameters: dict[str, Any],
                topology: str) -> bool:
        """True when this criterion judges a test of ``case`` on ``stack`` with
        ``parameters`` on ``topology`` (a record's fields will do as well as a measurement)."""
        if self.case != case:
            return False
        if self.topologies is not None and topology not in self.topologies:
            return False
        facts = {"stack": stack, **parameters}
        return all(
            str(facts.get(key)).lower() == str(value).lower()
            for key, value in self.when.items()
        )


class CriteriaFile(BaseModel):
    """``version``, the ``margin`` every measured floor keeps below its basis (version 2) and
    the list of ``criteria``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    version: Literal[1, 2]
    margin: float | None = Field(default=None, ge=0, lt=1)
    criteria: list[Criterion]

    @model_validator(mode="after")
    def _floors_keep_the_margin(self) -> CriteriaFile:
        if self.version == 2 and self.margin is None:
            raise ValueError("version 2 states its 'margin' (e.g. 0.4: every floor at most 60 %"
                             " of the low end it rests on)")
        return self


def _margin_problem(criterion: Criterion, margin: float) -> str | None:
    """Why a floor sits too close to the low end of its basis (None: it does not)."""
    basis = criterion.basis
    if criterion.min is None or basis is None or basis.low is None:
        return None
    limit = (1.0 - margin) * basis.low
    if criterion.min <= limit * (1 + 1e-9):
        return None
    return (f"floor {criterion.min:g} is above {limit:.4g}, {1 - margin:.0%} of the measured "
            f"low end {basis.low:g} it rests on ({basis.source}): a healthy build would "
            f"measure within the floor's margin")


Outcome = Literal["pass", "fail", "inconclusive"]


@dataclass(frozen=True)
class CriterionResult:
    """Outcome of one criterion: measured (the median and its interval) vs required.

    ``outcome``: ``pass`` when the interval clears the bound, ``fail`` when it lies wholly on
    the wrong side, ``inconclusive`` when it straddles the bound (or has too few trials to
    decide at the asked confidence). A single value (no interval) is judged by its value.
    """

    name: str
    metric: str
    op: str
    required: float
    measured: float
    unit: str
    outcome: Outcome
    source: str
    interval: Interval | None = None
    floor: bool = False
    """A performance bound resting on a measured ``basis`` (not a correctness check such as
    ``errors max: 0``): an A/B test reports it per side instead of failing on it."""
    per_trial: bool = False
    """A correctness check: ``measured`` is the worst trial's figure, ``violations`` every
    trial over the bound (``trials`` in all); no interval, never inconclusive."""
    violations: tuple[TrialViolation, ...] = ()
    trials: int = 0

    @property
    def passed(self) -> bool:
        """True for ``pass``."""
        return self.outcome == "pass"

    def as_record(self) -> dict[str, Any]:
        """The record-schema form."""
        record: dict[str, Any] = {
            "name": self.name, "metric": self.metric, "op": self.op,
            "required": self.required, "measured": self.measured, "outcome": self.outcome,
            "passed": self.passed, "source": self.source}
        if self.interval is not None:
            record["interval"] = self.interval.as_record()
        if self.per_trial:
            record.update(per_trial=True, trials=self.trials,
                          violations=[v.as_record() for v in self.violations])
        return record

    def describe(self) -> str:
        """``rps 812 [790, 840] requests/s < required 1000 (criteria.yaml: ...)`` style: the
        measured figures as the message's headline writes them (3 significant digits,
        :func:`~libraries.results.headline.figure`: one format in one message), the bound as
        the criteria file gives it (found there as written); a
        correctness check: ``errors > required 0 in 2 of 30 trials (round 4: 250; round 9
        on side b's run: 12) count (criteria.yaml: ...)``."""
        if self.per_trial:
            if self.violations:
                relation = "<" if self.op == ">=" else ">"
                return (f"{self.metric} {relation} required {self.required:g} "
                        f"{describe_violations(self.violations, self.trials)} {self.unit} "
                        f"({self.source})")
            return (f"{self.metric} {self.op} required {self.required:g} in every one of "
                    f"{self.trials} trials (worst {self.measured:g} {self.unit}) "
                    f"({self.source})")
        interval = self.interval
        shown = ""
        if interval is not None and interval.level is not None:
            shown = (f" [{figure(interval.low)}, {figure(interval.high)}] "
                     f"({interval.level:.0%} confidence)")
        if self.outcome == "inconclusive":
            why = ("too few trials for an interval that decides"
                   if interval is not None and not interval.decisive
                   else "the interval straddles the bound")
            return (f"{self.metric} {figure(self.measured)}{shown} {self.unit}: inconclusive "
                    f"against required {self.op} {self.required:g} ({why}) ({self.source})")
        relation = self.op if self.passed else ("<" if self.op == ">=" else ">")
        return (f"{self.metric} {figure(self.measured)}{shown} {self.unit} {relation} required "
                f"{self.required:g} ({self.source})")


def judge_bound(interval: Interval, value: float, op: str, bound: float) -> Outcome:
    """The three-way outcome of ``median op bound`` given its ``interval``."""
    if interval.level is None:  # a single value: no interval to judge with
        holds = value >= bound if op == ">=" else value <= bound
        return "pass" if holds else "fail"
    if not interval.decisive:
        return "inconclusive"
    if op == ">=":
        if interval.low >= bound:
            return "pass"
        return "fail" if interval.high < bound else "inconclusive"
    if interval.high <= bound:
        return "pass"
    return "fail" if interval.low > bound else "inconclusive"


def load_criteria(path: str | Path = DEFAULT_CRITERIA) -> CriteriaFile:
    """Read and validate a criteria file; errors name the file and the entry."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise CriteriaError(f"{path}: cannot read criteria ({error.strerror})") from None
    except yaml.YAMLError as error:
        raise CriteriaError(f"{path}: not valid YAML: {error}") from None
    try:
        loaded = CriteriaFile.model_validate(data)
    except ValidationError as error:
        lines = [
            f"{path}: {'.'.join(str(p) for p in item['loc']) or '(top level)'}: "
            f"{item['msg'].removeprefix('Value error, ')}"
            for item in error.errors()
        ]
        raise CriteriaError("\n".join(lines)) from None
    problems = [f"{path}: criteria.{index}.{problem}"
                for index, criterion in enumerate(loaded.criteria)
                for problem in _catalogue_problems(criterion)]
    problems += [f"{path}: criteria.{index}.min: {problem}"
                 for index, criterion in enumerate(loaded.criteria)
                 if (problem := _margin_problem(criterion, loaded.margin or 0.0))]
    if problems:
        raise CriteriaError("\n".join(problems))
    return loaded


def _catalogue_problems(criterion: Criterion) -> list[str]:
    """What the case catalogue says against ``criterion``: an unknown case, a metric the case
    never measures, a ``when`` on a parameter it does not have."""
    if criterion.case not in CASES:
        return [f"case: unknown case {criterion.case!r}: expected one of "
                f"{', '.join(sorted(CASES))}"]
    catalogue = CASES[criterion.case]
    problems = []
    if not catalogue.has_metric(criterion.metric):
        problems.append(f"metric: {criterion.metric!r} is not measured by case {criterion.case}"
                        f" (its metrics: {', '.join(catalogue.metrics)})")
    if criterion.per_trial and criterion.basis is not None:
        problems.append(f"basis: {criterion.metric} is a correctness metric of case "
                        f"{criterion.case}: its bound holds in every trial and rests on no "
                        "measured basis (drop 'basis')")
    problems += [f"when.{key}: case {criterion.case} has no parameter {key!r} (its "
                 f"parameters: stack, {', '.join(catalogue.parameters)})"
                 for key in criterion.when if not catalogue.has_parameter(key)]
    return problems


def evaluate(criteria: CriteriaFile, measurement: Measurement, topology: str,
             source: str = "criteria.yaml", measured_only: bool = False) -> list[CriterionResult]:
    """Every applicable criterion's result (empty: no criterion for this test/topology).

    A criterion on a metric the measurement lacks is an error, not a silent pass (with
    ``measured_only``, as for one side of an A/B test that measures only the path under test,
    it is left out); one on a metric the test recorded as unavailable (with its reason) is not
    judged. A correctness check is judged on every trial (see the module).
    """
    results = []
    for index, criterion in enumerate(criteria.criteria):
        if not criterion.applies_to(measurement, topology) or \
                criterion.metric in measurement.unavailable or \
                (measured_only and criterion.metric not in measurement.metrics):
            continue
        where = f"{source}: criteria.{index}"
        if criterion.metric not in measurement.metrics:
            raise TopologyError(
                f"{where}: metric {criterion.metric!r} was not measured by this test "
                f"(measured: {sorted(measurement.metrics)})"
            )
        metric = measurement.metrics[criterion.metric]
        if criterion.min is not None:
            op, required = ">=", criterion.min
        else:
            assert criterion.max is not None
            op, required = "<=", criterion.max
        scope = ",".join(criterion.topologies) if criterion.topologies else "portable"
        name = f"{criterion.case}.{criterion.metric} {op} {required:g} [{scope}]"
        if criterion.per_trial:
            values = metric.summary.values
            broken = trial_violations(values, op, required, measurement.trial_runs)
            results.append(CriterionResult(
                name=name, metric=criterion.metric, op=op, required=required,
                measured=worst(values, op), unit=metric.summary.unit,
                outcome="fail" if broken else "pass", source=where, per_trial=True,
                violations=broken, trials=len(values)))
            continue
        interval = metric.interval
        results.append(CriterionResult(
            name=name, metric=criterion.metric, op=op, required=required, measured=metric.value,
            unit=metric.summary.unit, outcome=judge_bound(interval, metric.value, op, required),
            source=where, interval=interval, floor=criterion.basis is not None,
        ))
    return results


def side_outcomes(results: Mapping[str, list[CriterionResult]], names: Mapping[str, str]
                  ) -> tuple[list[str], list[str]]:
    """An A/B test's criteria per side (``results`` per side, ``names`` each side's name):
    every outcome as a line for the log, and the failures that fail the test, each naming its
    side (``side b (candidate): errors > required 0 in 2 of 30 trials (round 4: 250; ...)``):
    a correctness check broken in any trial of either side, or any other bound without a
    ``basis`` that failed. Floors are reported per side, never failed on: the comparison
    decides."""
    lines, failed = [], []
    for side, found in results.items():
        label = f"side {side} ({names.get(side, side)})"
        for result in found:
            lines.append(f"{label}: {result.outcome.upper()} "
                         f"{'floor ' if result.floor else ''}{result.describe()}")
            if result.outcome == "fail" and not result.floor:
                failed.append(f"{label}: {result.describe()}")
    return lines, failed
