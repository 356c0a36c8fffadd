"""The sslsniff overhead case (seed 004): nginx HTTPS throughput untraced and with a tracer,
measured interleaved in one run. Tracers: the packaged kernel path (bcc, or the project's
bpftrace script), and the seed's sslsniff program (bpftime's libbpf example) attached by the
kernel or run under bpftime.

:class:`SslsniffCase` is one test: its ``baseline`` and ``traced`` trials (wrk against the
untraced server, and through ``traced``: a tracer started before and stopped after the load,
:mod:`libraries.cases.tracers`) and ``build`` are what the case runner calls; the
``measure_with_*`` functions add the tracer's block to the record. The keyword library
(``libraries.keywords.sslsniff``) makes one call per keyword: finding the tracer a node can
run (:mod:`libraries.cases.tracers`) or measuring with it (here).
"""

from __future__ import annotations

import logging
import shlex
from collections.abc import Callable
from dataclasses import dataclass

from libraries.cases.case_runner import Case, run_case
from libraries.cases.context import CaseContext, Skip
from libraries.cases.https_paths import closed_loop_uses
from libraries.cases.ssl_proxy import ProxySetup
from libraries.cases.tracers import (
    BpftimeTrials,
    KernelTracerTrials,
    SeedTracerTrials,
    TracerSetup,
    https_server,
)
from libraries.cases.trial_observer import TrialTelemetry, dut_cores, judged_costs
from libraries.results.cost import CostSpec, add_costs
from libraries.results.efficiency import ProcessCost, RateCost, add_process_costs, add_rate_costs
from libraries.results.inference import DEFAULT_ALPHA
from libraries.results.measurement import Measurement, Trial
from libraries.results.plan import TrialPlan
from libraries.testbed.errors import HostStackError, ToolMissing
from libraries.tools.bpftime import BpftimeSetup, detect_bpftime
from libraries.tools.nginx.service import nginx_is_alive
from libraries.tools.sslsniff.seed import (
    detect_seed_sslsniff,
)
from libraries.tools.sslsniff.userspace import TracedNginx, traced_config
from libraries.tools.wrk.output import WrkResult
from libraries.tools.wrk.run import WrkOptions, choose_load_tool, closed_loop_rate, run_wrk

LOG = logging.getLogger(__name__)
BPFTIME_PORT = 8447

Traced = Callable[[Callable[[], WrkResult], Trial], WrkResult]
"""A traced trial: runs the load (the first argument) with a tracer attached."""


@dataclass(frozen=True)
class SniffRequest:
    """One test's load: from node ``client``, file ``path``, wrk ``connections``, the trial
    ``plan``."""

    client: str
    path: str
    connections: int
    plan: TrialPlan


class SslsniffCase:
    """One test of the sslsniff case in ``ctx``: ``baseline`` (wrk against the untraced
    server) and ``traced`` (wrk through ``traced``, against ``traced_port`` when the traced
    server is another nginx; no ``traced``: plain wrk there)."""

    def __init__(self, ctx: CaseContext, server: ProxySetup, request: SniffRequest,
                 traced: Traced | None, variant: str, traced_port: int | None = None) -> None:
        testbed = ctx.testbed
        self.ctx, self.setup, self.request = ctx, server, request
        self.traced_fn, self.variant, self.traced_port = traced, variant, traced_port
        handle = https_server(server)
        self.server_name, self.server_ports = handle.process.name, handle.ports
        self.dut = testbed.nodes[handle.node]
        self.tg = testbed.node(request.client)
        self.tools = testbed.topology.nodes[self.tg.name].tools
        self.first, self.flavour = choose_load_tool(self.tg, self.tools)
        self.address = testbed.topology.address_of(self.dut.name, seen_from=self.tg.name)
        self.cpus = testbed.topology.cpus_of(self.tg.name, "load")
        self.telemetry = TrialTelemetry.of(ctx)

    def wrk(self, port: int, seconds: int) -> WrkResult:
        """One wrk run against ``port`` of the server's node; every request answered."""
        testbed, tg = self.ctx.testbed, self.tg
        binary, kind = choose_load_tool(tg, testbed.topology.nodes[tg.name].tools)
        options = WrkOptions(url=f"https://{self.address}:{port}{self.request.path}",
                             connections=self.request.connections, duration=seconds,
                             rate=closed_loop_rate(kind), cpus=self.cpus)
        result = run_wrk(tg, binary, options, flavour=kind,
                         env=testbed.topology.env_of(tg.name, kind),
                         cpu_ledger=self.telemetry.ledger(tg.name))
        if result.total_requests == 0 or result.total_errors:
            raise HostStackError(f"wrk against port {port}: {result.total_requests} "
                                 f"requests, {result.total_errors} errors")
        nginx_is_alive(self.dut, https_server(self.setup))
        return result

    def baseline(self, trial: Trial) -> WrkResult:
        """A trial against the untraced server."""
        return self.wrk(self.server_ports[0], trial.seconds)

    def with_tracer(self, trial: Trial) -> WrkResult:
        """A trial with the tracer attached."""
        port = self.traced_port or self.server_ports[0]  # bpftime: the traced server's own
        if self.traced_fn is None:
            return self.wrk(port, trial.seconds)
        return self.traced_fn(lambda: self.wrk(port, trial.seconds), trial)

    def build(self, results: dict[str, list[WrkResult]], seconds: float) -> Measurement:
        """The measurement: both rates, the overhead per round, the CPU metrics."""
        plan, request = self.request.plan, self.request
        measurement = Measurement(
            case="sslsniff", stack="kernel",
            parameters={"tracer": self.variant, "file": request.path,
                        "connections": request.connections, "tool": self.flavour,
                        "trials": plan.trials, "duration_s": plan.duration,
                        "warmup_s": plan.warmup},
            trial_seconds=seconds, alpha=self.ctx.alpha(DEFAULT_ALPHA),
        )
        base = [r.requests_per_second for r in results["baseline"]]
        with_ = [r.requests_per_second for r in results["traced"]]
        measurement.add("baseline_rps", base, "requests/s")
        measurement.add("traced_rps", with_, "requests/s")
        measurement.add("overhead_pct", [100.0 * (1.0 - t / b) for t, b in
                                         zip(with_, base, strict=True)], "%",
                        "lower_is_better")
        tracer_costs(measurement, self.telemetry, self.dut.name, self.server_name,
                     self.traced_fn, results, dut_cores(self.ctx.testbed, self.dut.name))
        return measurement

    def case(self) -> Case:
        """The test as the runner measures it (an A/B run compares the traced server's rate,
        its baseline beside it)."""
        request, tg = self.request, self.tg.name
        return Case("sslsniff", "kernel", {"baseline": self.baseline,
                                           "traced": self.with_tracer},
                    request.plan, self.build, {"traced_rps": "higher_is_better"},
                    {"tracer": self.variant, "file": request.path,
                     "connections": request.connections},
                    frozenset(closed_loop_uses(tg, self.tools, self.first)),
                    output="wrk output", generator=(tg, "wrk"),
                    costs=judged_costs("traced_", False))

    def measure(self) -> Measurement:
        """Measure the test, plainly or as an A/B test."""
        return run_case(self.ctx, self.case(), self.telemetry)


def measure_with_kernel_tracer(ctx: CaseContext, server: ProxySetup, tracers: TracerSetup,
                               request: SniffRequest, per_event: bool) -> Measurement:
    """``Measure HTTPS Load With Kernel Tracer``: the kernel tracer on nginx's libssl; the
    record's tracer evidence and ``events_per_request`` (an A/B test keeps each side's
    figures in its own evidence)."""
    if tracers.kernel is None:
        raise HostStackError("call 'Require Kernel SSL Tracer On Node' first")
    tracer = tracers.kernel
    trials = KernelTracerTrials(ctx.log, ctx.testbed.nodes[https_server(server).node], server,
                                tracers, per_event)
    measurement = SslsniffCase(ctx, server, request, trials.traced,
                               variant=f"kernel-{tracer.kind}").measure()
    measurement.parameters["per_event"] = per_event
    if measurement.ab:
        return measurement  # each side's figures are in its own evidence
    evidence = trials.evidence
    measurement.evidence["tracer_trials"] = evidence
    measurement.evidence["tracer"] = {"kind": tracer.kind, "binary": tracer.binary,
                                      "version": tracer.version,
                                      "not_bcc_because": list(tracer.notes)}
    measurement.add("events_per_request",
                    [e["events"] / max(1, e["wrk_requests"]) for e in evidence], "events")
    return measurement


def measure_with_seed_sslsniff(ctx: CaseContext, server: ProxySetup, tracers: TracerSetup,
                               request: SniffRequest) -> Measurement:
    """``Measure HTTPS Load With Seed Sslsniff In Kernel``: the seed's program attached by
    the kernel."""
    if tracers.seed is None:
        raise HostStackError("call 'Require Seed Sslsniff On Node' first")
    seed = tracers.seed
    trials = SeedTracerTrials(ctx.testbed.nodes[https_server(server).node], server, tracers)
    measurement = SslsniffCase(ctx, server, request, trials.traced,
                               variant="kernel-libbpf").measure()
    return with_tracer_evidence(measurement, trials.evidence, {
        "kind": "libbpf", "program": seed.binary, "version": seed.version,
        "mode": "kernel uprobes, run as root, -p <nginx worker>",
        "output": "every event with its data, counted on the node"})


def measure_with_userspace_tracer(ctx: CaseContext, server: ProxySetup,
                                  request: SniffRequest) -> Measurement:
    """``Measure HTTPS Load With Userspace Tracer``: the seed's program under bpftime, with a
    second nginx (the server's config, port 8447) under ``bpftime start``. Skips where bpftime,
    its libraries or its sslsniff program is absent, and in an A/B run."""
    handle = https_server(server)
    testbed = ctx.testbed
    dut = testbed.nodes[handle.node]
    spec = testbed.topology.nodes[dut.name]
    ctx.refuse_in_ab("A/B runs do not compare the bpftime suite: its traced nginx is a copy "
                     "of the server's config made once per test")
    if "bpftime" not in spec.tools or "bpftime_sslsniff" not in spec.tools:
        raise Skip(f"bpftime not declared on {dut.name} in topology {testbed.topology.name} "
                   "(tools.bpftime, tools.bpftime_sslsniff)")
    setup = BpftimeSetup(binary=spec.tools["bpftime"], sslsniff=spec.tools["bpftime_sslsniff"],
                         env=spec.tool_env.get("bpftime", {}),
                         install_dir=spec.tool_dirs.get("bpftime"))
    try:
        detected = detect_bpftime(dut, setup)
        program = detect_seed_sslsniff(dut, setup.sslsniff)
    except ToolMissing as error:
        raise Skip(str(error)) from None
    setup, version = detected.setup, detected.version
    prefix = f"{handle.prefix}-bpftime"
    dut.run(f"mkdir -p {shlex.quote(prefix)}/logs", timeout=10, sudo=True)
    dut.put(traced_config(dut.get(handle.config_path, sudo=True), handle.prefix, prefix,
                          handle.ports, BPFTIME_PORT), f"{prefix}/nginx.conf", sudo=True)
    nginx = spec.tools.get("nginx", "nginx")
    binary = dut.which(nginx)
    if binary is None:
        raise HostStackError(f"{dut.where}: nginx ({nginx}) not found on the login PATH "
                             "or sudo's PATH")
    target = TracedNginx(binary=binary, config=f"{prefix}/nginx.conf", prefix=prefix + "/",
                         port=BPFTIME_PORT,
                         error_log=handle.error_log.replace(handle.prefix, prefix))
    trials = BpftimeTrials(dut, setup, target, f"hoststack_bpftime_{handle.process.pid}")
    measurement = SslsniffCase(ctx, server, request, trials.traced, variant="bpftime",
                               traced_port=BPFTIME_PORT).measure()
    return with_tracer_evidence(measurement, trials.evidence, {
        "kind": "bpftime", "bpftime": setup.binary, "install_dir": setup.install_dir,
        "version": version,
        "program": setup.sslsniff, "program_version": program.version,
        "env": dict(setup.env), "mode": "bpftime userspace uprobes (load + start)",
        "output": "every event with its data, counted on the node"})


def tracer_costs(measurement: Measurement, telemetry: TrialTelemetry, dut: str,
                 server: str, traced: Callable | None,
                 results: dict[str, list[WrkResult]], cores: tuple[int, ...] = ()) -> None:
    """Telemetry of these very trials and the CPU metrics of both variants (the tracer's own,
    under bpftime), and nginx's CPU per request with the tracer and without it (the traced
    one first: an A/B test judges it)."""
    telemetry.attach(measurement, results)
    trials = measurement.trial_telemetry or {}
    add_rate_costs(measurement, trials, [
        RateCost(v, f"{v}_rps", "rps", prefix=f"{v}_", dut=dut)
        for v in ("baseline", "traced")])
    traced_server = "nginx-bpftime" if traced is None else server
    add_process_costs(measurement, trials, [
        ProcessCost("baseline", dut, f"{server} worker", "baseline_nginx_worker_cpu"),
        ProcessCost("traced", dut, f"{traced_server} worker", "traced_nginx_worker_cpu")])
    specs = [CostSpec(v, dut, (name,), "request", what, cores, prefix=f"{v}_")
             for v, name, what in (("traced", traced_server, "the traced HTTPS server"),
                                   ("baseline", server, "the untraced HTTPS server"))
             if v in results]
    add_costs(measurement, specs, {v: [r.total_requests for r in runs]
                                   for v, runs in results.items()}, trials)
    if traced is None:
        add_process_costs(measurement, trials, [
            ProcessCost("traced", dut, "bpftime-sslsniff", "tracer_cpu")])
    else:
        measurement.notes.append(
            "kernel tracer CPU: the tracer runs only inside each traced trial, so it "
            "shows in the per-core table (sys/soft of the DUT), not as a process")


def with_tracer_evidence(measurement: Measurement, evidence: list[dict],
                         tracer: dict) -> Measurement:
    """Attach the tracer's identity and per-trial proofs; ``events_per_request`` counts the
    events the probes fired (seen + reported lost) per request served. (An A/B test keeps
    each side's figures in its own evidence.)"""
    if measurement.ab:
        return measurement
    measurement.evidence["tracer_trials"] = evidence
    measurement.evidence["tracer"] = tracer
    measurement.add("events_per_request",
                    [(e["events"] + e["lost"]) / max(1, e["wrk_requests"]) for e in evidence],
                    "events")
    return measurement
