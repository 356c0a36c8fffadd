"""The history layer: every run's records, kept as a columnar store that later nights read.

Owns reading and validating records files into rows (``load``: one row per test and metric,
pandas; ``TESTS_FILE``, the listener's list of every test), the Parquet store of those rows,
one file per run under ``results/history/month=YYYY-MM/``, read with DuckDB (``store``), and
putting runs into it (``ingest``: ``python -m libraries.history.ingest RESULTS_DIR [--store DIR]
[--rebuild]``, remembering which records files it has seen). It judges nothing and draws
nothing: change detection and its cache live in ``libraries.trend``, pages in
``libraries.report``. Imports only ``libraries.results`` (the record schema) and
``libraries.testbed`` (errors).
"""
