"""What the trend dashboard draws beside a series' samples: the criterion that judges it today
and each sample's verdict.

* **The criterion**: the bounds of the criteria file (``topologies/criteria.yaml`` unless the
  caller loads another) that judge the series' metric on its median, for the newest sample's
  case, stack, parameters and topology (:meth:`~libraries.results.criteria.Criterion.applies`):
  a floor or ceiling drawn as a dashed line across the chart. The file as it is *now*: a
  sample judged against an older bound may sit on the other side of the line.
  Correctness checks (judged per trial: ``errors``) are not drawn.
* **Each sample's verdict** (``pass``, ``fail``, ``inconclusive``...), so that the page colours
  a failed run's sample apart from a passing one.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import pandas as pd

from libraries.results.criteria import CriteriaError, CriteriaFile, load_criteria
from libraries.results.headline import figure
from libraries.trend.analysis import SeriesTrend

LOG = logging.getLogger(__name__)
VERDICT_CODES = {"fail": "f", "inconclusive": "i"}
"""A sample's verdict as the page's script reads it (any other: ``""``, drawn as a pass)."""


def default_criteria() -> CriteriaFile | None:
    """The project's criteria file, or None (logged) when it cannot be read: the dashboard is
    drawn without criterion lines rather than not at all."""
    try:
        return load_criteria()
    except CriteriaError as error:
        LOG.warning("criterion lines left out of the dashboard: %s", error)
        return None


def _facts(trend: SeriesTrend) -> tuple[str, str, dict[str, Any], str] | None:
    rows = trend.samples
    if rows.empty or not {"case", "stack", "topology"} <= set(rows.columns):
        return None
    last = rows.iloc[-1]
    try:
        parameters = json.loads(last.get("parameters") or "{}")
    except (TypeError, ValueError):
        parameters = {}
    return str(last["case"]), str(last["stack"]), parameters or {}, str(last["topology"])


def series_bounds(trend: SeriesTrend, criteria: CriteriaFile | None) -> list[dict[str, Any]]:
    """``[{"y": bound, "text": "throughput ≥ 4"}]``: the criteria judging ``trend``'s median."""
    facts = _facts(trend) if criteria is not None else None
    if facts is None or criteria is None:
        return []
    found = []
    for c in criteria.criteria:
        if c.metric != trend.metric or c.per_trial or not c.applies(*facts):
            continue
        bound, sign = (c.min, "≥") if c.min is not None else (c.max, "≤")
        found.append({"y": bound, "text": f"{c.metric} {sign} {figure(float(bound))}"})
    return found


def verdict_codes(rows: pd.DataFrame) -> list[str]:
    """Each sample's verdict code (:data:`VERDICT_CODES`), oldest first."""
    if "verdict" not in rows.columns:
        return [""] * len(rows)
    return [VERDICT_CODES.get(str(v), "") for v in rows["verdict"].tolist()]
