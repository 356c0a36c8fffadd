"""Per-trial telemetry for the cases: a :class:`TrialObserver` that reads every node
of the testbed at the start and end of each measured trial (one command per node per read,
nodes read in parallel), and puts the result in the record and the log.

What it reads: per-core CPU (``/proc/stat``), the CPU of every process the test started on
the node (``Node.processes``: the group leader and its children, e.g. nginx workers, with
their threads), the foreground load generators' CPU (the ledger :func:`ledger_dir` names,
filled by ``run_wrk``/``run_iperf3_client`` with ``cpu_ledger``), and on a node where this
suite runs VPP ``clear runtime`` before / ``show runtime`` + ``show session`` after.
A node that cannot be read is ``unavailable`` with the reason, never zeros. Around the whole
measurement (before the first measured trial, after the last) it also reads each node's
environment: CPU frequency, interrupts per CPU, irqbalance, and where the started processes
were allowed to run (:mod:`libraries.tools.cpu.environment`; the record's ``environment``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from libraries.cases.context import CaseContext, Log, PlainLog
from libraries.results.measurement import Direction, Measurement
from libraries.results.telemetry_block import format_cpu_table, shared_kernels, telemetry_block
from libraries.testbed.errors import CommandError, HostStackError
from libraries.testbed.node import Node
from libraries.testbed.provision import Testbed
from libraries.tools.cpu.environment import (
    EnvironmentReading,
    environment_entry,
    read_environment,
)
from libraries.tools.cpu.proc_stat import Snapshot
from libraries.tools.cpu.telemetry import cpu_usage, take_snapshot
from libraries.vpp.instance import VppInstance
from libraries.vpp.runtime import runtime_summary
from libraries.vpp.vppctl import vppctl_command

LOG = logging.getLogger(__name__)


def ledger_dir(node: Node) -> str:
    """Where foreground commands on ``node`` leave their CPU accounting for the next read."""
    return f"{node.workdir}/cpu-ledger"


def dut_cores(testbed: Testbed, node: str) -> tuple[int, ...]:
    """The cores the topology pins ``node``'s programs to (every purpose), sorted; none where
    it pins nothing (a cost then counts every core of the node)."""
    declared = testbed.topology.nodes[node].cpus
    return tuple(sorted({int(cpu) for cpus in declared.values() for cpu in cpus or ()}))


def judged_costs(prefix: str, vpp: bool) -> dict[str, Direction]:
    """The cost metrics an A/B test judges beside its rate (lower is better): the process
    tree's CPU per unit of work, and on VPP's stack VPP's clocks per packet."""
    found: dict[str, Direction] = {f"{prefix}cost": "lower_is_better"}
    if vpp:
        found[f"{prefix}vpp_cost"] = "lower_is_better"
    return found


def attach_block(measurement: Measurement, block: dict[str, Any]) -> dict[str, Any]:
    """``block`` as ``measurement``'s telemetry, with a note per group of nodes sharing a
    kernel (once)."""
    measurement.telemetry = block
    for nodes in shared_kernels(block):
        note = (f"nodes {', '.join(nodes)} share one kernel (a netns testbed): their per-core "
                "tables are the same host's, and DUT efficiency is per busy host core")
        if note not in measurement.notes:
            measurement.notes.append(note)
    return block


def _reason(error: Exception) -> str:
    """One line saying why a read failed (a failed read's own output, not its long command)."""
    if isinstance(error, CommandError):
        output = (error.stderr.strip() or error.stdout.strip()).splitlines()
        return f"{error.where}: the read exited {error.exit_code}: " \
               f"{output[-1] if output else '(no output)'}"[:300]
    text = str(error).strip().splitlines()
    return (text[0] if text else type(error).__name__)[:300]


class TrialTelemetry:
    """Reads every node of ``testbed`` around each measured trial (a ``TrialObserver``).

    ``trials[variant]`` holds, per measured trial, ``{node: reading}`` where a reading is
    the tools layer's ``CpuUsage.as_record()`` (plus ``vpp``) or ``{"unavailable": why}``.
    """

    def __init__(self, testbed: Testbed, vpp: Mapping[str, VppInstance] | None = None,
                 log: Log | None = None):
        self._log = log or PlainLog()
        self._nodes: dict[str, Node] = dict(testbed.nodes)
        self._vpp = dict(vpp or {})
        self._before: dict[str, Snapshot | str] = {}
        self._names: dict[str, dict[int, str]] = {}
        # per node: (tracked groups, their members at the last end read), to skip pgrep
        self._members: dict[str, tuple[tuple[int, ...], list[int]]] = {}
        self.trials: dict[str, list[dict[str, dict[str, Any]]]] = {}
        self._results: dict[str, list[Any]] = {}  # per label, the results told, in order
        self.raw_runtime: list[tuple[str, str, str]] = []
        self._declared = {name: dict(testbed.topology.nodes[name].cpus)
                          for name in testbed.nodes}
        self._environment: dict[str, EnvironmentReading | str] | None = None

    @classmethod
    def of(cls, ctx: CaseContext) -> TrialTelemetry:
        """Telemetry over every node of the context's testbed and every VPP the suite
        started."""
        return cls(ctx.testbed, ctx.vpp.instances if ctx.vpp else None, ctx.log)

    def ledger(self, node: str) -> str:
        """:func:`ledger_dir` of node ``node``."""
        return ledger_dir(self._nodes[node])

    # -- TrialObserver ------------------------------------------------------------------------

    def trial_started(self, variant: str, round_number: int, total: int) -> None:
        """Read every node (and clear VPP's runtime counters) just before the trial; before
        the first one, each node's environment too."""
        for name, node in self._nodes.items():
            self._names[name] = {p.pid: p.name for p in node.processes}
        if self._environment is None:
            self._environment = self._environment_all()
        self._before = self._read_all("start")

    def trial_finished(self, variant: str, round_number: int, total: int,
                       result: Any) -> None:
        """Read every node again and keep the trial's usage per node."""
        for name, node in self._nodes.items():
            self._names[name].update({p.pid: p.name for p in node.processes})
        after = self._read_all("end")
        readings: dict[str, dict[str, Any]] = {}
        for name in self._nodes:
            readings[name] = self._reading(name, after[name], variant, round_number)
        self.keep(variant, result, readings)

    def keep(self, variant: str, result: Any, readings: dict[str, dict[str, Any]]) -> None:
        """Keep one measured trial's ``readings`` (per node) under ``variant``, beside the
        ``result`` its trial returned (which :meth:`paired` finds it by)."""
        self.trials.setdefault(variant, []).append(readings)
        self._results.setdefault(variant, []).append(result)

    # -- internals ------------------------------------------------------------------------------

    def _environment_of(self, name: str) -> EnvironmentReading | str:
        try:
            return read_environment(self._nodes[name], sorted(self._names.get(name, {})))
        except HostStackError as error:
            return _reason(error)

    def _environment_all(self) -> dict[str, EnvironmentReading | str]:
        with ThreadPoolExecutor(max_workers=len(self._nodes)) as pool:
            futures = {name: pool.submit(self._environment_of, name) for name in self._nodes}
            return {name: future.result() for name, future in futures.items()}

    def _sections(self, name: str, when: str) -> dict[str, str]:
        instance = self._vpp.get(name)
        if instance is None:
            return {}

        def cli(*words: str) -> str:
            return vppctl_command(words, socket=instance.install.cli_socket,
                                  vppctl=instance.install.vppctl).quoted()

        if when == "start":
            return {"clear": cli("clear", "runtime")}
        return {"runtime": cli("show", "runtime"), "sessions": cli("show", "session")}

    def _read(self, name: str, when: str) -> Snapshot | str:
        """At the start, list each tracked group's members (``pgrep``) and read the counters
        last; at the end, read the counters first, then the members found at the start and
        the leaders of groups started meanwhile (no ``pgrep`` inside the window)."""
        node = self._nodes[name]
        sections = self._sections(name, when)
        groups = sorted(self._names[name])
        before = self._before.get(name)
        try:
            if when == "start" or not isinstance(before, Snapshot):
                cached = self._members.get(name)
                members = cached[1] if cached and cached[0] == tuple(groups) else []
                return take_snapshot(node, groups, ledger=ledger_dir(node), sections=sections,
                                     sudo=bool(sections), counters_last=True, pids=members)
            known = {sample.stat.pgid for sample in before.processes.values()}
            pids = [*before.processes, *(g for g in groups if g not in known)]
            return take_snapshot(node, [], ledger=ledger_dir(node), sections=sections,
                                 sudo=bool(sections), pids=pids)
        except HostStackError as error:
            return _reason(error)

    def _read_all(self, when: str) -> dict[str, Snapshot | str]:
        with ThreadPoolExecutor(max_workers=len(self._nodes)) as pool:
            futures = {name: pool.submit(self._read, name, when) for name in self._nodes}
            return {name: future.result() for name, future in futures.items()}

    def _reading(self, name: str, after: Snapshot | str, variant: str,
                 round_number: int) -> dict[str, Any]:
        before = self._before.get(name, "not read at the trial's start")
        if isinstance(before, str):
            return {"unavailable": f"/proc not readable: {before}"}
        if isinstance(after, str):
            return {"unavailable": f"/proc not readable: {after}"}
        self._members[name] = (tuple(sorted(self._names[name])), sorted(after.processes))
        try:
            reading = cpu_usage(before, after, self._names[name]).as_record()
        except HostStackError as error:
            return {"unavailable": _reason(error)}
        if name in self._vpp:
            runtime = after.sections.get("runtime", "")
            sessions = after.sections.get("sessions", "")
            self.raw_runtime.append((name, f"{variant} trial {round_number}",
                                     f"{runtime}\n\nvppctl show session:\n{sessions}"))
            try:
                reading["vpp"] = runtime_summary(runtime, sessions)
            except HostStackError as error:
                reading["vpp"] = {"unavailable": f"VPP runtime data: {_reason(error)}"}
        return reading

    # -- results ------------------------------------------------------------------------------

    def paired(self, results: Mapping[str, Sequence[Any]]
               ) -> dict[str, list[dict[str, dict[str, Any]]] | None]:
        """Per variant, the readings of exactly the trials whose ``results`` are given (one
        side's, in an A/B test: its trials were told as ``<side> <variant>``), in their
        order; None for a variant whose results were not all told here (a duet's other run
        measured them). A trial is known by its result object, so the telemetry of each
        trial stays with that trial's own work whichever side or run held it."""
        return {variant: self._paired(variant, list(given))
                for variant, given in results.items()}

    def _paired(self, variant: str, given: list[Any]) -> list[dict[str, dict[str, Any]]] | None:
        labels = [label for label in self._results
                  if label == variant or label.endswith(f" {variant}")]
        whole = [label for label in labels if len(self._results[label]) == len(given)
                 and all(x is y for x, y in zip(self._results[label], given, strict=True))]
        if len(whole) == 1:
            return list(self.trials[whole[0]])
        found = []  # results told in another order or among others': one by one
        for result in given:
            places = [(label, index) for label in labels
                      for index, told in enumerate(self._results[label]) if told is result]
            if len(places) != 1:
                return None
            label, index = places[0]
            found.append(self.trials[label][index])
        return found

    def attach(self, measurement: Measurement,
               results: Mapping[str, Sequence[Any]] | None = None) -> dict[str, Any]:
        """Put the telemetry block of the trials so far in ``measurement`` (with a note when
        nodes share a kernel); with ``results``, of exactly those trials (:meth:`paired`,
        kept in ``measurement.trial_telemetry``; a variant none of whose trials were told
        here is left out). Logs nothing, so it may run after every round."""
        if results is None:
            by_variant: Mapping[str, Sequence[Any]] = self.trials
        else:
            paired = self.paired(results)
            measurement.trial_telemetry = {v: r for v, r in paired.items() if r is not None}
            by_variant = measurement.trial_telemetry
        return attach_block(measurement, telemetry_block(by_variant))

    def attach_sides(self, measurement: Measurement) -> dict[str, Any]:
        """An A/B test's telemetry block: per side and variant (``a proxy``, ``b proxy``) the
        trials of that side, from its own measurement (a duet's from both runs, round by
        round); the trials told here where a side kept none."""
        by_label = {f"{side} {variant}": readings
                    for side, built in sorted(measurement.sides.items())
                    for variant, readings in (built.trial_telemetry or {}).items()}
        if not by_label:
            return self.attach(measurement)
        return attach_block(measurement, telemetry_block(by_label))

    def log(self) -> None:
        """Log the telemetry once the measurement is done: per variant a folded mpstat-like
        table per node and its processes, VPP's raw ``show runtime`` texts, and a warning per
        node whose telemetry was unavailable."""
        block = telemetry_block(self.trials)
        shared = shared_kernels(block)
        for variant, entry in block["variants"].items():
            tables = []
            shown: dict[str, str] = {}
            for node, summary in entry["nodes"].items():
                same = next((shown[n] for nodes in shared if node in nodes
                             for n in nodes if n in shown), None)
                tables.append(format_cpu_table(node, summary, cores_of=same))
                if same is None and "unavailable" not in summary:
                    shown[node] = node
            self._log.folded(f"CPU telemetry: {variant} (median of measured trials)",
                       "\n\n".join(tables))
        for node, label, text in self.raw_runtime:
            self._log.folded(f"{node}: vppctl show runtime and show session after {label}", text)
        unavailable = [f"{variant}/{node}: {summary['unavailable']}"
                       for variant, entry in block["variants"].items()
                       for node, summary in entry["nodes"].items() if "unavailable" in summary]
        for line in unavailable:
            self._log.warn(f"telemetry unavailable: {line}")

    def environment(self, measurement: Measurement) -> None:
        """Read every node's environment again and put the test's in ``measurement``: per
        node, frequency, interrupt deltas, irqbalance and placement, or why it is
        unavailable."""
        if self._environment is None:
            measurement.environment = {"unavailable": "no measured trial ran"}
            return
        after = self._environment_all()
        nodes: dict[str, Any] = {}
        for name, before in self._environment.items():
            end = after[name]
            if isinstance(before, str) or isinstance(end, str):
                nodes[name] = {"unavailable": before if isinstance(before, str) else end}
                continue
            nodes[name] = environment_entry(before, end, self._names.get(name, {}),
                                            self._declared.get(name, {}))
        measurement.environment = {"nodes": nodes}
        self._log.folded("environment of the nodes (frequency, interrupts, placement)",
                   json.dumps(measurement.environment, indent=2, sort_keys=True))

    def close(self, measurement: Measurement) -> None:
        """After the last round: :meth:`environment`, then :meth:`log`."""
        self.environment(measurement)
        self.log()

    def finish(self, measurement: Measurement) -> dict[str, Any]:
        """:meth:`attach`, :meth:`environment` and :meth:`log` at once."""
        block = self.attach(measurement)
        self.close(measurement)
        return block
