"""The ``-v`` settings that choose the testbed a suite runs on: ``TOPOLOGY``, ``LAB_POOL``
and ``POOL_LOG``, each declared once here (:data:`DECLARED`: default, parser, meaning, its
field in :class:`libraries.cases.run_settings.RunSettings`). The suite set-up reads them
(``libraries.cases.suite_setup``); loading the topology they name is
:func:`libraries.testbed.topology_file.load_topology`'s."""

from __future__ import annotations

from pathlib import Path

from libraries.results.trial_settings import Setting


def _text(value: object) -> str | None:
    """A name or path; empty is not given."""
    return str(value) if value not in (None, "") else None


TOPOLOGY = Setting(
    "TOPOLOGY", "3node", str, "topology", "a topology name "
    "(topologies/<name>.yaml) or a path to a topology file", "The testbed the suites run on: "
    "built on this machine (provision: netns) or reached over SSH (a real lab).", "testbed",
    "suite set-up (Check Measurement Settings, Set Up Testbed): "
    "libraries.testbed.topology_file.load_topology")
LAB_POOL = Setting(
    "LAB_POOL", None, _text, "lab_pool", "a pabot value-set tag (the nightly's --pool gives "
    "hoststack-lab)", "Take a free lab of a pool shared through pabot's value sets instead of "
    "TOPOLOGY; given by the nightly runner with --pool.", "testbed", "suite set-up (Set Up "
    "Testbed): libraries.cases.suite_state.SuiteState.set_up_testbed, through "
    "libraries.keywords.pool", "(none)")
POOL_LOG = Setting(
    "POOL_LOG", None, lambda v: Path(str(v)) if v not in (None, "") else None, "pool_log",
    "a file path", "Where each suite's lab pool events (acquired, released, taken out) are "
    "appended as JSON lines; given by the nightly runner with --pool.", "testbed",
    "when a suite acquires a lab: libraries.keywords.pool.PoolClient", "(none: not logged)")

DECLARED = (TOPOLOGY, LAB_POOL, POOL_LOG)
"""The testbed settings, in the reference page's order."""
