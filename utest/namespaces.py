"""Which network namespaces a test's run left, on a machine where other runs build theirs
(``tox p`` runs the e2e job beside the unit tests; pabot runs suites side by side)."""

from __future__ import annotations

import os
import time

from libraries.testbed.teardown import NETNS_DIR, list_testbeds

ADMIN_LAB = "hl"
"""The prefix of :class:`utest.adminlab.AdminLab`'s namespaces (a lab another test built)."""


def namespaces() -> set[str]:
    """The names ``ip netns list`` shows."""
    return set(os.listdir(NETNS_DIR)) if NETNS_DIR.is_dir() else set()


def unexplained(before: set[str], settle: float = 5.0) -> set[str]:
    """Namespaces that appeared since ``before`` and belong to no other live run: neither a
    testbed's whose state names it (a namespace testbed writes its state before it adds a
    namespace) nor an admin lab's. One that goes away within ``settle`` s was another run's
    being torn down."""
    deadline = time.monotonic() + settle
    while True:
        new = namespaces() - before  # before the states: a state precedes its namespaces
        owned = {ns for state in list_testbeds() for ns in state.get("namespaces_present", [])}
        left = {ns for ns in new - owned if not ns.startswith(ADMIN_LAB)}
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.25)
