"""How an A/B record becomes series of the history: its own test id per comparison file,
its ratio metric, and each side's own figures beside it."""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Sequence
from functools import cache
from typing import Any

import numpy as np
from scipy.stats import norm


def ab_series_suffix(record: dict[str, Any]) -> str:
    """What keeps an A/B record's series apart: `` [A/B <comparison name> <sha256[:12]>]``
    after its test id (a plain run of the same test, and A/B runs of other comparison files or
    another version of the file, are other series), with `` files:<digest>`` before the ``]``
    when its sides name files (:func:`files_digest`: a binary replaced at the same path, or a
    library it loads upgraded, starts a new series); empty for a plain record."""
    ab = record.get("ab")
    if not isinstance(ab, dict):
        return ""
    comparison = ab.get("comparison") or {}
    digest = files_digest(ab.get("sides") or {})
    return (f" [A/B {comparison.get('name', '?')} {str(comparison.get('sha256', ''))[:12]}"
            + (f" files:{digest}" if digest else "") + "]")


def files_digest(sides: dict[str, Any]) -> str:
    """The first 12 hex digits of the sha256 over every side's ``files`` (``"node:path" ->
    sha256``, :mod:`libraries.ab.fingerprint`: the paths a side names and the libraries they
    load, alike), or ``""`` when no side has any. ``loaded_by`` (which entries are
    libraries) is not in it: a series is keyed by content, and a record from before
    libraries were keyed keeps its digest."""
    lines = sorted(f"{key} {path} {digest}" for key, side in sides.items()
                   if isinstance(side, dict)
                   for path, digest in (side.get("files") or {}).items())
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:12] if lines else ""


def files_text(record: dict[str, Any]) -> str:
    """An A/B record's sides' ``files`` as JSON text (sorted keys; ``""`` without any): the
    history's ``files`` column, from which the dashboard tells which file changed
    (``{"a": {"dut:/opt/ref/nginx": <sha256>, ...}}``), with ``"loaded_by"``: ``{"a": {<a
    library's key>: [<the named entries loading it>]}}`` when a side has libraries, so the
    dashboard can say a changed file is a library and which binary loads it."""
    sides = (record.get("ab") or {}).get("sides") or {}
    files: dict[str, Any] = {key: side["files"] for key, side in sides.items()
                             if isinstance(side, dict) and side.get("files")}
    loaded_by = {key: side["loaded_by"] for key, side in sides.items()
                 if isinstance(side, dict) and side.get("files") and side.get("loaded_by")}
    if loaded_by:
        files["loaded_by"] = loaded_by
    return json.dumps(files, sort_keys=True) if files else ""


SIDE_METRIC = re.compile(r" \[[ab]: [^\]]+\]$")
"""``rps [b: today]``: one side's own figure in an A/B record's series (shown, never gated)."""


def side_metrics(record: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Both sides' own figures of an A/B record's compared metrics, as ``(name, metric)``
    with the name ``<metric> [<side>: <side name>]`` (``rps [a: nginx-ref]``); none for a
    plain record or one whose sides carry no figures."""
    ab = record.get("ab")
    sides = (record.get("evidence") or {}).get("sides")
    if not isinstance(ab, dict) or not isinstance(sides, dict):
        return []
    names = {key: str(side.get("name", key)) for key, side in (ab.get("sides") or {}).items()
             if isinstance(side, dict)}
    found = []
    for key in ("a", "b"):
        metrics = (sides.get(key) or {}).get("metrics") or {}
        for metric in ab.get("metrics") or {}:
            figure = metrics.get(metric)
            if isinstance(figure, dict) and figure.get("trials"):
                found.append((f"{metric} [{key}: {names.get(key, key)}]", figure))
    return found


def is_side_metric(metric: str) -> bool:
    """Whether ``metric`` is one side's own figure of an A/B series (:func:`side_metrics`)."""
    return SIDE_METRIC.search(metric) is not None


def is_ratio_metric(metric: str, unit: str) -> bool:
    """An A/B test's per-round ratio (``ab_rps_ratio``): its ``value`` column holds the test's
    Hodges-Lehmann ratio and its ``stdev`` column that ratio's standard error
    (:func:`ratio_night`), so the gate sees each night as the estimate it is; the rounds' own
    spread stays in ``low``/``high`` and ``trial_values``."""
    return unit == "ratio" and metric.startswith("ab_") and metric.endswith("_ratio")


SE_LEVEL = 0.95
"""The level of the signed-rank interval whose half-width gives a ratio night's standard
error (:func:`ratio_night`)."""
EXACT_ROUNDS = 80
"""Up to this many rounds the signed-rank distribution is exact (as the A/B test's)."""


def ratio_night(trials: Sequence[float] | np.ndarray, value: float,
                stdev: float) -> tuple[float, float]:
    """An A/B ratio night as the history stores it (``value``, ``stdev``): the Hodges-Lehmann
    ratio of its per-round ratios, the estimate the test's message reports (the median of the
    Walsh averages of their logarithms, :func:`libraries.ab.rounds.ratio_interval`), and its
    standard error, estimated from the same method: the half-width, in logarithms, of the
    exact Wilcoxon signed-rank interval at about :data:`SE_LEVEL` (the widest one for fewer
    than 6 rounds) over the normal quantile of its actual coverage, times the ratio (the
    trend reads ``stdev / value`` as the standard error of the night's log ratio).

    Why not the median and the rounds' spread over their root count, as before: the message
    reports the Hodges-Lehmann ratio, and that spread is the *mean's* standard error, about
    20 % below a median's (the median's own is ``sqrt(pi / 2)`` times the mean's on normal
    noise). Simulated (2,000 nights at 2.4 % per-round spread, ``utest/test_history_night.py``):
    the mean standard error over the actual spread of the stored log ratio is 1.00 and 1.05
    on normal rounds (60, 20 rounds; 0.80 and 0.83 before) and 1.02 on t rounds with 3
    degrees of freedom (1.22 before). A record of any version is read alike (from its
    ``trials``); ratios that are not all positive and finite, or a single round, keep the
    recorded ``value`` with ``stdev`` over the root count (0 for one round)."""
    try:
        ratios = np.asarray(trials, dtype=float)
    except (TypeError, ValueError):
        ratios = np.array([np.nan])
    if ratios.size < 2 or not np.all(np.isfinite(ratios) & (ratios > 0)):
        return value, stdev / math.sqrt(max(len(trials), 1))
    logs = np.log(ratios)
    walsh = np.sort((logs[:, None] + logs[None, :])[_pairs(logs.size)] / 2.0)
    ratio = math.exp((walsh[(walsh.size - 1) // 2] + walsh[walsh.size // 2]) / 2.0)
    k, z = _signed_rank_k(logs.size)
    return ratio, ratio * float(walsh[-k] - walsh[k - 1]) / (2.0 * z)


@cache
def _pairs(n: int) -> tuple[np.ndarray, np.ndarray]:
    """The indexes of the Walsh averages of ``n`` values (every pair ``i <= j``)."""
    return np.triu_indices(n)


@cache
def _signed_rank_k(n: int) -> tuple[int, float]:
    """The rank ``k`` of the signed-rank interval ``[W(k), W(N + 1 - k)]`` of ``n`` rounds'
    Walsh averages at :data:`SE_LEVEL` (at least 1) and the normal quantile of its coverage
    (exact up to :data:`EXACT_ROUNDS`, normal beyond)."""
    alpha = 1.0 - SE_LEVEL
    if n > EXACT_ROUNDS:
        mean, sd = n * (n + 1) / 4, math.sqrt(n * (n + 1) * (2 * n + 1) / 24)
        k = max(1, math.floor(mean - float(norm.ppf(1 - alpha / 2)) * sd))
        below = float(norm.cdf((k - 0.5 - mean) / sd))
    else:
        counts = np.zeros(n * (n + 1) // 2 + 1)
        counts[0] = 1.0
        for rank in range(1, n + 1):
            counts[rank:] = counts[rank:] + counts[:-rank].copy()
        cdf = np.cumsum(counts) / 2.0 ** n
        found = np.nonzero(cdf <= alpha / 2)[0]
        k = int(found[-1]) + 1 if found.size else 1
        below = float(cdf[k - 1])
    return k, float(norm.ppf(1.0 - below))  # coverage 1 - 2 * below
