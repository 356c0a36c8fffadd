"""Cost per unit of work: the CPU time the system under test spends per request (per GB for a
stream, VPP's clocks per packet), trial by trial, from the telemetry every trial already reads.

Why: on a shared machine throughput is the noisiest figure there is (a descheduled process or
a shared core changes how many requests fit in a second), while the CPU each request needs
hardly moves with it (issue 61: per-round spread of the proxy's CPU per request a third to a
fifth of its throughput's, in the same A/B records). So every measuring case gives, beside its
rate, per trial:

- ``<v>cost``: the user + system CPU seconds of the process tree under test on the DUT (an
  nginx's master and workers, an iperf3 server), read at the trial's start and end, per unit
  of work the trial's own result counted (requests wrk completed, GB iperf3 received):
  ``CPU µs/request`` or ``CPU s/GB``, lower is better. This is what an A/B test judges, like
  throughput. The seconds are each thread's time on a CPU in nanoseconds
  (``/proc/<pid>/task/*/schedstat``) where the kernel gives it, else ``/proc/<pid>/stat``'s
  10 ms ticks (at 2 s trials those alone move a round's ratio by about 1.4 %); the record's
  ``cost`` block says which counted (``cpu_source``).
- ``<v>kernel_cost``: the system + irq + softirq time of the DUT's cores (``/proc/stat``) per
  the same unit. A process's system time leaves out the softirq work (the kernel's network
  processing, IRQ time accounting) that the kernel stack does for it on those cores; this
  counts it, and everything else the kernel did there (on a netns testbed, whose nodes share
  one kernel, the other nodes' kernel work on those cores too). Recorded beside, not judged.
- ``<v>vpp_cost`` (a DUT running VPP): VPP's clocks per packet from its own runtime counters
  (``clear runtime`` / ``show runtime`` around the trial): the clocks of the graph nodes that
  processed vectors, on the workers (``vpp_main`` where there are none), per packet entering
  the graph. VPP polls, so its process time says nothing of its work.
- ``<v>foreign_share``: the share of the DUT's cores that ``nice`` processes (a build, a
  burner at nice 19) and the hypervisor (``steal``) took during the trial, less what the
  testbed's own niced processes ran there (a suite started with ``nice``): CPU taken outside
  the testbed, stated so that a figure that moved says why.

A figure whose input is missing in any trial (a node unreadable, the process absent, no work
counted) is not added, never zero: the reason goes to the measurement's notes and the record's
``cost`` block (:func:`add_costs`), which says which metric is judged, its unit and what it
counts and leaves out.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from libraries.results.measurement import Measurement

PER = {"request": ("CPU µs/request", 1e6), "GB": ("CPU s/GB", 1.0)}
"""Unit of work -> (the cost's unit, seconds scaled to it)."""
KERNEL_COLUMNS = ("sys", "irq", "soft")
FOREIGN_COLUMNS = ("nice", "steal")
LARGE_FOREIGN = 20.0
"""A foreign share (% of the DUT's cores) from which an undecided or failed throughput verdict
says that other processes took it."""
Reading = Mapping[str, Any]
"""One trial's telemetry of every node: ``{node: CpuUsage.as_record() (+ vpp)}``."""


@dataclass(frozen=True)
class CostSpec:
    """The cost of ``variant``'s trials: the process groups ``groups`` (the names the test
    gave them, e.g. ``nginx-proxy``: its master and workers count) on node ``node``, per
    ``per`` (``request`` or ``GB``); ``what`` names them for the record (``the reverse
    proxy``); ``cores``: the DUT's declared cores (none: every core of the node); metric names
    start with ``prefix``; ``vpp``: VPP runs on the node (its clocks per packet beside)."""

    variant: str
    node: str
    groups: tuple[str, ...]
    per: str
    what: str
    cores: tuple[int, ...] = ()
    prefix: str = ""
    vpp: bool = False

    def __post_init__(self) -> None:
        if self.per not in PER:
            raise ValueError(f"cost per {self.per!r}: expected one of {', '.join(PER)}")

    @property
    def metric(self) -> str:
        """The judged metric's name (``cost``, ``traced_cost``)."""
        return f"{self.prefix}cost"

    @property
    def unit(self) -> str:
        """``CPU µs/request`` or ``CPU s/GB``."""
        return PER[self.per][0]


def tree_cpu_s(reading: Reading, groups: Sequence[str]) -> float | None:
    """User + system seconds of the processes of ``groups`` in one node's reading (a group's
    leader is named as the group, its children ``<group> <role>``); None when none ran."""
    found = None
    for label, row in reading.get("processes", {}).items():
        if any(label == g or label.startswith(f"{g} ") for g in groups):
            seconds = row.get("cpu_s")
            if seconds is None:  # a reading from before cpu_s: % of one core over the window
                seconds = row["cpu"] / 100.0 * float(reading["elapsed_s"])
            found = (found or 0.0) + float(seconds)
    return found


def cpu_source(reading: Reading, groups: Sequence[str]) -> str:
    """How one node's reading counted the seconds of ``groups``: ``schedstat``
    (nanoseconds) when every process of theirs was counted so, else ``ticks`` (a reading
    from before ``cpu_s_source`` counted ticks)."""
    told = reading.get("cpu_s_source", {})
    found = [told.get(label, "ticks") for label in reading.get("processes", {})
             if any(label == g or label.startswith(f"{g} ") for g in groups)]
    return "schedstat" if found and all(s == "schedstat" for s in found) else "ticks"


def sources_told(readings: Sequence[Reading], groups: Sequence[str]) -> str:
    """The ``cost`` block's ``cpu_source``: ``schedstat``, ``ticks``, or how many trials
    each counted (``schedstat in 58 of 60 trials, ticks in 2``)."""
    found = [cpu_source(r, groups) for r in readings]
    precise = found.count("schedstat")
    if precise in (0, len(found)):
        return found[0] if found else "ticks"
    return f"schedstat in {precise} of {len(found)} trials, ticks in {len(found) - precise}"


def core_seconds(reading: Reading, cores: Sequence[int], columns: Sequence[str]) -> float:
    """Seconds of ``columns`` summed over ``cores`` of one node's reading (every numbered core
    when ``cores`` is empty)."""
    table = reading["cores"]
    chosen = [str(c) for c in cores] or [k for k in table if k != "all"]
    missing = [c for c in chosen if c not in table]
    if missing:
        raise KeyError(f"cores {', '.join(missing)} not in the node's table "
                       f"({', '.join(sorted(table))})")
    share = sum(table[c][col] for c in chosen for col in columns) / 100.0
    return share * float(reading["elapsed_s"])


def foreign_share(trial: Mapping[str, Reading], node: str, cores: Sequence[int]) -> float:
    """% of ``node``'s ``cores`` (all of them when empty) taken outside the testbed in one
    trial: their ``nice`` (niced tasks' user time) and ``steal`` time, less the user time
    the testbed's own niced tasks (every node on that kernel: a run started with ``nice``)
    ran there, by the core each last ran on (``niced_s``); never below 0."""
    reading = trial[node]
    table = reading["cores"]
    chosen = [str(c) for c in cores] or [k for k in table if k != "all"]
    elapsed = float(reading["elapsed_s"])
    taken = sum(table[c][col] for c in chosen for col in FOREIGN_COLUMNS) / 100.0 * elapsed
    own = sum(seconds for other in trial.values() if "unavailable" not in other and
              other.get("boot_id") == reading.get("boot_id")
              for row in other.get("processes", {}).values()
              for core, seconds in row.get("niced_s", {}).items() if core in chosen)
    return round(max(0.0, taken - own) / (len(chosen) * elapsed) * 100.0, 2)


def vpp_clocks_per_packet(reading: Reading) -> float | None:
    """VPP's clocks of work per packet in one node's reading (see the module); None without
    runtime data or packets."""
    threads = (reading.get("vpp") or {}).get("threads")
    if not threads:
        return None
    workers = {n: t for n, t in threads.items() if n.startswith("vpp_wk")} or threads
    if any("work_clocks" not in t or "packets_in" not in t for t in workers.values()):
        return None
    packets = sum(float(t["packets_in"]) for t in workers.values())
    clocks = sum(float(t["work_clocks"]) for t in workers.values())
    return clocks / packets if packets > 0 else None


def _shared(trial: Mapping[str, Reading], node: str) -> bool:
    """Whether another node of the trial reported ``node``'s kernel (a netns testbed)."""
    boot = trial[node].get("boot_id")
    return any(n != node and "unavailable" not in r and r.get("boot_id") == boot
               for n, r in trial.items())


def _node_readings(spec: CostSpec, readings: Sequence[Mapping[str, Reading] | None]
                   ) -> tuple[list[Reading] | None, str]:
    """``spec.node``'s reading in each trial, or None and why one is missing."""
    found = []
    for number, trial in enumerate(readings, start=1):
        if trial is None:
            return None, f"trial {number} of {spec.variant} has no telemetry paired with it"
        reading = trial.get(spec.node, {"unavailable": f"{spec.node} not read"})
        if "unavailable" in reading:
            return None, f"trial {number} of {spec.variant}: {spec.node}: " \
                         f"{reading['unavailable']}"
        found.append(reading)
    return (found, "") if found else (None, f"no measured trial of {spec.variant}")


def _per_trial(spec: CostSpec, trials: Sequence[Mapping[str, Reading]],
               work: Sequence[float]) -> tuple[dict[str, list[float]], list[str]]:
    """Each figure's per-trial values (see the module), and why any could not be given."""
    scale = PER[spec.per][1]
    nodes = [trial[spec.node] for trial in trials]
    figures: dict[str, list[float]] = {}
    why: list[str] = []
    trees = [tree_cpu_s(r, spec.groups) for r in nodes]
    if any(w <= 0 for w in work):
        why.append(f"{spec.metric} unavailable: a trial of {spec.variant} counted no work")
        return figures, why
    if any(t is None for t in trees):
        why.append(f"{spec.metric} unavailable: no process of {', '.join(spec.groups)} on "
                   f"{spec.node} in every {spec.variant} trial")
    else:
        figures[spec.metric] = [t / w * scale for t, w in zip(trees, work, strict=True)
                                if t is not None]
    try:
        figures[f"{spec.prefix}kernel_cost"] = [
            core_seconds(r, spec.cores, KERNEL_COLUMNS) / w * scale
            for r, w in zip(nodes, work, strict=True)]
        figures[f"{spec.prefix}foreign_share"] = [foreign_share(t, spec.node, spec.cores)
                                                  for t in trials]
    except KeyError as error:
        why.append(f"{spec.prefix}kernel_cost unavailable: {spec.node}: {error.args[0]}")
    if spec.vpp:
        clocks = [vpp_clocks_per_packet(r) for r in nodes]
        if any(c is None for c in clocks):
            why.append(f"{spec.prefix}vpp_cost unavailable: VPP's runtime counters on "
                       f"{spec.node} counted no packet in a {spec.variant} trial (or were "
                       "unreadable)")
        else:
            figures[f"{spec.prefix}vpp_cost"] = [c for c in clocks if c is not None]
    return figures, why


def descriptions(spec: CostSpec, shared: bool) -> dict[str, dict[str, str]]:
    """What each figure of ``spec`` counts (the record's ``cost.metrics``)."""
    cores = ", ".join(map(str, spec.cores)) if spec.cores else "all"
    unit = spec.unit
    found = {
        spec.metric: {"unit": unit, "counts": (
            f"user + system CPU time of {spec.what} ({', '.join(spec.groups)}: every process "
            f"of its group) on {spec.node}, per {spec.per} the trial's own result counted; "
            "each thread's time on a CPU in ns (/proc/<pid>/task/*/schedstat) read at each "
            "measured trial's start and end, /proc/<pid>/stat's 10 ms ticks where the kernel "
            "gives no schedstat (cpu_source says which counted)")},
        f"{spec.prefix}kernel_cost": {"unit": unit, "counts": (
            f"system + irq + softirq time of {spec.node}'s cores ({cores}) per {spec.per}: "
            "the kernel's work there, the network processing a process's system time leaves "
            "out included" + ("; the testbed's nodes share one kernel, so every node's "
                              "kernel work on these cores counts" if shared else ""))},
        f"{spec.prefix}foreign_share": {"unit": "%", "counts": (
            f"nice + steal time of {spec.node}'s cores ({cores}) in % of them, less the "
            "testbed's own niced processes there: CPU taken by niced processes outside the "
            "testbed (builds, burners) and by the hypervisor; other processes at nice 0 are "
            "not told apart from the test's own")},
    }
    if spec.vpp:
        found[f"{spec.prefix}vpp_cost"] = {"unit": "clocks/packet", "counts": (
            f"VPP's clocks on {spec.node} in graph nodes that processed vectors (workers; "
            "vpp_main without them) per packet entering the graph (vector rate in x time), "
            "from clear runtime / show runtime around each trial")}
    return found


def add_costs(measurement: Measurement, specs: Sequence[CostSpec],
              work: Mapping[str, Sequence[float]],
              readings: Mapping[str, Sequence[Mapping[str, Reading] | None] | None]) -> None:
    """Add each spec's figures (see the module) from ``work`` (per variant, per trial: the
    requests or GB of the trial's own result) and ``readings`` (per variant, per trial, the
    telemetry paired with that very trial; None where none could be paired), and the record's
    ``cost`` block: how the first spec's cost (the one judged) is measured, whatever could be
    given, and why a figure could not."""
    block: dict[str, Any] = {}
    source: str | None = None
    metrics: dict[str, dict[str, str]] = {}
    reasons: list[str] = []
    for spec in specs:
        given = readings.get(spec.variant)
        nodes, why = _node_readings(spec, given) if given is not None else \
            (None, f"{spec.variant}'s trials have no telemetry paired with them")
        if nodes is None or given is None:
            reasons.append(f"{spec.metric} unavailable: {why}")
            continue
        counted = list(work.get(spec.variant, ()))
        if len(counted) != len(nodes):
            reasons.append(f"{spec.metric} unavailable: {len(counted)} results of "
                           f"{spec.variant} for {len(nodes)} telemetry readings")
            continue
        figures, missing = _per_trial(spec, [t for t in given if t is not None], counted)
        reasons += missing
        if spec is specs[0] and spec.metric in figures:
            source = sources_told(nodes, spec.groups)
        told = descriptions(spec, any(_shared(t, spec.node) for t in given if t is not None))
        for name, values in figures.items():
            measurement.add(name, values, told[name]["unit"], "lower_is_better")
            metrics[name] = told[name]
        if f"{spec.prefix}foreign_share" in figures and "foreign_load" not in block:
            block["foreign_load"] = foreign_load(spec, figures[f"{spec.prefix}foreign_share"])
    measurement.notes += [r for r in reasons if r not in measurement.notes]
    if not specs:
        return
    judged = specs[0]
    measurement.cost = {"metric": judged.metric, "unit": judged.unit,
                        "counts": descriptions(judged, False)[judged.metric]["counts"],
                        "not_counted": _not_counted(judged), **block, "metrics": metrics,
                        **({"cpu_source": source} if source else {}),
                        **({"unavailable": "; ".join(reasons)} if reasons else {})}


def _not_counted(spec: CostSpec) -> str:
    """What the judged cost leaves out, and where it is counted instead."""
    text = (f"interrupt and softirq time on {spec.node}'s cores (the kernel's network work "
            f"done outside the processes' system time): {spec.prefix}kernel_cost beside it "
            "counts system + irq + softirq time of those cores; the load generator and other "
            "nodes' processes")
    if spec.vpp:
        text += (f"; VPP's own work (it polls, so its process time is always its cores): "
                 f"{spec.prefix}vpp_cost beside it counts its clocks per packet")
    return text


def foreign_load(spec: CostSpec, shares: Sequence[float]) -> dict[str, Any]:
    """The record's statement of the CPU others took on the DUT's cores during the trials."""
    return {"node": spec.node, "cores": list(spec.cores) or "all",
            "share_pct": round(statistics.median(shares), 2), "max_pct": max(shares),
            "counts": "nice + steal time of the node's cores less the testbed's own niced "
                      "processes', % of them, median of the trials"}


def foreign_message(shares: Mapping[str, Mapping[str, Any]]) -> str | None:
    """``other processes took 57 % of dut's cores during the trials`` (the larger side's
    median share) when a side's share reached :data:`LARGE_FOREIGN`; None otherwise.
    ``shares``: per side its :func:`foreign_load`."""
    found = [(float(load["share_pct"]), str(load["node"])) for load in shares.values()
             if isinstance(load, Mapping) and "share_pct" in load]
    if not found:
        return None
    share, node = max(found)
    if share < LARGE_FOREIGN:
        return None
    return f"other processes took {share:.0f} % of {node}'s cores during the trials"


def busy_cores(measurement: Measurement) -> str | None:
    """:func:`foreign_message` of a plain test's own trials (its cost block's foreign load):
    what its failed or inconclusive verdict adds, so that a red row says when the machine,
    not the system, was busy; None below :data:`LARGE_FOREIGN` or without telemetry."""
    return foreign_message({"plain": (measurement.cost or {}).get("foreign_load") or {}})


def cost_phrase(unit: str) -> str:
    """How a message names a cost by its unit: ``CPU per request``, ``CPU per GB``,
    ``VPP clocks per packet``."""
    amount, _, per = unit.partition("/")
    if not per:
        return unit
    if amount.startswith("CPU"):
        return f"CPU per {per}"
    return f"VPP {amount} per {per}" if amount == "clocks" else f"{amount} per {per}"


def restate_foreign_load(measurement: Measurement) -> None:
    """The ``cost`` block's foreign load restated from the measurement's own per-trial
    ``foreign_share`` (after a duet merged its rounds from both runs)."""
    block = measurement.cost
    if not block or "foreign_load" not in block or not block["metric"].endswith("cost"):
        return
    metric = measurement.metrics.get(f"{block['metric'][:-len('cost')]}foreign_share")
    if metric is None:
        return
    values = metric.summary.values
    block["foreign_load"] = {**block["foreign_load"],
                             "share_pct": round(statistics.median(values), 2),
                             "max_pct": max(values)}
