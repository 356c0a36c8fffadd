"""A second Ctrl-C removes the testbed at once instead of abandoning it.

Robot Framework stops gracefully on a first SIGINT/SIGTERM (the running keyword fails, the
teardowns run) and forcibly on a second: it raises ``SystemExit`` wherever the interpreter is,
teardowns are skipped, so a testbed and every process on it stay behind, and Robot leaves an
``output.xml`` that ``rebot`` cannot read (an open ``<kw>`` closed by ``<errors>``: Robot 7.5's
own behaviour, shown without this library with a one-keyword suite).

:class:`InterruptGuard` wraps the signal handler Robot installed. The first signal goes to
Robot as before. On the second, the guard runs the registered emergency clean-ups (a
namespace testbed's teardown: every process in its namespaces, the namespaces themselves,
its files; a few hundred milliseconds, all local) and does *not* pass the signal on: Robot's
graceful stop, already under way, then finishes, its remaining teardowns find nothing left to
do, and its output is whole. A third signal goes to Robot, which then forces the exit.

Process-wide by nature (signal handlers are): the guard is the installed handler itself,
found again with ``signal.getsignal``; no module state.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import sys
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

SIGNALS = (signal.SIGINT, signal.SIGTERM)
Cleanup = Callable[[], None]


class InterruptGuard:
    """The SIGINT/SIGTERM handler of a process that owns testbeds (see the module docstring).

    ``previous`` maps each signal to the handler the guard replaced (Robot's, or Python's).
    """

    def __init__(self, previous: dict[int, Any]):
        self._previous = previous
        self._count = 0
        self._cleanups: dict[str, Cleanup] = {}

    # -- installation --------------------------------------------------------------------------

    @classmethod
    def install(cls) -> InterruptGuard | None:
        """The guard handling SIGINT/SIGTERM in this process, installed on first use; None
        outside the main thread (only it may set signal handlers)."""
        if threading.current_thread() is not threading.main_thread():
            return None
        current = signal.getsignal(signal.SIGINT)
        if isinstance(current, cls):
            return current
        guard = cls({sig: signal.getsignal(sig) for sig in SIGNALS})
        for sig in SIGNALS:
            signal.signal(sig, guard)
        return guard

    def protect(self, name: str, cleanup: Cleanup) -> None:
        """Run ``cleanup`` on a second signal (``name`` says what it removes)."""
        self._cleanups[name] = cleanup

    def release(self, name: str) -> None:
        """``name`` was removed the normal way: nothing to do for it any more."""
        self._cleanups.pop(name, None)

    # -- the handler ---------------------------------------------------------------------------

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        self._count += 1
        if self._count == 2 and self._cleanups:
            self._emergency()
            return
        self._forward(signum, frame)

    def _emergency(self) -> None:
        names = ", ".join(self._cleanups)
        _say(f"Second signal: removing {names} now; the run ends without measuring "
             f"(a third signal forces the exit and leaves output.xml unreadable).")
        with _logging_to_stderr():
            for name, cleanup in list(self._cleanups.items()):
                try:
                    cleanup()
                except Exception as error:
                    _say(f"removing {name} after the signal failed: {error}")
                self._cleanups.pop(name, None)

    def _forward(self, signum: int, frame: FrameType | None) -> None:
        previous = self._previous.get(signum)
        if callable(previous):
            previous(signum, frame)
        elif previous == signal.SIG_IGN:
            return
        elif signum == signal.SIGINT:
            signal.default_int_handler(signum, frame)
        else:
            raise SystemExit(128 + signum)


@contextlib.contextmanager
def _logging_to_stderr():
    """While the emergency clean-ups run, the root logger writes warnings to stderr and
    nothing to Robot: Robot's handler writes into output.xml, and the interrupted code may be
    in the middle of writing an element there (a clean-up's ``LOG.info`` from the handler
    put a ``<msg>`` inside an ``<arg>``: "Incompatible child element 'msg' for 'arg'", CI of
    stop 58)."""
    root = logging.getLogger()
    saved = root.handlers[:]
    console = logging.StreamHandler(sys.__stderr__)
    console.setLevel(logging.WARNING)
    root.handlers = [console]
    try:
        yield
    finally:
        root.handlers = saved


def _say(message: str) -> None:
    """Tell the console, from a signal handler: only stderr, never ``logging``, which Robot
    writes into output.xml (a message logged while Robot was writing another nested one
    inside it, and output.xml could not be read: "Incompatible child element 'msg' for
    'msg'", a CI-style run of the interrupt test)."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        sys.__stderr__.write(message + "\n")
        sys.__stderr__.flush()
