"""Efficiency metrics: what the measured rate cost in CPU, as ordinary metrics (unit and
direction, one value per measured trial) so they trend and can carry criteria.

Names (``<v>_`` is the variant's prefix, empty for a case's main variant):

- ``<v><rate>_per_dut_core``: the rate (``gbps``, ``rps``) per busy DUT core, higher is better
- ``<v>dut_busy_cores``: busy cores of the DUT (usr+sys+irq+soft, summed), lower is better
- ``<v>dut_softirq_share``: softirq as % of the DUT's busy time (where the forwarding work
  happens; informational, lower is better by convention)
- ``<name>_cpu``: a process's CPU in % of one core, lower is better (e.g.
  ``native_nginx_worker_cpu``), and ratios of two of them (``ebpf_nginx_worker_cpu_ratio``)

Inputs are the per-trial node readings (``CpuUsage.as_record()`` shape) of each variant. A
metric whose input is missing in any trial (node unavailable, process absent, zero busy
time) is not added; the reason goes to ``measurement.notes`` instead. Never zeros.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from libraries.results.measurement import Direction, Measurement
from libraries.results.telemetry_block import busy_cores, softirq_share

Trials = Mapping[str, Sequence[Mapping[str, Mapping[str, Any]]]]  # variant -> trial -> node


@dataclass(frozen=True)
class RateCost:
    """Rate metric ``metric`` of ``variant`` per busy core of node ``dut``; metric names
    start with ``prefix`` (``""`` or e.g. ``"native_"``) and ``rate`` (``gbps``/``rps``)."""

    variant: str
    metric: str
    rate: str
    prefix: str = ""
    dut: str = "dut"


@dataclass(frozen=True)
class ProcessCost:
    """CPU of the process named ``process`` on ``node`` during ``variant``'s trials, as
    metric ``metric`` (% of one core)."""

    variant: str
    node: str
    process: str
    metric: str


def _series(trials: Sequence[Mapping[str, Mapping[str, Any]]], node: str,
            what: str) -> tuple[list[Mapping[str, Any]] | None, str]:
    readings = [trial.get(node, {"unavailable": "not sampled"}) for trial in trials]
    missing = [r["unavailable"] for r in readings if "unavailable" in r]
    if missing or not readings:
        return None, f"{what} unavailable: {node} telemetry: {missing[0] if missing else 'none'}"
    return readings, ""


def _add(measurement: Measurement, name: str, values: list[float | None], unit: str,
         direction: Direction, why_missing: str) -> None:
    if not values or any(v is None for v in values):
        measurement.notes.append(f"{name} unavailable: {why_missing}")
        return
    measurement.add(name, [float(v) for v in values if v is not None], unit, direction)


def add_rate_costs(measurement: Measurement, trials: Trials, specs: Sequence[RateCost]) -> None:
    """``<v><rate>_per_dut_core``, ``<v>dut_busy_cores`` and ``<v>dut_softirq_share``."""
    for spec in specs:
        readings, why = _series(trials.get(spec.variant, []), spec.dut,
                                f"{spec.prefix}{spec.rate}_per_dut_core")
        if readings is None:
            measurement.notes.append(why)
            continue
        busy = [busy_cores(r["cores"]) for r in readings]
        rates = list(measurement.metrics[spec.metric].summary.values)
        unit = measurement.metrics[spec.metric].summary.unit
        _add(measurement, f"{spec.prefix}dut_busy_cores", list(busy), "cores",
             "lower_is_better", "")
        _add(measurement, f"{spec.prefix}{spec.rate}_per_dut_core",
             [rate / b if b > 0 else None for rate, b in zip(rates, busy, strict=True)],
             f"{unit}/core", "higher_is_better", f"{spec.dut} had no busy time in a trial")
        _add(measurement, f"{spec.prefix}dut_softirq_share",
             [softirq_share(r["cores"]) for r in readings], "%", "lower_is_better",
             f"{spec.dut} had no busy time in a trial")


def add_process_costs(measurement: Measurement, trials: Trials,
                      specs: Sequence[ProcessCost]) -> None:
    """``<metric>``: the named process's CPU (% of one core) per trial."""
    for spec in specs:
        readings, why = _series(trials.get(spec.variant, []), spec.node, spec.metric)
        if readings is None:
            measurement.notes.append(why)
            continue
        values = [r["processes"].get(spec.process, {}).get("cpu") for r in readings]
        _add(measurement, spec.metric, values, "% of a core", "lower_is_better",
             f"no process {spec.process!r} on {spec.node} in every {spec.variant} trial")


def add_ratio(measurement: Measurement, numerator: str, denominator: str, name: str,
              direction: Direction = "lower_is_better") -> None:
    """``name`` = ``numerator`` / ``denominator``, trial by trial (rounds are interleaved,
    so trial i of each ran in the same window); skipped with a note on a zero denominator."""
    if numerator not in measurement.metrics or denominator not in measurement.metrics:
        measurement.notes.append(f"{name} unavailable: needs {numerator} and {denominator}")
        return
    tops = measurement.metrics[numerator].summary.values
    bottoms = measurement.metrics[denominator].summary.values
    _add(measurement, name, [t / b if b > 0 else None
                             for t, b in zip(tops, bottoms, strict=True)], "ratio", direction,
         f"{denominator} was 0 in a trial")
