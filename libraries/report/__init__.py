"""The report layer: the pages people read, and the command that writes them.

Owns the offline plotly trend dashboard over the history (``dashboard``, its CSS and script in
``dashboard_assets``, each series' criterion line and verdicts in ``series_bounds``), one run's
``run-report.html`` (``run_report``: every test's metrics with their intervals, criteria
outcomes, telemetry, A/B and capacity sections; its bars, whiskers and criterion lines in
``run_charts``, its latency-against-rate charts in ``latency_curves``, why its confidence
levels differ in ``confidence``, a duet's links between its two sides' pages in ``duet_links``)
and its ``summary.md`` for CI (``run_summary``), and the trend command (``trend_command``:
``python -m libraries.report RESULTS_DIR --html OUT`` stores new runs, judges every series,
prints the summary, writes the dashboard and exits 3 on a regression; ``--compare RUN_A RUN_B``
judges one run against another). It draws what ``libraries.trend`` judged and what
``libraries.history`` stored, and reads records through ``libraries.results``; it runs no suite
and starts no process (that is ``libraries.nightly``).
"""
