"""Test selection and parallel scheduling.

``integration`` tests start real processes (nginx, wrk, iperf3, vegeta, bpftrace, chromium,
robot, sshd) or build namespace testbeds; the rest are plain Python. ``pytest -m "not
integration"`` is the fast feedback (``tox -e fast``: on two workers, 55 s); ``pytest -n 2``
(what tox runs) runs everything on two workers (pytest-xdist) with this file's scheduler,
which keeps together what must not overlap:

* each e2e module (:data:`E2E_MODULES`) is one unit: its tests share module fixtures (a lab
  built once) and follow each other; two modules' testbeds have their own per-run names, so
  they may run side by side;
* the modules of real tools on loopback (:data:`LOOPBACK_MODULES`) are one unit: they listen on
  fixed loopback ports (nginx 18431/18443, iperf3 18203, ...) and count their own processes;
* the modules that attach uprobes to the system's libssl or toggle BPF sysctls, and the e2e
  modules whose robot runs do (the sslsniff and ebpf_stream suites), are one unit
  (:data:`UPROBE_MODULES`): a uprobe on a library fires in every process using it, and each
  of them checks that no uprobe is left attached when it is done, which another's would fail;
* every other test is a unit of its own.

(pytest-xdist's own ``--dist loadgroup`` cannot do this under pytest 9: it renames node ids
through an attribute pytest 9 no longer reads.) ``utest/test_conftest.py`` checks that these
lists hold every module that starts real processes.
"""

from __future__ import annotations

import signal
import socket
import threading
from pathlib import PurePosixPath
from types import FrameType
from typing import Any

import pytest
from xdist.scheduler import LoadScopeScheduling

from libraries.ab.duet_link import DuetLink

E2E_MODULES = frozenset({
    "test_faults_e2e", "test_interrupt_e2e", "test_lab_pool", "test_reallab_e2e",
    "test_records_io", "test_short_trials_e2e", "test_telemetry_e2e", "test_testbed_e2e",
    "test_vpp_instance", "test_vpp_real", "test_ab_e2e", "test_cases_vpp", "test_pages_browser",
})
LOOPBACK_MODULES = frozenset({
    "test_nginx_real", "test_sslsniff_real", "test_bpftime_real", "test_ebpf_stream_real",
    "test_trend_browser", "test_cpu_telemetry", "test_environment",
    "test_iperf3", "test_nightly", "test_profile", "test_progress", "test_run_report",
    "test_vegeta", "test_wrk", "test_leftovers", "test_docs", "test_cli", "test_readme_commands",
    "test_docs_browser", "test_bpf_stats_real",
})
UPROBE_MODULES = frozenset({
    "test_reallab_e2e", "test_short_trials_e2e", "test_sslsniff_real", "test_bpftime_real",
    "test_ebpf_stream_real", "test_bpf_stats_real",
})
WHOLLY_INTEGRATION = frozenset({
    "test_nginx_real", "test_sslsniff_real", "test_bpftime_real", "test_ebpf_stream_real",
    "test_bpf_stats_real",
    "test_vpp_real", "test_trend_browser", "test_docs_browser",
})
"""Modules whose every test starts real processes (marked here, not test by test)."""


def module_of(nodeid: str) -> str:
    """``utest/test_wrk.py::test_x[1]`` -> ``test_wrk``."""
    return PurePosixPath(nodeid.split("::", 1)[0]).stem


def scope_of(nodeid: str) -> str:
    """The scheduling unit of a test (see the module docstring)."""
    module = module_of(nodeid)
    if module in UPROBE_MODULES:
        return "uprobes"
    if module in E2E_MODULES:
        return f"e2e:{module}"
    if module in LOOPBACK_MODULES:
        return "loopback"
    return nodeid


def _interrupted(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")


def pytest_sessionstart(session: pytest.Session) -> None:
    """A SIGTERM (a CI runner cancelling the job, ``kill``) ends the run as Ctrl-C does, in the
    controller and in each xdist worker: pytest then tears every fixture down (the admin lab's
    sshd, namespaces and bridge, testbeds, processes), which the default action (the process
    killed at once) left behind."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _interrupted)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark e2e tests and the wholly real modules ``integration``."""
    for item in items:
        if item.get_closest_marker("e2e") is not None or \
                module_of(item.nodeid) in WHOLLY_INTEGRATION:
            item.add_marker(pytest.mark.integration)


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """pytest-xdist's load-scope scheduler with :func:`scope_of` as the scope."""
    class UnitScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return scope_of(nodeid)

    return UnitScheduling(config, log)


@pytest.fixture
def links() -> Any:
    """Two connected ends of a duet's link (a socket pair): side a's and side b's."""
    ends = socket.socketpair()
    pair = DuetLink(ends[0], "a"), DuetLink(ends[1], "b")
    yield pair
    for link in pair:
        link.close()
