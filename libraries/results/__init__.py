"""The results layer: what a measurement is, how it is judged and how it is kept.

Owns trial statistics (``stats``), warm-up + interleaved trials (``measurement``), pass
criteria from ``topologies/criteria.yaml`` (``criteria``), the JSON record schema and the
JSON-lines record store (``records``, ``schemas/``: v1 and v2), the record's telemetry block
(``telemetry``), efficiency metrics computed from it (``efficiency``) and the tool versions a
record names (``versions``). Imports only ``libraries.testbed``.
"""
