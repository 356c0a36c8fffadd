"""The profiling settings of a run (``-v PROFILE``, ``-v PROFILE_SECONDS``), parsed with the
shared helpers of :mod:`libraries.results.trial_settings` (one error style: a ``ValueError`` naming
the variable), and what a case is handed of them (:class:`ProfileRequest`: the settings and
the run folder the profiles go into); each setting declared once here (:data:`DECLARED`).
The profiling trial itself: :mod:`.profiling`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from libraries.results.trial_settings import Lookup, Setting, parse_switch, whole


@dataclass(frozen=True)
class ProfileSettings:
    """``-v PROFILE`` (``mode``: ``auto``, a profiling trial per side in A/B runs, none in
    plain runs; ``on``: every measuring test; ``off``) and ``-v PROFILE_SECONDS``
    (``seconds``: how long perf samples, under the test's own load, after the measured
    trials); their defaults: :data:`PROFILE`, :data:`PROFILE_SECONDS`."""

    mode: str
    seconds: int

    def wanted(self, ab: bool) -> bool:
        """Whether a test (an A/B test when ``ab``) gets a profiling trial."""
        return self.mode == "on" or (self.mode == "auto" and ab)


def _mode(given: object) -> str:
    """``-v PROFILE``: auto, or a yes/no word (``ValueError`` naming the variable)."""
    if str(given).strip().lower() == "auto":
        return "auto"
    try:
        return "on" if parse_switch("PROFILE", given) else "off"
    except ValueError:
        raise ValueError(f"-v PROFILE:{given}: expected auto (A/B runs only), on or off, "
                         f"got {given!r}") from None


_PROFILE = ("suite set-up (Check Measurement Settings): "
            "libraries.cases.profile_settings.profile_settings_from_variables")

PROFILE = Setting(
    "PROFILE", "auto", _mode, "profile.mode", "auto, on or off (yes/no, true/false, 1/0)",
    "auto: a profiling trial per side in A/B runs, none in plain runs; on: every measuring "
    "test; off: none.", "profiles", _PROFILE)
PROFILE_SECONDS = Setting(
    "PROFILE_SECONDS", "5", lambda v: whole("PROFILE_SECONDS", v, 1, "seconds"),
    "profile.seconds", "whole seconds >= 1", "How long perf samples, under the test's own "
    "load, after the measured trials (never counted).", "profiles", _PROFILE)

DECLARED = (PROFILE, PROFILE_SECONDS)
"""The profiling settings, in the reference page's order."""


def profile_settings_from_variables(lookup: Lookup) -> ProfileSettings:
    """:class:`ProfileSettings` from ``-v PROFILE`` and ``-v PROFILE_SECONDS`` (``ValueError``
    naming the variable)."""
    return ProfileSettings(PROFILE.read(lookup), PROFILE_SECONDS.read(lookup))


@dataclass(frozen=True)
class ProfileRequest:
    """``-v PROFILE`` and ``PROFILE_SECONDS`` (``settings``) and the run folder profiles go
    into."""

    settings: ProfileSettings
    folder: Path

    def wanted(self, ab: bool) -> bool:
        """True when a test (an A/B one with ``ab``) gets a profiling trial."""
        return self.settings.wanted(ab)
