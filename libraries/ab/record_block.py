"""An A/B test's record block and message, from the comparison file, the versions of each
side's binaries and what :func:`libraries.ab.rounds.measure_ab` measured."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from libraries.ab.comparison import ComparisonFile
from libraries.ab.fingerprint import SideFiles
from libraries.ab.rounds import AbOutcome, MetricComparison, resolution
from libraries.results.cost import cost_phrase, foreign_message
from libraries.results.measurement import Measurement
from libraries.results.plan import AbSettings

Versions = dict[str, dict[str, dict[str, str]]]


def ab_block(loaded: ComparisonFile, versions: Versions, settings: AbSettings,
             outcome: AbOutcome, files: dict[str, SideFiles] | None = None,
             metrics: Mapping[str, str] | None = None, costs: frozenset[str] = frozenset()
             ) -> dict[str, Any]:
    """The record's ``ab`` block: the file (path, sha256, text), both sides (name, what they
    change, their binaries' versions, the sha256 of the ``files`` they name and of the
    libraries those load, ``loaded_by`` telling the libraries apart:
    :mod:`libraries.ab.fingerprint`; the CPU other processes took on the DUT's cores during
    the side's trials, ``foreign_load``), per metric the per-round ratios, interval, verdict
    and its share of ``ALPHA`` (``metrics``: every metric asked for, judged or not; the
    ``costs`` among them that a side could not give are ``unjudged``, with why), the worst
    verdict, the rounds and looks, and the cost of switching sides."""
    files = files or {}
    switches = outcome.switches
    sides = {"a": loaded.comparison.a, "b": loaded.comparison.b}
    asked = list(metrics) if metrics is not None else list(outcome.comparisons)
    share = settings.alpha / max(1, len(asked))
    unjudged = {m: _why_unjudged(outcome, m) for m in asked
                if m in costs and m not in outcome.comparisons}
    return {
        "comparison": {"path": loaded.path, "sha256": loaded.sha256, "text": loaded.text,
                       "name": loaded.title, "aa": loaded.comparison.aa},
        "sides": {key: {"name": side.name, "changes": side.changes(),
                        "versions": versions.get(key, {}),
                        **(files[key].record() if key in files else {}),
                        **_foreign(outcome, key)}
                  for key, side in sides.items()},
        "metrics": {m: {**_metric_record(c, settings.margin), "alpha": share,
                        **({"cost": True} if m in costs else {})}
                    for m, c in outcome.comparisons.items()},
        **({"unjudged": unjudged} if unjudged else {}),
        "verdict": worst([c.verdict for c in outcome.comparisons.values()]),
        "rounds": {"run": outcome.rounds, "looks": outcome.looks,
                   "planned_looks": list(settings.looks), "alpha": settings.alpha,
                   "alpha_per_look": settings.alpha_per_look, "margin": settings.margin,
                   "scatter": settings.scatter,
                   "max_rounds": settings.max_rounds, "budget_s": settings.budget_s,
                   "on_inconclusive": settings.inconclusive,
                   "stopped": outcome.stopped, "order": outcome.order,
                   "order_seed": outcome.seed,
                   "seconds": outcome.seconds},
        "switch": {"count": len(switches), "median_s": _median(switches),
                   "total_s": sum(switches), "each_s": switches},
    }


def ab_message(loaded: ComparisonFile, versions: Versions, settings: AbSettings,
               outcome: AbOutcome, costs: frozenset[str] = frozenset(),
               duet: bool = False) -> str:
    """``A/B nginx-1.26 4.1 % slower than debian-nginx on rps [-5.9, -2.2] after 24 rounds
    (nginx-1.26: nginx 1.26.3; debian-nginx: nginx 1.22.1)``; a cost says what it costs:
    ``nginx-1.26 costs 7.7 % more CPU per request than debian-nginx (cost [+5.1, +10.2])``;
    an undecided or worse rate beside a large foreign load says who took the cores, and, one
    side after the other (not a ``duet``), what to run instead: the two sides of a round meet
    different load then, and the CPU each request costs rises with it (benchmarks/README.md,
    issue 61), while a duet's sides share it."""
    a, b = loaded.comparison.a.name, loaded.comparison.b.name
    parts = []
    for metric, c in outcome.comparisons.items():
        change = (c.interval.change - 1) * 100
        if metric in costs:
            parts.append(_cost_part(metric, c, a, b, _unit(outcome, metric), settings.margin))
            continue
        if c.verdict in ("regression", "progression"):
            up = change > 0
            word = ("faster" if up else "slower") if c.direction != "lower_is_better" else \
                ("higher" if up else "lower")
            shown = c.describe()
            parts.append(f"{b} {abs(change):.1f} % {word} than {a} on {metric}"
                         f"{shown[shown.index(' ['):] if ' [' in shown else ''}")
        else:
            parts.append(f"{metric}: {c.verdict} ({c.describe()}, margin "
                         f"{settings.margin * 100:g} %{_told(c, settings.margin)})")
    for metric in sorted(costs - set(outcome.comparisons)):
        parts.append(f"{metric}: not judged ({_why_unjudged(outcome, metric)})")
    rates = [c.verdict for m, c in outcome.comparisons.items() if m not in costs]
    foreign = foreign_message({side: built.cost.get("foreign_load", {})
                               for side, built in outcome.sides.items() if built.cost})
    if foreign and any(v in ("inconclusive", "regression") for v in rates):
        parts.append(foreign if duet else f"{foreign} (a duet, hoststack-perf duet, runs "
                     "both sides at once: they share such load)")
    names = {"a": a, "b": b}
    shown_versions = "; ".join(
        f"{names[key]}: " + ", ".join(f"{tool} {v}" for node in found.values()
                                      for tool, v in node.items())
        for key, found in versions.items() if found)
    return (f"A/B {'; '.join(parts)} after {outcome.rounds} rounds"
            + (f" ({shown_versions})" if shown_versions else ""))


def _cost_part(metric: str, c: MetricComparison, a: str, b: str, unit: str,
               margin: float) -> str:
    """One cost's words: ``b costs 7.7 % more CPU per request than a (cost [+5.1, +10.2])``
    when it moved; its verdict and interval otherwise."""
    phrase = cost_phrase(unit)
    shown = c.describe()
    if c.verdict in ("regression", "progression"):
        change = (c.interval.change - 1) * 100
        bounds = shown[shown.index(" ["):] if " [" in shown else ""
        return (f"{b} costs {abs(change):.1f} % {'more' if change > 0 else 'less'} {phrase} "
                f"than {a} ({metric}{bounds})")
    return (f"{metric} ({phrase}): {c.verdict} ({shown}, margin {margin * 100:g} %"
            f"{_told(c, margin)})")


def _unit(outcome: AbOutcome, metric: str) -> str:
    """``metric``'s unit on side a (``CPU µs/request``), ``""`` when unknown."""
    built = outcome.sides.get("a")
    found = built.metrics.get(metric) if built is not None else None
    return found.summary.unit if found is not None else ""


def _why_unjudged(outcome: AbOutcome, metric: str) -> str:
    """Why a cost was not judged: the note of the side that could not give it."""
    for side, built in sorted(outcome.sides.items()):
        if metric not in built.metrics:
            said = next((n for n in built.notes if n.startswith(metric)), None)
            return f"side {side}: {said or 'no figure'}"
    return "not measured"


def _foreign(outcome: AbOutcome, side: str) -> dict[str, Any]:
    """``{"foreign_load": ...}`` of ``side`` when its cost block states one."""
    built = outcome.sides.get(side)
    load = (built.cost or {}).get("foreign_load") if built is not None else None
    return {"foreign_load": load} if load else {}


def side_costs(sides: Mapping[str, Measurement], block: Mapping[str, Any]) -> dict | None:
    """The A/B record's ``cost`` block: how the sides' costs were measured (side a's
    statement, the same for both), without the foreign load (each side's is in
    ``ab.sides``)."""
    for side in ("a", "b"):
        built = sides.get(side)
        if built is not None and built.cost:
            found = {k: v for k, v in copy.deepcopy(built.cost).items() if k != "foreign_load"}
            if "unjudged" in block:
                found["unjudged"] = block["unjudged"]
            return found
    return None


def _metric_record(c: MetricComparison, margin: float) -> dict[str, Any]:
    """A metric's record; an undecided one with what its rounds can tell (``resolution``)."""
    found = c.as_record()
    if c.verdict == "inconclusive":
        told = resolution(c.interval, margin)
        found["resolution"] = told.as_record() if told is not None else None
    return found


def _told(c: MetricComparison, margin: float) -> str:
    """For an undecided metric: the change its rounds call only beyond, and the rounds an
    interval as narrow as the margin would take, at the rounds' own scatter."""
    told = resolution(c.interval, margin) if c.verdict == "inconclusive" else None
    if told is None:
        return ""
    return (f"; at this scatter {c.interval.n} rounds call only a change beyond about "
            f"{told.smallest_change * 100:.1f} %, and an interval within the margin would "
            f"take about {told.rounds_for_margin:,} rounds")


def worst(verdicts: list[str]) -> str:
    """The verdict that decides a test: a regression first, then inconclusive, progression,
    no change."""
    for verdict in ("regression", "inconclusive", "progression", "no change"):
        if verdict in verdicts:
            return verdict
    return "inconclusive"


def _median(values: list[float]) -> float | None:
    ordered = sorted(values)
    if not ordered:
        return None
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2
