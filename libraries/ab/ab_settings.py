"""The A/B settings of a run, parsed with the shared helpers' error style
(:mod:`libraries.results.trial_settings`: a bad value is a ``ValueError`` naming the variable, the
value and what was expected): ``AB_MARGIN``, ``AB_LOOK``, ``AB_MAX_ROUNDS``, ``AB_BUDGET``,
``AB_INCONCLUSIVE``, ``AB_UNUSED``, ``AB_ALPHA`` (``ALPHA`` otherwise) and ``AB_SCATTER``
(:func:`ab_settings_from_variables`), each declared once (:data:`DECLARED`: default,
parser, meaning), here but for ``AB_MARGIN``, whose default the nightly's ratio gate shares
(:data:`libraries.results.trial_settings.AB_MARGIN`); the declared defaults as one value
(:func:`declared_ab_settings`), and the check that their budget can reach a deciding
look at the planned trials (:func:`check_ab_plan`). Pure: it reads the values it is handed
(``lookup(name, default)``, Robot's variables in a suite)."""

from __future__ import annotations

import dataclasses

from libraries.results.plan import INCONCLUSIVE, UNUSED, AbSettings, TrialPlan
from libraries.results.trial_settings import AB_MARGIN, ALPHA, Lookup, Setting, finite_number


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


def _word(given: object) -> str:
    return str(given).strip().lower()


def _alpha(given: object) -> float | None:
    """``-v AB_ALPHA``: a number (AbSettings checks its range, naming alpha); None: ALPHA's."""
    if given is None:
        return None
    try:
        return float(str(given))
    except ValueError:
        raise ValueError(f"-v AB_ALPHA:{given}: expected a number, got {given!r}") from None


_AB = ("suite set-up (Check Measurement Settings, then Set Up A/B Comparison), A/B runs "
       "only: libraries.ab.ab_settings.ab_settings_from_variables")

AB = Setting(
    "AB", None, lambda v: str(v or "") or None, "ab_file", "a path to a comparison file "
    "(YAML: sides a and b)", "Every measuring test becomes an A/B test of the file's two "
    "sides, in rounds of random order.", "A/B", "suite set-up (Set Up A/B Comparison): "
    "libraries.ab.comparison, checked on the nodes by libraries.ab.session",
    "(none: not an A/B run)")
AB_DUET = Setting(
    "AB_DUET", None, lambda v: str(v or "") or None, "ab_duet", "<side>:<fd>, side a or b",
    "This run is one side of a duet: both sides run at once on testbeds of their own, joined "
    "by the launcher's socket pair.", "A/B", "suite set-up (Set Up A/B Comparison): "
    "libraries.ab.duet_link", "(none; given by libraries.ab.duet_run)")
AB_LOOK = Setting(
    "AB_LOOK", "10", finite_number("AB_LOOK", int), "ab.look", "whole rounds >= 1, enough "
    "for the first look to decide at ALPHA", "Rounds between looks: the verdict is judged "
    "after every AB_LOOK rounds (Bonferroni-corrected levels).", "A/B", _AB)
AB_MAX_ROUNDS = Setting(
    "AB_MAX_ROUNDS", "60", finite_number("AB_MAX_ROUNDS", int), "ab.max_rounds", "whole "
    "rounds >= AB_LOOK", "The most rounds an A/B test runs before it is inconclusive.", "A/B",
    _AB)
AB_BUDGET = Setting(
    "AB_BUDGET", "600", finite_number("AB_BUDGET", float), "ab.budget_s", "seconds > 0, at "
    "least 2 x WARMUP + 2 x DURATION x AB_LOOK", "Seconds the whole A/B measurement of one "
    "test may take, switches included.", "A/B", _AB + " and check_ab_plan")
AB_INCONCLUSIVE = Setting(
    "AB_INCONCLUSIVE", INCONCLUSIVE[0], _word, "ab.inconclusive", ", ".join(INCONCLUSIVE[:-1])
    + f" or {INCONCLUSIVE[-1]}", "What an A/B test that no look decided becomes.", "A/B", _AB)
AB_UNUSED = Setting(
    "AB_UNUSED", UNUSED[0], _word, "ab.unused", " or ".join(UNUSED), "What a test that uses "
    "nothing the sides set differently does: skip with the reason, or measure it plainly.",
    "A/B", _AB)
AB_ALPHA = Setting(
    "AB_ALPHA", None, _alpha, "ab.alpha", "a number in (0, 1)", "The A/B verdict's level "
    "alone (the nightly gives each test its share of the night's family-wise level).", "A/B",
    _AB, "ALPHA")
AB_SCATTER = Setting(
    "AB_SCATTER", "0", finite_number("AB_SCATTER", float), "ab.scatter", "a percentage in "
    "[0, 100)", "The night-to-night spread of the true ratio the verdict tolerates: the "
    "interval is widened by it (the nightly against a reference gives 1).", "A/B", _AB)

DECLARED = (AB, AB_DUET, AB_MARGIN, AB_LOOK, AB_MAX_ROUNDS, AB_BUDGET, AB_INCONCLUSIVE,
            AB_UNUSED, AB_ALPHA, AB_SCATTER)
"""The A/B settings, in the reference page's order."""


def ab_settings_from_variables(lookup: Lookup) -> AbSettings:
    """The A/B settings (:data:`DECLARED`, each with its default) of ``lookup``'s values;
    ``ALPHA`` unless ``AB_ALPHA`` is given (the nightly's share of its family-wise level,
    :mod:`libraries.results.family`); ``ValueError`` naming the variable."""
    numbers = {s.name: s.read(lookup) for s in (AB_MARGIN, AB_LOOK, AB_MAX_ROUNDS, AB_BUDGET)}
    alpha = finite_number(ALPHA.name, float)(lookup(ALPHA.name, ALPHA.default))
    scatter = AB_SCATTER.read(lookup)
    own_alpha = AB_ALPHA.read(lookup)
    return AbSettings(margin=numbers["AB_MARGIN"] / 100.0, look=int(numbers["AB_LOOK"]),
                      max_rounds=int(numbers["AB_MAX_ROUNDS"]), budget_s=numbers["AB_BUDGET"],
                      alpha=alpha if own_alpha is None else own_alpha, scatter=scatter / 100.0,
                      inconclusive=AB_INCONCLUSIVE.read(lookup), unused=AB_UNUSED.read(lookup))


def declared_ab_settings(**overrides: object) -> AbSettings:
    """The A/B settings a run gets when no ``-v AB_*`` (nor ``ALPHA``) is given: each field
    from its declaration's default (:data:`DECLARED`, read by
    :func:`ab_settings_from_variables`), with the fields named in ``overrides`` replaced
    (``declared_ab_settings(look=6, max_rounds=6)``).

    Why: :class:`~libraries.results.plan.AbSettings` has no defaults of its own, so a default
    is written once, in its declaration; the benchmarks and tests that build settings by hand
    build them here and get what a run gets. An override is checked as any value is
    (``ValueError`` naming the variable, e.g. ``-v AB_LOOK:0``); an unknown field name is a
    ``TypeError``."""
    declared = ab_settings_from_variables(lambda name, default: default)
    return dataclasses.replace(declared, **overrides)  # type: ignore[arg-type]
