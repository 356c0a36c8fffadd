"""The socket between the two runs of a duet A/B test (:mod:`libraries.ab.duet`): which side
a run leads or follows, pickled messages sent whole and received with a timeout, and the
handshake that keeps both runs on the same test."""

from __future__ import annotations

import contextlib
import pickle
import socket
import struct
import time
from dataclasses import dataclass
from typing import Any

from libraries.ab.rounds import SIDES
from libraries.testbed.errors import HostStackError

HANDSHAKE_TIMEOUT = 900.0
"""Seconds a side waits for the other to reach the same test: the other side's set-up of it
(a testbed's processes, a VPP) may take this long."""
_HEADER = struct.Struct("!I")
_LARGEST = 64 * 1024 * 1024


class DuetError(HostStackError):
    """The other side of a duet did not answer, answered out of step, or failed."""


class OtherSideEnded(DuetError):
    """The other side ended the test without measuring it (its skip or failure is its run's
    to report)."""


@dataclass(frozen=True)
class DuetRole:
    """Which side this run measures (``a`` leads, ``b`` follows) and the file descriptor of
    its end of the launcher's socket pair: ``-v AB_DUET:a:5``."""

    side: str
    fd: int

    @classmethod
    def parse(cls, text: str) -> DuetRole:
        """``a:5`` -> DuetRole("a", 5); anything else is an error naming the variable."""
        side, _, fd = text.strip().partition(":")
        if side not in SIDES or not fd.isdigit():
            raise ValueError(f"-v AB_DUET:{text}: expected <side>:<fd> with side a or b and the "
                             "descriptor of the launcher's socket (python -m "
                             "libraries.ab.duet_run sets it)")
        return cls(side, int(fd))


class DuetLink:
    """One end of the duet's socket: pickled messages, each a tuple ``(kind, test, ...)``, sent
    whole and received with a timeout. Both ends are this run's own processes, started by the
    same launcher and user (a socket pair, never a listening socket)."""

    def __init__(self, sock: socket.socket, side: str):
        self.sock, self.side = sock, side
        self.test = ""
        self.finished = True

    @classmethod
    def from_role(cls, role: DuetRole) -> DuetLink:
        """The link of ``role``'s descriptor; an error naming it if it is not a socket."""
        try:
            sock = socket.socket(fileno=role.fd)
        except OSError as error:
            raise DuetError(f"-v AB_DUET:{role.side}:{role.fd}: descriptor {role.fd} is not "
                            f"the launcher's socket ({error}); start duet runs with python -m "
                            "libraries.ab.duet_run") from None
        return cls(sock, role.side)

    @property
    def other(self) -> str:
        """The other side's name."""
        return "b" if self.side == "a" else "a"

    def send(self, *message: Any) -> None:
        """Send ``(kind, test, ...)``; an error if the other side is gone."""
        data = pickle.dumps(message)
        try:
            self.sock.sendall(_HEADER.pack(len(data)) + data)
        except OSError as error:
            raise DuetError(f"duet: side {self.other} is gone ({error})") from None

    def receive(self, timeout: float, waiting_for: str) -> tuple[Any, ...]:
        """The next message, within ``timeout`` s; an error saying what was awaited."""
        self.sock.settimeout(timeout)
        try:
            size = _HEADER.unpack(self._exactly(_HEADER.size, waiting_for))[0]
            if size > _LARGEST:
                raise DuetError(f"duet: side {self.other} sent a message of {size} bytes "
                                f"while this side waited for {waiting_for}")
            message = pickle.loads(self._exactly(size, waiting_for))  # noqa: S301 (our own run)
        except TimeoutError:
            raise DuetError(f"duet: side {self.other} sent nothing in {timeout:g} s while "
                            f"this side waited for {waiting_for}") from None
        finally:
            self.sock.settimeout(None)
        if not isinstance(message, tuple) or len(message) < 2:
            raise DuetError(f"duet: side {self.other} sent {message!r} while this side waited "
                            f"for {waiting_for}")
        return message

    def _exactly(self, size: int, waiting_for: str) -> bytes:
        data = b""
        while len(data) < size:
            chunk = self.sock.recv(size - len(data))
            if not chunk:
                raise DuetError(f"duet: side {self.other}'s run ended while this side waited "
                                f"for {waiting_for}")
            data += chunk
        return data

    def start_test(self, test: str) -> None:
        """Meet the other side at ``test``: say so and wait until it says the same. What it
        says of earlier tests (a result or an end this side no longer waits for) is passed
        over; its end of *this* test without measuring it is an error quoting its reason."""
        self.test, self.finished = test, False
        self.send("measure", test)
        deadline = time.monotonic() + HANDSHAKE_TIMEOUT
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise DuetError(f"duet: side {self.other} did not reach test {test!r} in "
                                f"{HANDSHAKE_TIMEOUT:g} s")
            kind, named, *rest = self.receive(left, f"side {self.other} to reach {test!r}")
            if named != test:
                continue
            if kind == "measure":
                return
            if kind == "ended":
                raise OtherSideEnded(f"duet: side {self.other} ended test {test!r} without "
                                     f"measuring it: {rest[0] if rest else 'no reason given'}")

    def test_ended(self, test: str, why: str) -> None:
        """``test`` ended here: unless this side measured it to the end with the other side,
        tell the other side (with ``why``) so it stops waiting; nothing if it is gone."""
        if test == self.test and self.finished:
            return
        self.test, self.finished = test, True
        with contextlib.suppress(DuetError):
            self.send("ended", test, why)

    def close(self) -> None:
        """Close this end (the other side then reads the run's end)."""
        self.sock.close()
