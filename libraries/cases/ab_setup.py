"""A suite's A/B comparison outside the keyword layer: opening it from the run's settings
(:func:`open_comparison`: the comparison file against the testbed, the ``AB_*`` settings, a
duet's link), telling the other side of a duet about a test this side did not measure
(:func:`tell_unmeasured`), and an A/B test's verdict as its status and tag
(:func:`check_ab_verdict`). ``libraries.keywords.ab`` adapts each to a keyword or a listener
hook; the session itself is :class:`libraries.ab.session.AbSession`.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from libraries.ab.ab_settings import AB_INCONCLUSIVE, ab_settings_from_variables
from libraries.ab.duet_link import DuetLink, DuetRole
from libraries.ab.opening import open_session
from libraries.ab.session import AbSession
from libraries.cases.context import Log, Skip
from libraries.cases.run_settings import RunSettings
from libraries.results.measurement import Measurement
from libraries.testbed.errors import HostStackError
from libraries.testbed.provision import Testbed


def open_comparison(settings: RunSettings, path: str, testbed: Callable[[], Testbed],
                    log: Log) -> AbSession | None:
    """The suite's A/B session of comparison file ``path`` (empty: ``-v AB``'s; none: not an
    A/B run, None), checked against ``testbed``, with the run's ``AB_*`` settings and, in a
    duet run (``-v AB_DUET``), the link to the other side's run (``testbed()``: the suite's
    testbed, asked only in an A/B run); what it compares is logged."""
    path = path or settings.ab_file or ""
    if not path:
        return None
    try:
        ab = settings.ab or ab_settings_from_variables(
            lambda name, default: settings.values.get(name) or default)
    except ValueError as error:
        raise HostStackError(str(error)) from None
    duet = duet_link(settings.ab_duet or "")
    try:
        session = open_session(path, testbed(), ab, duet)
    except BaseException:
        if duet is not None:
            duet.close()
        raise
    loaded = session.loaded
    if duet is not None:
        log.info(f"duet A/B: this run measures side {duet.side} beside the other side's run, "
                 "on the same cores")
    log.info(f"A/B comparison {loaded.title} ({path}, sha256 {loaded.sha256[:12]}): a = "
             f"{loaded.comparison.a.name}, b = {loaded.comparison.b.name}; looks at rounds "
             f"{list(ab.looks)} at alpha {ab.alpha_per_look:.3g} each, margin "
             f"{ab.margin * 100:g} %")
    return session


def restore(session: AbSession | None, closing: bool = False) -> None:
    """Put the original topology and sysctls back (``closing``: at the suite's end, the
    originals kept on lab nodes removed too); fails listing what could not be restored."""
    if session is None:
        return
    errors = session.close() if closing else session.restore()
    if errors:
        raise HostStackError("A/B: could not restore: " + "; ".join(errors))


def duet_link(given: str) -> DuetLink | None:
    """The duet link of ``-v AB_DUET:<side>:<fd>`` (none without it), on a descriptor of its
    own so that closing one suite's link leaves the run's socket open for the next suite."""
    if not given:
        return None
    try:
        role = DuetRole.parse(given)
        copied = os.dup(role.fd)
    except (ValueError, OSError) as error:
        raise HostStackError(f"-v AB_DUET:{given}: {error}") from None
    try:
        return DuetLink.from_role(DuetRole(role.side, copied))
    except HostStackError:
        os.close(copied)
        raise


def tell_unmeasured(session: AbSession | None, given: str | None, test: str,
                    why: str) -> None:
    """A duet test that ended here unmeasured (skipped, failed in its set-up, or in a suite
    whose set-up failed before the comparison was open) or in the middle is told to the
    other side's run (``given``: ``-v AB_DUET``), which stops waiting."""
    if session is not None and session.duet is not None:
        session.duet.test_ended(test, why)
        return
    if given and session is None:
        try:
            link = duet_link(given)
        except HostStackError:
            return  # the suite set-up reported it
        if link is not None:
            link.test_ended(test, why)
            link.close()


class AbRegression(HostStackError):
    """The candidate is slower than the baseline: the test fails with the comparison alone."""

    ROBOT_SUPPRESS_NAME = True


def check_ab_verdict(measurement: Measurement, tag: Callable[[str], None], log: Log) -> None:
    """An A/B test's verdict as its status: tagged ``AB_<VERDICT>``; a regression fails, a
    verdict no look reached skips, passes with a warning or fails (``-v AB_INCONCLUSIVE``,
    as the record's ``on_inconclusive`` says)."""
    block = measurement.ab or {}
    verdict = str(block.get("verdict"))
    message = measurement.notes[-1] if measurement.notes else "A/B"
    tag(f"AB_{verdict.upper().replace(' ', '_')}")
    if verdict == "regression":
        raise AbRegression(message)
    if verdict == "inconclusive":
        policy = block.get("rounds", {}).get("on_inconclusive", AB_INCONCLUSIVE.default)
        why = "the load generator bounded both sides" if block.get("generator_bound") else \
            "no look decided"
        text = (f"A/B inconclusive: {message}: {why} (-v AB_INCONCLUSIVE:{policy}; "
                "skip by default: not a pass, not a failure)")
        if policy == "fail":
            raise AbRegression(text)
        if policy == "skip":
            raise Skip(text)
        log.warn(text)
