"""``python -m libraries.ab.duet_run COMPARISON [-d DIR] [--timeout S] -- ROBOT ARGS``:
a duet A/B run (:mod:`libraries.ab.duet`). Starts two Robot runs of the same ``ROBOT ARGS``,
side a's and side b's, each on a namespace testbed of its own, joined by a socket pair; side
a's run judges and records every test (its output in ``DIR/a``, its console here), side b's
measures beside it (``DIR/b``, its console in ``DIR/b/console.log``; its measured tests end
SKIPPED, their trials being in side a's record).

    python -m libraries.ab.duet_run topologies/examples/ab-sysctl.yaml -d results/duet -- \\
        -v TOPOLOGY:3node -t 1s-kernel-tcp-term tests/tcp_term/kernel.robot

``DIR/duet.json`` (:data:`DUET_FILE`) names the comparison and each side's folder, so that
each side's run report links to the other's (side b's to side a's, where the verdicts are).

Exit status: side a's Robot status; where side a's is 0 and side b's is not, side b's (a
failure only side b saw: its suite set-up, a teardown); :data:`BAD_INPUT` (252, Robot's code
for invalid options) for bad options, a missing comparison file, or bad settings, topology or
comparison file, before either run starts. Run as ``python -m``, this module is
``hoststack-perf duet`` (:mod:`libraries.cli`, reached by name: it sits above every layer),
whose checks (:mod:`libraries.cases.input_checks`, a layer above this one) come first. SIGINT
and SIGTERM are passed to both runs, which stop as Robot stops and tear their testbeds down.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import socket
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import NoReturn

LOG = logging.getLogger("duet_run")
DEFAULT_TIMEOUT = 6 * 3600.0
"""Seconds both runs may take together before they are stopped."""
BAD_INPUT = 252
"""The exit code of bad options (Robot's, as ``hoststack-perf``'s bad input: never "2 tests
failed")."""
EXAMPLE = ("topologies/examples/ab-sysctl.yaml -d results/duet -- -v TOPOLOGY:3node "
           "-t 1s-kernel-tcp-term tests/tcp_term/kernel.robot")


DUET_FILE = "duet.json"
"""The duet's description in its output folder: ``{"comparison": path, "sides": {"a": "a",
"b": "b"}}`` (each side's folder, relative), read by the run report
(:mod:`libraries.report.duet_links`)."""


def write_duet_file(output_dir: Path, comparison: str) -> Path:
    """Write ``output_dir``/:data:`DUET_FILE` (before the runs start: each side's report
    reads it when its run ends); its path."""
    path = output_dir / DUET_FILE
    path.write_text(json.dumps({"comparison": comparison, "sides": {"a": "a", "b": "b"}},
                               indent=2) + "\n")
    return path


@dataclass(frozen=True)
class DuetCommand:
    """One side's Robot command, the descriptor of its end of the socket pair it inherits,
    and its output folder."""

    side: str
    command: tuple[str, ...]
    fd: int
    output_dir: Path


def commands(comparison: str, output_dir: Path, robot_args: Sequence[str],
             fds: tuple[int, int], python: str = sys.executable) -> tuple[DuetCommand, ...]:
    """Side a's and side b's commands: the comparison, the side's end of the socket (``-v
    AB_DUET:<side>:<fd>``) and its own output folder, then the user's Robot arguments (which
    :func:`refused` checked do not set these)."""
    found = []
    for side, fd in zip(("a", "b"), fds, strict=True):
        folder = output_dir / side
        found.append(DuetCommand(side, (
            python, "-m", "robot", "--variable", f"AB:{comparison}",
            "--variable", f"AB_DUET:{side}:{fd}", "--outputdir", str(folder), *robot_args),
            fd, folder))
    return tuple(found)


OWN = ("AB", "AB_DUET")


def refused(robot_args: Sequence[str]) -> str | None:
    """Why the user's Robot arguments cannot be passed on (they set what the launcher sets
    per side: the output folder, ``AB``, ``AB_DUET``), or None."""
    for index, arg in enumerate(robot_args):
        if arg in ("-d", "--outputdir") or arg.startswith("--outputdir="):
            return f"{arg}: give the output folder to the launcher (-d DIR: DIR/a and DIR/b)"
        if arg in ("-v", "--variable") and index + 1 < len(robot_args):
            name = robot_args[index + 1].partition(":")[0]
            if name in OWN:
                return (f"{arg} {robot_args[index + 1]}: the launcher sets {name} per side "
                        "(the comparison is its first argument)")
    return None


class _Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors exit :data:`BAD_INPUT`, not argparse's 2."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(BAD_INPUT, f"{self.prog}: error: {message}\n")


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    """The options (``robot``: the arguments after ``--``); ``SystemExit(BAD_INPUT)`` naming
    what is wrong."""
    parser = _Parser(
        prog="python -m libraries.ab.duet_run",
        usage="%(prog)s [-h] [-d OUTPUTDIR] [--timeout S] COMPARISON -- ROBOT_ARGS...",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Run an A/B comparison as a duet: both sides at once, each on a testbed "
                    "of its own,\non the same cores.\n\nROBOT_ARGS (after --): robot's "
                    "options and the suites to run, as for robot itself,\nexcept -d and -v "
                    "AB/AB_DUET (the launcher sets them per side).",
        epilog=f"example:\n  %(prog)s {EXAMPLE}")
    parser.add_argument("comparison", help="the comparison file (as for -v AB)")
    parser.add_argument("-d", "--outputdir", default="results/duet", type=Path,
                        help="output folder: side a's run in DIR/a, side b's in DIR/b")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT,
                        help=f"seconds before both runs are stopped (default "
                             f"{DEFAULT_TIMEOUT:g})")
    given = list(sys.argv[1:] if argv is None else argv)
    cut = given.index("--") if "--" in given else len(given)
    options = parser.parse_args(given[:cut])
    args = given[cut + 1:]
    if not args:
        parser.error("give robot's arguments after --, ending with the suites to run")
    why = refused(args)
    if why:
        parser.error(why)
    if not Path(options.comparison).is_file():
        parser.error(f"{options.comparison}: no such comparison file")
    options.robot = args
    return options


def main(argv: Sequence[str] | None = None) -> int:
    """See the module."""
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    options = parse(argv)
    ends = socket.socketpair()
    planned = commands(str(Path(options.comparison).resolve()), options.outputdir,
                       options.robot, (ends[0].fileno(), ends[1].fileno()))
    processes: dict[str, subprocess.Popen[bytes]] = {}
    consoles = []
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}

    def forward(signum: int, frame: FrameType | None) -> None:
        LOG.warning("signal %d: stopping both runs", signum)
        for process in processes.values():
            if process.poll() is None:
                process.send_signal(signum)

    for sig in previous:
        signal.signal(sig, forward)
    try:
        options.outputdir.mkdir(parents=True, exist_ok=True)
        write_duet_file(options.outputdir, str(Path(options.comparison).resolve()))
        for duet in planned:
            duet.output_dir.mkdir(parents=True, exist_ok=True)
            LOG.info("side %s: %s", duet.side, " ".join(duet.command))
            if duet.side == "a":
                processes[duet.side] = subprocess.Popen(duet.command, pass_fds=(duet.fd,))
            else:
                console = (duet.output_dir / "console.log").open("wb")
                consoles.append(console)
                processes[duet.side] = subprocess.Popen(
                    duet.command, pass_fds=(duet.fd,), stdout=console,
                    stderr=subprocess.STDOUT)
        for end in ends:  # the runs hold theirs: a run that dies closes its end
            end.close()
        codes = {side: _wait(process, options.timeout, side)
                 for side, process in processes.items()}
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        for process in processes.values():
            if process.poll() is None:
                process.kill()
                process.wait()
        for console in consoles:
            console.close()
        for end in ends:
            end.close()
    LOG.info("side a's run: status %d (%s); side b's: status %d (%s)", codes["a"],
             options.outputdir / "a", codes["b"], options.outputdir / "b")
    if codes["a"] == 0 and codes["b"] != 0:
        LOG.error("side b's run failed where side a's did not: see %s",
                  options.outputdir / "b" / "log.html")
        return codes["b"]
    return codes["a"]


def _wait(process: subprocess.Popen[bytes], timeout: float, side: str) -> int:
    try:
        return process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        LOG.error("side %s's run still going after %g s: stopping it", side, timeout)
        process.send_signal(signal.SIGINT)
        try:
            return process.wait(timeout=300)
        except subprocess.TimeoutExpired:
            process.kill()
            return process.wait()


if __name__ == "__main__":
    # python -m libraries.ab.duet_run ARGS: hoststack-perf duet ARGS, its checks included
    from libraries.cli import main as hoststack_perf

    sys.exit(hoststack_perf(["duet", *sys.argv[1:]]))
