"""CPU profiles as folded stacks, and what changed between two of them. Pure: text in, figures
out; the recording (``perf``) and the drawing (inferno) are :mod:`libraries.tools.perf`'s.

A folded profile is one line per distinct call stack, root first, frames joined by ``;``, and
its weight: ``nginx;ngx_process_events;...;SSL_write 12024048``. With ``perf record -e
cpu-clock`` the weight is nanoseconds of CPU (each sample carries its period), so a profile's
total is the CPU time it saw. A frame ``[libfoo.so]`` is a sample inside ``libfoo.so`` whose
symbol perf could not name (a stripped binary); ``[unknown]``: not even the object.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

_UNRESOLVED = re.compile(r"^\[(.+)\]$")
MIN_UNRESOLVED_SHARE = 0.01
"""An object whose frames without a symbol hold at least this share of the samples is named
(a stripped binary), so a reader knows why its own functions are missing."""


class ProfileError(ValueError):
    """Folded-stack text that is not one (quotes the offending line)."""


@dataclass(frozen=True)
class Folded:
    """``stacks``: call stack (root first, ``;``-joined) -> weight."""

    stacks: dict[str, int]

    @property
    def total(self) -> int:
        """The sum of the weights."""
        return sum(self.stacks.values())

    def self_weights(self) -> Counter[str]:
        """Weight per function where it was on CPU itself (the stack's last frame)."""
        weights: Counter[str] = Counter()
        for stack, weight in self.stacks.items():
            weights[stack.rsplit(";", 1)[-1]] += weight
        return weights

    def process_weights(self) -> Counter[str]:
        """Weight per process (a stack's first frame: the thread's name, e.g. ``nginx``,
        ``vpp_main``)."""
        weights: Counter[str] = Counter()
        for stack, weight in self.stacks.items():
            weights[stack.split(";", 1)[0]] += weight
        return weights

    def total_weights(self) -> Counter[str]:
        """Weight per function on CPU itself or in what it called (anywhere on the stack,
        counted once per stack): what a flame graph's frame width shows."""
        weights: Counter[str] = Counter()
        for stack, weight in self.stacks.items():
            for function in set(stack.split(";")):
                weights[function] += weight
        return weights

    def text(self) -> str:
        """The folded text (one ``stack weight`` line each, heaviest first)."""
        ordered = sorted(self.stacks.items(), key=lambda item: (-item[1], item[0]))
        return "".join(f"{stack} {weight}\n" for stack, weight in ordered)


def parse_folded(text: str, where: str) -> Folded:
    """The folded stacks in ``text`` (from ``where``, named in errors): every non-empty line
    ``<stack> <positive weight>``; at least one line."""
    stacks: Counter[str] = Counter()
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        stack, _, weight = line.rstrip().rpartition(" ")
        if not stack or not weight.isdigit() or int(weight) <= 0:
            raise ProfileError(f"{where}: line {number} is not '<stack> <weight>': {line[:200]!r}")
        stacks[stack] += int(weight)
    if not stacks:
        raise ProfileError(f"{where}: no stacks (the profile saw no sample of the processes)")
    return Folded(dict(stacks))


def unresolved_objects(folded: Folded) -> dict[str, float]:
    """Object -> share of all samples that were on CPU inside it without a symbol, for every
    object at :data:`MIN_UNRESOLVED_SHARE` or more (e.g. ``{"nginx": 0.31}``: a stripped
    nginx; OpenSSL, libc and the kernel still resolve)."""
    total = folded.total
    shares: Counter[str] = Counter()
    for function, weight in folded.self_weights().items():
        match = _UNRESOLVED.match(function)
        if match:
            shares[match.group(1)] += weight
    return {name: round(weight / total, 4) for name, weight in shares.most_common()
            if weight / total >= MIN_UNRESOLVED_SHARE}


@dataclass(frozen=True)
class FunctionChange:
    """One function's self share of CPU on each side (percent of that side's samples)."""

    function: str
    a_ms: float
    b_ms: float
    a_pct: float
    b_pct: float

    @property
    def points(self) -> float:
        """The change in percentage points (b - a)."""
        return self.b_pct - self.a_pct

    def as_record(self) -> dict[str, Any]:
        """The record's entry."""
        return {"function": self.function, "a_ms": round(self.a_ms, 1),
                "b_ms": round(self.b_ms, 1), "a_pct": round(self.a_pct, 2),
                "b_pct": round(self.b_pct, 2), "points": round(self.points, 2)}

    def text(self) -> str:
        """``SSL_write 3.1 % -> 5.4 % (+2.3 points)``."""
        return (f"{self.function} {self.a_pct:.1f} % -> {self.b_pct:.1f} % "
                f"({self.points:+.1f} points)")


def function_changes(a: Folded, b: Folded, top: int = 10,
                     inclusive: bool = False) -> list[FunctionChange]:
    """The ``top`` functions whose share of CPU changed most from ``a`` to ``b`` (shares, not
    times: the two profiles' lengths and sample counts need not match), largest first: their
    self share, or with ``inclusive`` their share with what they called (``SSL_write`` and the
    encryption and system calls under it)."""
    self_a, self_b = ((a.total_weights(), b.total_weights()) if inclusive else
                      (a.self_weights(), b.self_weights()))
    total_a, total_b = a.total, b.total
    changes = [FunctionChange(function, self_a[function] / 1e6, self_b[function] / 1e6,
                              100.0 * self_a[function] / total_a,
                              100.0 * self_b[function] / total_b)
               for function in self_a.keys() | self_b.keys()]
    changes.sort(key=lambda change: (-abs(change.points), change.function))
    return changes[:top]


def grown(changes: list[FunctionChange]) -> FunctionChange | None:
    """The function that grew most (for a regression's message), or None when none grew."""
    growing = [change for change in changes if change.points > 0]
    return max(growing, key=lambda change: change.points) if growing else None


def rename_binaries(folded: Folded, names: dict[str, str]) -> Folded:
    """``folded`` with the frames of side b's binaries named as side a's: a build of another
    name (``/tmp/nginx-copy`` against ``/usr/sbin/nginx``) heads its stacks with its own
    process name (``nginx-copy``, cut at 15 characters as the kernel's comm is) and names its
    unresolved code ``[nginx-copy]``, so no frame of it would match side a's and the copy
    would seem to "grow" from nothing. ``names``: b's file name -> a's."""
    frames = {}
    for b_name, a_name in names.items():
        frames[b_name] = a_name
        frames[b_name[:15]] = a_name[:15]
        frames[f"[{b_name}]"] = f"[{a_name}]"
    if not frames:
        return folded
    renamed: dict[str, int] = {}
    for stack, weight in folded.stacks.items():
        key = ";".join(frames.get(frame, frame) for frame in stack.split(";"))
        renamed[key] = renamed.get(key, 0) + weight
    return Folded(renamed)

