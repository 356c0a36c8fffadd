"""A node's environment around a test: what can make a figure move that the figure does not
show. Read twice (before the first measured trial and after the last), one command each:

* frequency: the cpufreq governor and current MHz per CPU (``/sys/.../cpufreq``), or the
  ``cpu MHz`` the kernel reports where there is no cpufreq (a VM);
* interrupts: per CPU, hardware interrupts (``/proc/interrupts`` summed) and the NET_RX /
  NET_TX softirqs (``/proc/softirqs``), as deltas over the test;
* ``irqbalance`` running or not (it moves interrupts between CPUs during a run);
* placement: every process the test started, with the CPUs it was allowed to run on
  (``Cpus_allowed_list``), beside the CPUs the topology declares per purpose.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from libraries.testbed.errors import HostStackError, ParseError

if TYPE_CHECKING:
    from libraries.testbed.node import Node

_SCRIPT = r"""
echo "==cpus $(getconf _NPROCESSORS_ONLN)"
echo "==frequency"
for d in /sys/devices/system/cpu/cpu[0-9]*; do
  f=$d/cpufreq; c=${d##*/}
  [ -r $f/scaling_governor ] || continue
  echo "$c $(cat $f/scaling_governor) $(cat $f/scaling_cur_freq 2>/dev/null || echo -)"
done
echo "==mhz"
awk -F: '/^cpu MHz/ {gsub(/ /, "", $2); print $2}' /proc/cpuinfo
echo "==interrupts"
awk 'NR == 1 {n = NF; next} {for (i = 2; i <= n + 1; i++) if ($i ~ /^[0-9]+$/) s[i - 2] += $i}
     END {for (i = 0; i < n; i++) printf "cpu%d %d\n", i, s[i]}' /proc/interrupts
echo "==softirqs"
awk '$1 == "NET_RX:" || $1 == "NET_TX:"' /proc/softirqs
echo "==irqbalance"
pgrep -x irqbalance >/dev/null && echo yes || echo no
echo "==affinity"
for g in $GROUPS_; do
  for p in $(pgrep -g "$g" 2>/dev/null); do
    a=$(awk '/^Cpus_allowed_list/ {print $2}' /proc/$p/status 2>/dev/null) || continue
    [ -n "$a" ] && echo "$g $p $(cat /proc/$p/comm 2>/dev/null) $a"
  done
done
echo "==end"
"""


@dataclass(frozen=True)
class EnvironmentReading:
    """One read: ``cpus`` online, ``governors`` (cpu -> (governor, kHz or None)), ``mhz``
    (reported per CPU), ``interrupts`` (cpu -> count), ``net_rx`` / ``net_tx`` (cpu -> count),
    ``irqbalance``, ``affinity`` (group -> [(pid, comm, allowed CPUs text)])."""

    cpus: int
    governors: dict[str, tuple[str, int | None]] = field(default_factory=dict)
    mhz: list[float] = field(default_factory=list)
    interrupts: dict[str, int] = field(default_factory=dict)
    net_rx: dict[str, int] = field(default_factory=dict)
    net_tx: dict[str, int] = field(default_factory=dict)
    irqbalance: bool | None = None
    affinity: dict[int, list[tuple[int, str, str]]] = field(default_factory=dict)


def environment_command(groups: list[int]) -> str:
    """The read, for the process groups ``groups`` (the processes a test started)."""
    return f"GROUPS_={shlex.quote(' '.join(str(int(g)) for g in groups))}; {_SCRIPT}"


def _softirq_row(line: str, source: str, text: str) -> dict[str, int]:
    counts = line.split()[1:]
    if not all(c.isdigit() for c in counts):
        raise ParseError(source, f"a softirq row of numbers, got {line!r}", text)
    return {f"cpu{i}": int(c) for i, c in enumerate(counts)}


def parse_environment(text: str, source: str = "environment read") -> EnvironmentReading:
    """Parse :func:`environment_command`'s output (``ParseError`` quoting it otherwise)."""
    sections: dict[str, list[str]] = {}
    current = None
    cpus = None
    for line in text.splitlines():
        if line.startswith("=="):
            name, _, rest = line[2:].partition(" ")
            current = name
            sections[name] = []
            if name == "cpus":
                cpus = int(rest) if rest.strip().isdigit() else None
            continue
        if current is not None and line.strip():
            sections[current].append(line.strip())
    if "end" not in sections or cpus is None:
        raise ParseError(source, "no complete read (an ==cpus N header and an ==end marker)",
                         text)
    governors: dict[str, tuple[str, int | None]] = {}
    for line in sections.get("frequency", []):
        cpu, governor, khz = [*line.split(), "-", "-"][:3]
        governors[cpu] = (governor, int(khz) if khz.isdigit() else None)
    try:
        mhz = [float(v) for v in sections.get("mhz", [])]
        interrupts = {cpu: int(count) for cpu, count in
                      (line.split() for line in sections.get("interrupts", []))}
    except ValueError:
        raise ParseError(source, "numbers in the mhz and interrupts sections", text) from None
    net = {line.split()[0]: _softirq_row(line, source, text)
           for line in sections.get("softirqs", [])}
    affinity: dict[int, list[tuple[int, str, str]]] = {}
    for line in sections.get("affinity", []):
        parts = line.split()
        if len(parts) != 4 or not parts[0].isdigit() or not parts[1].isdigit():
            raise ParseError(source, f"'group pid comm cpus' lines, got {line!r}", text)
        affinity.setdefault(int(parts[0]), []).append((int(parts[1]), parts[2], parts[3]))
    irqbalance = sections.get("irqbalance", [""])
    return EnvironmentReading(
        cpus=cpus, governors=governors, mhz=mhz, interrupts=interrupts,
        net_rx=net.get("NET_RX:", {}), net_tx=net.get("NET_TX:", {}),
        irqbalance={"yes": True, "no": False}.get(irqbalance[0] if irqbalance else ""),
        affinity=affinity)


def read_environment(node: Node, groups: list[int]) -> EnvironmentReading:
    """Read ``node``'s environment (processes of the tracked ``groups`` included)."""
    result = node.run(environment_command(groups), timeout=20, check=False, quiet=True)
    if result.exit_code != 0:
        raise HostStackError(f"{node.where}: environment read exited {result.exit_code}: "
                             f"{(result.stderr or result.stdout).strip()[-300:]}")
    return parse_environment(result.stdout, f"{node.where}: environment read")


def environment_entry(before: EnvironmentReading, after: EnvironmentReading,
                      names: dict[int, str], declared: dict[str, list[int]]) -> dict[str, Any]:
    """The record's entry for one node: frequency, interrupt deltas, irqbalance, placement
    (``names``: group -> the name the test gave the process; ``declared``: the topology's
    CPUs per purpose on this node)."""
    if after.governors:
        frequency: dict[str, Any] = {
            "governor": sorted({g for g, _ in after.governors.values()}),
            "mhz": {cpu: (khz / 1000.0 if khz else None)
                    for cpu, (_, khz) in sorted(after.governors.items())}}
    else:
        frequency = {"unavailable": "no cpufreq interface (no frequency scaling the guest "
                     "can see, as in a VM)", "reported_mhz": after.mhz}
    interrupts = {
        cpu: {"hard": after.interrupts.get(cpu, 0) - before.interrupts.get(cpu, 0),
              "net_rx": after.net_rx.get(cpu, 0) - before.net_rx.get(cpu, 0),
              "net_tx": after.net_tx.get(cpu, 0) - before.net_tx.get(cpu, 0)}
        for cpu in sorted(set(after.interrupts) | set(after.net_rx))}
    processes = {}
    for group, members in sorted({**before.affinity, **after.affinity}.items()):
        name = names.get(group, f"group {group}")
        allowed = sorted({cpus for _, _, cpus in members})
        processes[name] = allowed[0] if len(allowed) == 1 else allowed
    return {"cpus": after.cpus, "frequency": frequency, "interrupts": interrupts,
            "irqbalance": after.irqbalance,
            "placement": {"declared": declared, "processes": processes}}
