"""The miss curve of a path: the chance that a whole window (30 s by default) misses the latency
goal, as a function of the rate, fitted over every window of that length a test measured.

A window *missed* when it lost more than the goal's loss ratio (``p99 <= 25 ms``: over 1 % of
its scheduled requests failed, unsent or later than 25 ms). The model is a logistic regression
of miss (0/1) on ``ln(rate)``, fitted by Firth's penalised likelihood (Jeffreys prior): the
plain maximum-likelihood fit has no finite answer when the windows separate perfectly (every
one under some rate held, every one above missed), which a dozen windows often do; Firth's
always has one, shrunk toward a gentler slope. The *crossing* is the rate at which the fitted
miss probability equals the stated ``share`` (10 % by default); the *figure* is the safe end of
its interval, the lowest crossing the windows leave plausible: a one-sided ``(1 + level) / 2``
(95 %) lower confidence bound. "p99 <= 25 ms missed in <= 10 % of 30 s windows at 4.6k req/s
(95 % confidence; the 10 % crossing 5.1k [4.6k, 5.5k])".

Why the safe end and not the crossing (issue 60): the crossing is an estimate, and at it a
window misses more than the share about as often as less; a curve the model does not describe
(a share of windows that miss at any rate, a machine slow part of the time) put it higher
still. Simulated (:mod:`benchmarks.capacity_sim`, the suite's windows, 100 tests a curve,
2026-11-29), the true miss share at the crossing was within the stated 10 % in 69-89 % of the
tests with a figure on curves with no floor, 16-68 % with a 3-8 % floor and 43-46 % on a
machine slow 20 % of the time at 0.7 x its rate; at the safe end in 98-100 % on every one of
them, the price a figure at 0.47-0.58 of the true crossing (median: what 12 windows can
prove). The guarantee is the model's: with 20 planned windows (``CAPACITY_WINDOWS``) the
interval narrows about a curve the logistic does not describe, and the safe end held in 91 %
(a 5 % floor) and 88 % (the machine slow part of the time) of the tests (benchmarks/README.md).

The interval is the profile penalised-likelihood interval of that rate (the interval Heinze
and Schemper recommend with Firth's fit): the curve is written as ``logit(share) + slope x
(ln(rate) - ln(crossing))`` and every crossing whose best slope keeps the penalised
log-likelihood within ``chi2(1, level) / 2`` of its maximum is in it, found on a grid (a rate
step of about 0.5 %). The interval of the miss probability at the figure (what separate
windows there should find) is the same region's image. Why not a bootstrap: in simulation
(windows placed as :mod:`libraries.capacity.confirm` places them, 16 a path, a logistic curve
rising from 10 % to 90 % over 30 % and over 15 % of rate, 100 draws each) a parametric
bootstrap of the same fit covered the true rate in 73 and 63 draws at 90 %, this interval in
91 and 94 (93 and 91 at 12 windows); resampling whole windows covered less than the parametric
bootstrap (a dozen windows resampled are often all held or perfectly separated).

No figure is made up. The fit is refused, with the reason, when there are fewer than
:data:`MIN_WINDOWS` windows, when fewer than :data:`MIN_EACH` windows missed or held (all held:
the crossing is above the rates measured; all missed: below), when the fitted curve does not
rise with rate, when the crossing lies outside the rates measured (an extrapolation), or when
the interval reaches the edge of its grid (half a natural log beyond the rates measured:
unbounded), and when the windows at or below the figure refute it: with the miss share
rising with rate, every window at or below a rate misses at most as often as one at it, so
``k`` of ``n`` such windows missing where ``Binomial(n, share)`` makes ``k`` or more unlikely
(an exact test at ``(1 - level) / 2``) proves that no rate from the figure up meets the share,
and the refusal says so with the Clopper-Pearson lower bound of the share there ("misses at
least F % at every rate from X up"): a floor of misses the logistic cannot show. The caller
(:mod:`libraries.capacity.confirm`) adds windows where the fit lacks them, within its bound,
and otherwise reports the figure unavailable with that reason.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from scipy.stats import beta, binom, chi2

MIN_WINDOWS = 6
"""Fewest windows a curve is fitted over (two parameters, and a crossing between held and
missed windows)."""
MIN_EACH = 2
"""Fewest windows that missed, and fewest that held: one of either is no crossing to locate."""
ITERATIONS = 100
"""Newton steps of the penalised fit at most (each halved until the penalised likelihood does
not fall)."""
MAX_STEP = 4.0
"""Largest change of either coefficient in one Newton step."""
TOLERANCE = 1e-8
"""The fit has converged when no coefficient moves by more than this share of the largest
(plus this much): at a steep slope the penalised likelihood's maximum is flat to rounding, and
an absolute bound let the steps creep on for ever (simulated separated windows, 4-5 % of tests
with a curve rising over 15-30 % of rate: a slope of 22.5 moving 3e-8 a step)."""
CROSSINGS = 301
"""Grid points of ln(crossing) for the profile, over the rates measured and :data:`BEYOND`
either side."""
BEYOND = 0.5
"""...that far (natural log) below the lowest and above the highest rate measured."""
SLOPES = np.geomspace(0.05, 1000.0, 200)
"""Slopes (per natural log of rate) the profile maximises over: from 10 % to 90 % over 88
times the rate down to 0.4 % of it."""


@dataclass(frozen=True)
class MissWindow:
    """One whole window of the path at ``rate`` requests/s, ``seconds`` long: the share of its
    requests ``lost`` for the goal's limit, whether it ``missed`` the goal, and what ran it
    (``kind``: ``plan`` (placed to locate the crossing), ``verification``, ``challenge`` (run
    where other evidence disagreed), ``latency pass``)."""

    rate: float
    seconds: float
    lost: float
    missed: bool
    kind: str = "plan"

    def as_record(self) -> dict[str, Any]:
        """The record's form."""
        return {"rate": self.rate, "duration_s": self.seconds, "loss_ratio": self.lost,
                "missed": self.missed, "kind": self.kind}


@dataclass(frozen=True)
class MissCurve:
    """What :func:`fit_miss_curve` found: the ``rate`` (requests/s) where a window misses with
    probability ``share`` and its ``level`` interval ``low``..``high`` (None each, with
    ``why``, when the fit was refused), the interval ``share_low``..``share_high`` of
    the miss probability at the figure, ``low`` (what separate windows there should find; its
    upper end is ``share``: no plausible curve crosses below the figure), the
    coefficients (``intercept`` + ``slope`` x ln(rate / ``scale``)), the windows counted
    (``windows``, ``missed``) and the rates they span."""

    share: float
    level: float
    seconds: float
    windows: int
    missed: int
    span: tuple[float, float]
    rate: float | None = None
    low: float | None = None
    high: float | None = None
    share_low: float | None = None
    share_high: float | None = None
    intercept: float | None = None
    slope: float | None = None
    scale: float = 1.0
    why: str = ""

    @property
    def fitted(self) -> bool:
        """A figure and its interval stand."""
        return self.rate is not None

    @property
    def figure(self) -> float | None:
        """The figure claimed: the interval's safe end, where a window misses with
        probability at most ``share`` at :attr:`confidence` (None without a fit)."""
        return self.low

    @property
    def confidence(self) -> float:
        """The one-sided confidence of :attr:`figure`: each end of a ``level`` interval."""
        return (1.0 + self.level) / 2.0

    def miss_probability(self, rate: float) -> float | None:
        """The fitted chance that a window at ``rate`` misses (None without a fit)."""
        if self.intercept is None or self.slope is None:
            return None
        return _sigmoid(self.intercept + self.slope * math.log(rate / self.scale))

    def as_record(self) -> dict[str, Any]:
        """The record's form (``evidence.capacity_confirmation.<path>.model``)."""
        return {"method": "logistic regression of miss on ln(rate), Firth's penalised "
                          "likelihood; profile penalised-likelihood interval",
                "share": self.share, "level": self.level, "duration_s": self.seconds,
                "windows": self.windows, "missed": self.missed, "span": list(self.span),
                "rate": self.rate, "low": self.low, "high": self.high,
                "figure": self.figure, "confidence": self.confidence,
                "share_at_figure": [self.share_low, self.share_high],
                "intercept": self.intercept, "slope": self.slope, "scale": self.scale,
                "why": self.why or None}


def _sigmoid(value: Any) -> Any:
    return 1.0 / (1.0 + np.exp(-np.clip(value, -60.0, 60.0)))


def _penalised(x: np.ndarray, y: np.ndarray, eta: np.ndarray) -> np.ndarray:
    """Firth's penalised log-likelihood of linear predictors ``eta`` (last axis: the windows):
    the log-likelihood plus half the log-determinant of the Fisher information."""
    w = np.maximum(_sigmoid(eta) * (1.0 - _sigmoid(eta)), 1e-300)
    s0, s1, s2 = w.sum(-1), (w * x).sum(-1), (w * x * x).sum(-1)
    return (y * eta - np.logaddexp(0.0, eta)).sum(-1) + \
        0.5 * np.log(np.maximum(s0 * s2 - s1 * s1, 1e-300))


def firth_fit(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """The Firth-penalised logistic fit of ``y`` (0/1) on ``x``: intercept and slope (NaN each
    when it did not converge). Newton steps on the modified score ``X'(y - p + h (1/2 - p))``
    with the Fisher information ``X'WX`` (h: the hat values), each capped at :data:`MAX_STEP`
    and halved until the penalised likelihood does not fall."""
    beta = np.zeros(2)
    for _step in range(ITERATIONS):
        p = _sigmoid(beta[0] + beta[1] * x)
        w = np.maximum(p * (1.0 - p), 1e-12)
        s0, s1, s2 = w.sum(), (w * x).sum(), (w * x * x).sum()
        det = max(s0 * s2 - s1 * s1, 1e-300)
        i00, i01, i11 = s2 / det, -s1 / det, s0 / det
        hat = w * (i00 + 2 * i01 * x + i11 * x * x)
        residual = y - p + hat * (0.5 - p)
        u0, u1 = residual.sum(), (residual * x).sum()
        step = np.clip([i00 * u0 + i01 * u1, i01 * u0 + i11 * u1], -MAX_STEP, MAX_STEP)
        now = _penalised(x, y, beta[0] + beta[1] * x)
        while _penalised(x, y, (beta[0] + step[0]) + (beta[1] + step[1]) * x) < now - 1e-10 \
                and np.abs(step).max() > 1e-10:
            step = step / 2.0
        beta = beta + step
        if np.abs(step).max() < TOLERANCE * (1.0 + np.abs(beta).max()):
            return float(beta[0]), float(beta[1])
    return math.nan, math.nan


def _refusal(rates: np.ndarray, missed: np.ndarray, seconds: float) -> str:
    n, k = len(rates), int(missed.sum())
    if n < MIN_WINDOWS:
        return f"only {n} windows of {seconds:g} s (at least {MIN_WINDOWS} needed)"
    if k == 0:
        return (f"all {n} windows of {seconds:g} s held (up to {rates.max():.0f} requests/s): "
                "the crossing is above the rates measured")
    if k == n:
        return (f"all {n} windows of {seconds:g} s missed (down to {rates.min():.0f} "
                "requests/s): the crossing is below the rates measured")
    if k < MIN_EACH or n - k < MIN_EACH:
        return (f"{k} of {n} windows of {seconds:g} s missed: at least {MIN_EACH} that "
                f"missed and {MIN_EACH} that held are needed around the crossing")
    return ""


def _profile(x: np.ndarray, y: np.ndarray, target: float,
             level: float) -> tuple[float, float, float, float, bool]:
    """The profile interval of ln(crossing) (grid of :data:`CROSSINGS` x :data:`SLOPES`), the
    interval of the miss probability at its low end (the figure) over the same region, and
    whether the crossing's interval stays inside the grid."""
    crossings = np.linspace(x.min() - BEYOND, x.max() + BEYOND, CROSSINGS)
    eta = SLOPES[None, :, None] * (x[None, None, :] - crossings[:, None, None]) + target
    penalised = _penalised(x, y, eta)
    inside = 2.0 * (penalised.max() - penalised) <= chi2.ppf(level, 1)
    cross = np.broadcast_to(crossings[:, None], inside.shape)[inside]
    at = cross.min()
    share = _sigmoid(SLOPES[None, :] * (at - crossings[:, None]) + target)[inside]
    bounded = cross.min() > crossings[0] and cross.max() < crossings[-1]
    return float(cross.min()), float(cross.max()), float(share.min()), float(share.max()), \
        bool(bounded)


def fit_miss_curve(windows: Sequence[MissWindow], share: float = 0.1,
                   level: float = 0.9) -> MissCurve:
    """The miss curve of ``windows`` (all of one length) and the rate where a window misses
    with probability ``share``, with its ``level`` interval (module docstring). ``ValueError``
    when the windows mix lengths or ``share``/``level`` are not fractions."""
    if not 0.0 < share < 0.5 or not 0.0 < level < 1.0:
        raise ValueError(f"miss curve: expected a share in (0, 0.5) and a level in (0, 1), got "
                         f"{share!r} and {level!r}")
    lengths = {w.seconds for w in windows}
    if len(lengths) > 1:
        raise ValueError(f"miss curve: windows of one length only, got {sorted(lengths)} s")
    rates = np.array([w.rate for w in windows], float)
    missed = np.array([w.missed for w in windows], float)
    seconds = next(iter(lengths), 0.0)
    base = MissCurve(share, level, seconds, len(rates), int(missed.sum()),
                     (float(rates.min()), float(rates.max())) if len(rates) else (0.0, 0.0))
    why = _refusal(rates, missed, seconds)
    if why:
        return replace(base, why=why)
    scale = float(np.exp(np.log(rates).mean()))
    x = np.log(rates / scale)
    target = math.log(share / (1.0 - share))
    b0, b1 = firth_fit(x, missed)
    if not (math.isfinite(b0) and math.isfinite(b1)):  # no coefficients: None, never NaN
        return replace(base, scale=scale, why=(
            f"the miss curve cannot be fitted from the {len(rates)} windows "
            f"({int(missed.sum())} missed, {rates.min():.0f}..{rates.max():.0f} requests/s): "
            "the fit did not converge"))
    fit = replace(base, intercept=b0, slope=b1, scale=scale)
    if b1 <= 0:
        return replace(fit, why=f"the miss share does not rise with rate over the "
                                f"{len(rates)} windows ({int(missed.sum())} missed)")
    rate = scale * math.exp((target - b0) / b1)
    if not rates.min() <= rate <= rates.max():
        return replace(fit, why=f"the fitted crossing ({rate:.0f} requests/s) lies outside the "
                                f"rates measured ({rates.min():.0f}..{rates.max():.0f}): an "
                                "extrapolation")
    low, high, share_low, share_high, bounded = _profile(x, missed, target, level)
    safe = scale * math.exp(low)
    why = (f"the {level:.0%} interval of the crossing reaches beyond {math.exp(BEYOND):.2f} "
           "times the rates measured: unbounded" if not bounded
           else floor_refutes(rates, missed, safe, share, (1.0 - level) / 2.0))
    if why:
        return replace(fit, why=why)
    return replace(fit, rate=rate, low=safe, high=scale * math.exp(high),
                   share_low=share_low, share_high=share_high)


def floor_refutes(rates: np.ndarray, missed: np.ndarray, figure: float, share: float,
                  alpha: float) -> str:
    """Why the windows at or below ``figure`` refute that a window misses there with
    probability at most ``share`` ('' when they do not): an exact binomial test at ``alpha``
    (the miss share rising with rate, each of them misses at most as often as one at
    ``figure``), with the Clopper-Pearson lower bound at ``1 - alpha`` of the share from there
    up."""
    below = rates <= figure * (1.0 + 1e-9)
    n, k = int(below.sum()), int(missed[below].sum())
    if k == 0:
        return ""
    p_value = float(binom.sf(k - 1, n, share))
    if p_value > alpha:
        return ""
    least = float(beta.ppf(alpha, k, n - k + 1))
    return (f"no rate from {figure:.0f} requests/s up meets <= {share:.0%}: {k} of {n} windows "
            f"at or below it missed (exact binomial p = {p_value:.2g} against {share:.0%}): a "
            f"window misses in at least {least:.0%} at every rate from there up "
            f"({1.0 - alpha:.0%} confidence)")


def point_crossing(windows: Sequence[MissWindow], share: float) -> float | None:
    """The rate where the Firth fit of ``windows`` crosses ``share`` (no interval, no refusal
    but a curve that does not rise: None); where the next window goes."""
    rates = np.array([w.rate for w in windows], float)
    missed = np.array([w.missed for w in windows], float)
    if len(rates) < 2:
        return None
    scale = float(np.exp(np.log(rates).mean()))
    b0, b1 = firth_fit(np.log(rates / scale), missed)
    if not math.isfinite(b1) or b1 <= 0:
        return None
    return scale * math.exp((math.log(share / (1.0 - share)) - b0) / b1)
