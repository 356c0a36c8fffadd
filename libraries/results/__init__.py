"""The results layer: what a measurement is, how it is judged and how it is kept.

Owns trial statistics (``stats``), warm-up + interleaved trials (``measurement``), pass
criteria from ``topologies/criteria.yaml`` (``criteria``), the JSON record schema and the
JSON-lines record store (``records``, ``schemas/``) and the tool versions a record names
(``versions``). Imports only ``libraries.testbed``.
"""
