"""A suite's side of the lab pool: pabot's PabotLib value sets plus the pool's event log.

The nightly runner (:mod:`libraries.nightly.lab_pool`) gives pabot one value set per lab (tag
``-v LAB_POOL:<tag>``, value ``topology``) and ``-v POOL_LOG:<file>``. :class:`PoolClient`
acquires, disables and releases through the PabotLib library instance the suite imported
(found by :mod:`libraries.keywords.context`, as ``-v POOL_LOG``)
(``resources/testbed.resource``: ``Library pabot.PabotLib``), and appends one JSON line per
event to the log (one ``write`` call per line: several pabot processes append at once).
"""

from __future__ import annotations

import datetime
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from libraries.keywords import context


@dataclass
class PoolClient:
    """Value sets of ``tag`` through ``pabotlib``; events to ``log`` (None: not logged)."""

    pabotlib: Any
    tag: str
    log: Path | None
    suite: str
    lab: str | None = None

    @classmethod
    def for_suite(cls, tag: str) -> PoolClient:
        """The running suite's client of pool ``tag`` (events to ``-v POOL_LOG``)."""
        return cls(context.pabotlib(), tag, context.settings().pool_log,
                   str(context.variable("SUITE NAME", "?")))

    def event(self, kind: str, lab: str, **extra: str) -> None:
        if self.log is None:
            return
        entry = {"time": datetime.datetime.now(datetime.UTC).isoformat(), "event": kind,
                 "lab": lab, "suite": self.suite, "pid": os.getpid(), **extra}
        fd = os.open(self.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, (json.dumps(entry) + "\n").encode())
        finally:
            os.close(fd)

    def acquire(self) -> tuple[str, str]:
        """(lab, topology) of a free lab; waits while all are busy. Raises what PabotLib
        raises when no lab of the tag is left (all disabled) or no pool was given."""
        self.lab = str(self.pabotlib.acquire_value_set(self.tag))
        topology = str(self.pabotlib.get_value_from_set("topology"))
        self.event("acquired", self.lab, topology=topology)
        return self.lab, topology

    def disable(self, reason: str) -> None:
        """Take the acquired lab out of the pool for the rest of the run."""
        if self.lab is not None:
            self.pabotlib.disable_value_set()
            self.event("disabled", self.lab, reason=reason)
            self.lab = None

    def release(self) -> None:
        """Give the acquired lab back to the pool."""
        if self.lab is not None:
            self.pabotlib.release_value_set()
            self.event("released", self.lab)
            self.lab = None
