"""How many tests a night will run, counted before it runs: the size of the night's family
(:class:`libraries.results.family.NightFamily`) when ``--series`` is not given.

Each A/B test of a night runs at its share of the night's level split over the night's
series (``AB_ALPHA``), so the count must be known before the first test starts. Robot's own
parser reads the night's selection (``--include``, ``--exclude``, ``--test``, ``--suite``
among the robot arguments after ``--``) and its suite builder counts the tests it selects,
per topology. The count is an upper bound on the A/B tests that run (a test that skips, or
that uses nothing the reference sets and is measured plainly, spends nothing), so the
Bonferroni bound holds; a planned ``--series`` smaller than the tests that ran would not.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol

from robot.api import TestSuiteBuilder
from robot.errors import DataError
from robot.run import RobotFramework

from libraries.results.family import NightFamily

LOG = logging.getLogger(__name__)


class PlanError(ValueError):
    """The night's suites or robot arguments cannot be read."""


def planned_tests(suites: Sequence[str], extra: Sequence[str], topologies: int = 1) -> int:
    """The tests the night's robot runs select: ``suites`` filtered by the selection options
    among the robot arguments ``extra``, once per topology (at least 1)."""
    try:
        options, _ = RobotFramework().parse_arguments([*extra, *suites])
        suite = TestSuiteBuilder().build(*suites)
    except DataError as error:
        raise PlanError(f"counting the night's tests in {' '.join(suites)}: {error}") from None
    suite.configure(include_tags=options.get("include"), exclude_tags=options.get("exclude"),
                    include_tests=options.get("test"), include_suites=options.get("suite"))
    return max(1, suite.test_count) * max(1, topologies)


class _Night(Protocol):
    suites: tuple[str, ...]
    extra: tuple[str, ...]
    topologies: tuple[str, ...]


def night_family(level: float, series: int | None, night: _Night) -> NightFamily:
    """The night's family: ``level`` over ``series`` A/B series when given, else over the
    tests the night selects (:func:`planned_tests`); logged once with each test's level."""
    size = series or planned_tests(night.suites, night.extra, len(night.topologies))
    family = NightFamily(level, size)
    LOG.info("the night's family: %d A/B series (%s), level %g: each test at AB_ALPHA %.6g",
             size, "given" if series else "the tests its suites select", level,
             family.test_alpha)
    return family
