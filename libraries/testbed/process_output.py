"""Waiting for a background process to say something: a tracer's header, a holder's "ready".

A program that makes its set-up calls and then prints a line is ready once the line is in its
output; it may also end first, or say nothing in time. :func:`wait_for_output` tells the three
apart and hands back the output, and the caller words the error for its program. Works with
any node that reads a started process's output and looks for it (``read_log``,
``is_running``: :class:`~libraries.testbed.node.Node`, and the unit tests' local node).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Output:
    """The process's output ``text`` when the wait ended; ``found`` whether it holds the
    marker, ``ended`` whether the process had ended (neither: the wait timed out)."""

    text: str
    found: bool
    ended: bool


def wait_for_output(node: Any, process: Any, marker: str, timeout: float,
                    poll: float = 0.1) -> Output:
    """Read ``process``'s output on ``node`` until it holds ``marker``, the process ends (its
    output read once more: a process that is gone has written all it will) or ``timeout`` s
    pass."""
    deadline = time.monotonic() + timeout
    while True:
        text = node.read_log(process)
        if marker in text:
            return Output(text, found=True, ended=False)
        if not node.is_running(process):
            text = node.read_log(process)
            return Output(text, found=marker in text, ended=True)
        if time.monotonic() > deadline:
            return Output(text, found=False, ended=False)
        time.sleep(poll)
