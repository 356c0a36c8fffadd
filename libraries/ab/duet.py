"""Duet A/B: both sides measured at the same time, each on a testbed of its own, so that what
the machine does to one trial (a slow core, a burst of the host's own work) it does to the
other. On a shared machine whose cores slow down in episodes of seconds, a sequential round's
two trials meet different episodes; a duet round's two trials meet the same ones, and the
per-round ratio keeps only the change (benchmarks/README.md: the per-round spread fell 4-8x).

Two Robot runs of the same suites, one per side (``python -m libraries.ab.duet_run`` starts
them), each on its own namespace testbed on the same cores, talk over a socket pair their
launcher made. Side ``a`` leads (:func:`measure_duet`): per trial it tells side ``b`` to start
the same variant for the same seconds, runs its own, and takes ``b``'s result; looks, interval
and verdict are the sequential engine's (:mod:`libraries.ab.rounds`). Side ``b`` follows
(:func:`serve_duet`). Each test starts with a handshake naming it, so the two runs stay on the
same test; a test that one side ended without measuring (a skip, a failed set-up) is told to
the other (:meth:`DuetLink.test_ended`), which stops waiting for it.

What a duet verdict means: whether side b differs from side a *under the same load on the
same cores*. A change that moves work between resources the sides share (cores, caches,
memory bandwidth) can read a different size than when each side has the machine alone.
"""

from __future__ import annotations

import contextlib
import pickle
import socket
import struct
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from libraries.ab.rounds import SIDES, AbOutcome, judge_rounds
from libraries.results.measurement import Direction, Trial, TrialObserver
from libraries.results.plan import AbSettings, TrialPlan
from libraries.testbed.errors import HostStackError

HANDSHAKE_TIMEOUT = 900.0
"""Seconds a side waits for the other to reach the same test: the other side's set-up of it
(a testbed's processes, a VPP) may take this long."""
REPLY_SLACK = 120.0
"""Seconds beyond a trial's own that a side waits for the other's result of it."""
COMMAND_TIMEOUT = 600.0
"""Seconds side b waits for side a's next command inside a test (looks are judged in between)."""
DUET_ORDER = "duet: a and b at once in every round"
"""The record's ``rounds.order`` of a duet test."""
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


def measure_duet(variants: Mapping[str, Callable[[Trial], Any]], plan: TrialPlan,
                 build: Callable[[dict[str, list[Any]], float], Any],
                 metrics: Mapping[str, Direction], settings: AbSettings, link: DuetLink,
                 observer: TrialObserver | None = None,
                 clock: Callable[[], float] = time.monotonic) -> AbOutcome:
    """Side a's measurement of a duet test (after :meth:`DuetLink.start_test`): a warm-up of
    every variant on both sides at once, then rounds in which every variant runs on both sides
    at once, judged at the suite's looks as :func:`~libraries.ab.rounds.measure_ab` judges,
    until a look is conclusive, ``max_rounds`` or the budget. Side b's failure fails the test
    naming it; this side's failure tells side b to stop."""
    started = clock()
    results: dict[str, dict[str, list[Any]]] = {s: {v: [] for v in variants} for s in SIDES}
    trial_seconds = {s: 0.0 for s in SIDES}

    def run_round(number: int) -> None:
        for name, trial in variants.items():
            if observer is not None:
                observer.trial_started(f"a {name}", number, settings.max_rounds)
            (mine, mine_s), (theirs, theirs_s) = _pair(link, trial,
                                                       Trial(name, plan.duration, number))
            for side, result, seconds in (("a", mine, mine_s), ("b", theirs, theirs_s)):
                results[side][name].append(result)
                trial_seconds[side] += seconds
            if observer is not None:
                observer.trial_finished(f"a {name}", number, settings.max_rounds, mine)

    try:
        for name, trial in variants.items():
            if plan.warmup:
                _pair(link, trial, Trial(name, plan.warmup, 0))
        judged = judge_rounds(run_round, lambda: {s: build(results[s], trial_seconds[s])
                                                  for s in SIDES},
                              metrics, settings, started, clock)
        link.send("done", link.test, judged.stopped)
        link.finished = True
    finally:
        if not link.finished:
            link.test_ended(link.test, "side a stopped measuring it")
    return AbOutcome(judged.sides, results, judged.comparisons, judged.rounds, judged.stopped,
                     judged.looks, [], clock() - started, DUET_ORDER, 0)


def _pair(link: DuetLink, trial: Callable[[Trial], Any], given: Trial
          ) -> tuple[tuple[Any, float], tuple[Any, float]]:
    """Run ``given`` here and on side b at the same time: this side's result and seconds, then
    side b's."""
    link.send("trial", link.test, given.variant, given.seconds, given.round)
    started = time.monotonic()
    mine = trial(given)
    seconds = time.monotonic() - started
    what = f"side b's {'warm-up' if not given.measured else f'round {given.round}'} of " \
           f"{given.variant}"
    while True:
        kind, named, *rest = link.receive(given.seconds + REPLY_SLACK, what)
        if named != link.test:
            continue
        if kind == "result":
            return (mine, seconds), (rest[0], rest[1])
        if kind in ("error", "ended"):
            raise DuetError(f"A/B side b: {rest[0] if rest else 'ended the test'}")
        raise DuetError(f"duet: side b sent {kind!r} while side a waited for {what}")


def serve_duet(variants: Mapping[str, Callable[[Trial], Any]], link: DuetLink) -> str:
    """Side b's part of a duet test (after :meth:`DuetLink.start_test`): run each trial side a
    asks for and send its result, until side a says the test is done; returns why it stopped
    (side a's words). A trial that fails here is sent to side a and raised here."""
    while True:
        kind, named, *rest = link.receive(COMMAND_TIMEOUT, "side a's next trial")
        if named != link.test:
            continue
        if kind == "done":
            link.finished = True
            return str(rest[0])
        if kind == "ended":
            link.finished = True
            raise DuetError(f"duet: side a stopped test {link.test!r}: {rest[0]}")
        if kind != "trial":
            raise DuetError(f"duet: side a sent {kind!r} while side b waited for a trial")
        variant, seconds, round_number = rest
        if variant not in variants:
            link.send("error", link.test, f"side b has no variant {variant!r} "
                                          f"(it measures {', '.join(variants)})")
            raise DuetError(f"duet: side a asked for variant {variant!r}, which side b's test "
                            f"does not measure ({', '.join(variants)})")
        started = time.monotonic()
        try:
            result = variants[variant](Trial(variant, seconds, round_number))
        except Exception as error:
            link.send("error", link.test, str(error))
            raise
        link.send("result", link.test, result, time.monotonic() - started)
