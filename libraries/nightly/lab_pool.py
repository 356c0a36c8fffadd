"""A pool of labs for a nightly run, shared by pabot's own resource sharing.

``python -m libraries.nightly --pool lab-a lab-b`` runs the suites with pabot over
several testbeds at once. Before anything runs, each lab gets a pre-flight check
(:func:`preflight`: the testbed is brought up and torn down, so SSH to every node and the
pings across every link and route are checked; a ``provision: netns`` lab is built and
removed). A lab that fails is left out of the run, with the reason in ``run.json`` and the
run report. The others become pabot value sets (:func:`resource_file`, ``--resourcefile``):
each suite's setup acquires a free one with PabotLib's ``Acquire Value Set`` (the keyword
``Set Up Testbed From Lab Pool``), takes its ``topology`` value, and its teardown releases it
on every outcome. A lab that fails its pre-flight there (its sshd died mid-run) is disabled
for the rest of the run (``Disable Value Set``) and the suite takes another; when none is
left, the suite fails naming each lab and why. Each acquire, release and disable is one JSON
line in ``<run dir>/pool.jsonl`` (:func:`read_events`, :func:`summarise`).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from libraries.testbed.errors import HostStackError
from libraries.testbed.provision import Testbed
from libraries.testbed.topology_file import load_topology, topology_path

LOG = logging.getLogger(__name__)
POOL_TAG = "hoststack-lab"
"""The pabot value-set tag of every lab of a nightly pool."""
EVENTS_FILE = "pool.jsonl"
RESOURCE_FILE = "labs.dat"
PREFLIGHT_TIMEOUT = 300.0


@dataclass(frozen=True)
class Lab:
    """A lab of the pool: its ``name`` (the topology's) and the ``topology`` to load."""

    name: str
    topology: str


@dataclass
class PoolReport:
    """Where each suite ran (``runs``: suite -> labs in order), the labs left out before the
    run (``excluded``) or disabled during it (``disabled``), lab -> reason."""

    labs: list[str] = field(default_factory=list)
    runs: dict[str, list[str]] = field(default_factory=dict)
    excluded: dict[str, str] = field(default_factory=dict)
    disabled: dict[str, str] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"labs": self.labs, "suites": self.runs, "excluded": self.excluded,
                "disabled": self.disabled}

    def lines(self) -> list[str]:
        """The report as text lines (the nightly's log, the run report)."""
        lines = [f"lab pool: {', '.join(self.labs) or 'no lab'}"]
        for suite, labs in sorted(self.runs.items()):
            lines.append(f"  {suite}: {' -> '.join(labs)}")
        for lab, reason in sorted(self.excluded.items()):
            lines.append(f"  {lab} left out before the run: {reason}")
        for lab, reason in sorted(self.disabled.items()):
            lines.append(f"  {lab} taken out during the run: {reason}")
        return lines


def _check(spec: str, results: dict[str, tuple[Lab | None, str]],
           up: Callable[[str], Testbed]) -> None:
    try:
        topology = load_topology(spec)
        lab = Lab(topology.name, str(topology_path(spec).resolve())
                  if topology_path(spec).exists() else spec)
        results[spec] = (lab, "")
        testbed = up(spec)
        testbed.down()
    except (HostStackError, OSError) as error:
        found = results.get(spec, (None, ""))[0]
        results[spec] = (found, str(error) or type(error).__name__)


def preflight(specs: Sequence[str], timeout: float = PREFLIGHT_TIMEOUT,
              up: Callable[[str], Testbed] | None = None) -> tuple[list[Lab], dict[str, str]]:
    """Check every lab in parallel: (labs that passed, lab or spec -> why the others did
    not). ``up`` brings a testbed up (default: :meth:`Testbed.up` as owner ``preflight``)."""
    results: dict[str, tuple[Lab | None, str]] = {}
    bring_up = up or (lambda spec: Testbed.up(spec, owner="preflight"))
    threads = [threading.Thread(target=_check, args=(spec, results, bring_up), daemon=True)
               for spec in specs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout)
    passed: list[Lab] = []
    failed: dict[str, str] = {}
    for spec in specs:
        lab, reason = results.get(spec, (None, f"no answer within {timeout:g} s"))
        name = lab.name if lab else spec
        if reason or lab is None:
            failed[name] = reason or "pre-flight did not finish"
        elif name in {p.name for p in passed}:
            failed[spec] = f"a second lab named {name!r} (topology names must differ)"
        else:
            passed.append(lab)
    return passed, failed


def resource_file(labs: Sequence[Lab], tag: str = POOL_TAG) -> str:
    """pabot's ``--resourcefile``: one value set per lab, tagged ``tag``, with its topology."""
    return "".join(f"[{lab.name}]\ntags: {tag}\ntopology: {lab.topology}\n\n" for lab in labs)


def read_events(path: Path) -> list[dict[str, Any]]:
    """The pool's events (one JSON object a line; an unreadable line is logged and skipped:
    the report is a convenience, the records are the data)."""
    if not path.is_file():
        return []
    events = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        try:
            event = json.loads(line)
        except ValueError:
            LOG.warning("%s:%d: ignoring unreadable pool event %r", path, number, line[:200])
            continue
        if isinstance(event, dict):
            events.append(event)
    return events


def summarise(labs: Sequence[Lab], excluded: dict[str, str],
              events: Sequence[dict[str, Any]]) -> PoolReport:
    """What ran where, from the events, plus the labs left out before the run."""
    report = PoolReport(labs=[lab.name for lab in labs], excluded=dict(excluded))
    for event in events:
        suite, lab = str(event.get("suite", "?")), str(event.get("lab", "?"))
        if event.get("event") == "acquired":
            report.runs.setdefault(suite, []).append(lab)
        elif event.get("event") == "disabled":
            report.disabled[lab] = str(event.get("reason", ""))
    return report
