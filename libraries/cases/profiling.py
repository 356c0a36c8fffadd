"""The profiling trial: where the system under test spent its CPU, after the measured trials so
it never counts (FD.io CSIT's habit with its telemetry: a separate trial after the figure).

For each profiled variant (a plain run with ``-v PROFILE:on``: the variants a comparison
measures, e.g. the SSL proxy's ``proxy``, sslsniff's ``baseline`` and ``traced``) or each
A/B side (``-v PROFILE:auto``, the default, profiles A/B runs only), one more trial of that
variant runs under the same load while ``perf record -e cpu-clock --call-graph dwarf``
samples every process the test started on the DUT (nginx master and workers, the iperf3
server, VPP's threads, the traced nginx) for ``PROFILE_SECONDS``. The stacks are folded and
drawn (inferno) into ``<run dir>/profiles/<test>/``; the record's ``evidence.profile``
points at the files and holds each profile's CPU per process, the objects whose frames had
no symbols (a stripped binary), and for two profiles (sides a and b, or a plain run's two
variants) a differential flame graph, the functions whose share of CPU changed most (with what they
called, and on CPU themselves), and the hint (:mod:`libraries.results.profile_hint`): the
deepest frame that explains its callers' growth beyond sampling noise, with its caller
chain; "no function changed beyond noise"; or, where the DUT's CPU per unit of work (busy
cores per request, per round from the telemetry: :func:`cpu_per_work`) did not change within
its interval, that the profile does not explain the change. An A/B regression's message
ends with the hint.

A profile that cannot be made (perf missing or not permitted, a perf that does not stop, a
trial failing under the profiler) is a warning with the reason and no profile: never a failed
measurement.
"""

from __future__ import annotations

import re
import shlex
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from libraries.ab.comparison import side_topology
from libraries.ab.rounds import ratio_interval
from libraries.cases.context import CaseContext, Log, PlainLog
from libraries.cases.profile_settings import ProfileRequest, ProfileSettings
from libraries.results.measurement import Measurement, Trial
from libraries.results.profile import (
    Folded,
    ProfileError,
    function_changes,
    parse_folded,
    rename_binaries,
    unresolved_objects,
)
from libraries.results.profile_hint import CostChange, profile_hint
from libraries.results.telemetry_block import busy_cores
from libraries.testbed.errors import HostStackError
from libraries.testbed.provision import Testbed
from libraries.tools.perf import (
    EVENT,
    FREQUENCY,
    diff_graph,
    finish_recording,
    flame_graph,
    fold,
    remove,
    script,
    start_recording,
)

if TYPE_CHECKING:
    from libraries.ab.session import AbSession

DELAY = 1.0
"""Seconds of load before perf starts sampling (the connections are up)."""
PERIOD_NS = 1e9 / FREQUENCY
"""Nanoseconds of CPU one sample stands for (``perf record -e cpu-clock -F``)."""
COST_ALPHA = 0.05
"""The level of the CPU-per-work interval (1 - alpha)."""
UNITS = {"rps": "request", "throughput": "Gbit", "gbps": "Gbit"}
PMU_NOTE = ("perf samples the software clock (cpu-clock): time on CPU, no cycles or "
            "instructions (a VM without a hardware PMU has none)")


@dataclass(frozen=True)
class Target:
    """One profile to take: its ``label`` (a variant, or side ``a``/``b``), the ``variant``
    whose trial loads the system, and what to do first (``prepare``: switch an A/B side)."""

    label: str
    variant: str
    trial: Callable[[Trial], Any]
    prepare: Callable[[], Any] | None = None
    title: str = ""


def slug(text: str) -> str:
    """``text`` as a file name."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-")[:80] or "test"


class Profiler:
    """Profiles the DUT's processes of one test under one target's load at a time."""

    def __init__(self, testbed: Testbed, folder: Path, seconds: int, test: str,
                 log: Log | None = None):
        name = testbed.topology.node_with_role("dut")
        self.log = log or PlainLog()
        self.node = testbed.nodes[name]
        self.perf = testbed.topology.nodes[name].tools.get("perf", "perf")
        self.seconds = seconds
        self.run_folder = folder
        self.folder = folder / "profiles" / slug(test)
        self._found: str | None = None

    def _perf(self) -> str:
        """perf's path on the DUT, looked up once (``HostStackError`` when it is not there)."""
        if self._found is None:
            perf = self.node.which(self.perf)
            if perf is None or self.node.run(f"test -x {shlex.quote(perf)}", timeout=10,
                                             check=False, quiet=True).exit_code != 0:
                raise HostStackError(f"perf not found on {self.node.where} ({self.perf!r}: "
                                     "Debian's linux-perf, which setup.sh installs)")
            self._found = perf
        return self._found

    def _pids(self) -> list[int]:
        groups = sorted({process.pid for process in self.node.processes})
        if not groups:
            raise HostStackError(f"{self.node.where}: the test started no process here to "
                                 "profile")
        listed = self.node.run(f"pgrep -g {','.join(map(str, groups))}", timeout=10,
                               check=False, quiet=True).stdout.split()
        return sorted({int(pid) for pid in listed if pid.isdigit()}) or groups

    def profile(self, target: Target) -> tuple[Folded, dict[str, Any], Path]:
        """Run ``target``'s trial under perf; its folded stacks, its record entry and the
        folded file."""
        perf = self._perf()
        if target.prepare is not None:
            target.prepare()
        pids = self._pids()
        recording = start_recording(self.node, perf, pids, self.seconds, DELAY)
        try:
            self.log.info(f"profiling {target.label}: perf record on {self.node.name} of pids "
                        f"{pids} for {self.seconds} s under a trial of {target.variant}")
            try:
                target.trial(Trial(target.variant, self.seconds + 2 * int(DELAY), 0))
            finally:
                said = finish_recording(recording)
            text = script(recording, perf, said)
        finally:
            remove(recording)
        where = f"perf on {self.node.name} ({target.label})"
        try:
            folded = parse_folded(fold(text, where), f"folded {where}")
        except ProfileError as error:
            raise HostStackError(str(error)) from None
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / f"{slug(target.label)}.folded"
        text = folded.text()
        path.write_text(text)
        processes = folded.process_weights()
        svg = flame_graph(text, target.title or target.label,
                          f"{self.node.name}: {', '.join(processes)}, {self.seconds} s "
                          f"of {EVENT} at {FREQUENCY} Hz", path.with_suffix(".svg"))
        entry = {"variant": target.variant, "node": self.node.name, "pids": pids,
                 "seconds": self.seconds, "cpu_ms": round(folded.total / 1e6, 1),
                 "processes_ms": {name: round(weight / 1e6, 1)
                                  for name, weight in processes.most_common()},
                 "unresolved": unresolved_objects(folded),
                 "folded": str(path.relative_to(self.run_folder)),
                 "svg": str(svg.relative_to(self.run_folder))}
        return folded, entry, path


def cpu_per_work(measurement: Measurement, trials: Mapping[str, list[dict[str, Any]]],
                 variant: str, dut: str) -> CostChange | None:
    """The DUT's busy cores per unit of the A/B's rate metric (requests, Gbit), b against a:
    per round the ratio of each side's busy cores over the rate's ratio, and their
    Hodges-Lehmann change with its signed-rank interval; None where the telemetry or the
    rounds do not give it (a node unread, a round missing)."""
    metrics = (measurement.ab or {}).get("metrics") or {}
    chosen = next((m for m, e in metrics.items() if e.get("direction") == "higher_is_better"
                   and e.get("ratios")), None)
    if chosen is None:
        return None
    ratios = metrics[chosen]["ratios"]
    sides = [trials.get(f"{side} {variant}", []) for side in ("a", "b")]
    if any(len(readings) != len(ratios) for readings in sides):
        return None
    per_round = []
    for ratio, a, b in zip(ratios, *sides, strict=True):
        if "cores" not in a.get(dut, {}) or "cores" not in b.get(dut, {}) or ratio <= 0:
            return None
        busy_a, busy_b = busy_cores(a[dut]["cores"]), busy_cores(b[dut]["cores"])
        if busy_a <= 0 or busy_b <= 0:
            return None
        per_round.append(busy_b / busy_a / ratio)
    interval = ratio_interval(per_round, COST_ALPHA)
    pct = (lambda r: None if r is None else (r - 1) * 100)  # noqa: E731
    return CostChange(f"busy cores per {UNITS.get(chosen, 'unit of ' + chosen)}",
                      (interval.change - 1) * 100, pct(interval.low), pct(interval.high))


def profile_targets(measurement: Measurement, testbed: Testbed, targets: list[Target],
                    settings: ProfileSettings, folder: Path, test: str,
                    cost: CostChange | None = None,
                    renames: dict[str, str] | None = None, log: Log | None = None) -> None:
    """Profile every target in turn into ``measurement.evidence["profile"]`` (files in
    ``<folder>/profiles/<test>/``); with two, the differential of the first to the second.
    A profile that cannot be made is a warning. ``seconds_spent``: what the profiling took
    (trials, switches, perf script, folding, drawing). ``renames``: the second target's
    binaries' file names -> the first's, for the differential
    (:func:`~libraries.results.profile.rename_binaries`). ``log``: where a warning goes."""
    block: dict[str, Any] = {"event": EVENT, "frequency_hz": FREQUENCY, "note": PMU_NOTE,
                             "profiles": {}}
    measurement.evidence["profile"] = block
    started = time.monotonic()
    try:
        _profile_into(block, measurement, testbed, targets, settings, folder, test, cost,
                      renames or {}, log or PlainLog())
    finally:
        block["seconds_spent"] = round(time.monotonic() - started, 2)


def _profile_into(block: dict[str, Any], measurement: Measurement, testbed: Testbed,
                  targets: list[Target], settings: ProfileSettings, folder: Path,
                  test: str, cost: CostChange | None, renames: dict[str, str],
                  log: Log) -> None:
    try:
        profiler = Profiler(testbed, folder, settings.seconds, test, log)
    except HostStackError as error:
        block["unavailable"] = {target.label: str(error) for target in targets}
        log.warn(f"no profile: {error}")
        return
    folded: dict[str, Folded] = {}
    files: dict[str, Path] = {}
    for target in targets:
        try:
            folded[target.label], block["profiles"][target.label], files[target.label] = \
                profiler.profile(target)
        except HostStackError as error:
            block.setdefault("unavailable", {})[target.label] = str(error)
            log.warn(f"no profile of {target.label}: {error}")
            return
    log.info(f"profiles of {', '.join(folded)} in {profiler.folder}")
    if len(folded) != 2:
        return
    (first, _), (second, b) = folded.items()
    if renames:  # b's binaries under a's names, so that their frames meet
        folded[second] = rename_binaries(b, renames)
        files[second] = files[second].with_name(f"{slug(second)}-named-as-{slug(first)}.folded")
        files[second].write_text(folded[second].text())
        block["renamed"] = renames
    _differential(block, measurement, profiler, folder, folded, files, cost)


def _differential(block: dict[str, Any], measurement: Measurement, profiler: Profiler,
                  folder: Path, folded: dict[str, Folded], files: dict[str, Path],
                  cost: CostChange | None) -> None:
    (first, a), (second, b) = folded.items()
    changes = function_changes(a, b)
    inclusive = function_changes(a, b, inclusive=True)
    entry: dict[str, Any] = {"from": first, "to": second,
                             "changes": [change.as_record() for change in changes],
                             "inclusive": [change.as_record() for change in inclusive]}
    try:
        entry["svg"] = str(diff_graph(
            files[first], files[second],
            f"{first} -> {second}: red where {second} spends a larger share",
            f"{profiler.node.name}, widths of {second}",
            profiler.folder / f"diff-{slug(first)}-{slug(second)}.svg"
        ).relative_to(folder))
    except HostStackError as error:
        profiler.log.warn(f"no differential flame graph: {error}")
    hint = profile_hint(a, b, PERIOD_NS, cost)
    entry["hint"] = hint.as_record()
    block["diff"] = entry
    if (measurement.ab or {}).get("verdict") == "regression" and measurement.notes:
        measurement.notes[-1] += f"; profile: {hint.text()}"


def profile_case(ctx: CaseContext, measurement: Measurement, name: str,
                 variants: Mapping[str, Callable[[Trial], Any]], session: AbSession | None,
                 request: ProfileRequest,
                 trials: Mapping[str, list[dict[str, Any]]] | None = None) -> None:
    """The profiling trials of test case ``name``: in a plain run each of ``variants`` (the
    ones it compares); in an A/B test the last of them on side a, then on side b (side a is
    active again afterwards), judged against the DUT's CPU per unit of work of the measured
    rounds (``trials``: the telemetry's readings per variant and trial)."""
    testbed, settings, folder = ctx.testbed, request.settings, request.folder
    test = ctx.test_name() or name
    if session is None:
        profile_targets(measurement, testbed,
                        [Target(v, v, trial, title=f"{name} {v}")
                         for v, trial in variants.items()], settings, folder, test,
                        log=ctx.log)
        return
    variant, trial = list(variants.items())[-1]
    dut = testbed.topology.node_with_role("dut")
    cost = cpu_per_work(measurement, trials or {}, variant, dut)
    tools = {side: side_topology(session.base, session.sides[side]).nodes[dut].tools
             for side in ("a", "b")}
    renames = {PurePosixPath(path).name: PurePosixPath(tools["a"][tool]).name
               for tool, path in tools["b"].items()
               if tool in tools["a"] and PurePosixPath(path).name !=
               PurePosixPath(tools["a"][tool]).name}
    targets = [Target(side, variant, trial, prepare=lambda side=side: session.switch(side),
                      title=f"{name} {variant}, side {side} ({session.sides[side].name})")
               for side in ("a", "b")]
    try:
        profile_targets(measurement, testbed, targets, settings, folder, test, cost, renames,
                        log=ctx.log)
    finally:
        session.switch("a")
