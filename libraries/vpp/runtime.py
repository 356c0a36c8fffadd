"""VPP's runtime counters: ``show runtime`` and ``show session`` parsed, summarised per thread.

``clear runtime`` before a measured trial and ``show runtime`` after it give, per VPP thread
(``vpp_main``, ``vpp_wk_N``) and graph node, the calls, vectors, suspends and clocks of that
window, the main loop rate and the vector rates in/out/drop. The format is vlib's
``show_node_runtime`` (``src/vlib/node_cli.c``): a ``Thread N name (lcore C)`` line per
thread when VPP has workers, ``Time T, R sec internal node vector rate V loops/sec L``, a
``vector rates in ..., out ..., drop ..., punt ...`` line, a column header and one row per
node: name, state, calls, vectors, suspends, clocks per vector (or per call / suspend) and
vectors per call.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from libraries.testbed.errors import ParseError

_THREAD = re.compile(r"^Thread (\d+) (\S+)(?: \(lcore (\d+)\))?$")
_TIME = re.compile(r"^Time ([\d.]+), (?:[\d.]+ sec )?internal node vector rate ([\d.]+) "
                   r"loops/sec ([\d.]+)$")
_RATES = re.compile(r"^vector rates in ([-+\d.eE]+), out ([-+\d.eE]+), drop ([-+\d.eE]+), "
                    r"punt ([-+\d.eE]+)$")
_HEADER = re.compile(r"^Name\s+State\s+Calls\s+Vectors\s+Suspends\s+\S*Clocks\s+Vectors/Call$")
_NUMBERS = re.compile(r"^(\d+)\s+(\d+)\s+(\d+)\s+([-+\d.eE]+|[-+]NaN)\s+([\d.]+)$")
NAME_WIDTH, STATE_WIDTH = 30, 12
"""Row columns: ``%-30v%=12U%16Ld%16Ld%16Ld%16.2e%16.2f``; VPP cuts a longer name or state
to the width (``ip4-full-reassembly-expire-wal``, ``interrupt wa``) and prints a process
node's state in quotes (``"any wait"``)."""
# show session: "N sessions"; verbose: "active sessions N [closed M]", or "N sessions. Verbose
# output suppressed. ..." past 50 sessions (src/vnet/session/session_cli.c)
_SESSIONS = re.compile(r"^Thread (\d+): (?:(\d+) sessions\b.*|active sessions (\d+)(?: closed \d+)?"
                       r"|no sessions)$")
TOP_NODES = 5


@dataclass(frozen=True)
class NodeRuntime:
    """One graph node's row: counts since ``clear runtime`` and clocks per vector (or per
    call, or per suspend, whichever is non-zero first, as VPP prints it)."""

    name: str
    state: str
    calls: int
    vectors: int
    suspends: int
    clocks_per: float
    vectors_per_call: float

    @property
    def clocks(self) -> float:
        """Total clocks of the node in the window (clocks per unit times its units)."""
        units = self.vectors or self.calls or self.suspends
        return self.clocks_per * units


@dataclass(frozen=True)
class ThreadRuntime:
    """One VPP thread's block of ``show runtime``."""

    index: int
    name: str
    lcore: int | None
    time_s: float
    vector_rate: float
    loops_per_sec: float
    rates: dict[str, float]
    nodes: tuple[NodeRuntime, ...]

    @property
    def work_clocks(self) -> float:
        """Clocks of the nodes that processed vectors in the window: the thread's work, not
        its polling of empty queues (an input node polled without a packet counts its clocks
        per call, and those grow with time, not with traffic)."""
        return sum(n.clocks for n in self.nodes if n.vectors)

    @property
    def packets_in(self) -> float:
        """Packets that entered the graph on this thread in the window: the ``vector rates
        in`` rate times the window."""
        return self.rates.get("in", 0.0) * self.time_s

    def summary(self) -> dict[str, Any]:
        """Totals, rates, the clocks of work and the packets in (what a cost per packet
        divides) and the nodes that took most clocks (plain data for a record)."""
        active = [n for n in self.nodes if n.calls]
        calls = sum(n.calls for n in self.nodes)
        vectors = sum(n.vectors for n in self.nodes)
        top = sorted(active, key=lambda n: n.clocks, reverse=True)[:TOP_NODES]
        return {
            "time_s": self.time_s, "loops_per_sec": self.loops_per_sec,
            "vector_rate": self.vector_rate, "calls": calls, "vectors": vectors,
            "suspends": sum(n.suspends for n in self.nodes),
            "vectors_per_call": round(vectors / calls, 3) if calls else 0.0,
            "clocks": sum(n.clocks for n in self.nodes),
            "work_clocks": self.work_clocks, "packets_in": round(self.packets_in, 1),
            "rates": dict(self.rates),
            "top_nodes": {n.name: {"calls": n.calls, "vectors": n.vectors,
                                   "clocks_per": n.clocks_per,
                                   "vectors_per_call": n.vectors_per_call} for n in top},
        }


def parse_show_runtime(text: str) -> list[ThreadRuntime]:
    """Every thread block of ``show runtime``; ParseError quoting the text on a line that
    is none of the known kinds, a block without its ``Time`` line, or no block at all."""
    threads: list[ThreadRuntime] = []
    current: dict[str, Any] | None = None
    pending_thread: tuple[int, str, int | None] | None = None

    def close() -> None:
        if current is not None:
            threads.append(ThreadRuntime(nodes=tuple(current.pop("nodes")), **current))

    for raw in text.splitlines():
        line = raw.strip()
        if not line or line == "---------------" or line.startswith("events pending"):
            continue
        if match := _THREAD.match(line):
            close()
            current = None
            pending_thread = (int(match[1]), match[2], int(match[3]) if match[3] else None)
        elif match := _TIME.match(line):
            close()
            index, name, lcore = pending_thread or (0, "vpp_main", None)
            pending_thread = None
            current = {"index": index, "name": name, "lcore": lcore,
                       "time_s": float(match[1]), "vector_rate": float(match[2]),
                       "loops_per_sec": float(match[3]), "rates": {}, "nodes": []}
        elif current is None:
            raise ParseError("vppctl show runtime", f"{line!r} before any 'Time' line", text)
        elif match := _RATES.match(line):
            current["rates"] = {k: float(v) for k, v in
                                zip(("in", "out", "drop", "punt"), match.groups(), strict=True)}
        elif _HEADER.match(line):
            continue
        elif node := _row(raw.rstrip()):
            current["nodes"].append(node)
        else:
            raise ParseError("vppctl show runtime", f"unexpected line {line!r}", text)
    close()
    if not threads:
        raise ParseError("vppctl show runtime", "no 'Time ..., loops/sec' line", text)
    return threads


def _row(line: str) -> NodeRuntime | None:
    """A node row by its fixed columns, or None when the line is not one."""
    name = line[:NAME_WIDTH].strip()
    state = line[NAME_WIDTH:NAME_WIDTH + STATE_WIDTH].strip().strip('"')
    numbers = _NUMBERS.match(line[NAME_WIDTH + STATE_WIDTH:].strip())
    if not name or " " in name or not state or numbers is None:
        return None
    calls, vectors, suspends, clocks, per_call = numbers.groups()
    return NodeRuntime(name, state, int(calls), int(vectors), int(suspends), float(clocks),
                       float(per_call))


def parse_session_counts(text: str) -> dict[str, int]:
    """Sessions per thread from ``show session`` (``Thread N: M sessions``, ``Thread N: no
    sessions``, or the verbose ``active sessions M``); other lines (session rows, headers)
    are skipped. ParseError when there is no thread line."""
    counts: dict[str, int] = {}
    for raw in text.splitlines():
        match = _SESSIONS.match(raw.strip())
        if match:
            counts[match[1]] = int(match[2] or match[3] or 0)
    if not counts:
        raise ParseError("vppctl show session", "no 'Thread N: ...' line", text)
    return counts


def runtime_summary(runtime_text: str, session_text: str) -> dict[str, Any]:
    """The record's ``vpp`` entry of one trial: per thread name its :meth:`summary`, and the
    active sessions per thread."""
    threads = parse_show_runtime(runtime_text)
    return {"threads": {t.name: t.summary() for t in threads},
            "sessions": parse_session_counts(session_text)}
