"""The results layer: what a measurement is, how it is judged and how it is kept.

Owns what a test is told (``plan``: trials, the budget for more, alpha), the cases' metrics
and parameters (``catalogue``), trial statistics (``stats``) and distribution-free intervals
(``inference``), warm-up + interleaved rounds (``measurement``) and more of them while a
criterion is inconclusive (``adaptive``), pass criteria from ``topologies/criteria.yaml``
with three outcomes (``criteria``), the A/B verdict between two runs (``verdict``), the
capacity search under a latency SLO (``capacity``), the JSON record schema and the
JSON-lines record store (``records``, ``schemas/``: v1, v2 and v3), the record's telemetry
block (``telemetry``), efficiency metrics computed from it (``efficiency``), headlines
(``headline``) and the tool versions a record names (``versions``). Imports only
``libraries.testbed``.
"""
