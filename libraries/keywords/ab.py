"""Keywords for A/B runs: ``robot -v AB:<comparison file> ...`` runs every selected measuring
test as an A/B test of two sides of the system under test (:mod:`libraries.ab`), measured
side by side in one run and judged per round.

The suite's :class:`~libraries.ab.session.AbSession` is kept in the suite's state
(:class:`libraries.cases.suite_state.SuiteState`): the suite setup opens it (the file loaded against
the topology and checked on the nodes before anything is measured), each test's teardown puts
the original sysctls and topology back, failures included, and ``Check A/B Verdict`` turns the
verdict into the test's status (:mod:`libraries.cases.ab_setup`). The cases measure through it
and register what they start with it (:mod:`libraries.cases.case_runner`, ``CaseContext.ab``, from
:mod:`libraries.keywords.context`).
"""

from __future__ import annotations

from typing import Any

from robot.api.deco import keyword, library

from libraries.ab.ab_settings import AB_DUET
from libraries.cases.ab_setup import check_ab_verdict, open_comparison, restore, tell_unmeasured
from libraries.keywords import context
from libraries.results.measurement import Measurement


@library(scope="SUITE", auto_keywords=False, listener="SELF")
class AbKeywords:
    """Keywords of A/B runs: two sides of the system under test measured side by side.

    ``robot -v AB:<comparison file> ...`` runs every selected measuring test as an A/B test:
    the comparison file (e.g. ``topologies/examples/ab-nginx-builds.yaml``) names side
    ``a`` (the baseline) and side ``b`` (the candidate) as binaries, VPP installs, startup
    sections, nginx settings or sysctls that differ from the topology. The case keywords
    then measure both sides round by round, switching between them, and judge the
    candidate's change per round (``-v AB_MARGIN``, ``AB_LOOK``, ``AB_MAX_ROUNDS``,
    ``AB_BUDGET``, ``AB_INCONCLUSIVE``...). In a duet run (``python -m
    libraries.ab.duet_run``, which sets ``-v AB_DUET``) this run measures one side beside
    the other side's run, on the same cores.

    The suite's A/B session (kept in the suite's state): `Set Up A/B Comparison` opens it in the
    suite setup, `Restore A/B Sides` puts the original topology and sysctls back after each
    test, `Close A/B Comparison` at the suite's end, and `Check A/B Verdict` (also called
    by ``Check Criteria`` of the results library for an A/B result) turns the verdict into
    the test's status. Without ``-v AB`` the set-up, restore and close keywords do nothing,
    so suites import the library always, through ``resources/measure.resource``:

    | =Setting= | =Value= |
    | Library | libraries.keywords.ab.AbKeywords |

    The suite set-up (after the testbed's) and teardown, as ``Set Up Measuring Suite`` and
    ``Tear Down Measuring Suite`` of that resource have them, and a test's teardown:

    | =Keyword= | =Arguments= |
    | Set Up A/B Comparison | |
    | Run Keyword And Continue On Failure | Close A/B Comparison |
    | Run Keyword And Continue On Failure | Restore A/B Sides |

    A run: ``robot -v TOPOLOGY:3node -v AB:topologies/examples/ab-nginx-builds.yaml
    tests/ssl_proxy``.
    """

    ROBOT_LISTENER_API_VERSION = 3

    def start_test(self, data: Any, result: Any) -> None:
        """Listener hook: a duet run meets the other side's at this test's full name."""
        session = context.ab_session()
        if session is not None:
            session.test = result.full_name

    def end_test(self, data: Any, result: Any) -> None:
        """Listener hook: a duet test that ended here unmeasured (skipped, failed in its
        set-up, or in a suite whose set-up failed before the comparison was open) or in the
        middle is told to the other side's run, which stops waiting."""
        tell_unmeasured(context.ab_session(), context.run_setting(AB_DUET), result.full_name,
                        f"{result.status}: {result.message or 'no message'}")

    @keyword("Set Up A/B Comparison")
    def set_up_ab_comparison(self, path: str = "") -> None:
        """Open the suite's A/B comparison from a comparison file, or do nothing.

        Loads the comparison file against the testbed's topology and checks it on the
        nodes before anything is measured: every binary a side names answers its version
        command, every sysctl exists and can be written back. The ``AB_*`` settings are
        read and checked here too. The comparison, its settings and, in a duet run, the
        side this run measures are logged. Call it after ``Set Up Testbed``.

        Args:
            path: The comparison file; empty (default): ``-v AB:<file>``'s, and without
                it this is not an A/B run: nothing happens.

        Fails naming the file, key or node when the file is invalid or a side cannot run
        on the nodes, or naming the variable when an ``AB_*`` setting is invalid.

        Examples:
        | Set Up A/B Comparison | |
        | Set Up A/B Comparison | topologies/examples/ab-sysctl.yaml |
        """
        context.suite().ab = open_comparison(context.settings(), path, context.testbed,
                                             context.RobotLog())

    @keyword("Close A/B Comparison")
    def close_ab_comparison(self) -> None:
        """Close the suite's A/B comparison: the original topology and sysctls back.

        At the suite's end the originals kept on each lab node are removed too. Does
        nothing outside an A/B run.

        Fails listing what could not be restored.

        Examples:
        | Run Keyword And Continue On Failure | Close A/B Comparison |
        """
        restore(context.close_ab_session(), closing=True)

    @keyword("Restore A/B Sides")
    def restore_ab_sides(self) -> None:
        """Put the original topology and sysctls back after a test.

        Belongs in the test teardown, failures included: the next test starts from the
        topology's own binaries and sysctls. Does nothing outside an A/B run.

        Fails listing what could not be restored.

        Examples:
        | Run Keyword And Continue On Failure | Restore A/B Sides |
        """
        restore(context.ab_session())

    @keyword("Check A/B Verdict")
    def check_ab_verdict(self, measurement: Measurement) -> None:
        """Turn an A/B test's verdict into the test's status and tag.

        Tags the test ``AB_<VERDICT>`` (``AB_REGRESSION``, ``AB_PROGRESSION``,
        ``AB_NO_CHANGE``, ``AB_INCONCLUSIVE``). A regression of the candidate fails the
        test, saying by how much and after how many rounds; a progression or no change
        passes. When no look decided, the test is skipped (``-v AB_INCONCLUSIVE:skip``, the
        default: not a pass, not a failure), passes with a warning (``pass``) or fails
        (``fail``); the message says whether the load generator bounded both sides.
        ``Check Criteria`` of the results library calls it for an A/B result.

        Args:
            measurement: An A/B test's measurement, as a case keyword (e.g. ``Measure
                HTTPS Load Through Proxy``) returned it in an A/B run.

        Examples:
        | ${result} = | Measure TCP Throughput From Node | tg |
        | Check A/B Verdict | ${result} | |
        """
        check_ab_verdict(measurement, context.set_tags, context.RobotLog())

