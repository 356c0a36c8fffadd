"""The results layer: what a measurement is, how it is judged and how it is kept. Generic and
pure: no Robot Framework, no command on a node.

Owns what a test is told (``plan``: trials, the budget for more, alpha), the declaration of a
``-v`` setting and the helpers every setting is parsed with, in one error style, and the
trials', judging's and run's settings themselves (``trial_settings``; the registry that collects
every package's: ``libraries.cases.registry``), the cases' metrics and parameters
(``catalogue``), trial statistics (``stats``)
and distribution-free intervals (``inference``), warm-up + interleaved rounds
(``measurement``) and more of them while a criterion is inconclusive (``adaptive``), pass
criteria from ``topologies/criteria.yaml`` with three outcomes and the basis of every floor
(``criteria``), correctness checks judged in every trial, never on a median
(``correctness``), and how close the floors sit to what a testbed measures (``floors``), the
four-outcome rule every comparison uses and the verdict between two runs (``verdict``), the
JSON record, its schema and the JSON-lines record store (``records``, ``schemas/``: v1 to
v4), the record's telemetry block (``telemetry_block``), efficiency metrics computed from it
(``efficiency``), the cost per unit of work of each trial and the record's ``cost`` block
(``cost``) and headlines (``headline``). Imports only ``libraries.testbed`` (its
errors and topology constants).
"""
