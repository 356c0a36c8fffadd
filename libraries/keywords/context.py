"""The suite's context: the one module that reads Robot's variables and finds a suite's
keyword libraries.

Every ``-v`` setting is resolved once per suite, at its set-up, from Robot's variables into
one frozen :class:`~libraries.cases.run_settings.RunSettings` (:func:`open_suite`), logged
once with the names given on the command line, and kept with the rest of the suite's state in
one :class:`~libraries.cases.suite_state.SuiteState` (the testbed, the criteria, the A/B session,
the cases' context, the SSL proxy case's set-up), held by the suite's ``SuiteKeywords`` library
(:func:`suite`). What other libraries keep is found here by Robot's library lookup
(``BuiltIn().get_library_instance``), and nowhere else (``utest/test_layers.py``): the run
folder (``ResultsKeywords``), where applications sit on VPP
(``VppKeywords``) and pabot's value sets (``pabot.PabotLib``). A library the suite does not
import gives None where a case can do without it. Robot's own variables (``${TEST NAME}``,
``${OUTPUT DIR}``...) are read through :func:`variable`, tags and metadata written through
:func:`set_tags` and :func:`set_suite_metadata`.

:func:`case_context` puts it together as the cases' one argument
(:class:`libraries.cases.context.CaseContext`), with Robot's log and console progress.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from robot.api import logger
from robot.libraries.BuiltIn import BuiltIn
from robot.running.context import EXECUTION_CONTEXTS

from libraries.cases.context import CaseContext
from libraries.cases.profile_settings import ProfileRequest
from libraries.cases.registry import SETTINGS
from libraries.cases.run_settings import RunSettings, resolve_settings
from libraries.cases.suite_state import SuiteState
from libraries.keywords import log_folded
from libraries.keywords.progress import ConsoleProgress, console_line
from libraries.testbed.errors import HostStackError

if TYPE_CHECKING:
    from libraries.ab.session import AbSession
    from libraries.results.adaptive import Judge
    from libraries.results.trial_settings import Setting
    from libraries.testbed.provision import Testbed
    from libraries.vpp.placement import VppPlacement

SUITE_LIBRARY = "libraries.keywords.suite.SuiteKeywords"
RESULTS_LIBRARY = "libraries.keywords.results.ResultsKeywords"
VPP_LIBRARY = "libraries.keywords.vpp.VppKeywords"
PABOTLIB = "pabot.PabotLib"


def variable(name: str, default: Any = None) -> Any:
    """Robot's variable ``${name}`` (``OUTPUT DIR``, ``TEST NAME``...), or ``default``."""
    return BuiltIn().get_variable_value("${" + name + "}", default)


def run_setting(setting: Setting) -> Any:
    """One setting's typed value, read before any suite resolved its settings (the results
    library's listener at the run's first suite: ``RUN_ID``, ``TREND_STORE``)."""
    return setting.read(variable)


def dry_run() -> bool:
    """True under ``robot --dryrun``: nothing is measured, so nothing is recorded."""
    running = EXECUTION_CONTEXTS.current
    return bool(running is not None and running.dry_run)


def set_tags(*tags: str) -> None:
    """Add ``tags`` to the running test."""
    BuiltIn().set_tags(*tags)


def set_suite_metadata(name: str, value: str) -> None:
    """Set the running suite's metadata ``name``."""
    BuiltIn().set_suite_metadata(name, value)


def _library(name: str) -> Any:
    """The suite's instance of library ``name`` (Robot's ``RuntimeError`` when not imported)."""
    return BuiltIn().get_library_instance(name)


def _optional(name: str) -> Any | None:
    """The suite's instance of library ``name``, or None when the suite does not import it."""
    try:
        return _library(name)
    except RuntimeError:
        return None


def open_suite() -> SuiteState:
    """A suite's state, its settings resolved from Robot's variables (a bad value fails
    naming the variable and what was expected) and logged once: every setting in force, and
    which were given on the command line."""
    given = [s.name for s in SETTINGS if variable(s.name) is not None]
    try:
        settings = resolve_settings(variable, given)
    except ValueError as error:
        raise HostStackError(str(error)) from None
    log_folded(f"Run settings in force (given: {', '.join(given) or 'none'}; the others at "
               "their defaults, docs/reference/settings.md)", settings.table())
    return SuiteState(settings)


def suite() -> SuiteState:
    """This suite's state (its settings resolved at the first call, in its set-up)."""
    return _library(SUITE_LIBRARY).state


def opened_suite() -> SuiteState | None:
    """This suite's state when its settings were resolved, else None (a teardown after a
    set-up that failed before)."""
    library = _optional(SUITE_LIBRARY)
    return None if library is None else library.opened


def settings() -> RunSettings:
    """This suite's settings."""
    return suite().settings


def testbed() -> Testbed:
    """The testbed set up by this suite's ``Set Up Testbed`` (fails clearly when there is none)."""
    return suite().testbed.current


def testbed_versions() -> dict[str, dict[str, str]]:
    """Each node's tool versions, read when the testbed was set up."""
    return suite().testbed.versions


def judge() -> Judge | None:
    """The criteria and settings a measuring test is judged by, or None when the suite does
    not import the results library: the test then runs its planned trials only."""
    if _optional(RESULTS_LIBRARY) is None:
        return None
    return suite().judge(testbed().topology)


def ab_session() -> AbSession | None:
    """This suite's A/B session, or None (no ``-v AB``, or a suite whose set-up failed before
    its settings were resolved)."""
    state = opened_suite()
    return None if state is None else state.ab


def close_ab_session() -> AbSession | None:
    """This suite's A/B session, no longer kept (None when there is none)."""
    state = opened_suite()
    session = None if state is None else state.ab
    if state is not None:
        state.ab = None
    return session


def vpp_placement() -> VppPlacement | None:
    """The VPPs this suite runs and where its applications sit on them, or None when the suite
    does not import the VPP library."""
    return None if _optional(VPP_LIBRARY) is None else suite().vpp.placement


def pabotlib() -> Any:
    """pabot's ``PabotLib`` instance the suite imported (value sets of the lab pool)."""
    return _library(PABOTLIB)


class RobotLog:
    """The cases' :class:`~libraries.cases.context.Log` in Robot's log."""

    def info(self, text: str) -> None:
        logger.info(text)

    def warn(self, text: str) -> None:
        logger.warn(text)

    def folded(self, title: str, text: str) -> None:
        log_folded(title, text)


def _test_name() -> str:
    return str(variable("TEST NAME", ""))


def case_context() -> CaseContext:
    """The context a case runs in, from this suite's state and libraries: its testbed,
    settings, judge, A/B session, VPP placement and profiling settings (each None where the
    suite does without), Robot's log and console progress.

    Built once per suite, at its first case keyword (the suite set-up has then set up the
    testbed and opened the A/B session), and kept in the suite's state; built again only
    when the testbed, the A/B session or the VPP placement is no longer the one it holds."""
    state = suite()
    current, ab, vpp = state.testbed.current, ab_session(), vpp_placement()
    kept = state.context
    if kept is None or kept.testbed is not current or kept.ab is not ab or kept.vpp is not vpp:
        results = _optional(RESULTS_LIBRARY)
        request = None if results is None else \
            ProfileRequest(state.settings.profile, results.run_folder())
        kept = CaseContext(testbed=current, settings=state.settings, log=RobotLog(),
                           judge=judge(), ab=ab, vpp=vpp, profiling=request,
                           progress=ConsoleProgress, say=console_line, test_name=_test_name)
        state.context = kept
    return kept
