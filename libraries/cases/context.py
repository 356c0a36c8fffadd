"""What a case runs in: the suite's testbed, run settings, judge, A/B session, VPP placement,
profiling settings, log and console progress, as one typed value (:class:`CaseContext`).

The keyword layer builds it once per suite from the suite's libraries
(``libraries.keywords.context``); a unit test builds one by hand (a testbed, a list as the
log). A case never looks anything
up: what it needs is a field here or an argument.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from libraries.cases.run_settings import RunSettings, default_settings
from libraries.results.measurement import Say, TrialObserver, silent

if TYPE_CHECKING:
    from libraries.ab.session import AbSession, Use
    from libraries.cases.profile_settings import ProfileRequest
    from libraries.results.adaptive import Judge
    from libraries.testbed.provision import Testbed
    from libraries.vpp.placement import VppPlacement

LOG = logging.getLogger(__name__)


class Skip(Exception):
    """The test cannot run here, with the reason: Robot marks it skipped (as its
    ``SkipExecution``, by the attribute Robot looks for), never failed or passed."""

    ROBOT_SKIP_EXECUTION = True
    ROBOT_SUPPRESS_NAME = True


class Log(Protocol):
    """Where a case says what it did: Robot's log in a suite, a list or ``logging`` in a test."""

    def info(self, text: str) -> None:
        """A line of the log."""

    def warn(self, text: str) -> None:
        """A warning (Robot: in the log and on the console)."""

    def folded(self, title: str, text: str) -> None:
        """A long text (a config, a tool's output) under ``title``, folded."""


class PlainLog:
    """A :class:`Log` over Python's ``logging`` (outside Robot)."""

    def info(self, text: str) -> None:
        LOG.info("%s", text)

    def warn(self, text: str) -> None:
        LOG.warning("%s", text)

    def folded(self, title: str, text: str) -> None:
        LOG.info("%s:\n%s", title, text)


class NoProgress:
    """A trial observer that says nothing (outside Robot's console)."""

    def trial_started(self, variant: str, round_number: int, total: int) -> None:
        """Nothing."""

    def trial_finished(self, variant: str, round_number: int, total: int,
                       result: Any) -> None:
        """Nothing."""


@dataclass(frozen=True)
class CaseContext:
    """The suite's context of a case: ``testbed``; ``settings`` (every ``-v`` setting,
    resolved once at the suite's set-up; a run given nothing by default); ``judge`` (the
    criteria and settings a measuring test is judged by; None: its planned trials only);
    ``ab`` (the suite's A/B session, None in a plain run); ``vpp`` (the VPPs the suite runs
    and where applications sit on them; None when the suite runs none); ``profiling`` (None:
    no profile asked); ``log``; ``progress`` (a new console observer per measurement);
    ``say`` (a progress line of a long step: a capacity window, an A/B look); ``test_name``
    (the running test's name, read when needed)."""

    testbed: Testbed
    settings: RunSettings = field(default_factory=default_settings)
    log: Log = field(default_factory=PlainLog)
    judge: Judge | None = None
    ab: AbSession | None = None
    vpp: VppPlacement | None = None
    profiling: ProfileRequest | None = None
    progress: Callable[[], TrialObserver] = NoProgress
    say: Say = silent
    test_name: Callable[[], str] = str

    def component_started(self, name: str, uses: set[Use], stop: Callable[[], None],
                          restart: Callable[[], None]) -> None:
        """A set-up step started ``name`` (a server, a proxy, VPP), which reads ``uses``: in
        an A/B run a switch of side stops it and ``restart``s it where the sides differ in
        them; nothing in a plain run."""
        if self.ab is not None:
            self.ab.register(name, uses, stop, restart)

    def side_nginx(self, role: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """The active A/B side's extra (http, server) directives for nginx ``role``; none in
        a plain run."""
        return self.ab.nginx(role) if self.ab is not None else ((), ())

    def side_vcl(self, app: str) -> tuple[str, ...]:
        """The active A/B side's VCL lines for ``app``; none in a plain run."""
        return self.ab.vcl(app) if self.ab is not None else ()

    def side_startup(self, node: str) -> tuple[tuple[str, str], ...]:
        """The active A/B side's VPP startup sections for ``node``; none in a plain run."""
        return self.ab.startup(node) if self.ab is not None else ()

    def refuse_in_ab(self, why: str) -> None:
        """Skip the test with ``why`` when it runs as an A/B test (a variant A/B cannot
        compare)."""
        if self.ab is not None:
            raise Skip(why)

    def alpha(self, default: float) -> float:
        """The judge's alpha, ``default`` without a judge."""
        return self.judge.settings.alpha if self.judge is not None else default

