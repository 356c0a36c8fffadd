"""Every ``-v`` setting the project reads, collected from the packages that declare them
(:data:`SETTINGS`): the testbed's (:mod:`libraries.cases.testbed_settings`), the trials',
the judging's and the run's (:mod:`libraries.results.trial_settings`), the A/B ones
(:mod:`libraries.ab.ab_settings`), the profiling ones (:mod:`libraries.cases.profile_settings`)
and the capacity searches' (:mod:`libraries.capacity.search_settings`). Nothing is declared here:
each :class:`~libraries.results.trial_settings.Setting` (name, default, parser, meaning, its typed
field) stands once, in its package. The suite set-up resolves them all
(:mod:`libraries.cases.run_settings`), the settings reference page
(``docs/reference/settings.md``) is generated from them by ``docs_gen/hooks.py``, and
``utest/test_registry.py`` fails when code reads a setting missing here, one here is read by
nobody, or a default is written anywhere but its declaration.
"""

from __future__ import annotations

from libraries.ab.ab_settings import DECLARED as AB
from libraries.capacity.search_settings import DECLARED as CAPACITY
from libraries.cases.profile_settings import DECLARED as PROFILES
from libraries.cases.testbed_settings import DECLARED as TESTBED
from libraries.results.trial_settings import DECLARED as RESULTS
from libraries.results.trial_settings import Setting

SETTINGS: tuple[Setting, ...] = (*TESTBED, *RESULTS, *AB, *PROFILES, *CAPACITY)
"""Every ``-v`` setting, grouped by area in reading order."""


def setting(name: str) -> Setting:
    """The setting called ``name`` (``KeyError`` naming the known ones otherwise)."""
    for entry in SETTINGS:
        if entry.name == name:
            return entry
    raise KeyError(f"no -v setting {name!r}; known: {', '.join(s.name for s in SETTINGS)}")


def areas() -> tuple[str, ...]:
    """The areas in the order :data:`SETTINGS` first names them."""
    return tuple(dict.fromkeys(s.area for s in SETTINGS))
