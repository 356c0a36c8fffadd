"""A foreground tool's own CPU time from the shell's ``times`` builtin: the command runs in a
subshell, and once it ended the wrapping shell prints a marker and ``times``, whose second
line is the CPU (user, system) of every child it waited for: the tool and its threads, with
no sampling process (a command value with ``times``: ``libraries.testbed.command``). Used
for the load generators whose CPU share decides whether the generator, not the path, set a
trial's pace (wrk2, oha)."""

from __future__ import annotations

import re

from libraries.testbed.command import TIMES_MARKER
from libraries.testbed.errors import ParseError

_TIMES = re.compile(r"(\d+)m([0-9.]+)s\s+(\d+)m([0-9.]+)s")


def children_cpu_s(text: str, source: str) -> float | None:
    """The children's CPU seconds (user + system) of the ``times`` after the marker in
    ``text``; None when the marker is absent (the command was not timed or died before);
    :class:`ParseError` quoting ``text`` when the marker is there but not two lines of
    times."""
    if TIMES_MARKER not in text:
        return None
    lines = text.split(TIMES_MARKER, 1)[1].strip().splitlines()
    match = _TIMES.fullmatch(lines[1].strip()) if len(lines) > 1 else None
    if match is None:
        raise ParseError(source, f"two lines of the shell's times after {TIMES_MARKER}", text)
    minutes_u, seconds_u, minutes_s, seconds_s = match.groups()
    return 60 * (int(minutes_u) + int(minutes_s)) + float(seconds_u) + float(seconds_s)


def before_times(text: str) -> str:
    """``text`` without the marker and the ``times`` lines after it."""
    return text.split(TIMES_MARKER, 1)[0]
