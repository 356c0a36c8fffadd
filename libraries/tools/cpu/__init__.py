"""CPU accounting of a node from ``/proc``: what each core and each started process spent in
a measured trial, read twice (trial start and end) with no sampling process.

Owns the parsers of ``/proc/stat``, ``/proc/<pid>/stat`` and a telemetry snapshot
(``proc_stat``), and the snapshot script, the CPU ledger that load generators write their own
usage to, and the per-core / per-process usage computed from two snapshots (``telemetry``).

Other tool families use only the names below (``from libraries.tools.cpu import ...``): a
runner wraps its command with :func:`accounted_command` so the load generator's own CPU is
counted, and with :func:`timed_command` to read that CPU back itself (``times``).
"""

from libraries.tools.cpu.telemetry import accounted_command
from libraries.tools.cpu.times import TIMES_MARKER, before_times, children_cpu_s, timed_command

__all__ = ["TIMES_MARKER", "accounted_command", "before_times", "children_cpu_s",
           "timed_command"]
