"""The A/B layer: two sides of the system under test measured in one run and judged per round.

Owns the comparison file and the topology each side sees (``comparison``), the ``AB_*``
settings and the check that their budget can decide (``ab_settings``), the rounds in random
order, the Hodges-Lehmann interval of per-round ratios at corrected looks and the
verdict per metric (``rounds``, with the four-outcome rule of
:func:`libraries.results.verdict.classify`), the record's ``ab`` block and the test's message
(``record_block``), and the session of a running suite: sides, components, what a test uses,
switching, sysctls set and restored (``session``). No Robot Framework: the case runner
(``libraries.cases.case_runner``) measures through it and ``libraries.keywords.ab`` adapts it.
Imports ``libraries.testbed``, ``libraries.tools`` (version probes) and ``libraries.results``.
"""
