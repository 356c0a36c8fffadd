"""The results layer: what a measurement is, how it is judged and how it is kept.

Owns what a test is told (``plan``: trials, the budget for more, alpha), the cases' metrics
and parameters (``catalogue``), trial statistics (``stats``) and distribution-free intervals
(``inference``), warm-up + interleaved rounds (``measurement``) and more of them while a
criterion is inconclusive (``adaptive``), pass criteria from ``topologies/criteria.yaml``
with three outcomes and the basis of every floor (``criteria``) and how close the floors sit
to what a testbed measures (``floors``), the verdict between two runs (``verdict``), A/B
rounds of two sides in one run with their verdict at corrected looks (``ab``) and their
record block (``ab_record``), capacity under latency goals: goals, settings, trials
(``capacity``) searched by CSIT's MLRsearch (``mlrsearch``), the JSON record schema and the
JSON-lines record store (``records``, ``schemas/``: v1 to v4), the record's telemetry block
(``telemetry``), efficiency metrics computed from it (``efficiency``), headlines
(``headline``) and the tool versions a record names (``versions``). Imports only
``libraries.testbed``.
"""
