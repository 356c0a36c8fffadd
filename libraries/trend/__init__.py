"""The trend layer: from many runs' records to a dashboard, a comparison and a nightly verdict.

Owns loading and validating record stores with pandas (``load``), jumpavg change detection
(``detect``, ``analysis``), the offline plotly dashboard (``dashboard``), two-run comparison
(``compare``), the command line (``cli``: ``python -m libraries.trend``) and the nightly runner
(``nightly``: ``python -m libraries.trend.nightly``). It reads records only: imports
``libraries.results`` and ``libraries.testbed`` (errors), never a tool or a node.
"""
