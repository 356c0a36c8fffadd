"""A run's testbed names on a host, defined once: its prefix and the work directories under it.

A testbed is known by its prefix (:func:`make_prefix`): ``hr`` and 5 random hex digits for a
Robot run (unique, so parallel runs never collide), ``hc`` and a hash of the topology name for
the ``testbed`` command (stable, so ``down 3node`` finds what ``up 3node`` built). Everything a
run writes on a node sits in that node's work directory, :func:`node_workdir`:
``/tmp/hoststack-<prefix>/<node>`` (configs, certificates, logs, the CPU ledger), below the
testbed's scratch directory :func:`workdir_root`, which the teardown removes and the leftovers
check looks for (:data:`WORKDIR_PATTERN`). The provisioning, the namespace testbed, the
teardown and the leftovers check take these names from here, so a reader finds the whole
path in one file. Pure: names only, nothing touches a host.
"""

from __future__ import annotations

import hashlib
import os
import re

WORKDIR_BASE = "/tmp/hoststack-"
"""Every testbed's scratch directory is this followed by its prefix."""
WORKDIR_PATTERN = re.compile(re.escape(WORKDIR_BASE) + r"(h[a-z0-9]+)")
"""A testbed's scratch directory in a text (a Robot log naming a run's files); group 1 is
its prefix."""


def make_prefix(topology: str, owner: str) -> str:
    """``hc`` + hash of the topology name for the CLI (stable, so ``down 3node`` finds it);
    ``hr`` + random for a Robot run (unique, so parallel runs never collide)."""
    if owner == "cli":
        return "hc" + hashlib.sha1(topology.encode()).hexdigest()[:5]  # noqa: S324
    return "hr" + os.urandom(3).hex()[:5]


def workdir_root(prefix: str) -> str:
    """The testbed's scratch directory (its nodes' work directories are below it)."""
    return f"{WORKDIR_BASE}{prefix}"


def node_workdir(prefix: str, node: str) -> str:
    """The work directory of ``node`` in the testbed of ``prefix`` (created when the node is
    connected, removed with the testbed)."""
    return f"{workdir_root(prefix)}/{node}"
