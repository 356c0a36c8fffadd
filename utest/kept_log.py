"""A case's log that keeps what it was told (a :class:`libraries.cases.context.Log`), for the
tests of code below the keyword layer that logs through the case context."""

from __future__ import annotations


class KeptLog:
    """Every line in ``lines``: info as it is, a warning behind ``WARN``, a folded text by its
    title."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def info(self, text: str) -> None:
        self.lines.append(text)

    def warn(self, text: str) -> None:
        self.lines.append(f"WARN {text}")

    def folded(self, title: str, text: str) -> None:
        self.lines.append(title)
