"""The record's ``telemetry`` block: per variant, per node, the per-trial CPU usage the
keywords collected, summarised as medians over the measured trials, and printable tables.

Input is plain data in the shape the tools layer's ``CpuUsage.as_record()`` gives (plus a
``vpp`` entry on a node running VPP), or ``{"unavailable": "<reason>"}`` for a node or
trial that could not be read; the schema (``schemas/record-v3.schema.json``) is the contract.
Nothing here fills a gap with zeros: a node with no readable trial stays ``unavailable``.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

CORE_COLUMNS = ("usr", "nice", "sys", "iowait", "irq", "soft", "steal", "idle")
BUSY_COLUMNS = ("usr", "sys", "irq", "soft")
"""Busy time of a core for efficiency metrics: work in user space, kernel, hard and soft
interrupts. ``nice`` is left out (niced background jobs, e.g. a build, are not the test's),
as are ``iowait``, ``steal`` (the hypervisor's) and ``idle``."""
SAMPLING = ("/proc/stat and /proc/<pid>/stat(+task) read at the start and end of each "
            "measured trial (warm-ups excluded); per-core columns like mpstat -P ALL, "
            "processes in % of one core")

NodeTrial = Mapping[str, Any]


def median_tree(trials: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Median of every numeric leaf over ``trials`` (nested dicts of the same shape); a key
    missing from some trials is the median of the trials that have it."""
    keys: list[str] = []
    for trial in trials:
        keys.extend(k for k in trial if k not in keys)
    merged: dict[str, Any] = {}
    for key in keys:
        values = [trial[key] for trial in trials if key in trial]
        if all(isinstance(v, Mapping) for v in values):
            merged[key] = median_tree(values)
        elif all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
            merged[key] = round(statistics.median(values), 3)
    return merged


def summarize_node(trials: Sequence[NodeTrial]) -> dict[str, Any]:
    """One node's summary over the measured trials of one variant (see the module doc)."""
    readable = [t for t in trials if "unavailable" not in t]
    reasons = sorted({str(t["unavailable"]) for t in trials if "unavailable" in t})
    if not readable:
        return {"unavailable": "; ".join(reasons) or "no measured trial"}
    summary: dict[str, Any] = {
        "trials": len(readable),
        "elapsed_s": [t["elapsed_s"] for t in readable],
        "boot_id": readable[-1]["boot_id"],
        "sampler_cpu_s": [t["sampler_cpu_s"] for t in readable],
        "cores": median_tree([t["cores"] for t in readable]),
        "processes": _processes(readable),
        "per_trial": [{"cores": t["cores"], "processes": _shown(t["processes"])}
                      for t in readable],
    }
    exited = sorted({name for t in readable for name in t.get("exited", [])})
    if exited:
        summary["exited"] = exited
    if reasons:
        summary["unavailable_trials"] = reasons
    vpp = [t["vpp"] for t in readable if "vpp" in t]
    if vpp:
        parsed = [v for v in vpp if "unavailable" not in v]
        summary["vpp"] = ({"median": median_tree(parsed), "per_trial": parsed} if parsed
                          else {"unavailable": str(vpp[-1]["unavailable"])})
    return summary


def _shown(processes: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """A trial's process table as the record keeps it: without ``cpu_s`` and ``niced_s``
    (the seconds a cost divides and a foreign share leaves out, :mod:`libraries.results.cost`;
    ``cpu`` is the same time in % of one core)."""
    return {name: {k: v for k, v in row.items() if k not in ("cpu_s", "niced_s")}
            for name, row in processes.items()}


def _processes(trials: Sequence[NodeTrial]) -> dict[str, Any]:
    table = median_tree([_shown(t["processes"]) for t in trials])
    for name, row in table.items():
        row["count"] = max(int(t["processes"][name]["count"]) for t in trials
                           if name in t["processes"])
        row["in_trials"] = sum(1 for t in trials if name in t["processes"])
    return table


def telemetry_block(by_variant: Mapping[str, Sequence[Mapping[str, NodeTrial]]]
                    ) -> dict[str, Any]:
    """The record's ``telemetry``: ``{"sampling": ..., "variants": {variant: {"nodes":
    {node: summary}}}}`` from the per-trial node readings of each variant."""
    variants: dict[str, Any] = {}
    for variant, trials in by_variant.items():
        nodes: list[str] = []
        for trial in trials:
            nodes.extend(n for n in trial if n not in nodes)
        variants[variant] = {"nodes": {
            node: summarize_node([t.get(node, {"unavailable": "not sampled"}) for t in trials])
            for node in nodes}}
    return {"sampling": SAMPLING, "variants": variants}


def unavailable_block(reason: str) -> dict[str, Any]:
    """A telemetry block saying why there is none."""
    return {"unavailable": reason}


def busy_cores(cores: Mapping[str, Mapping[str, float]]) -> float:
    """Busy cores (:data:`BUSY_COLUMNS`) summed over the numbered cores, e.g. 1.35."""
    return round(sum(sum(row[c] for c in BUSY_COLUMNS) for core, row in cores.items()
                     if core != "all") / 100.0, 4)


def softirq_share(cores: Mapping[str, Mapping[str, float]]) -> float | None:
    """Softirq time as % of busy time over all cores (None when nothing was busy)."""
    row = cores["all"]
    busy = sum(row[c] for c in BUSY_COLUMNS)
    return round(100.0 * row["soft"] / busy, 2) if busy > 0 else None


def shared_kernels(block: Mapping[str, Any]) -> list[list[str]]:
    """Groups of nodes that report the same boot id (one kernel: netns testbeds), so their
    per-core tables are the same host's."""
    by_boot: dict[str, set[str]] = {}
    for variant in block.get("variants", {}).values():
        for node, summary in variant["nodes"].items():
            if "boot_id" in summary:
                by_boot.setdefault(summary["boot_id"], set()).add(node)
    return sorted(sorted(nodes) for nodes in by_boot.values() if len(nodes) > 1)


def format_cpu_table(node: str, summary: Mapping[str, Any], cores_of: str | None = None) -> str:
    """An ``mpstat -P ALL``-like text table of one node's medians, then its processes;
    with ``cores_of`` (a node on the same kernel, already shown) only a reference to it."""
    if "unavailable" in summary:
        return f"{node}: telemetry unavailable: {summary['unavailable']}"
    elapsed = ", ".join(f"{e:g}" for e in summary["elapsed_s"])
    lines = [f"{node}: median of {summary['trials']} measured trial(s) of {elapsed} s"]
    cores = summary["cores"]
    if cores_of is not None:
        lines.append(f"per-core table: same kernel as {cores_of}")
    else:
        lines.append("CPU    " + "".join(f"{'%' + c:>9}" for c in CORE_COLUMNS))
        for core in sorted(cores, key=lambda c: (c != "all", int(c) if c.isdigit() else 0)):
            lines.append(f"{core:<7}" + "".join(f"{cores[core][c]:>9.2f}"
                                                for c in CORE_COLUMNS))
    if summary["processes"]:
        width = max(len(name) for name in summary["processes"]) + 2
        lines.append("")
        lines.append(f"{'process':<{width}}{'%CPU':>8}{'%usr':>8}{'%sys':>8}  threads")
        for name, row in summary["processes"].items():
            threads = ", ".join(f"{t} {v:g}" for t, v in row.get("threads", {}).items())
            lines.append(f"{name:<{width}}{row['cpu']:>8.2f}{row['usr']:>8.2f}"
                         f"{row['sys']:>8.2f}  {threads}".rstrip())
    else:
        lines.append("(no process of the test runs on this node)")
    if summary.get("exited"):
        lines.append(f"exited during a trial (CPU not counted): {', '.join(summary['exited'])}")
    if summary.get("unavailable_trials"):
        lines.append(f"trials without telemetry: {'; '.join(summary['unavailable_trials'])}")
    return "\n".join(lines)
