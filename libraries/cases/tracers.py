"""The sslsniff case's tracers: which one a node can run (:func:`require_kernel_tracer`,
:func:`require_seed_sslsniff`, kept in a :class:`TracerSetup`) and how each runs around one
traced trial, as the ``traced`` function of :class:`libraries.cases.sslsniff.SslsniffCase`:
:class:`KernelTracerTrials` (bcc or bpftrace; a tracer hung on SIGTERM runs the trial again
once, probes left behind fail the test), :class:`SeedTracerTrials` (the seed's program as
root; no uprobe may be left, a failing trial's error stays the first one) and
:class:`BpftimeTrials` (under bpftime). Each measured trial leaves its proof (events per
PID, events lost, requests served) in ``evidence``."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from libraries.cases.context import CaseContext, Log, Skip
from libraries.cases.ssl_proxy import ProxySetup
from libraries.results.measurement import Trial
from libraries.testbed.errors import HostStackError, ParseError, ToolMissing
from libraries.testbed.node import Node
from libraries.tools.bpftime import BpftimeSetup
from libraries.tools.nginx.service import NginxHandle
from libraries.tools.sslsniff.kernel import (
    KernelTracer,
    detect_kernel_tracer,
    group_pids,
    start_sslsniff,
    stop_sslsniff,
    uprobe_leftovers,
)
from libraries.tools.sslsniff.seed import (
    SeedSslsniff,
    detect_seed_sslsniff,
    nginx_worker,
    start_kernel_sslsniff,
    stop_kernel_sslsniff,
)
from libraries.tools.sslsniff.tracer import SslsniffParams, SslsniffResult, check_attachment
from libraries.tools.sslsniff.userspace import TracedNginx, run_bpftime_trial
from libraries.tools.wrk.output import WrkResult

LOG = logging.getLogger(__name__)


@dataclass
class TracerSetup:
    """The tracers the ``Require ...`` keywords found: the kernel tracer (bcc or bpftrace) and
    the seed's sslsniff program (an A/B switch may find them again)."""

    kernel: KernelTracer | None = None
    seed: KernelTracer | None = None


def require_kernel_tracer(ctx: CaseContext, tracers: TracerSetup, node: str) -> str:
    """The kernel tracer ``node`` can run (bcc sslsniff where kernel headers exist, else the
    project's bpftrace script), kept in ``tracers``; its kind. A skip with the reason when
    neither can run; an A/B side with another bpftrace detects it again."""
    target = ctx.testbed.node(node)
    bpftrace = ctx.testbed.topology.nodes[target.name].tools.get("bpftrace", "bpftrace")
    try:
        tracers.kernel = detect_kernel_tracer(target, bpftrace, sudo=True)
    except ToolMissing as error:
        raise Skip(str(error)) from None
    for note in tracers.kernel.notes:
        ctx.log.info(f"not bcc: {note}")
    ctx.component_started("kernel-tracer", {("tool", target.name, "bpftrace")}, lambda: None,
                          lambda: require_kernel_tracer(ctx, tracers, node))
    return tracers.kernel.kind


def require_seed_sslsniff(ctx: CaseContext, tracers: TracerSetup, node: str) -> str:
    """The seed's sslsniff program on ``node`` (topology ``tools.bpftime_sslsniff``) and
    bpftool, kept in ``tracers``; its version. A skip with the reason where it is not declared
    or not installed."""
    testbed = ctx.testbed
    target = testbed.node(node)
    binary = testbed.topology.nodes[target.name].tools.get("bpftime_sslsniff")
    if binary is None:
        raise Skip(f"bpftime_sslsniff not declared on {target.name} in topology "
                   f"{testbed.topology.name}")
    try:
        tracers.seed = detect_seed_sslsniff(target, binary)
    except ToolMissing as error:
        raise Skip(str(error)) from None
    ctx.component_started("seed-sslsniff", {("tool", target.name, "bpftime_sslsniff")},
                          lambda: None, lambda: require_seed_sslsniff(ctx, tracers, node))
    return tracers.seed.version


def https_server(setup: ProxySetup) -> NginxHandle:
    """The running HTTPS server (fails clearly before ``Start HTTPS Server On Node``)."""
    if setup.server is None:
        raise HostStackError("start the HTTPS server first ('Start HTTPS Server On Node')")
    return setup.server.handle


@dataclass
class KernelTracerTrials:
    """Traced trials of the kernel tracer on the HTTPS server's node ``dut``: started before
    and stopped after every traced trial; each must count events from nginx's PIDs only and
    leave no uprobe behind. ``evidence``: one entry per measured trial."""

    log: Log
    dut: Node
    server: ProxySetup
    tracers: TracerSetup
    per_event: bool
    evidence: list[dict[str, Any]] = field(default_factory=list)

    def traced(self, run: Callable[[], WrkResult], trial: Trial) -> WrkResult:
        server, tracer = https_server(self.server), self.tracers.kernel  # A/B may switch them
        assert tracer is not None
        dut = self.dut
        pids = sorted(group_pids(dut, server.process.pid))
        params = SslsniffParams(pids=tuple(pids), per_event=self.per_event)
        for attempt in (1, 2):  # bpftrace has been seen not to stop on SIGTERM (rarely)
            running = start_sslsniff(dut, params, tracer, sudo=True)
            try:
                result = run()
            finally:
                seen = stopped(self.log, dut, running, again=attempt == 1)
            if seen is not None:
                break
        leftovers = uprobe_leftovers(dut, footprint=running.footprint)
        if leftovers:
            raise HostStackError(f"{dut.where}: the tracer left probes attached: {leftovers}")
        check_attachment(seen, pids, "nginx", dut.where)
        if trial.measured:
            self.evidence.append({"events": seen.total_events, "lost": seen.lost_events,
                                  "events_per_pid": {str(p): n for p, n in
                                                     seen.events_per_pid.items()},
                                  "wrk_requests": result.total_requests})
        return result


@dataclass
class SeedTracerTrials:
    """Traced trials of the seed's sslsniff binary run as root and given nginx's worker
    (``-p``): started before and stopped (SIGINT) after every traced trial; each must count
    events from nginx only and leave no uprobe."""

    dut: Node
    server: ProxySetup
    tracers: TracerSetup
    evidence: list[dict[str, Any]] = field(default_factory=list)

    def traced(self, run: Callable[[], WrkResult], trial: Trial) -> WrkResult:
        server, seed = https_server(self.server), self.tracers.seed  # A/B may switch them
        assert seed is not None
        dut = self.dut
        pids = sorted(group_pids(dut, server.process.pid))
        program = SeedSslsniff(binary=seed.binary, pid=nginx_worker(pids, server.process.pid))
        running = None
        try:
            running = start_kernel_sslsniff(dut, program, seed)
            result = run()
        finally:
            failing = sys.exc_info()[0] is not None
            try:
                if running is not None:
                    seen = stop_kernel_sslsniff(dut, running)
            finally:
                no_uprobe_left(dut, failing)
        check_attachment(seen, pids, "nginx", dut.where)
        if trial.measured:
            self.evidence.append(trial_evidence(seen, result))
        return result


@dataclass
class BpftimeTrials:
    """Traced trials under bpftime: ``bpftime load <sslsniff>`` and the traced nginx
    (``target``) under ``bpftime start``, both stopped after the trial, nothing left behind."""

    dut: Node
    setup: BpftimeSetup
    target: TracedNginx
    shm_name: str
    evidence: list[dict[str, Any]] = field(default_factory=list)

    def traced(self, run: Callable[[], WrkResult], trial: Trial) -> WrkResult:
        program = SeedSslsniff(binary=self.setup.sslsniff)
        outcome = run_bpftime_trial(self.dut, self.setup, program, self.target, run,
                                    self.shm_name)
        if trial.measured:
            self.evidence.append(trial_evidence(outcome.seen, outcome.result))
        return outcome.result


def stopped(log: Log, dut: Any, running: Any, again: bool) -> SslsniffResult | None:
    """The tracer's counts; None when it hung on SIGTERM (killed, no maps) and may run again."""
    try:
        return stop_sslsniff(dut, running)
    except ParseError as error:
        if not again or "killed or cut off" not in str(error):
            raise
        log.warn(f"{dut.where}: the tracer hung on SIGTERM; the trial runs again ({error})")
        return None


def no_uprobe_left(dut: Any, failing: bool) -> None:
    """Fail when a uprobe on libssl is still in the kernel after the tracer stopped (only log
    it when the trial is already failing, so the first error is the one reported)."""
    leftovers = uprobe_leftovers(dut)
    if leftovers and failing:
        LOG.error("%s: the tracer left probes attached: %s", dut.where, leftovers)
    elif leftovers:
        raise HostStackError(f"{dut.where}: the tracer left probes attached: {leftovers}")


def trial_evidence(seen: SslsniffResult, result: WrkResult) -> dict:
    """One traced trial's proof: events seen (per PID), events lost, requests served."""
    return {"events": seen.total_events, "lost": seen.lost_events,
            "events_per_pid": {str(p): n for p, n in seen.events_per_pid.items()},
            "wrk_requests": result.total_requests}
