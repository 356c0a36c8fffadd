"""The trend layer: from many runs' records to a history, a dashboard, a comparison and a gate.

Owns loading and validating records files with pandas (``load``), the columnar history of
every run (``store``: a Parquet dataset, one file per run, read with DuckDB; ``ingest``:
records -> Parquet, ``python -m libraries.trend.ingest``), jumpavg change detection
(``detect``, ``analysis``) and its resumable form (``incremental``) kept per series in the
store's cache (``series``), the interval check a jumpavg step must pass (``confirm``), the gate
and dashboard over a whole store (``gate``), the offline plotly dashboard (``dashboard``,
``dashboard_assets``), two-run comparison with the A/B verdict (``compare``), one run's report
(``report``, its latency curves: ``report_capacity``), the command line (``cli``:
``python -m libraries.trend``), the nightly runner (``nightly``:
``python -m libraries.trend.nightly``) and its pool of labs shared through pabot's value sets
(``pool``). It reads records only: imports ``libraries.results``
and ``libraries.testbed`` (errors, topologies and, for the pool's pre-flight, testbeds), never
a tool or a node.
"""
