"""The suite's own library: it holds the suite's state
(:class:`~libraries.cases.suite_state.SuiteState`: the settings resolved once at the set-up,
the testbed, the criteria, the cases' context), and its keywords check the settings at the
set-up and skip extended rows."""

from __future__ import annotations

from robot.api.deco import keyword, library

from libraries.cases.suite_state import SuiteState
from libraries.keywords import context


@library(scope="SUITE", auto_keywords=False)
class SuiteKeywords:
    """The suite's settings and state: every ``-v`` setting resolved once, at the suite
    set-up, into one frozen settings object, logged once with the names given on the command
    line (``docs/reference/settings.md`` says what each accepts); other libraries read the
    suite's state through ``libraries.keywords.context``, never a Robot variable.

    Every suite imports it through ``resources/testbed.resource``; a measuring suite's set-up
    starts with `Check Measurement Settings`, a row that runs only with ``-v EXTENDED:yes``
    has `Skip Extended Row Unless Asked` as its test setup:

    | =Setting= | =Value= |
    | Library | libraries.keywords.suite.SuiteKeywords |
    | Suite Setup | Check Measurement Settings |
    | Test Setup | Skip Extended Row Unless Asked |
    """

    def __init__(self) -> None:
        self.opened: SuiteState | None = None
        """The suite's state once its settings were resolved."""

    @property
    def state(self) -> SuiteState:
        """The suite's state, its settings resolved (and logged) at the first call."""
        if self.opened is None:
            self.opened = context.open_suite()
        return self.opened

    @keyword("Check Measurement Settings")
    def check_measurement_settings(self) -> None:
        """Check the run's settings and criteria file before anything is built.

        Resolves every ``-v`` setting once for the suite (whole numbers of trials and
        seconds: ``-v DURATION:1.5`` is refused, not truncated; an alpha in (0, 1); yes/no
        switches; the profiling, capacity and, in an A/B run, the ``AB_*`` settings) and logs
        them, then checks what the values alone cannot: a budget (``-v MAX_TRIALS``,
        ``MAX_SECONDS`` or the topology's ``budget``) that allows the planned trials and a
        conclusive interval, an A/B budget that reaches a deciding look, and the criteria file
        (``-v CRITERIA``): valid YAML, known keys, every criterion on a metric and parameters
        its case really has (``libraries.results.catalogue``). The plan and the criteria found
        are logged.

        Fails with the variable, its value and what was expected for the first bad
        setting, or with the file and key for a bad topology or criteria file.

        Examples:
        | Check Measurement Settings |
        """
        self.state.check(context.RobotLog())

    @keyword("Skip Extended Row Unless Asked")
    def skip_extended_row_unless_asked(self) -> None:
        """Skip a test tagged ``EXTENDED`` unless the run asks for extended rows.

        The default run keeps one row per seed configuration; extended rows (the kernel twins of
        VPP rows, more streams, a counting tracer) run with ``-v EXTENDED:yes``, as CI's
        end-to-end job and the nightly do. A test without the tag always runs. Use it as
        the test setup.

        Examples:
        | [Setup] | Skip Extended Row Unless Asked |
        | Test Setup | Skip Extended Row Unless Asked |
        """
        self.state.skip_unless_extended(list(context.variable("TEST TAGS", [])))
