"""What a run leaves on its way out: the run stored in the history, its run report, and its
failed tests with their messages printed last, where a long run's console (or a CI log that
keeps only its tail) still shows them. The results listener calls :func:`finish_run` when
Robot closes it."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TextIO

from libraries.history.ingest import ingest
from libraries.history.store import Store
from libraries.report.run_report import write_run_report, write_summary
from libraries.results.records import RecordError

LOG = logging.getLogger(__name__)


def failure_line(name: str, message: str, limit: int = 600) -> str:
    """One line of the run's closing list of failures: the test's full name and its message
    (first ``limit`` characters, newlines folded)."""
    text = " ".join((message or "(no message)").split())
    if len(text) > limit:
        text = text[:limit - 3] + "..."
    return f"  {name}: {text}"


def finish_run(run_dir: Path | None, store_to: str | None, failures: list[str],
               console: TextIO) -> None:
    """Store ``run_dir`` in the history (``store_to``: the store's folder, '' for
    ``<run dir>/../history``, ``NONE`` or None for not at all), write its run report and
    ``summary.md`` (:mod:`libraries.report.run_summary`), then
    print ``failures`` (lines of :func:`failure_line`) to ``console``."""
    if run_dir is not None and run_dir.is_dir():
        if store_to is not None and store_to.upper() != "NONE":
            _store(run_dir, Path(store_to) if store_to else run_dir.parent / "history", console)
        try:
            print(f"Run report: {write_run_report(run_dir)}", file=console)
        except (OSError, ValueError, RecordError) as error:
            LOG.warning("run report not written: %s", error)
        try:
            print(f"Summary: {write_summary(run_dir)}", file=console)
        except (OSError, ValueError, RecordError) as error:
            LOG.warning("summary.md not written: %s", error)
    if failures:
        print("\n".join([f"Failed tests ({len(failures)}):", *failures]), file=console)


def _store(run_dir: Path, root: Path, console: TextIO) -> None:
    if not (run_dir / "records.jsonl").is_file():
        return
    store = Store(root)
    try:
        report = ingest([run_dir], store)
    except (OSError, RecordError) as error:
        LOG.warning("run not stored in the history: %s", error)
        return
    for error in report.errors:
        LOG.warning("run not stored in the history: %s", error)
    if report.stored:
        print(f"History: {store.root}", file=console)
