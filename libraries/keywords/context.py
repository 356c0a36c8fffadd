"""The suite's context: the one module that finds a suite's other keyword libraries.

A suite imports one library per area (``resources/*.resource``); what one keeps, others read:
the testbed (``TestbedKeywords``), the judge, the settings and the run folder
(``ResultsKeywords``), the A/B session (``AbKeywords``), where applications sit on VPP
(``VppKeywords``), the running HTTPS server (``SslProxyKeywords``, which the sslsniff case
traces) and pabot's value sets (``pabot.PabotLib``). Each is found here by Robot's library
lookup (``BuiltIn().get_library_instance``), and nowhere else (``utest/test_layers.py``).
A library the suite does not import gives None where a case can do without it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from robot.libraries.BuiltIn import BuiltIn

if TYPE_CHECKING:
    from libraries.ab.session import AbSession
    from libraries.results.adaptive import Judge
    from libraries.results.settings import ProfileSettings
    from libraries.testbed.provision import Testbed
    from libraries.tools.nginx.service import NginxHandle
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


def profiling(ab: bool) -> tuple[ProfileSettings, Path] | None:
    """The profiling settings and run folder when this test gets a profiling trial (the suite
    imports the results library and ``-v PROFILE`` asks for it), else None."""
    library = _optional(RESULTS_LIBRARY)
    if library is None:
        return None
    settings, folder = library.profiling()
    return (settings, folder) if settings.wanted(ab) else None


def ab_session() -> AbSession | None:
    """This suite's A/B session, or None (no ``-v AB``, or a suite without the library)."""
    library = _optional(AB_LIBRARY)
    return None if library is None else library.session


def vpp_placement() -> VppPlacement | None:
    """The VPPs this suite runs and where its applications sit on them, or None when the suite
    does not import the VPP library."""
    library = _optional(VPP_LIBRARY)
    return None if library is None else library.placement


def https_server() -> NginxHandle | None:
    """The running HTTPS server started by ``Start HTTPS Server On Node`` (or None)."""
    library = _optional(SSL_PROXY_LIBRARY)
    return None if library is None else library.server


def pabotlib() -> Any:
    """pabot's ``PabotLib`` instance the suite imported (value sets of the lab pool)."""
    return _library(PABOTLIB)
