"""Nightly runner: run the suites, merge the outputs, regenerate the trend dashboard, gate.

    python -m libraries.nightly [--topology 3node ...] [--suites tests ...] [--processes N]
                                [--pabot] [--results results] [-- EXTRA ROBOT ARGS]
    python -m libraries.nightly --pool lab-a lab-b [--suites tests ...] [--processes N]
    python -m libraries.nightly --reference reference.yaml [--duet] [--topology 3node ...]

One run = one run id ``<YYYYmmdd-HHMMSS>-<4 hex>`` (UTC) and one directory
``<results>/<run-id>/`` holding ``run.json`` (run id, start / end time, project revision,
topologies, host, suites, commands, exit codes), the Robot outputs and ``records.jsonl`` (written
by the suites' Results library, which is given ``-v RUN_ID:<id>``). Each topology gets its own
``robot`` (or ``pabot --processes N`` when ``--pabot`` is given or ``--processes`` > 1) run; with
several topologies they run at the same time, each in ``<run-dir>/<topology>/`` with its console
in ``console.log`` there, and ``rebot`` combines their ``output.xml`` files into
``<run-dir>/output.xml``, ``log.html`` and ``report.html``. With ``--pool`` one pabot run
shares the labs between the suites (:mod:`libraries.nightly.lab_pool`: pre-flight, value sets, what
ran where in ``run.json``). Then the run is ingested into the history (``<results>/history``
or ``--store``) and ``python -m libraries.report`` rebuilds ``<results>/trend.html`` and
``trend.md`` from it.

With ``--reference FILE`` every measuring test runs as an A/B test, the pinned reference
(side a) against the topology as it is tonight (side b): see :mod:`libraries.nightly.reference`
(the variables it sets, overridable after ``--``). The history then holds per test and metric
the series of today / reference, keyed by the reference, and the gate judges that ratio.
With ``--duet`` as well, the reference and today run at the same time, each on a namespace
testbed of its own (:mod:`libraries.ab.duet_run`; side a's run, whose records the history
takes, in ``<run-dir>/a/`` or ``<run-dir>/<topology>/a/``, side b's beside it in ``b/``).

Exit status: 252 bad input, refused before anything ran (bad options, topology, --reference,
--series or --duet, a ``-v`` setting after ``--``: :mod:`libraries.cases.input_checks`, as
``hoststack-perf nightly``);
then, first match wins: 4 a suite run could not run or was interrupted (Robot exit code >= 251,
missing command, timeout); 2 the records are bad (trend tool exit 2); 3 the newest sample of
some series is a regression; 1 tests failed (Robot exit 1-250); 0 otherwise (summary.md).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import secrets
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

from libraries.cases.input_checks import run_problems
from libraries.history.ingest import ingest
from libraries.history.store import Store, default_store
from libraries.nightly.arguments import parser
from libraries.nightly.lab_pool import (
    EVENTS_FILE,
    POOL_TAG,
    RESOURCE_FILE,
    Lab,
    preflight,
    read_events,
    resource_file,
    summarise,
)
from libraries.nightly.night_summary import write_night_summary
from libraries.nightly.planned import PlanError, night_family
from libraries.nightly.reference import FILE as REFERENCE_FILE
from libraries.nightly.reference import (
    Reference,
    comparison_text,
    load_reference,
    robot_variables,
    write_comparison,
)
from libraries.report import trend_command as trend
from libraries.report.run_report import write_run_report
from libraries.results.family import NightFamily
from libraries.results.records import RecordError
from libraries.testbed.errors import TopologyError
from libraries.testbed.topology_file import load_topology

LOG = logging.getLogger(__name__)

EXIT_OK, EXIT_TESTS_FAILED, EXIT_BAD_RECORDS, EXIT_REGRESSION, EXIT_RUN_ERROR = 0, 1, 2, 3, 4
EXIT_BAD_INPUT = 252
"""Bad input, refused before anything ran (``hoststack-perf``'s one code for it)."""
ROBOT_ERROR_MIN = 251
"""Robot Framework exit codes from 251 up mean help / bad options or data / interrupted."""
EVERY_ROW = ("--variable", "EXTENDED:yes")
"""The nightly runs the extended rows too (a later ``-- -v EXTENDED:no`` overrides it)."""


@dataclass(frozen=True)
class Options:
    """What to run: ``topologies``, ``suites``, ``processes``, ``pabot`` (force pabot),
    ``results`` root, ``extra`` robot arguments, tool commands, ``timeout`` per run (s),
    the labs of a ``pool``, the history ``store``, the ``reference`` file, the night's
    ``family`` (level and planned A/B series, :mod:`libraries.results.family`)."""

    topologies: tuple[str, ...] = ("3node",)
    suites: tuple[str, ...] = ("tests",)
    processes: int = 1
    pabot: bool = False
    results: Path = Path("results")
    extra: tuple[str, ...] = ()
    robot: str = "robot"
    pabot_cmd: str = "pabot"
    rebot: str = "rebot"
    timeout: float = 6 * 3600.0
    pool: tuple[str, ...] = ()
    store: Path | None = None
    reference: Path | None = None
    duet: bool = False
    family: NightFamily = field(default_factory=NightFamily)


@dataclass(frozen=True)
class Invocation:
    """One suite run: its ``topology``, ``command``, ``output_dir``, ``console`` log file
    (None: the console goes to ours) and working directory ``cwd`` (None: ours; parallel pabot
    runs each get their own, as pabot keeps ``.pabotsuitenames`` in the working directory)."""

    topology: str
    command: tuple[str, ...]
    output_dir: Path
    console: Path | None
    cwd: Path | None = None


@dataclass(frozen=True)
class Plan:
    """Everything a nightly run does: ``run_id``, ``run_dir``, ``invocations``, the ``merge``
    command (None with one invocation), and the trend outputs ``html`` / ``markdown``."""

    run_id: str
    run_dir: Path
    invocations: tuple[Invocation, ...]
    merge: tuple[str, ...] | None
    html: Path
    markdown: Path


@dataclass
class Outcome:
    """Exit codes of a run: per invocation, of the merge and of the trend tool; ``status``."""

    run_codes: dict[str, int] = field(default_factory=dict)
    merge_code: int | None = None
    trend_code: int | None = None
    status: int = EXIT_OK


def new_run_id(now: datetime | None = None) -> str:
    """``YYYYmmdd-HHMMSS-xxxx``: UTC time plus 4 random hex digits (unique for parallel runs)."""
    return f"{(now or datetime.now(UTC)):%Y%m%d-%H%M%S}-{secrets.token_hex(2)}"


def resolve_tool(name: str) -> str:
    """A tool on PATH, else the one installed beside this Python (the project venv), else name."""
    found = shutil.which(name)
    if found:
        return found
    beside = Path(sys.executable).parent / name
    return str(beside) if beside.exists() else name


def build_plan(options: Options, run_id: str) -> Plan:
    """The commands of a nightly run (pure: nothing is run or written)."""
    run_dir = options.results.resolve() / run_id
    suites = [str(Path(suite).resolve()) for suite in options.suites]
    reference = robot_variables(run_dir, options.duet, options.family) \
        if options.reference else ()
    if options.pool:  # one pabot run; each suite acquires a lab of the pool
        command = [options.pabot_cmd, "--processes",
                   str(options.processes if options.processes > 1 else len(options.pool)),
                   "--pabotlibport", "0", "--resourcefile", str(run_dir / RESOURCE_FILE),
                   "--outputdir", str(run_dir), "--variable", f"RUN_ID:{run_id}",
                   "--variable", f"LAB_POOL:{POOL_TAG}",
                   "--variable", f"POOL_LOG:{run_dir / EVENTS_FILE}",
                   "--metadata", f"Run id:{run_id}", *EVERY_ROW, *reference, *options.extra,
                   *suites]
        invocation = Invocation("pool", tuple(command), run_dir, run_dir / "console.log",
                                run_dir)
        return Plan(run_id, run_dir, (invocation,), None, run_dir.parent / "trend.html",
                    run_dir.parent / "trend.md")
    parallel = len(options.topologies) > 1
    use_pabot = options.pabot or options.processes > 1
    invocations = []
    for topology in options.topologies:
        output_dir = run_dir / topology if parallel else run_dir
        command: list[str] = [options.pabot_cmd, "--processes", str(options.processes)] \
            if use_pabot else [options.robot]
        where = ["--outputdir", str(output_dir)]
        if options.duet:  # the launcher names each run's folder: a/ (recorded) and b/
            command = [sys.executable, "-m", "libraries.ab.duet_run",
                       str(run_dir / REFERENCE_FILE), "-d", str(output_dir), "--"]
            where = []
        command += [*where, "--variable", f"RUN_ID:{run_id}",
                    "--variable", f"TOPOLOGY:{topology}", "--metadata", f"Run id:{run_id}",
                    "--metadata", f"Topology:{topology}"]
        if parallel:
            command += ["--name", topology]
        command += [*EVERY_ROW, *reference, *options.extra, *suites]
        invocations.append(Invocation(
            topology, tuple(command), output_dir / "a" if options.duet else output_dir,
            output_dir / "console.log" if parallel else None,
            output_dir if parallel and use_pabot else None))
    merge = None
    if parallel:
        merge = (options.rebot, "--name", "Nightly", "--outputdir", str(run_dir),
                 "--output", "output.xml", "--log", "log.html", "--report", "report.html",
                 *(str(i.output_dir / "output.xml") for i in invocations))
    return Plan(run_id, run_dir, tuple(invocations), merge, run_dir.parent / "trend.html",
                run_dir.parent / "trend.md")


def _project_revision() -> str:
    try:
        done = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=10, cwd=Path(__file__).resolve().parent, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def _write_metadata(plan: Plan, options: Options, extra: dict[str, object]) -> None:
    path = plan.run_dir / "run.json"
    data = json.loads(path.read_text()) if path.is_file() else {}
    data.update(extra)
    data.setdefault("run_id", plan.run_id)
    data.setdefault("topology", ",".join(options.topologies))
    data.setdefault("suites", list(options.suites))
    data.setdefault("commands", [list(i.command) for i in plan.invocations])
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


def _start(invocation: Invocation) -> subprocess.Popen[bytes]:
    invocation.output_dir.mkdir(parents=True, exist_ok=True)
    LOG.info("running: %s", " ".join(invocation.command))
    # pabot starts ``robot`` by name: the project's venv is searched after the PATH.
    env = {**os.environ, "PATH": os.pathsep.join(
        filter(None, [os.environ.get("PATH", ""), str(Path(sys.executable).parent)]))}
    if invocation.console is None:
        return subprocess.Popen(invocation.command, cwd=invocation.cwd, start_new_session=True,
                                env=env)
    with invocation.console.open("wb") as console:
        return subprocess.Popen(invocation.command, stdout=console, stderr=subprocess.STDOUT,
                                cwd=invocation.cwd, start_new_session=True, env=env)


def _with_processes(invocation: Invocation, processes: int) -> Invocation:
    """The pool's pabot command with ``--processes`` set to the labs that passed."""
    command = list(invocation.command)
    command[command.index("--processes") + 1] = str(processes)
    return replace(invocation, command=tuple(command))


def _wait(process: subprocess.Popen[bytes], timeout: float, what: str) -> int:
    try:
        return process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        LOG.error("%s: still running after %g s; killing it", what, timeout)
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        return -1


def _prepare_pool(plan: Plan, options: Options, outcome: Outcome
                  ) -> tuple[list[Lab], dict[str, str], tuple[Invocation, ...]]:
    """Pre-flight the pool's labs and write pabot's resource file: (labs that passed, labs
    left out -> why, the invocations to start). Without a pool: the plan's invocations."""
    if not options.pool:
        return [], {}, plan.invocations
    labs, excluded = preflight(options.pool)
    for lab, reason in excluded.items():
        LOG.warning("lab %s left out of the pool: %s", lab, reason)
    (plan.run_dir / RESOURCE_FILE).write_text(resource_file(labs))
    if not labs:
        LOG.error("no lab passed its pre-flight: nothing to run on")
        outcome.run_codes["pool"] = -1
        return labs, excluded, ()
    processes = options.processes if options.processes > 1 else len(labs)
    return labs, excluded, tuple(_with_processes(i, processes) for i in plan.invocations)


def gate_status(outcome: Outcome) -> int:
    """Apply the precedence documented in the module docstring."""
    codes = list(outcome.run_codes.values())
    if any(code < 0 or code >= ROBOT_ERROR_MIN for code in codes):
        return EXIT_RUN_ERROR
    if outcome.trend_code == EXIT_BAD_RECORDS:
        return EXIT_BAD_RECORDS
    if outcome.trend_code == EXIT_REGRESSION:
        return EXIT_REGRESSION
    if any(codes) or (outcome.merge_code not in (None, 0)):
        return EXIT_TESTS_FAILED
    return EXIT_OK


def execute(plan: Plan, options: Options, reference: Reference | None = None) -> Outcome:
    """Run the plan: suites (in parallel when several), merge, trend; returns the outcome.
    With a ``reference`` (loaded from ``options.reference``) its comparison file is written
    into the run folder first."""
    plan.run_dir.mkdir(parents=True, exist_ok=True)
    _write_metadata(plan, options, {"start_time": datetime.now(UTC).isoformat(),
                                    "project_revision": _project_revision(),
                                    "host": platform.node()})
    if reference is not None:
        write_comparison(reference, plan.run_dir)
        _write_metadata(plan, options, {"reference": reference.as_dict(),
                                        "family": options.family.as_dict()})
    outcome = Outcome()
    started = {}
    labs, excluded, invocations = _prepare_pool(plan, options, outcome)
    for invocation in invocations:
        try:
            started[invocation.topology] = _start(invocation)
        except OSError as error:
            LOG.error("cannot run %s: %s", invocation.command[0], error)
            outcome.run_codes[invocation.topology] = -1
    for topology, process in started.items():
        outcome.run_codes[topology] = _wait(process, options.timeout, f"run on {topology}")
    outputs = [i.output_dir / "output.xml" for i in plan.invocations]
    if plan.merge and any(path.is_file() for path in outputs):
        merge = [*plan.merge[: -len(outputs)], *(str(p) for p in outputs if p.is_file())]
        try:
            outcome.merge_code = subprocess.run(merge, timeout=600, check=False).returncode
        except (OSError, subprocess.TimeoutExpired) as error:
            LOG.error("rebot failed: %s", error)
            outcome.merge_code = -1
    if options.pool:
        report = summarise(labs, excluded, read_events(plan.run_dir / EVENTS_FILE))
        _write_metadata(plan, options, {"pool": report.as_dict()})
        for line in report.lines():
            LOG.info("%s", line)
    try:
        LOG.info("run report: %s", write_run_report(plan.run_dir))
    except (OSError, ValueError, RecordError) as error:
        LOG.warning("run report not written: %s", error)
    broken = {t: c for t, c in outcome.run_codes.items() if c < 0 or c >= ROBOT_ERROR_MIN}
    if broken:  # its records are drawn, never judged (history.load.excluded_reason)
        _write_metadata(plan, options, {"partial": f"suite run(s) did not finish: {broken}"})
    store = Store(options.store or default_store([options.results]))
    started_ingest = time.monotonic()
    ingested = ingest([plan.run_dir], store)
    LOG.info("run %s stored in %s in %.2f s%s", plan.run_id, store.root,
             time.monotonic() - started_ingest,
             "" if not ingested.errors else ": " + "; ".join(ingested.errors))
    outcome.trend_code = trend.main([str(options.results), "--store", str(store.root),
                                     "--html", str(plan.html), "--markdown", str(plan.markdown)])
    outcome.status = gate_status(outcome)
    _write_metadata(plan, options, {"end_time": datetime.now(UTC).isoformat(),
                                    "exit_codes": asdict(outcome)})
    write_night_summary(plan.run_dir, plan.run_id, asdict(outcome), plan.html, plan.markdown)
    return outcome


def _checked_input(args: argparse.Namespace, extra: list[str]
                   ) -> tuple[Options, Reference | None]:
    """The options of the command line and the reference it names, checked before anything
    runs; ``ValueError`` naming the option and what is wrong (exit :data:`EXIT_BAD_INPUT`)."""
    options = Options(
        topologies=tuple(args.topology), suites=tuple(args.suites),
        processes=max(args.processes, 1), pabot=args.pabot, results=args.results,
        extra=tuple(extra), robot=args.robot or resolve_tool("robot"),
        pabot_cmd=args.pabot_command or resolve_tool("pabot"),
        rebot=args.rebot or resolve_tool("rebot"), timeout=args.timeout,
        pool=tuple(args.pool), store=args.store, reference=args.reference, duet=args.duet)
    if options.reference is not None:
        try:
            options = replace(options, family=night_family(args.night_level, args.series,
                                                           options))
        except PlanError as error:
            raise ValueError(f"--series: {error}") from None
    if options.duet and (options.reference is None or options.pool or
                         options.pabot or options.processes > 1):
        raise ValueError("--duet: needs --reference, and runs one robot per side (not with "
                         "--pool, --pabot or --processes)")
    for name in options.pool or options.topologies:
        try:
            load_topology(name)
        except TopologyError as error:
            raise ValueError(f"--{'pool' if options.pool else 'topology'} {name}: "
                             f"{error}") from None
    try:
        reference = None if options.reference is None else load_reference(options.reference)
    except TopologyError as error:
        raise ValueError(f"--reference: {error}") from None
    problems = run_problems(options.extra, None, options.pool or options.topologies)
    if problems:  # robot's -v settings after --: as hoststack-perf nightly checks them
        raise ValueError("\n".join(problems))
    return options, reference


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns the gate status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    try:
        args = parser(__doc__.split("\n\n")[0]).parse_args(
            argv[: argv.index("--")] if "--" in argv else argv)
    except SystemExit as stop:  # argparse's usage error (2): bad input, not bad records
        if stop.code != 2:
            raise
        return EXIT_BAD_INPUT
    logging.basicConfig(level=logging.INFO, format="nightly: %(message)s")
    try:
        options, reference = _checked_input(args, extra)
    except ValueError as error:
        LOG.error("%s", error)
        return EXIT_BAD_INPUT
    plan = build_plan(options, args.run_id or new_run_id())
    if args.dry_run:
        lines = [shlex.join(i.command) for i in plan.invocations]
        lines += [shlex.join(plan.merge)] if plan.merge else []
        if reference is not None:
            lines.append(f"# {plan.run_dir / REFERENCE_FILE}:\n{comparison_text(reference)}")
        sys.stdout.write(f"run id {plan.run_id}\n" + "\n".join(lines) + "\n")
        return EXIT_OK
    outcome = execute(plan, options, reference)
    LOG.info("run %s: suite exit codes %s, trend exit %s -> gate status %d", plan.run_id,
             outcome.run_codes, outcome.trend_code, outcome.status)
    return outcome.status


if __name__ == "__main__":
    sys.exit(main())
