"""One comparison of a bisection as a Robot A/B run of one test.

For builds ``a`` and ``b`` the runner writes a comparison file (side a = build a, side b =
build b) into the comparison's folder, runs ``robot -v AB:<file> -t <test>`` on the suite
folder of the test's case, and reads the A/B verdict of the followed metric from the record
the run wrote. A second attempt (after an inconclusive first) runs with the round count and
the budget doubled. Every comparison is its own Robot run: its suite setup builds the testbed
and its teardown removes it, failures included, so nothing stays running or configured between
comparisons. The files each side ran (the record's ``ab.sides.<side>.files``: the sha256 the A/B
session took of every file a side names and loads) go to the bisection's
:class:`~libraries.bisect.identity.Identities`, so builds found to be the same files need no
further comparison.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import yaml
from robot.api import TestSuiteBuilder

from libraries.ab.ab_settings import AB_BUDGET, AB_MAX_ROUNDS
from libraries.bisect.bisection import Outcome
from libraries.bisect.builds import Builds
from libraries.bisect.identity import Identities
from libraries.results.records import RecordError, find_record_files, iter_records

REPO = Path(__file__).resolve().parents[2]
ROBOT_MARGIN_S = 600.0
"""Seconds a comparison's Robot run may take beyond its A/B budget (testbed, warm-ups, the
last round) before it is stopped."""
STOP_GRACE_S = 60.0
"""Seconds a Robot run past its time gets after a Ctrl-C to tear its testbed down."""


@dataclass(frozen=True)
class TestRef:
    """A test found in the suites: its name, its case folder (``tests/<case>``) and the
    suite file."""

    __test__ = False

    name: str
    case: str
    source: Path


def find_test(wanted: str, tests_dir: Path = REPO / "tests") -> TestRef:
    """The test ``wanted`` names: a test name, ``<case>/<name>`` or a record's test id
    ``<topology>/<case>/<name>``. ``ValueError`` naming what was looked for and where."""
    parts = wanted.strip("/").split("/")
    name, case = parts[-1], (parts[-2] if len(parts) > 1 else None)
    found: list[TestRef] = []

    def walk(suite: Any) -> None:
        for test in suite.tests:
            source = Path(test.source)
            if test.name == name and (case is None or source.parent.name == case):
                found.append(TestRef(test.name, source.parent.name, source))
        for child in suite.suites:
            walk(child)

    walk(TestSuiteBuilder().build(str(tests_dir)))
    if not found:
        raise ValueError(f"unknown test {wanted!r}: no test named {name!r}"
                         + (f" in case {case}" if case else "") + f" under {tests_dir}")
    if len(found) > 1:
        raise ValueError(f"test {wanted!r} is ambiguous: " + ", ".join(
            f"{ref.case}/{ref.name} ({ref.source})" for ref in found) + ": give <case>/<name>")
    return found[0]


MARGIN_PCT = 3.0
"""Bisect's own margin (``--margin``), percent: a step to find must be clearly larger than it
(e.g. 5 %); the A/B runs' 1 % leaves a pair without a change undecided for hundreds of rounds
on a noisy machine."""


@dataclass(frozen=True)
class RobotComparisons:
    """How to run the comparisons: topology, test, followed metric (None: the test's first
    A/B metric), the A/B round limit, margin (percent: a change within it is "no change") and
    budget of a first attempt, the output folder, extra Robot arguments (``-v DURATION:...``),
    and where the files each side ran are learned (``identities``)."""

    topology: str
    test: TestRef
    builds: Builds
    out: Path
    metric: str | None = None
    max_rounds: int = int(AB_MAX_ROUNDS.default)
    margin_pct: float = MARGIN_PCT
    budget_s: float = float(AB_BUDGET.default)
    extra: tuple[str, ...] = ()
    robot: tuple[str, ...] = (sys.executable, "-m", "robot")
    made: list[Path] = field(default_factory=list)
    identities: Identities | None = None

    def __call__(self, a: int, b: int, attempt: int) -> Outcome:
        """Compare build ``a`` with build ``b`` (see the module docstring)."""
        names = self.builds.names
        folder = self.out / f"{len(self.made) + 1:02d}-{_safe(names[a])}-vs-{_safe(names[b])}"
        self.made.append(folder)
        folder.mkdir(parents=True, exist_ok=True)
        sides = self.builds.sides
        comparison = {"name": f"bisect {self.builds.title}: {names[a]} vs {names[b]}",
                      "a": {"name": names[a], **sides[a].changes()},
                      "b": {"name": names[b], **sides[b].changes()}}
        (folder / "comparison.yaml").write_text(yaml.safe_dump(comparison, sort_keys=False),
                                                encoding="utf-8")
        rounds, budget = self.max_rounds * attempt, self.budget_s * attempt
        command = [*self.robot, "-v", f"TOPOLOGY:{self.topology}",
                   "-v", f"AB:{folder / 'comparison.yaml'}", "-v", f"AB_MAX_ROUNDS:{rounds}",
                   "-v", f"AB_BUDGET:{budget:g}", "-v", f"AB_MARGIN:{self.margin_pct:g}",
                   "-v", "AB_INCONCLUSIVE:pass",
                   "-v", "TREND_STORE:NONE", *self.extra, "-d", str(folder),
                   "-t", self.test.name, str(REPO / "tests" / self.test.case)]
        started = time.monotonic()
        with (folder / "console.log").open("w", encoding="utf-8") as console:
            exit_code = run_robot(command, console, budget + ROBOT_MARGIN_S)
        minutes = (time.monotonic() - started) / 60
        if self.identities is not None:
            ran = record_files(folder, self.test.name)
            for key, index in (("a", a), ("b", b)):
                if key in ran:
                    self.identities.learn(index, ran[key], f"the record of {folder.name}")
        return read_outcome(folder, self.test.name, self.metric, a, b, attempt, minutes,
                            exit_code)


def run_robot(command: list[str], console: IO[str], timeout: float) -> int | str:
    """Run ``command`` (a Robot run) to its end; its exit code. Past ``timeout`` s it is
    stopped as a person would: Ctrl-C (Robot stops, its teardowns remove the testbed), a
    second Ctrl-C after :data:`STOP_GRACE_S` (the testbed is removed at once), then killed;
    the answer then says it timed out."""
    process = subprocess.Popen(command, stdout=console, stderr=subprocess.STDOUT, cwd=REPO)
    try:
        return process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        for grace in (STOP_GRACE_S, STOP_GRACE_S / 2):
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=grace)
                break
            except subprocess.TimeoutExpired:
                continue
        else:
            process.kill()
            process.wait()
        return f"timed out after {timeout:g} s and was stopped"


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in name)[:40]


def _last_record(folder: Path, test: str) -> tuple[dict[str, Any] | None, list[str]]:
    """The last record ``folder``'s run wrote for ``test`` (None: none), and the problems of
    the unreadable ones."""
    records = []
    problems: list[str] = []
    try:
        for path in find_record_files([folder]):
            records += [r for r in iter_records(path, problems) if r.get("name") == test]
    except RecordError as error:
        problems.append(str(error))
    return (records[-1] if records else None), problems


def record_files(folder: Path, test: str) -> dict[str, dict[str, str]]:
    """Per side (``a``, ``b``) the files it ran, as the record ``folder``'s run wrote for
    ``test`` holds them (``ab.sides.<side>.files``; a side that names no file has none)."""
    record, _ = _last_record(folder, test)
    sides = ((record or {}).get("ab") or {}).get("sides") or {}
    found = {}
    for key in ("a", "b"):
        side = sides.get(key)
        if isinstance(side, dict):
            files = side.get("files") or {}
            if isinstance(files, dict):
                found[key] = {str(k): str(v) for k, v in files.items()}
    return found


def read_outcome(folder: Path, test: str, metric: str | None, a: int, b: int, attempt: int,
                 minutes: float, exit_code: int | str) -> Outcome:
    """The followed metric's A/B verdict in the record ``folder``'s run wrote for ``test``;
    ``failed`` with why when there is none (the test's message from ``tests.jsonl``)."""
    base = {"a": a, "b": b, "attempt": attempt, "minutes": minutes}
    record, problems = _last_record(folder, test)
    block = (record or {}).get("ab") or {}
    metrics = block.get("metrics") or {}
    chosen = metric or next(iter(metrics), None)
    if chosen == "cost" and chosen not in metrics:  # --metric cost: the test's judged cost
        chosen = next((m for m, entry in metrics.items() if entry.get("cost")), chosen)
    if chosen is None or chosen not in metrics:
        why = (f"metric {metric!r} not compared (the test compared: "
               f"{', '.join(metrics) or 'nothing'})" if metrics else
               f"no A/B record (robot exit {exit_code}): {_message(folder, test)}")
        if problems:
            why += f"; unreadable records: {'; '.join(problems)}"
        return Outcome(verdict="failed", detail=why + f" (see {folder})", **base)
    entry = metrics[chosen]
    if record is not None and record.get("invalid"):
        return Outcome(verdict="failed", detail=f"a side's result is invalid: "
                       f"{record['invalid']} (see {folder})", **base)
    pct = lambda ratio: None if ratio is None else (ratio - 1) * 100  # noqa: E731
    return Outcome(verdict=entry["verdict"], change_pct=entry.get("change_pct"),
                   low_pct=pct(entry.get("low")), high_pct=pct(entry.get("high")),
                   rounds=int((block.get("rounds") or {}).get("run") or 0),
                   detail=f"{chosen}{_profile_hint(record or {})} (see {folder})", **base)


def _profile_hint(record: dict[str, Any]) -> str:
    """What the comparison's profiles say (the hint the profiling trial recorded: the frame
    that grew beyond noise with its callers, "no function changed beyond noise", or that the
    profile does not explain the change); a record from before hints: the function whose
    share grew most; nothing without a differential."""
    diff = ((record.get("evidence") or {}).get("profile") or {}).get("diff") or {}
    hint = diff.get("hint")
    if hint and hint.get("text"):
        return f"; profile: {hint['text']}"
    top = diff.get("grown")
    if not top:
        return ""
    return (f"; profile: b spends a larger share of the DUT's CPU in {top['function']} "
            f"({top['a_pct']:.1f} % -> {top['b_pct']:.1f} %)")


def _message(folder: Path, test: str) -> str:
    for path in sorted(folder.glob("*/tests.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                continue
            if entry.get("name") == test:
                return f"{entry.get('status')}: {entry.get('message') or '(no message)'}"
    return "the test wrote nothing (see console.log)"
