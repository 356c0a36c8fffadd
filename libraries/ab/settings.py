"""The A/B settings of a run, parsed with the shared helpers' error style
(:mod:`libraries.results.settings`: a bad value is a ``ValueError`` naming the variable, the
value and what was expected): ``AB_MARGIN``, ``AB_LOOK``, ``AB_MAX_ROUNDS``, ``AB_BUDGET``,
``AB_INCONCLUSIVE``, ``AB_UNUSED``, ``AB_ALPHA`` (``ALPHA`` otherwise) and ``AB_SCATTER``
(:func:`ab_settings_from_variables`), and the check that their budget can reach a deciding
look at the planned trials (:func:`check_ab_plan`). Pure: it reads the values it is handed
(``lookup(name, default)``, Robot's variables in a suite)."""

from __future__ import annotations

import math

from libraries.results.plan import AbSettings, TrialPlan
from libraries.results.settings import Lookup


def check_ab_plan(settings: AbSettings, plan: TrialPlan) -> None:
    """Refuse (``ValueError`` with the numbers) settings whose budget cannot reach the first
    look at the planned trial length: a round measures each side for at least ``DURATION``
    seconds, after a warm-up of each side."""
    least = 2 * plan.warmup + 2 * plan.duration * settings.look
    if least > settings.budget_s:
        fits = max(0, int((settings.budget_s - 2 * plan.warmup) // (2 * plan.duration)))
        raise ValueError(
            f"-v AB_BUDGET:{settings.budget_s:g} with -v DURATION:{plan.duration}: a round "
            f"measures each side for at least {plan.duration} s, so at most {fits} rounds fit,"
            f" fewer than the first look at AB_LOOK {settings.look} rounds: nothing could be "
            f"decided (give AB_BUDGET at least {least:g} s, or a shorter DURATION)")


def ab_settings_from_variables(lookup: Lookup) -> AbSettings:
    """``-v AB_MARGIN`` (percent, default 1), ``AB_LOOK`` (10), ``AB_MAX_ROUNDS`` (60),
    ``AB_INCONCLUSIVE`` (skip), ``AB_UNUSED`` (skip),
    ``AB_BUDGET`` (600 s), ``ALPHA`` (0.05; ``AB_ALPHA`` overrides it for the A/B verdict
    alone: the nightly's share of its family-wise level, :mod:`libraries.results.family`)
    and ``AB_SCATTER`` (percent, 0: the night-to-night spread of the true ratio the verdict
    tolerates); ``ValueError`` naming the variable."""
    values = {}
    for name, default, kind in (("AB_MARGIN", 1, float), ("AB_LOOK", 10, int),
                                ("AB_MAX_ROUNDS", 60, int), ("AB_BUDGET", 600, float),
                                ("ALPHA", 0.05, float), ("AB_SCATTER", 0, float)):
        given = lookup(name, default)
        try:
            number = kind(str(given).rstrip("%"))
        except ValueError:
            raise ValueError(f"-v {name}:{given}: expected a {'whole ' if kind is int else ''}"
                             f"number, got {given!r}") from None
        if not math.isfinite(number):
            raise ValueError(f"-v {name}:{given}: expected a finite number")
        values[name] = number
    given = lookup("AB_ALPHA", values["ALPHA"])
    try:  # AbSettings checks the range and names alpha
        values["ALPHA"] = float(str(given))
    except ValueError:
        raise ValueError(f"-v AB_ALPHA:{given}: expected a number, got {given!r}") from None
    return AbSettings(margin=values["AB_MARGIN"] / 100.0, look=int(values["AB_LOOK"]),
                      max_rounds=int(values["AB_MAX_ROUNDS"]), budget_s=values["AB_BUDGET"],
                      alpha=values["ALPHA"], scatter=values["AB_SCATTER"] / 100.0,
                      inconclusive=str(lookup("AB_INCONCLUSIVE", "skip")).strip().lower(),
                      unused=str(lookup("AB_UNUSED", "skip")).strip().lower())
