"""The suite's context: the one module that finds a suite's other keyword libraries.

A suite imports one library per area (``resources/*.resource``); what one keeps, others read:
the testbed (``TestbedKeywords``), the judge, the settings and the run folder
(``ResultsKeywords``), the A/B session (``AbKeywords``), where applications sit on VPP
(``VppKeywords``), the HTTPS server and proxy started (``SslProxyKeywords``; the sslsniff
case traces the server) and pabot's value sets (``pabot.PabotLib``). Each is found here by
Robot's library lookup (``BuiltIn().get_library_instance``), and nowhere else
(``utest/test_layers.py``).
A library the suite does not import gives None where a case can do without it.

:func:`case_context` puts them together as the cases' one argument
(:class:`libraries.cases.context.CaseContext`), with Robot's log and console progress.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from robot.api import logger
from robot.libraries.BuiltIn import BuiltIn

from libraries.cases.context import CaseContext
from libraries.cases.profile_settings import ProfileRequest
from libraries.cases.ssl_proxy import ProxySetup
from libraries.keywords import log_folded
from libraries.keywords.progress import ConsoleProgress, console_line

if TYPE_CHECKING:
    from libraries.ab.session import AbSession
    from libraries.results.adaptive import Judge
    from libraries.testbed.provision import Testbed
    from libraries.vpp.placement import VppPlacement

TESTBED_LIBRARY = "libraries.keywords.testbed.TestbedKeywords"
RESULTS_LIBRARY = "libraries.keywords.results.ResultsKeywords"
AB_LIBRARY = "libraries.keywords.ab.AbKeywords"
VPP_LIBRARY = "libraries.keywords.vpp.VppKeywords"
SSL_PROXY_LIBRARY = "libraries.keywords.ssl_proxy.SslProxyKeywords"
PABOTLIB = "pabot.PabotLib"


def _library(name: str) -> Any:
    """The suite's instance of library ``name`` (Robot's ``RuntimeError`` when not imported)."""
    return BuiltIn().get_library_instance(name)


def _optional(name: str) -> Any | None:
    """The suite's instance of library ``name``, or None when the suite does not import it."""
    try:
        return _library(name)
    except RuntimeError:
        return None


def testbed() -> Testbed:
    """The testbed set up by this suite's ``Set Up Testbed`` (fails clearly when there is none)."""
    return _library(TESTBED_LIBRARY).testbed


def testbed_versions() -> dict[str, dict[str, str]]:
    """Each node's tool versions, read when the testbed was set up."""
    return _library(TESTBED_LIBRARY).versions


def judge() -> Judge | None:
    """The criteria and settings a measuring test is judged by (the results library's), or
    None when the suite does not import it: the test then runs its planned trials only."""
    library = _optional(RESULTS_LIBRARY)
    return None if library is None else library.judge()


def ab_session() -> AbSession | None:
    """This suite's A/B session, or None (no ``-v AB``, or a suite without the library)."""
    library = _optional(AB_LIBRARY)
    return None if library is None else library.session


def vpp_placement() -> VppPlacement | None:
    """The VPPs this suite runs and where its applications sit on them, or None when the suite
    does not import the VPP library."""
    library = _optional(VPP_LIBRARY)
    return None if library is None else library.placement


def proxy_setup() -> ProxySetup | None:
    """What the SSL proxy library started (the HTTPS server the sslsniff case traces), or None
    when the suite does not import it."""
    library = _optional(SSL_PROXY_LIBRARY)
    return None if library is None else library.setup


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
    return str(BuiltIn().get_variable_value("${TEST NAME}", ""))


def case_context() -> CaseContext:
    """The context a case runs in, from this suite's libraries: its testbed, judge, A/B
    session, VPP placement and profiling settings (each None where the suite does without),
    Robot's log and console progress.

    Built once per suite, at its first case keyword (the suite set-up has then set up the
    testbed and opened the A/B session), and kept by the testbed library; built again only
    when the testbed, the A/B session or the VPP placement is no longer the one it holds."""
    library = _library(TESTBED_LIBRARY)
    current, ab, vpp = library.testbed, ab_session(), vpp_placement()
    kept: CaseContext | None = library.case_context
    if kept is None or kept.testbed is not current or kept.ab is not ab or kept.vpp is not vpp:
        results = _optional(RESULTS_LIBRARY)
        request = None
        if results is not None:
            settings, folder = results.profiling()
            request = ProfileRequest(settings, folder)
        kept = CaseContext(testbed=current, log=RobotLog(),
                           judge=None if results is None else results.judge(),
                           ab=ab, vpp=vpp, profiling=request, progress=ConsoleProgress,
                           say=console_line, test_name=_test_name)
        library.case_context = kept
    return kept
