"""One suite's state, in one explicit object (:class:`SuiteState`): the run's settings as the
suite resolved them at its set-up, the criteria file read once, the testbed it runs on
(:class:`~libraries.cases.testbed_setup.SuiteTestbed`), the cases' context built at the
first case keyword, the SSL proxy case's set-up (the HTTPS server and proxy started, which
the sslsniff case traces too) and the last test it measured (the capacity search continues
it). The keyword layer keeps one per suite (``libraries.keywords.context.suite``); every
library reads and writes the suite's state here, never another library's attributes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from libraries.cases.context import CaseContext, Log, Skip
from libraries.cases.ebpf_stream import StreamSetup
from libraries.cases.run_settings import RunSettings, check_measurement
from libraries.cases.ssl_proxy import ProxySetup, SslProxyCase
from libraries.cases.tcp_term import TcpTermSetup
from libraries.cases.testbed_setup import Metadata, Pool, SuiteTestbed
from libraries.cases.tracers import TracerSetup
from libraries.cases.vpp import VppHostStack
from libraries.results.adaptive import Judge
from libraries.results.criteria import CriteriaFile, load_criteria
from libraries.testbed.errors import HostStackError
from libraries.testbed.topology_file import load_topology

if TYPE_CHECKING:
    from libraries.ab.session import AbSession
    from libraries.testbed.topology import Topology

EXTENDED_TAG = "EXTENDED"
"""The tag of a row that runs only with ``-v EXTENDED:yes``."""


@dataclass
class SuiteState:
    """A suite's ``settings`` (resolved once, frozen), its ``criteria`` (read at the set-up's
    check, else at the first judgement), its ``testbed``, its A/B session (``ab``; None in a
    plain run), the cases' ``context`` (None until the first case keyword), the SSL proxy
    case's ``proxy`` set-up and its last measured test (``last_proxy_case``), the VPPs it
    runs and where its applications sit on them (``vpp``), and each case's own set-up: the
    TCP termination's (``tcp``: MTUs to restore), the stream proxies' (``stream``), the
    tracers' (``tracers``)."""

    settings: RunSettings
    criteria: CriteriaFile | None = None
    testbed: SuiteTestbed = field(default_factory=SuiteTestbed)
    ab: AbSession | None = None
    vpp: VppHostStack = field(default_factory=VppHostStack)
    tcp: TcpTermSetup = field(default_factory=TcpTermSetup)
    stream: StreamSetup = field(default_factory=StreamSetup)
    tracers: TracerSetup = field(default_factory=TracerSetup)
    context: CaseContext | None = None
    proxy: ProxySetup = field(default_factory=ProxySetup)
    last_proxy_case: SslProxyCase | None = None

    def set_up_testbed(self, topology: str | None, pool: Callable[[str], Pool],
                       metadata: Metadata, log: Log) -> None:
        """Set the suite's testbed up: ``topology`` when given, else a lab of ``-v LAB_POOL``
        (``pool(tag)``: its client) when given, else ``-v TOPOLOGY``'s."""
        if topology is None and self.settings.lab_pool:
            tag = self.settings.lab_pool
            self.testbed.up_from_pool(pool(tag), tag, metadata, log)
        else:
            self.testbed.up(topology or self.settings.topology, metadata)

    def check(self, log: Log) -> None:
        """The suite set-up's check of what the values alone cannot say (the budget on the
        topology ``-v TOPOLOGY`` names, the A/B plan, the criteria file), its findings
        logged; a bad value fails naming the variable, a bad topology or criteria file naming
        its file and key."""
        topology = load_topology(self.settings.topology)
        try:
            found = check_measurement(self.settings, topology)
        except ValueError as error:
            raise HostStackError(str(error)) from None
        self.criteria = found.criteria
        for line in found.lines:
            log.info(line)

    def judge(self, topology: Topology) -> Judge:
        """The criteria of ``topology`` at this suite's settings (a case measures until they
        are conclusive)."""
        if self.criteria is None:
            self.criteria = load_criteria(self.settings.criteria)
        try:
            trials = self.settings.trial_settings(topology)
        except ValueError as error:
            raise HostStackError(str(error)) from None
        return Judge(self.criteria, self.settings.criteria.name, topology.name, trials,
                     self.settings.correctness_only)

    def skip_unless_extended(self, tags: list[str]) -> None:
        """Skip a row tagged ``EXTENDED`` unless the run asks for extended rows."""
        if EXTENDED_TAG in tags and not self.settings.extended:
            raise Skip("extended row: runs with -v EXTENDED:yes (CI's e2e job and the nightly "
                       "do); the default run keeps one row per seed configuration")


def tear_down_suite(state: SuiteState | None, log: Log) -> None:
    """Tear the suite's testbed down (nothing when the suite's state was never opened: a
    set-up that failed on a setting)."""
    if state is not None:
        state.testbed.down(log)
