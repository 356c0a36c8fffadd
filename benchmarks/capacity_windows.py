"""What the capacity tests' whole-window trials say about the suite's rule (issues 35 and 52).

Every confirmation trial and every verification run of a capacity test is one window (30 s by
default) at a known share of the path's knee (MLRsearch's figure), judged over all its
requests. Pooled over the records of ``capacity_bench``, they estimate, per share of the knee,
how often such a window misses: the confirmation's bar (more than
:data:`~libraries.capacity.confirm.HOLD` of the goal's loss ratio lost) and the goal itself
(the verification's bar). That curve decides what any confirmation rule can give: where the
share of windows that miss rises slowly over a wide band of rates, the rate at which a rule
first sees a window hold is drawn from that band, and a figure whose verification holds 5 of
5 times must sit where misses are rare, a point that takes tens of windows per rate to
locate.

:func:`resample` runs the suite's own rule (:func:`libraries.capacity.confirm.
confirm_capacity`: since issue 52 the miss curve's rate, windows placed around its crossing)
on windows drawn from the pools, five tests to a set as
``capacity_bench`` runs five tests, and reports how often a set's figures lie within +-5 % of
their median and how often all five verifications hold, the knee held fixed (its own scatter
comes on top). The windows of a share bin are treated as exchangeable: a rule run on a day
quieter or busier than the recorded ones sees other pools.
"""

from __future__ import annotations

import random
import statistics
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from scipy.stats import binomtest

from libraries.capacity.confirm import HOLD, confirm_capacity
from libraries.capacity.search_settings import LatencyGoal, parse_goals
from libraries.capacity.trials import CapacityTrial

BIN = 0.1
"""Windows are pooled by their rate's share of the knee in bins this wide."""
KNEE = 10000.0
"""The knee the resampled confirmations start from (the figures are read as shares of it)."""
LOW = 0.1
"""...and the lowest rate they may try, as a share of it."""


@dataclass(frozen=True)
class Window:
    """One whole-window trial: its rate as a ``share`` of the path's knee, the share of its
    requests ``lost`` for the goal's limit, the ``goal``, its length and ``kind``
    (``confirmation`` or ``verification``)."""

    share: float
    lost: float
    goal: LatencyGoal
    seconds: float
    kind: str

    @property
    def bin(self) -> float:
        """The share bin this window is pooled in (its lower edge)."""
        return round(int(self.share / BIN + 1e-9) * BIN, 6)


def windows(records: Iterable[dict[str, Any]], variant: str = "proxy") -> list[Window]:
    """The whole-window trials of ``variant`` in capacity records (confirmation trials and the
    verification run), each as a share of its own test's knee."""
    found: list[Window] = []
    for record in records:
        evidence = record.get("evidence") or {}
        confirmation = (evidence.get("capacity_confirmation") or {}).get(variant)
        if not confirmation or not confirmation.get("knee"):
            continue
        goal = parse_goals(confirmation["goal"], "capacity_confirmation.goal")[0]
        knee = float(confirmation["knee"])
        trials = [(t, "confirmation") for t in confirmation["trials"]]
        verification = (evidence.get("capacity_verification") or {}).get(variant)
        if verification:
            trials.append((verification, "verification"))
        found += [Window(t["rate"] / knee, t["loss_ratio"], goal, t["duration_s"], kind)
                  for t, kind in trials]
    return found


def _bins(pool: list[Window]) -> dict[float, list[Window]]:
    bins: dict[float, list[Window]] = defaultdict(list)
    for window in pool:
        bins[window.bin].append(window)
    return bins


def _interval(misses: int, count: int) -> str:
    low, high = binomtest(misses, count).proportion_ci(0.9)
    return f"{misses}/{count} ({low:.0%}-{high:.0%})"


def table(pool: list[Window]) -> str:
    """Per share bin: the windows, how many missed the confirmation's bar and the goal (with
    a 90 % Clopper-Pearson interval of the share), and their losses."""
    lines = ["| share of the knee | windows | missed the confirmation's bar (90 % interval) | "
             "missed the goal (90 % interval) | loss: median, max |", "|---|---|---|---|---|"]
    bins = _bins(pool)
    for edge in sorted(bins):
        group = bins[edge]
        over_bar = sum(w.lost > HOLD * w.goal.loss_ratio for w in group)
        over_goal = sum(w.lost > w.goal.loss_ratio for w in group)
        losses = [w.lost for w in group]
        lines.append(f"| {edge:.1f}-{edge + BIN:.1f} | {len(group)} | "
                     f"{_interval(over_bar, len(group))} | {_interval(over_goal, len(group))} | "
                     f"{statistics.median(losses):.2%}, {max(losses):.2%} |")
    return "\n".join(lines) + "\n"


def _trial(rate: float, seconds: float, window: Window) -> CapacityTrial:
    intended = max(1, round(rate * seconds))
    return CapacityTrial(rate=rate, duration=seconds, ran_s=seconds, intended=intended,
                         sent=intended, failed=0,
                         over={window.goal.limit_ms: round(window.lost * intended)},
                         achieved=rate, latency={}, generator_cpu=None, tool="resampled",
                         processes=1, seconds=seconds)


@dataclass(frozen=True)
class Resampled:
    """What :func:`resample` found: the sets drawn, the share of them whose five figures lay
    within +-5 % of their median, the share whose five verifications all held, and the
    figures' 10th and 90th percentiles as shares of the knee."""

    sets: int
    within: float
    verified: float
    p10: float
    p90: float

    def line(self) -> str:
        """One line for the benchmark's report."""
        return (f"the suite's rule (the miss curve) resampled, {self.sets} sets of 5: figures "
                f"within +-5 % of their median in {self.within:.1%} of the sets, all 5 "
                f"verifications held in {self.verified:.1%}, figures {self.p10:.2f}-"
                f"{self.p90:.2f} of the knee (10th-90th percentile; the knee's own scatter "
                "comes on top)")


def resample(pool: list[Window], sets: int = 100, seed: int = 35) -> Resampled:
    """Run :func:`~libraries.capacity.confirm.confirm_capacity` on windows drawn from
    ``pool`` (a rate draws from its share bin, else from the nearest bin that has windows),
    five confirmations to a set, and one verification window at each figure judged against
    the goal. ``ValueError`` when ``pool`` is empty or mixes goals or window lengths."""
    if not pool:
        raise ValueError("no whole-window trials in the records (a capacity test with "
                         "CAPACITY_CONFIRM and CAPACITY_VERIFY records them)")
    if len({(w.goal, w.seconds) for w in pool}) > 1:
        raise ValueError("the windows mix goals or lengths: "
                         f"{sorted({(w.goal.name, w.seconds) for w in pool})}")
    goal, seconds = pool[0].goal, pool[0].seconds
    bins = _bins(pool)
    rng = random.Random(seed)  # noqa: S311 (resampling, not secrets)

    def draw(rate: float) -> Window:
        edge = Window(rate / KNEE, 0.0, goal, seconds, "").bin
        nearest = min(bins, key=lambda b: (abs(b - edge), -b))
        return rng.choice(bins[nearest])

    def measure(_path: str, length: float, rate: float) -> CapacityTrial:
        return _trial(rate, length, draw(rate))

    within = verified = 0
    figures: list[float] = []
    for _set in range(sets):
        rates = [confirm_capacity(measure, "proxy", KNEE, goal, seconds, LOW * KNEE).rate
                 for _test in range(5)]
        held = [r for r in rates if r is not None]
        figures += [r / KNEE for r in held]
        if len(held) == 5:
            middle = statistics.median(held)
            within += max(abs(r - middle) for r in held) <= 0.05 * middle
            verified += all(draw(r).lost <= goal.loss_ratio for r in held)
    deciles = statistics.quantiles(figures, n=10) if len(figures) > 1 else [float("nan")] * 9
    return Resampled(sets, within / sets, verified / sets, deciles[0], deciles[-1])
