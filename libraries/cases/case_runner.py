"""The case runner: the one path from a case's measure keyword to its trials, plain or A/B.

A case library describes its test as a :class:`Case` (its variants' trial functions, the plan,
how results become a measurement, what it compares in an A/B run, what each trial runs) and
hands it to :func:`run_case`. The runner owns the branch every case shares:

- a plain run measures the variants interleaved until the criteria are conclusive
  (:func:`libraries.results.adaptive.measure`), with the console progress and every node's
  telemetry around each trial, runs the case's ``after`` step (the SSL proxy's latency pass)
  and logs each trial's raw output;
- with ``-v AB:<file>`` the same trials run on both sides (:class:`libraries.ab.session.
  AbSession`), with the same telemetry per side (and the load generator's CPU per side,
  marked when it saturated), and a test that uses nothing the sides change is skipped with
  the reason (or, with ``-v AB_UNUSED:plain``, as the nightly against a reference runs,
  measured plainly with that reason in its message).

The set-up steps report what they start and read a side's settings through the context
(:class:`~libraries.cases.context.CaseContext`: ``component_started``, ``side_nginx``, ...),
which in a plain run do nothing and give nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from libraries.ab.session import MeasuredBeside, NothingToCompare, Use
from libraries.cases.context import CaseContext, Skip
from libraries.cases.profiling import profile_case
from libraries.cases.trial_observer import TrialTelemetry
from libraries.results.adaptive import Build, measure
from libraries.results.measurement import AllObservers, Direction, Measurement, Trial
from libraries.results.plan import TrialPlan
from libraries.testbed.errors import HostStackError


@dataclass(frozen=True)
class Case:
    """One test's measurement as its case describes it: ``name`` and ``stack`` (the record's),
    ``variants`` (name -> the function running one trial), the ``plan``, ``build`` (results
    per variant and seconds inside trials -> the measurement), and for an A/B run the
    ``compared`` metrics with their direction, the test's identifying ``parameters`` and the
    variants it measures on both sides (``ab_variants``; default: all). ``uses``: what a
    trial starts (``("tool", node, tool)``, ``("env", tool)``, ``("vcl", app)``, ...), beside
    the components the set-up keywords registered. ``output``: how a trial's raw output is
    titled in the log (``wrk output``, ``iperf3 JSON``)."""

    name: str
    stack: str
    variants: Mapping[str, Callable[[Trial], Any]]
    plan: TrialPlan
    build: Build
    compared: Mapping[str, Direction]
    parameters: dict[str, Any]
    uses: frozenset[Use] = field(default_factory=frozenset)
    ab_variants: tuple[str, ...] | None = None
    output: str = "output"
    generator: tuple[str, str] | None = None
    """``(node, process)`` of the load generator (``("tg", "wrk")``): an A/B side whose
    generator used :data:`SATURATED` of its core or more is marked."""
    costs: Mapping[str, Direction] = field(default_factory=dict)
    """The cost metrics an A/B run judges beside ``compared`` (``{"cost": "lower_is_better"}``:
    :mod:`libraries.results.cost`), each where both sides have it (a side whose telemetry
    could not give it leaves it unjudged, saying why)."""


SATURATED = 90.0
"""A load generator (one thread: wrk -t1, an iperf3 client) at this % of one core or more
bounded the side's figure itself."""


def run_case(ctx: CaseContext, case: Case, telemetry: TrialTelemetry,
             after: Callable[[Measurement], None] | None = None) -> Measurement:
    """Measure ``case`` in ``ctx`` plainly or as an A/B test (see the module); ``after`` runs
    once after a plain run's trials (never in an A/B run, whose record compares only the
    trials)."""
    ab = ctx.ab
    unused = None
    if ab is not None:
        profiling = ctx.profiling if ctx.profiling and ctx.profiling.wanted(True) else None
        if profiling is not None and ab.duet is not None:
            if profiling.settings.mode == "on":
                raise HostStackError("-v PROFILE:on: a duet A/B run cannot profile its sides "
                                     "(a profile switches between them on one testbed); "
                                     "profile in a sequential A/B run")
            ctx.log.info("duet A/B: no profile per side (-v PROFILE:auto profiles sequential "
                        "A/B runs only)")
            profiling = None
        chosen = case.ab_variants or tuple(case.variants)
        try:
            measurement = ab.measure(case.name, case.stack, case.parameters,
                                     {v: case.variants[v] for v in chosen}, case.plan,
                                     case.build, case.compared,
                                     AllObservers(ctx.progress(), telemetry),
                                     trial_uses=case.uses, costs=case.costs, say=ctx.say)
        except MeasuredBeside as done:
            raise Skip(str(done)) from None
        except NothingToCompare as error:
            if ab.settings.unused != "plain" or ab.duet is not None:
                raise Skip(str(error)) from None
            unused = f"{error}; measured plainly (-v AB_UNUSED:plain)"
            ctx.log.info(unused)
        else:
            _side_telemetry(ctx, measurement, case, telemetry)
            if profiling is not None and measurement.ab:
                profile_case(ctx, measurement, case.name, _profiled(case), ab, profiling,
                             trials=telemetry.trials)
            return measurement
    measurement = _plain(ctx, case, telemetry, after)
    if unused:
        measurement.evidence["ab_unused"] = unused  # in the record and the test's message
    return measurement


def _plain(ctx: CaseContext, case: Case, telemetry: TrialTelemetry,
           after: Callable[[Measurement], None] | None) -> Measurement:
    """A plain run of ``case`` (see the module)."""
    profiling = ctx.profiling if ctx.profiling and ctx.profiling.wanted(False) else None
    measurement, results = measure(case.variants, case.plan, case.build, ctx.judge,
                                   AllObservers(ctx.progress(), telemetry))
    telemetry.close(measurement)
    if after is not None:
        after(measurement)
    if profiling is not None:
        profile_case(ctx, measurement, case.name, _profiled(case), None, profiling)
    for variant, runs in results.items():
        for number, run in enumerate(runs, start=1):
            raw = getattr(run, "raw", None)
            if raw is not None:
                ctx.log.folded(f"{variant} trial {number}: {case.output}", raw)
    return measurement


def _profiled(case: Case) -> dict[str, Callable[[Trial], Any]]:
    """The variants a profile follows: the ones the case compares (the SSL proxy's ``proxy``,
    not the ``direct`` path that bypasses the DUT's proxy), all where it compares them all
    (sslsniff's ``baseline`` and ``traced``)."""
    return {v: case.variants[v] for v in case.ab_variants or tuple(case.variants)}


def _side_telemetry(ctx: CaseContext, measurement: Measurement, case: Case,
                    telemetry: TrialTelemetry) -> None:
    """An A/B test's telemetry: every node's CPU per core and per process (and VPP's runtime)
    over each side's trials (variants ``a <v>``, ``b <v>``: medians per side, each trial's
    from that side's own measurement: in a duet from whichever run held the side in its
    round), and per side the load generator's CPU, marked when it saturated its core."""
    message = measurement.notes.pop() if measurement.notes else None  # stays the last note
    block = telemetry.attach_sides(measurement)
    telemetry.close(measurement)
    if message is not None:
        measurement.notes.append(message)
    if case.generator is None or not measurement.ab:
        return
    node, process = case.generator
    for side, entry in measurement.ab["sides"].items():
        shares = [v["nodes"].get(node, {}).get("processes", {}).get(process, {}).get("cpu")
                  for name, v in block.get("variants", {}).items()
                  if name.startswith(f"{side} ")]
        shares = [s for s in shares if isinstance(s, int | float)]
        cpu = max(shares) if shares else None
        entry["load_generator"] = {"node": node, "process": process, "cpu_pct": cpu,
                                   "saturated": cpu is not None and cpu >= SATURATED}
        if cpu is not None and cpu >= SATURATED:
            note = (f"A/B side {side} ({entry.get('name')}): the load generator ({process} on "
                    f"{node}) used {cpu:.0f} % of its core: the side's figure may be the "
                    "generator's, not the system's")
            measurement.notes.insert(0, note)
            ctx.log.warn(note)
    _generator_bound(measurement, f"{process} on {node}")


def _generator_bound(measurement: Measurement, generator: str) -> None:
    """A "no change" with the load generator saturated on both sides says nothing of the
    system: the change may hide behind the generator's own limit (real VPP, 1node tcp_term:
    the iperf3 client at 96 % of its core on both sides, a VPP knob that cut ssl_proxy by
    29 % read "no change"). It becomes "inconclusive", saying why; a regression or
    progression measured through a saturated generator still stands (the system moved)."""
    block = measurement.ab or {}
    sides = block.get("sides", {}).values()
    if block.get("verdict") != "no change" or not sides or \
            not all(s.get("load_generator", {}).get("saturated") for s in sides):
        return
    why = (f"the load generator ({generator}) was saturated on both sides: a 'no change' "
           "is the generator's, not the system's")
    block.update(verdict="inconclusive", verdict_before_generator_check="no change",
                 generator_bound=why)
    if measurement.notes:
        measurement.notes[-1] = f"{measurement.notes[-1]}; {why}"
