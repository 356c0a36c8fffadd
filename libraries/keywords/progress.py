"""Per-trial progress on Robot Framework's console: ``proxy trial 2/5: 15.3k req/s``; and the
lines of longer steps (:func:`console_line`: each capacity window, each A/B look).

Long nightly tests (``-v TRIALS:5 -v DURATION:30``) are otherwise silent for minutes. Lines go
to Robot's own verbose console, the way Robot prints a warning in the middle of a test: the
line, then the test's name again so its status lands where it belongs. Under ``--console
dotted``, ``quiet`` or ``none`` nothing is printed, and never more than one line per
:data:`MIN_INTERVAL` seconds.

Robot has no public API that says which console is active; :func:`verbose_console` looks at
the logger's registered console (a private attribute of Robot 7) and prints nothing when it
cannot tell.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from robot.output import LOGGER

from libraries.results.headline import figure

MIN_INTERVAL = 3.0
"""Seconds between two progress lines at least."""


def verbose_console() -> Any | None:
    """Robot's verbose console object when that is the console in use, else None."""
    console = getattr(LOGGER, "_Logger__console", None)
    console = getattr(console, "listener", console)  # Robot 7 wraps it in a listener facade
    if type(console).__name__ != "VerboseConsole" or not hasattr(console, "current_info"):
        return None
    return console


def describe_result(result: Any) -> str:
    """A trial result's headline figure: requests/s (wrk) or Gbit/s (iperf3)."""
    if hasattr(result, "requests_per_second"):
        return f"{figure(result.requests_per_second)} req/s"
    if hasattr(result, "gbps"):
        return f"{result.gbps:.3g} Gbit/s"
    return "done"


def console_line(line: str) -> None:
    """``line`` on Robot's verbose console now, unthrottled (a long step's news: a capacity
    window, an A/B look); nothing under another console."""
    progress = ConsoleProgress()
    if progress.on_console:
        progress.write(line)


class ConsoleProgress:
    """A trial observer (see ``libraries.results.measurement.TrialObserver``) that prints one
    short line per measured trial on Robot's verbose console."""

    def __init__(self, console: Any | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 min_interval: float = MIN_INTERVAL) -> None:
        self._console = console if console is not None else verbose_console()
        self._clock = clock
        self._min_interval = min_interval
        self._last: float | None = None

    @property
    def on_console(self) -> bool:
        """Whether Robot's verbose console is there to print on."""
        return self._console is not None

    def trial_started(self, variant: str, round_number: int, total: int) -> None:
        """Nothing to say before a trial."""

    def trial_finished(self, variant: str, round_number: int, total: int,
                       result: Any) -> None:
        """Print ``<variant> trial N/M: <figure>`` unless a line went out too recently."""
        if self._console is None:
            return
        now = self._clock()
        if self._last is not None and now - self._last < self._min_interval:
            return
        self._last = now
        self.write(f"{variant} trial {round_number}/{total}: {describe_result(result)}")

    def write(self, line: str) -> None:
        """``line`` on its own console line, then the test's name line again."""
        console = self._console
        stream = getattr(console, "_stdout", None)
        tty = bool(getattr(getattr(stream, "stream", None), "isatty", lambda: False)())
        if tty:
            console.clear()
        else:
            console.write("\n")
        console.write(f"  {line}\n")
        console.write(console.current_info)
        console.marker_count = 0
