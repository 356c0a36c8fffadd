"""Trend dashboard and nightly gate over the columnar history of result records.

    python -m libraries.report [RESULTS_DIR...] [--store DIR] --html OUT.html [--markdown OUT.md]
                              [--test PATTERN]
    python -m libraries.report [RESULTS_DIR...] [--store DIR] --compare RUN_A RUN_B

Runs under RESULTS_DIR (default ``results``) that the history (``<RESULTS_DIR>/history`` or
``--store``) lacks are stored first (:mod:`libraries.history.ingest`); everything is then read
from the history with DuckDB. One series per (test id, metric), ordered by the records' start
time. jumpavg groups each series (:mod:`libraries.trend.detect`, resumed from the store's cache:
:mod:`libraries.trend.series`); the newest sample is a *regression* (or *progression*) when the
group it belongs to moved the wrong (right) way against the previous group, taking the metric's
direction into account, and that group started within the newest ``--recent`` samples (default 5:
a new level is reported for that many nights, then it is the baseline) and the series has at
least ``--min-samples`` samples (default 5).

Exit status: 0 nothing regressed, 3 the newest sample of some series is a regression (compare
mode: a significant regression), 2 bad input (unreadable or invalid record: file and line; a
damaged Parquet file: its name).
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from libraries.history.ingest import ingest
from libraries.history.store import Store, default_store
from libraries.report.dashboard import write_dashboard
from libraries.report.series_bounds import default_criteria
from libraries.report.series_notes import comparison_changes, notes_markdown
from libraries.testbed.errors import HostStackError
from libraries.trend.analysis import (
    EXIT_BAD_INPUT,
    EXIT_OK,
    EXIT_REGRESSION,
    SUMMARY_HEADER,
    analyse,
    family_statement,
    markdown_summary,
    select_tests,
    summary_rows,
    text_table,
)
from libraries.trend.compare import run_compare
from libraries.trend.gate import analyse_store

LOG = logging.getLogger(__name__)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m libraries.report", description=__doc__.split("\n\n")[0],
        epilog="exit status: 0 no regression, 3 regression, 2 bad input")
    parser.add_argument("results", nargs="*", type=Path, metavar="RESULTS_DIR",
                        help="directories searched for records.jsonl (default: results)")
    parser.add_argument("--html", type=Path, help="write the plotly dashboard here")
    parser.add_argument("--markdown", type=Path, help="write a markdown summary here")
    parser.add_argument("--test", action="append", default=[], metavar="PATTERN",
                        help="only tests whose id matches this glob (repeatable)")
    parser.add_argument("--recent", type=int, default=5, metavar="N",
                        help="a change older than the newest N samples is the new baseline")
    parser.add_argument("--min-samples", type=int, default=5, metavar="N",
                        help="series with fewer samples are never flagged")
    parser.add_argument("--engine", choices=["fast", "jumpavg"], default="fast",
                        help="grouping: the store's incremental cache (default) or jumpavg's "
                        "own classes over every sample (slow reference)")
    parser.add_argument("--compare", nargs=2, metavar=("RUN_A", "RUN_B"),
                        help="compare two runs (run ids or run directories) instead")
    parser.add_argument("--alpha", type=float, default=0.05, metavar="A",
                        help="compare: the intervals' confidence is 1 - A (default 0.05)")
    parser.add_argument("--margin", type=float, default=5.0, metavar="PCT",
                        help="compare: a change smaller than this is no finding (default 5)")
    parser.add_argument("--title", default="Performance trend", help="dashboard title")
    parser.add_argument("--store", type=Path, help="history folder (default: <first "
                        "RESULTS_DIR>/history); runs under RESULTS_DIR not yet in it are "
                        "ingested first")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns the exit status."""
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s: %(message)s")
    roots = args.results or ([] if args.store else [Path("results")])
    store = Store(args.store or default_store(roots))
    try:
        errors = ingest(roots, store).errors if roots else []
        for error in errors:
            sys.stderr.write(f"error: {error}\n")
        if args.compare:
            status = run_compare(store, args.compare[0], args.compare[1], args.test,
                                 args.markdown, args.alpha, args.margin / 100.0)
        else:
            status = _run_trend(args, store)
    except HostStackError as error:
        sys.stderr.write(f"error: {error}\n")
        return EXIT_BAD_INPUT
    return EXIT_BAD_INPUT if errors else status


def _run_trend(args: argparse.Namespace, store: Store) -> int:
    recent = max(args.recent, 1)
    runs = None
    if args.engine == "fast":  # the store's change-detection cache: only new samples searched
        result = analyse_store(store, recent, args.min_samples, args.test)
        trends, runs = result.trends, result.runs
    else:  # the reference: every series searched by jumpavg's own classes
        trends = analyse(select_tests(store.frame(), args.test), recent=recent,
                         engine=args.engine, min_samples=args.min_samples)
    if not trends:
        sys.stderr.write(f"error: no records in {store.root}"
                         f"{' matching ' + ', '.join(args.test) if args.test else ''}\n")
        return EXIT_BAD_INPUT
    sys.stdout.write(text_table(SUMMARY_HEADER, summary_rows(trends)))
    if args.html:
        write_dashboard(trends, args.html, title=args.title, runs=runs,
                        criteria=default_criteria())
        LOG.info("dashboard written to %s", args.html)
    if args.markdown:
        args.markdown.parent.mkdir(parents=True, exist_ok=True)
        args.markdown.write_text(markdown_summary(trends, family_statement(trends))
                                 + notes_markdown(comparison_changes(trends)),
                                 encoding="utf-8")
    regressed = [t.key for t in trends if t.classification == "regression"]
    if regressed:
        sys.stderr.write(f"regression in {len(regressed)} series: {', '.join(regressed)}\n")
        return EXIT_REGRESSION
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
