"""perf and inferno: CPU profiles of the processes a test started, as a flame graph.

Owns ``perf record -e cpu-clock --call-graph dwarf`` of running processes on a node, in the
background while a trial loads them, and ``perf script`` of the samples there, where the
binaries are (``record``); and, on this machine, inferno's folding of that text into stacks
and its flame graphs, plain and differential (``flame``). The folded text is handed back as
text: what it says is :mod:`libraries.results.profile`'s.

Other tool families use only the names below (``from libraries.tools.perf import ...``).
"""

from libraries.tools.perf.flame import diff_graph, flame_graph, fold, inferno
from libraries.tools.perf.record import (
    EVENT,
    FREQUENCY,
    Recording,
    finish_recording,
    record_command,
    remove,
    script,
    start_recording,
)

__all__ = ["EVENT", "FREQUENCY", "Recording", "diff_graph", "finish_recording", "flame_graph",
           "fold", "inferno", "record_command", "remove", "script", "start_recording"]
