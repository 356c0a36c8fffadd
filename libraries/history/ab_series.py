"""How an A/B record becomes series of the history: its own test id per comparison file,
its ratio metric, and each side's own figures beside it."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any


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
    """An A/B test's per-round ratio (``ab_rps_ratio``): its ``stdev`` column holds the
    standard error of the test's ratio (the rounds' spread over the square root of their
    count), so the gate's jumpavg sees each night as the estimate it is; the rounds' own
    spread stays in ``low``/``high`` and ``trial_values``."""
    return unit == "ratio" and metric.startswith("ab_") and metric.endswith("_ratio")
