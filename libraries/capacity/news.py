"""The capacity search's console lines: one when a path's search ends, one per window.

The search and its 30 s windows run for many minutes after the closed-loop trials, which
print a line each (:mod:`libraries.keywords.progress`); these say as much for what follows, so
a console is never silent for the length of a capacity test: ``proxy capacity search: knee
5.1k req/s after 23 trials``, then per window ``proxy capacity window 3: 4.6k req/s for 30 s,
p99 23.1 ms, 0.4 % over 25 ms: held p99<=25ms``. The lines go to a ``say`` function (the
keyword layer's console; a plain run outside Robot says nothing).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from libraries.capacity.confirm import holds
from libraries.capacity.search import Measure
from libraries.capacity.search_settings import LatencyGoal
from libraries.capacity.trials import CapacityTrial, PathCapacity
from libraries.results.headline import figure
from libraries.results.measurement import Say


def window_line(path: str, number: int, trial: CapacityTrial, goal: LatencyGoal) -> str:
    """A window's line: its rate and length, its p99, the share of requests over the goal's
    limit, and whether it held the goal or missed it."""
    p99 = trial.latency.get("p99")
    shown = "p99 -" if p99 is None else f"p99 {p99:.3g} ms"
    outcome = "held" if holds(trial, goal) else "missed"
    return (f"{path} capacity window {number}: {figure(trial.rate)} req/s for "
            f"{trial.duration:g} s, {shown}, {trial.loss_ratio(goal.limit_ms):.1%} over "
            f"{goal.limit_ms:g} ms: {outcome} {goal.name}")


def search_lines(found: Mapping[str, PathCapacity]) -> list[str]:
    """Per path, how its search ended: the knee and the trials it took (or that it found
    none)."""
    lines = []
    for path, result in found.items():
        knee = result.capacity
        shown = f"knee {figure(knee)} req/s" if knee is not None else "no knee found"
        lines.append(f"{path} capacity search: {shown} after {len(result.trials)} trials")
    return lines


def announced(measure: Measure, goal: LatencyGoal, say: Say) -> Measure:
    """``measure`` saying each window it runs (:func:`window_line`), numbered per path."""
    counts: Counter[str] = Counter()

    def run(path: str, seconds: float, rate: float) -> CapacityTrial:
        trial = measure(path, seconds, rate)
        counts[path] += 1
        say(window_line(path, counts[path], trial, goal))
        return trial

    return run
