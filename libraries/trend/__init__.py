"""The trend layer: judging series of results, one run against the history or against another.

Owns jumpavg change detection (``detect``) and its resumable form (``incremental``), whose
state per series is cached beside the history (``series``: a generation folder of arrays under
the store's ``_cache``, so a night searches only its new samples); the interval check a
jumpavg step must pass before it is reported (``interval_check``); judging a whole table of series
and the summary rows of the result (``analysis``); the gate over the store (``gate``: the
newest sample of every series classified, regressions named); and one run against another
with the A/B verdict (``compare``). It reads the history (``libraries.history``) and the
results layer's verdict and intervals (``libraries.results``); it writes no page (the
dashboard and the command that prints the gate live in ``libraries.report``). It has no
command of its own: ``hoststack-perf trend`` (``python -m libraries.report``), ``ingest``
(``libraries.history.ingest``), ``report`` (``libraries.report.run_report``) and ``nightly``
(``libraries.nightly``) are their homes.
"""
