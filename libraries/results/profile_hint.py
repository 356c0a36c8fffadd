"""What a differential CPU profile may say about a change: the frame where side b's CPU went,
only when that is beyond sampling noise, and nothing when the profile cannot explain the
change. Pure: two folded profiles (:class:`libraries.results.profile.Folded`) in, a
:class:`Hint` out.

**Noise.** A profile is a sample: ``perf record -F 499`` takes about 499 samples per second
of CPU, so a side's share of a frame is a proportion of its sample count (the weight divided
by the sampling period). A frame grew only when the two-proportion interval of its share
difference (b - a; Newcombe's hybrid score interval, from each side's Wilson interval) lies
wholly above zero at :data:`LEVEL`, Bonferroni-corrected for every frame compared (each node
of the call tree: a frame in its caller chain). Otherwise: "no function changed beyond noise".

**Where.** The call tree's node whose inclusive share grew most (beyond noise) is where the
growth concentrates; from it the hint walks down into the callee that carries at least
:data:`EXPLAINS` of the growth (by its estimate: the growth itself is established above),
as long as one does (``SSL_write`` -> ``EVP_EncryptUpdate`` ->
``aesni_gcm_encrypt``), so it names the deepest frame that explains its callers' growth,
with the caller chain beside it, and whether its own (self) share carries the growth or its
callees share it. Ties go to the deeper frame, never to a name.

**Not the CPU.** Where the DUT's CPU per unit of work (busy cores per request) did not change
within its interval, a slower side did the same work per request, only fewer of them: the
profile's shares do not explain the change, and the hint says so instead of naming a
function.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.stats import norm

from libraries.results.profile import Folded

LEVEL = 0.95
"""The family-wise confidence of the share intervals (over every frame compared)."""
EXPLAINS = 0.5
"""A callee carrying at least this share of its caller's growth explains it."""
CHAIN = 6
"""Callers shown beside the frame (nearest first)."""

Path = tuple[str, ...]


@dataclass(frozen=True)
class CostChange:
    """The DUT's CPU per unit of work, b against a, in percent with its interval (``what``:
    e.g. ``busy cores per request``)."""

    what: str
    change_pct: float
    low_pct: float | None
    high_pct: float | None

    @property
    def unchanged(self) -> bool:
        """The interval holds no change (or there is none to judge by)."""
        return self.low_pct is None or self.high_pct is None or \
            self.low_pct <= 0.0 <= self.high_pct

    def text(self) -> str:
        """``+0.4 % [-1.8, +2.6]``."""
        shown = f"{self.change_pct:+.1f} %"
        if self.low_pct is not None and self.high_pct is not None:
            shown += f" [{self.low_pct:+.1f}, {self.high_pct:+.1f}]"
        return shown


@dataclass(frozen=True)
class Hint:
    """What the profiles say: ``kind`` ``frame`` (``path`` grew ``points`` [``low``,
    ``high``] percentage points of b's CPU, from ``a_pct`` to ``b_pct``; ``own``: its own
    share carries the growth), ``noise`` (nothing beyond noise) or ``not_cpu`` (``cost``
    unchanged). ``frames``: how many frames were compared; ``samples``: per side."""

    kind: str
    samples: tuple[float, float]
    frames: int
    path: Path = ()
    a_pct: float = 0.0
    b_pct: float = 0.0
    low: float = 0.0
    high: float = 0.0
    own: bool = False
    cost: CostChange | None = None
    grew: str | None = None
    """When the named frame is a callee that carries most of an ancestor's growth: that
    ancestor, whose growth cleared the noise; ``low`` and ``high`` are then its interval and
    ``grew_points`` its change (the callee's own interval need not clear zero)."""
    grew_points: float = 0.0

    @property
    def function(self) -> str | None:
        """The frame named (None: none)."""
        return self.path[-1] if self.path else None

    @property
    def points(self) -> float:
        """The share's change in percentage points."""
        return self.b_pct - self.a_pct

    def chain(self) -> str:
        """The callers, nearest first: ``EVP_EncryptUpdate <- SSL_write <- ...``. Past
        :data:`CHAIN` of them, the nearest few and then the nearest named functions of the
        program (not the kernel's ``_[k]`` frames nor an unresolved ``[object]``), so that a
        kernel frame is shown with the call that led into it
        (``tcp_v4_do_rcv_[k] <- ... <- __GI___libc_write <- BIO_write <- SSL_write <- ...``)."""
        callers = list(reversed(self.path[:-1]))
        if len(callers) <= CHAIN:
            return " <- ".join(callers)
        near = callers[:CHAIN // 2]
        named = [c for c in callers[CHAIN // 2:]
                 if not c.endswith("_[k]") and not (c.startswith("[") and c.endswith("]"))]
        if not named or callers.index(named[0]) < CHAIN:
            return " <- ".join(callers[:CHAIN]) + " <- ..."
        return " <- ".join([*near, "...", *named[:CHAIN // 2]]) + " <- ..."

    def text(self) -> str:
        """The sentence for a test's message."""
        if self.kind == "not_cpu" and self.cost is not None:
            return (f"the DUT's {self.cost.what} did not change ({self.cost.text()}): the CPU "
                    "profile does not explain this change (the same CPU per unit of work: "
                    "look at waiting, latency, the network or the load generator)")
        samples = f"{self.samples[0]:,.0f} and {self.samples[1]:,.0f} samples"
        if self.kind == "noise":
            return f"no function changed beyond noise ({samples}, {self.frames} frames)"
        how = "on CPU itself" if self.own else "with what it called"
        cost = (f"; the DUT's {self.cost.what} {self.cost.text()}" if self.cost is not None
                else "")
        interval = f"[{self.low:+.1f}, {self.high:+.1f}] at {LEVEL:.0%} over {self.frames} frames"
        change = (f"{self.points:+.1f} points, most of the growth of {self.grew} and what it "
                  f"called: {self.grew_points:+.1f} points {interval}" if self.grew
                  else f"{self.points:+.1f} points {interval}")
        return (f"side b spends a larger share of the DUT's CPU in {self.function} ({how}) "
                f"{self.a_pct:.1f} % -> {self.b_pct:.1f} % ({change}), called from "
                f"{self.chain() or 'nothing'}{cost}")

    def as_record(self) -> dict[str, Any]:
        """The record's ``evidence.profile.diff.hint``."""
        found: dict[str, Any] = {"kind": self.kind, "text": self.text(),
                                 "samples": [round(n, 1) for n in self.samples],
                                 "frames": self.frames, "level": LEVEL}
        if self.kind == "frame":
            found |= {"function": self.function, "chain": list(reversed(self.path[:-1])),
                      "own": self.own, "a_pct": round(self.a_pct, 2),
                      "b_pct": round(self.b_pct, 2), "points": round(self.points, 2),
                      "low": round(self.low, 2), "high": round(self.high, 2)}
            if self.grew:
                found |= {"grew": self.grew, "grew_points": round(self.grew_points, 2)}
        if self.cost is not None:
            found["cost"] = {"what": self.cost.what, "change_pct": self.cost.change_pct,
                             "low_pct": self.cost.low_pct, "high_pct": self.cost.high_pct}
        return found


def _tree(folded: Folded) -> tuple[dict[Path, float], dict[Path, float]]:
    """Inclusive and self weight of every node of the call tree (a node: the frames from
    the root to it)."""
    inclusive: dict[Path, float] = {}
    own: dict[Path, float] = {}
    for stack, weight in folded.stacks.items():
        frames = tuple(stack.split(";"))
        for depth in range(1, len(frames) + 1):
            inclusive[frames[:depth]] = inclusive.get(frames[:depth], 0.0) + weight
        own[frames] = own.get(frames, 0.0) + weight
    return inclusive, own


def _wilson(x: np.ndarray, n: float, z: float) -> tuple[np.ndarray, np.ndarray]:
    p = x / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return np.clip(centre - half, 0.0, 1.0), np.clip(centre + half, 0.0, 1.0)


def share_intervals(x_a: np.ndarray, n_a: float, x_b: np.ndarray, n_b: float,
                    alpha: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The share differences ``x_b/n_b - x_a/n_a`` with Newcombe's hybrid score interval
    (two-sided, ``1 - alpha`` each), in proportions: (difference, low, high)."""
    z = float(norm.ppf(1 - alpha / 2))
    p_a, p_b = x_a / n_a, x_b / n_b
    low_a, high_a = _wilson(x_a, n_a, z)
    low_b, high_b = _wilson(x_b, n_b, z)
    d = p_b - p_a
    return (d, d - np.sqrt((p_b - low_b) ** 2 + (high_a - p_a) ** 2),
            d + np.sqrt((high_b - p_b) ** 2 + (p_a - low_a) ** 2))


def profile_hint(a: Folded, b: Folded, period_ns: float,
                 cost: CostChange | None = None) -> Hint:
    """The hint of profiles ``a`` and ``b`` whose samples weigh ``period_ns`` each (see the
    module docstring); ``cost``: the DUT's CPU per unit of work, b against a, when known."""
    n_a, n_b = a.total / period_ns, b.total / period_ns
    inc_a, own_a = _tree(a)
    inc_b, own_b = _tree(b)
    nodes = sorted(inc_a.keys() | inc_b.keys())
    frames = len(nodes)
    alpha = (1 - LEVEL) / max(frames, 1)
    x_a = np.array([inc_a.get(node, 0.0) for node in nodes]) / period_ns
    x_b = np.array([inc_b.get(node, 0.0) for node in nodes]) / period_ns
    d, low, high = share_intervals(x_a, n_a, x_b, n_b, alpha)
    grown = {node: i for i, node in enumerate(nodes) if low[i] > 0}
    if not grown:  # an A/A pair, or a change the sampling cannot see
        return Hint("noise", (n_a, n_b), frames, cost=cost)
    if cost is not None and cost.unchanged:  # shares moved, the CPU per unit of work did not
        return Hint("not_cpu", (n_a, n_b), frames, cost=cost)
    index = {node: i for i, node in enumerate(nodes)}
    current = top = max(grown, key=lambda node: (d[grown[node]], len(node)))
    while True:
        # the callee carrying most of the growth (its own interval need not clear zero:
        # the growth is established above, the callee says where it went)
        children = [node for node in nodes if len(node) == len(current) + 1
                    and node[:-1] == current]
        best = max(children, key=lambda node: d[index[node]], default=None)
        if best is None or d[index[best]] < EXPLAINS * d[index[current]]:
            break
        current = best
    i, t = index[current], index[top]
    own_d = (own_b.get(current, 0.0) / b.total - own_a.get(current, 0.0) / a.total)
    # the interval shown is one that cleared the noise: the frame's own, or, where the frame
    # only carries most of an ancestor's growth, that ancestor's (named beside it)
    ours = low[i] > 0
    return Hint("frame", (n_a, n_b), frames, current, 100 * x_a[i] / n_a, 100 * x_b[i] / n_b,
                100 * float(low[i if ours else t]), 100 * float(high[i if ours else t]),
                own=own_d >= EXPLAINS * float(d[i]) and not math.isclose(own_d, 0.0),
                cost=cost, grew=None if ours else top[-1],
                grew_points=0.0 if ours else 100 * float(d[t]))
