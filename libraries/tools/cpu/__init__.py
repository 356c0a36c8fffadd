"""CPU accounting of a node from ``/proc``: what each core and each started process spent in
a measured trial, read twice (trial start and end) with no sampling process.

Owns the parsers of ``/proc/stat``, ``/proc/<pid>/stat`` and a telemetry snapshot
(``proc_stat``), and the snapshot script, the CPU ledger that load generators write their own
usage to, and the per-core / per-process usage computed from two snapshots (``telemetry``).

A runner leaves its load generator's own CPU in the ledger, or has the shell print it
(``times``), through its command value (``libraries.testbed.command.NodeCommand``: ``ledger``,
``times``); other tool families use only the names below (``from libraries.tools.cpu import
...``) to read that CPU back from the output.
"""

from libraries.tools.cpu.times import before_times, children_cpu_s

__all__ = ["before_times", "children_cpu_s"]
