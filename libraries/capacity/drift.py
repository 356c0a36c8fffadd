"""Did the machine drift while a path's windows ran? The same rate judged differently early and
late in the test (issue 60).

A capacity test's windows of one path run over 10-20 minutes. A shared machine can change in
that time: on this VM, issue 52's held-out windows at the low end of a figure's interval
missed 2 of 3, 25 minutes after every window of that test's curve at higher rates had held.
The miss curve fitted over all the windows then describes neither machine, and a figure from
it would be stated as if the machine had not changed.

The test: the windows in the order they ran, the first half *early* and the second half
*late*; the miss curve of :mod:`libraries.capacity.misscurve` (a logistic regression of miss
on ln(rate), Firth's penalised likelihood) fitted with and without a term for the late half;
the penalised likelihood ratio against ``chi2(1)`` (Heinze and Schemper's test for Firth's
fit). A drift is stated when the ratio's p-value is at most :data:`DRIFT_ALPHA`, with how far
the late half's curve lies from the early half's (its rates as a factor of the early ones at
the same miss probability) and the windows that missed in each half.

It sees little, and says so. The plan places its windows where the curve crosses and follows
a drifting machine, so few windows of the two halves share a rate. Simulated
(:mod:`benchmarks.capacity_sim`, 100 tests a machine, 2026-11-29): a machine whose rates fell
to 0.8 x at a window drawn from the 4th to the 11th was stated in none of the tests, to
0.65 x in 10 %, to 0.7 x gradually in 4 %; 1.6 % of the steady tests (1,300, every curve) were
flagged. An exact conditional test of early against late windows within 5-20 % of each
other's rate, tried first on the same simulation (60-80 tests a machine), found 0-2 %, and 3
more windows at the figure, run last, 0-4 % (the safe end holds for the slowed machine too:
every figure of those drifting machines held the stated share for the machine as it was at
the end). What 13 binary windows
cannot show is not claimed: no statement means "no drift seen", never "no drift".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.stats import chi2

from libraries.capacity.misscurve import (
    ITERATIONS,
    MAX_STEP,
    MIN_EACH,
    MIN_WINDOWS,
    TOLERANCE,
    MissWindow,
)

DRIFT_ALPHA = 0.05
"""A drift is stated when the penalised likelihood ratio's p-value is at most this."""


def _sigmoid(value: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-np.clip(value, -60.0, 60.0)))


def _penalised(design: np.ndarray, y: np.ndarray, beta: np.ndarray) -> float:
    eta = design @ beta
    p = _sigmoid(eta)
    w = np.maximum(p * (1.0 - p), 1e-300)
    _sign, logdet = np.linalg.slogdet(design.T @ (w[:, None] * design))
    return float((y * eta - np.logaddexp(0.0, eta)).sum() + 0.5 * logdet)


def firth_design(design: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, float]:
    """Firth's penalised logistic fit of ``y`` (0/1) on the columns of ``design`` (the first
    a column of ones): the coefficients and the penalised log-likelihood at them. Newton
    steps on the modified score, each capped at :data:`~libraries.capacity.misscurve.MAX_STEP`
    and halved until the penalised likelihood does not fall, as
    :func:`~libraries.capacity.misscurve.firth_fit` does for two columns."""
    beta = np.zeros(design.shape[1])
    for _step in range(ITERATIONS):
        p = _sigmoid(design @ beta)
        w = np.maximum(p * (1.0 - p), 1e-12)
        inverse = np.linalg.pinv(design.T @ (w[:, None] * design))
        hat = w * np.einsum("ij,jk,ik->i", design, inverse, design)
        step = np.clip(inverse @ (design.T @ (y - p + hat * (0.5 - p))), -MAX_STEP, MAX_STEP)
        now = _penalised(design, y, beta)
        while _penalised(design, y, beta + step) < now - 1e-10 and np.abs(step).max() > 1e-10:
            step = step / 2.0
        beta = beta + step
        if np.abs(step).max() < TOLERANCE * (1.0 + np.abs(beta).max()):
            break
    return beta, _penalised(design, y, beta)


@dataclass(frozen=True)
class Drift:
    """What :func:`drift_test` found over one path's windows: the ``early`` and ``late``
    halves' (missed, windows), the penalised likelihood ratio's ``p_value`` (None: not tested,
    ``why`` says why), ``factor``: the late half's rates as a factor of the early half's at the
    same miss probability (under 1: the machine got slower), and ``alpha``."""

    early: tuple[int, int]
    late: tuple[int, int]
    p_value: float | None = None
    factor: float | None = None
    alpha: float = DRIFT_ALPHA
    why: str = ""

    @property
    def detected(self) -> bool:
        """The same rate was judged differently early and late, beyond chance."""
        return self.p_value is not None and self.p_value <= self.alpha

    @property
    def statement(self) -> str:
        """What a result says of it ('' when no drift was detected)."""
        if not self.detected:
            return ""
        assert self.p_value is not None
        where = ("" if self.factor is None else
                 f", its curve at {self.factor:.2f} x the first half's rates")
        more = "more" if self.factor is None or self.factor < 1.0 else "less"
        return (f"the machine drifted during the test: at the same rate the windows of its "
                f"second half missed {more} than those of its first{where} ({self.early[0]} of "
                f"{self.early[1]} early and {self.late[0]} of {self.late[1]} late windows "
                f"missed; penalised likelihood ratio test p = {self.p_value:.2g})")

    def as_record(self) -> dict[str, Any]:
        """The record's form (``evidence.capacity_confirmation.<path>.drift``)."""
        return {"method": "Firth logistic regression of miss on ln(rate) with and without a "
                          "term for the second half of the windows; penalised likelihood ratio",
                "early": {"missed": self.early[0], "windows": self.early[1]},
                "late": {"missed": self.late[0], "windows": self.late[1]},
                "p_value": self.p_value, "factor": self.factor, "alpha": self.alpha,
                "detected": self.detected, "why": self.why or None}


def drift_test(windows: Sequence[MissWindow], alpha: float = DRIFT_ALPHA) -> Drift:
    """Whether ``windows`` (in the order they ran) judged the same rate differently in their
    first and second half (module docstring)."""
    rates = np.array([w.rate for w in windows], float)
    missed = np.array([w.missed for w in windows], float)
    n = len(rates)
    late = np.arange(n) >= n / 2.0
    halves = ((int(missed[~late].sum()), int((~late).sum())),
              (int(missed[late].sum()), int(late.sum())))
    k = int(missed.sum())
    if n < MIN_WINDOWS or k < MIN_EACH or n - k < MIN_EACH:
        return Drift(*halves, alpha=alpha, why=f"{k} of {n} windows missed: too few for a "
                                               "curve in each half")
    x = np.log(rates / float(np.exp(np.log(rates).mean())))
    plain = np.column_stack([np.ones(n), x])
    _beta, steady = firth_design(plain, missed)
    beta, drifting = firth_design(np.column_stack([plain, late.astype(float)]), missed)
    if not np.all(np.isfinite(beta)) or not math.isfinite(steady):
        return Drift(*halves, alpha=alpha, why="the fit did not converge")
    p_value = float(chi2.sf(max(0.0, 2.0 * (drifting - steady)), 1))
    factor = math.exp(-beta[2] / beta[1]) if beta[1] > 0 else None
    return Drift(*halves, p_value=p_value, factor=factor, alpha=alpha)
