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
growth concentrates; from it the hint walks down into the callee that explains the growth, as
long as one does (``SSL_write`` -> ``EVP_EncryptUpdate`` -> ``aesni_gcm_encrypt``), so it
names the deepest frame that explains its callers' growth, with the caller chain beside it,
and whether its own (self) share carries the growth or its callees share it. Ties go to the
deeper frame, never to a name. A callee explains its caller's growth when it carries at least
:data:`EXPLAINS` of it by its estimate (the growth itself is established above) *and* more
than any other part of it (a sibling, or the caller's own share) beyond noise: the difference
of the two parts' changes (per side two disjoint cells of the multinomial, a normal interval)
lies above zero at :data:`SPLIT_LEVEL`. Why: of a growth split evenly over two callees one
always carries half by its estimate, so a walk by the estimate named one at random (300 of 300
simulated pairs) and never the other. Simulated (1,000 pairs, 2,500 / 5,000 samples a side;
docs/concepts/profiles.md): an even split over two leaves of ``SSL_write`` now names it with
both leaves' branches in 964 / 992 pairs (before: a leaf in 980 / 986); a slowed leaf is named
in 943 / 999 (969 / 1,000 before), else its caller with the leaf's branch first; a leaf beside
a large sibling pays most (``aesni_gcm_decrypt``: 803 / 981, 905 / 1,000 before).

**A split growth.** Where the walk stops at a frame whose callees grew, the hint lists the
parts that together carry its growth (callees that grew and its own share, largest first,
until :data:`TOGETHER` of it, at most :data:`LISTED`, the others counted), each with its
share of the growth and its change in points and interval (the frames' level), a callee named
as the deepest frame that explains it: ``SSL_write ...; of its growth: 58 % in tcp_sendmsg_[k]
<- __x64_sys_sendto_[k] <- ssl3_write_bytes (+4.1 points [+1.8, +6.3]), 51 % in
aesni_gcm_encrypt <- EVP_EncryptUpdate (+3.5 points [+1.2, +5.9])`` (shares of the net
growth: other callees' shares shrank). None where its own share carries :data:`TOGETHER`.

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
"""A callee explains its caller's growth when it carries at least this share of it (by its
estimate) and more than any other part of it beyond noise (:data:`SPLIT_LEVEL`)."""
SPLIT_LEVEL = 0.99
"""The confidence (two-sided, one step of the walk) at which a callee must carry more of its
caller's growth than any other part of it to explain it."""
TOGETHER = 0.9
"""A split growth lists its parts, largest first, until they carry this share of it."""
LISTED = 4
"""At most this many parts of a split growth are listed (the others counted)."""
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
class Part:
    """One part of a split growth: the frame ``path`` names (the deepest that explains the
    callee's growth; ``itself``: the split frame's own share), its ``share`` of the split
    frame's growth and its own change, ``points`` [``low``, ``high``] (the frames' level).
    ``via``: the frames between the split frame and the one named, nearest first."""

    path: Path
    via: Path
    share: float
    points: float
    low: float
    high: float
    itself: bool = False

    def text(self) -> str:
        """``52 % in aesni_gcm_encrypt <- EVP_EncryptUpdate (+4.1 points [+1.2, +7.0])``."""
        where = (f"{self.path[-1]} itself" if self.itself
                 else " <- ".join([self.path[-1], *self.via]))
        return (f"{100 * self.share:.0f} % in {where} ({self.points:+.1f} points "
                f"[{self.low:+.1f}, {self.high:+.1f}])")

    def as_record(self) -> dict[str, Any]:
        """One entry of the record's ``parts``."""
        return {"function": self.path[-1], "via": list(self.via), "itself": self.itself,
                "share": round(self.share, 3), "points": round(self.points, 2),
                "low": round(self.low, 2), "high": round(self.high, 2)}


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
    parts: tuple[Part, ...] = ()
    """Where the walk stopped at a frame whose callees grew: the parts that together carry its
    growth, largest first (:data:`TOGETHER`); ``more``: the other callees that grew."""
    more: int = 0

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
                f"{self.chain() or 'nothing'}{self.split()}{cost}")

    def split(self) -> str:
        """``; of its growth: 52 % in aesni_gcm_encrypt <- ... (...), 48 % in ...`` (or
        nothing: see :attr:`parts`)."""
        if not self.parts:
            return ""
        more = f", and {self.more} more callees that grew" if self.more else ""
        return "; of its growth: " + ", ".join(part.text() for part in self.parts) + more

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
            if self.parts:
                found |= {"parts": [part.as_record() for part in self.parts],
                          "more": self.more}
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


@dataclass(frozen=True)
class _Compared:
    """The call tree's nodes compared: inclusive and self sample counts per side (of ``n_a``,
    ``n_b``), share differences ``d`` with intervals at ``alpha`` (corrected), callees."""

    nodes: list[Path]
    index: dict[Path, int]
    children: dict[Path, list[Path]]
    x_a: np.ndarray
    x_b: np.ndarray
    own_a: np.ndarray
    own_b: np.ndarray
    n_a: float
    n_b: float
    d: np.ndarray
    low: np.ndarray
    high: np.ndarray
    alpha: float

    def explains(self, child: Path, node: Path) -> bool:
        """Whether ``child`` explains ``node``'s growth (see the module): the two parts' changes
        differ by more than the normal quantile at :data:`SPLIT_LEVEL` times the difference's
        standard error (two disjoint cells: variance ``(p_u + p_v - (p_u - p_v)**2) / n``)."""
        c, p = self.index[child], self.index[node]
        if self.d[c] < EXPLAINS * self.d[p]:
            return False
        others = [(float(self.d[self.index[s]]), self.x_a[self.index[s]],
                   self.x_b[self.index[s]]) for s in self.children.get(node, []) if s != child]
        others.append((float(self.own_b[p] / self.n_b - self.own_a[p] / self.n_a),
                       self.own_a[p], self.own_b[p]))  # node's own share
        rival, rival_a, rival_b = max(others, key=lambda other: other[0])
        variance = sum((u / n + v / n - (u / n - v / n) ** 2) / n
                       for u, v, n in ((self.x_a[c], rival_a, self.n_a),
                                       (self.x_b[c], rival_b, self.n_b)))
        z = float(norm.ppf(1 - (1 - SPLIT_LEVEL) / 2))
        return float(self.d[c]) - rival > z * math.sqrt(max(variance, 0.0))

    def walk(self, node: Path) -> Path:
        """From ``node`` down into the callee that explains its growth, as long as one does."""
        while True:
            best = max(self.children.get(node, []), key=lambda c: self.d[self.index[c]],
                       default=None)
            if best is None or not self.explains(best, node):
                return node
            node = best


def _compare(a: Folded, b: Folded, period_ns: float) -> _Compared:
    """:class:`_Compared` of ``a`` and ``b`` (samples of ``period_ns`` each)."""
    inc_a, own_a = _tree(a)
    inc_b, own_b = _tree(b)
    nodes = sorted(inc_a.keys() | inc_b.keys())
    alpha = (1 - LEVEL) / max(len(nodes), 1)
    n_a, n_b = a.total / period_ns, b.total / period_ns

    def counts(weights: dict[Path, float]) -> np.ndarray:
        return np.array([weights.get(node, 0.0) for node in nodes]) / period_ns

    x_a, x_b = counts(inc_a), counts(inc_b)
    d, low, high = share_intervals(x_a, n_a, x_b, n_b, alpha)
    children: dict[Path, list[Path]] = {}
    for node in nodes:
        if len(node) > 1:
            children.setdefault(node[:-1], []).append(node)
    return _Compared(nodes, {node: i for i, node in enumerate(nodes)}, children, x_a, x_b,
                     counts(own_a), counts(own_b), n_a, n_b, d, low, high, alpha)


def _own_part(tree: _Compared, node: Path) -> Part:
    """The part of ``node``'s growth on CPU in ``node`` itself (its self share's change)."""
    i = tree.index[node]
    d, low, high = share_intervals(tree.own_a[i:i + 1], tree.n_a, tree.own_b[i:i + 1],
                                   tree.n_b, tree.alpha)
    return Part(node, (), float(d[0] / tree.d[i]), 100 * float(d[0]), 100 * float(low[0]),
                100 * float(high[0]), itself=True)


def _callee_part(tree: _Compared, node: Path, callee: Path) -> Part:
    """``callee``'s part of ``node``'s growth, named as the deepest frame explaining it."""
    named = tree.walk(callee)
    i = tree.index[named]
    return Part(named, tuple(reversed(named[len(node):-1])),
                float(tree.d[i] / tree.d[tree.index[node]]), 100 * float(tree.d[i]),
                100 * float(tree.low[i]), 100 * float(tree.high[i]))


def _parts(tree: _Compared, node: Path, own: Part) -> tuple[tuple[Part, ...], int]:
    """The parts of a growth no single callee explains (see the module), and how many
    other callees grew beyond those; none where no callee grew, or where ``node``'s own share
    carries :data:`TOGETHER` of it."""
    growth = float(tree.d[tree.index[node]])
    grown = [c for c in tree.children.get(node, []) if tree.d[tree.index[c]] > 0]
    candidates: list[tuple[float, Path | Part]] = [
        (float(tree.d[tree.index[c]]) / growth, c) for c in grown]
    if own.points > 0:
        candidates.append((own.share, own))
    candidates.sort(key=lambda found: -found[0])
    if not grown or own.share >= TOGETHER:
        return (), 0
    parts: list[Part] = []
    carried = 0.0
    for share, found in candidates:
        if carried >= TOGETHER or len(parts) == LISTED:
            break
        carried += share
        parts.append(found if isinstance(found, Part) else _callee_part(tree, node, found))
    listed = {part.path for part in parts}
    return tuple(parts), sum(not any(path[:len(c)] == c for path in listed) for c in grown)


def profile_hint(a: Folded, b: Folded, period_ns: float,
                 cost: CostChange | None = None) -> Hint:
    """The hint of profiles ``a`` and ``b`` whose samples weigh ``period_ns`` each (see the
    module docstring); ``cost``: the DUT's CPU per unit of work, b against a, when known."""
    tree = _compare(a, b, period_ns)
    samples, frames = (tree.n_a, tree.n_b), len(tree.nodes)
    d, low, high = tree.d, tree.low, tree.high
    grown = {node: i for i, node in enumerate(tree.nodes) if low[i] > 0}
    if not grown:  # an A/A pair, or a change the sampling cannot see
        return Hint("noise", samples, frames, cost=cost)
    if cost is not None and cost.unchanged:  # shares moved, the CPU per unit of work did not
        return Hint("not_cpu", samples, frames, cost=cost)
    top = max(grown, key=lambda node: (d[grown[node]], len(node)))
    # the callee carrying most of the growth beyond noise (its own interval need not clear
    # zero: the growth is established above, the callee says where it went)
    current = tree.walk(top)
    i, t = tree.index[current], tree.index[top]
    own = _own_part(tree, current)
    parts, more = _parts(tree, current, own)
    # the interval shown is one that cleared the noise: the frame's own, or, where the frame
    # only carries most of an ancestor's growth, that ancestor's (named beside it)
    ours = low[i] > 0
    return Hint("frame", samples, frames, current, 100 * tree.x_a[i] / tree.n_a,
                100 * tree.x_b[i] / tree.n_b,
                100 * float(low[i if ours else t]), 100 * float(high[i if ours else t]),
                own=own.share >= EXPLAINS and not math.isclose(own.points, 0.0),
                cost=cost, grew=None if ours else top[-1],
                grew_points=0.0 if ours else 100 * float(d[t]), parts=parts, more=more)
