"""The profiling settings of a run (``-v PROFILE``, ``-v PROFILE_SECONDS``), parsed with the
shared helpers of :mod:`libraries.results.settings` (one error style: a ``ValueError`` naming
the variable), and what a case is handed of them (:class:`ProfileRequest`: the settings and
the run folder the profiles go into). The profiling trial itself: :mod:`.profiling`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from libraries.results.settings import Lookup, parse_switch, whole


@dataclass(frozen=True)
class ProfileSettings:
    """``-v PROFILE``: ``auto`` (default: a profiling trial per side in A/B runs, none in
    plain runs), ``on`` (every measuring test) or ``off``; ``-v PROFILE_SECONDS`` (5): how long
    perf samples, under the test's own load, after the measured trials."""

    mode: str = "auto"
    seconds: int = 5

    def wanted(self, ab: bool) -> bool:
        """Whether a test (an A/B test when ``ab``) gets a profiling trial."""
        return self.mode == "on" or (self.mode == "auto" and ab)


def profile_settings_from_variables(lookup: Lookup) -> ProfileSettings:
    """:class:`ProfileSettings` from ``-v PROFILE`` and ``-v PROFILE_SECONDS`` (``ValueError``
    naming the variable)."""
    given = lookup("PROFILE", "auto")
    if str(given).strip().lower() == "auto":
        mode = "auto"
    else:
        try:
            mode = "on" if parse_switch("PROFILE", given) else "off"
        except ValueError:
            raise ValueError(f"-v PROFILE:{given}: expected auto (A/B runs only), on or off, "
                             f"got {given!r}") from None
    seconds = whole("PROFILE_SECONDS", lookup("PROFILE_SECONDS", 5), 1, "seconds")
    return ProfileSettings(mode, seconds)


@dataclass(frozen=True)
class ProfileRequest:
    """``-v PROFILE`` and ``PROFILE_SECONDS`` (``settings``) and the run folder profiles go
    into."""

    settings: ProfileSettings
    folder: Path

    def wanted(self, ab: bool) -> bool:
        """True when a test (an A/B one with ``ab``) gets a profiling trial."""
        return self.settings.wanted(ab)
