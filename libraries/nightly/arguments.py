"""The nightly runner's command line (:mod:`libraries.nightly.nightly_run`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from libraries.results.family import NIGHT_LEVEL


def _level(text: str) -> float:
    """A family-wise level in (0, 1)."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1), e.g. 0.05; got {text!r}")
    return value


def _count(text: str) -> int:
    """A whole number >= 1."""
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
    return int(text)


def parser(description: str) -> argparse.ArgumentParser:
    """The nightly's command line (:func:`libraries.nightly.nightly_run.main` reads it)."""
    parser = argparse.ArgumentParser(prog="python -m libraries.nightly",
                                     description=description,
                                     epilog="arguments after -- go to robot / pabot")
    parser.add_argument("--topology", nargs="+", default=["3node"], help="testbed name(s)")
    parser.add_argument("--pool", nargs="+", default=[], metavar="LAB",
                        help="run the suites over this pool of labs (topology names or files; "
                        "pabot value sets: each suite takes a free lab)")
    parser.add_argument("--store", type=Path, help="history folder (default: <results>/history)")
    parser.add_argument("--reference", type=Path, metavar="FILE",
                        help="run every measuring test as an A/B test against this pinned "
                        "reference (one side of a comparison file; the topology is today)")
    parser.add_argument("--duet", action="store_true",
                        help="with --reference: run the reference and today at the same time, "
                        "each on a namespace testbed of its own (python -m "
                        "libraries.ab.duet_run)")
    parser.add_argument("--night-level", type=_level, default=NIGHT_LEVEL, metavar="P",
                        help="with --reference: the night's family-wise level, the chance a "
                        "night with no change fails an A/B test or exits 3 (default "
                        f"{NIGHT_LEVEL:g}; a fifth to the tests, the rest to the gate)")
    parser.add_argument("--series", type=_count, default=None, metavar="N",
                        help="with --reference: the A/B series a night judges, over which "
                        "the tests' fifth of --night-level is split (default: the tests the "
                        "night's suites and selection hold, counted before it runs, times "
                        "its topologies)")
    parser.add_argument("--suites", nargs="+", default=["tests"], help="suite paths")
    parser.add_argument("--processes", type=int, default=1, help="pabot processes (>1: pabot)")
    parser.add_argument("--pabot", action="store_true", help="use pabot even with 1 process")
    parser.add_argument("--results", type=Path, default=Path("results"), help="results root")
    parser.add_argument("--timeout", type=float, default=6 * 3600.0, help="per run, seconds")
    parser.add_argument("--robot", default=None, help="robot command (default: from PATH)")
    parser.add_argument("--pabot-command", default=None, help="pabot command")
    parser.add_argument("--rebot", default=None, help="rebot command")
    parser.add_argument("--run-id", default=None, help="use this run id instead of a new one")
    parser.add_argument("--dry-run", action="store_true", help="print the plan, run nothing")
    return parser
