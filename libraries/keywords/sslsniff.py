"""Keywords for the sslsniff overhead case (seed 004): nginx HTTPS throughput untraced and with
a tracer, measured interleaved in one run. Tracers: the packaged kernel path (bcc, or the
project's bpftrace script), and the seed's sslsniff program (bpftime's libbpf example) attached
by the kernel or run under bpftime."""

from __future__ import annotations

import logging
import shlex
import sys
from collections.abc import Callable
from typing import Any

from robot.api import SkipExecution, logger
from robot.api.deco import keyword, library

from libraries.keywords import context, tool_env
from libraries.keywords.ab import closed_loop_uses, component_started, refuse_in_ab
from libraries.keywords.case import Case, run_case
from libraries.keywords.telemetry import TrialTelemetry
from libraries.results.efficiency import ProcessCost, RateCost, add_process_costs, add_rate_costs
from libraries.results.inference import DEFAULT_ALPHA
from libraries.results.measurement import Measurement, Trial
from libraries.results.settings import parse_plan
from libraries.testbed.errors import HostStackError, ParseError, ToolMissing
from libraries.tools.bpftime import BpftimeSetup, detect_bpftime
from libraries.tools.nginx.service import NginxHandle, nginx_is_alive
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
from libraries.tools.sslsniff.userspace import TracedNginx, run_bpftime_trial, traced_config
from libraries.tools.wrk.output import WrkResult
from libraries.tools.wrk.run import WrkOptions, choose_load_tool, run_wrk

LOG = logging.getLogger(__name__)
BPFTIME_PORT = 8447


@library(scope="SUITE", auto_keywords=False)
class SslsniffKeywords:
    """Measure an nginx HTTPS server's throughput with and without an SSL tracer attached."""

    def __init__(self) -> None:
        self._tracer: KernelTracer | None = None
        self._seed: KernelTracer | None = None

    @staticmethod
    def _server() -> NginxHandle:
        server = context.https_server()
        if server is None:
            raise HostStackError("start the HTTPS server first ('Start HTTPS Server On Node')")
        return server

    @keyword("Require Kernel SSL Tracer On Node")
    def require_kernel_ssl_tracer_on_node(self, node: str = "dut") -> str:
        """Choose the kernel tracer ``node`` can run (bcc sslsniff where kernel headers exist,
        else the project's bpftrace script) and return its kind; skip with the reason when
        neither can run."""
        testbed = context.testbed()
        target = testbed.node(node)
        bpftrace = testbed.topology.nodes[target.name].tools.get("bpftrace", "bpftrace")
        try:
            self._tracer = detect_kernel_tracer(target, bpftrace, sudo=True)
        except ToolMissing as error:
            raise SkipExecution(str(error)) from None
        for note in self._tracer.notes:
            logger.info(f"not bcc: {note}")
        # an A/B side with another bpftrace: detected again on each switch
        component_started("kernel-tracer", {("tool", target.name, "bpftrace")}, lambda: None,
                          lambda: self.require_kernel_ssl_tracer_on_node(node))
        return self._tracer.kind

    @keyword("Measure HTTPS Load With Kernel Tracer")
    def measure_https_load_with_kernel_tracer(
        self, client: str = "tg", path: str = "/1kb", connections: int = 10,
        per_event: bool = True, trials: str | int = 5, duration: str | int = 2,
        warmup: str | int = 1,
    ) -> Measurement:
        """wrk from ``client`` against the HTTPS server: untraced and with the kernel tracer on
        nginx's libssl ``SSL_read``/``SSL_write`` (entry and return probes), interleaved.

        The tracer is started before and stopped after every traced trial (failures
        included); each traced trial must count events from nginx's PIDs only (a tracer that
        attached nothing, or caught wrk, fails the test) and leave no uprobe behind.
        Metrics: ``baseline_rps``, ``traced_rps``, ``overhead_pct`` (100 x (1 - traced /
        baseline), per round) and ``events_per_request``.
        """
        if self._tracer is None:
            raise HostStackError("call 'Require Kernel SSL Tracer On Node' first")
        tracer = self._tracer
        dut = context.testbed().nodes[self._server().node]
        evidence: list[dict] = []

        def traced(run: Callable[[], WrkResult], trial: Trial) -> WrkResult:
            server, tracer = self._server(), self._tracer  # an A/B run may switch them
            assert tracer is not None
            pids = sorted(group_pids(dut, server.process.pid))
            params = SslsniffParams(pids=tuple(pids), per_event=bool(per_event))
            for attempt in (1, 2):  # bpftrace has been seen not to stop on SIGTERM (rarely)
                running = start_sslsniff(dut, params, tracer, sudo=True)
                try:
                    result = run()
                finally:
                    seen = _stopped(dut, running, again=attempt == 1)
                if seen is not None:
                    break
            leftovers = uprobe_leftovers(dut, footprint=running.footprint)
            if leftovers:
                raise HostStackError(f"{dut.where}: the tracer left probes attached: "
                                     f"{leftovers}")
            check_attachment(seen, pids, "nginx", dut.where)
            if trial.measured:
                evidence.append({"events": seen.total_events, "lost": seen.lost_events,
                                 "events_per_pid": {str(p): n for p, n in
                                                    seen.events_per_pid.items()},
                                 "wrk_requests": result.total_requests})
            return result

        measurement = self._measure(client, path, connections, trials, duration, warmup,
                                    traced, variant=f"kernel-{tracer.kind}")
        measurement.parameters["per_event"] = bool(per_event)
        if measurement.ab:
            return measurement  # each side's figures are in its own evidence
        measurement.evidence["tracer_trials"] = evidence
        measurement.evidence["tracer"] = {"kind": tracer.kind, "binary": tracer.binary,
                                          "version": tracer.version,
                                          "not_bcc_because": list(tracer.notes)}
        measurement.add("events_per_request",
                        [e["events"] / max(1, e["wrk_requests"]) for e in evidence], "events")
        return measurement

    @keyword("Require Seed Sslsniff On Node")
    def require_seed_sslsniff_on_node(self, node: str = "dut") -> str:
        """Check that ``node`` has the seed's sslsniff program (bpftime's libbpf example;
        topology ``tools.bpftime_sslsniff``) and bpftool; return its version. Skips with the
        reason where it is not declared or not installed."""
        testbed = context.testbed()
        target = testbed.node(node)
        binary = testbed.topology.nodes[target.name].tools.get("bpftime_sslsniff")
        if binary is None:
            raise SkipExecution(f"bpftime_sslsniff not declared on {target.name} in topology "
                                f"{testbed.topology.name}")
        try:
            self._seed = detect_seed_sslsniff(target, binary)
        except ToolMissing as error:
            raise SkipExecution(str(error)) from None
        component_started("seed-sslsniff", {("tool", target.name, "bpftime_sslsniff")},
                          lambda: None, lambda: self.require_seed_sslsniff_on_node(node))
        return self._seed.version

    @keyword("Measure HTTPS Load With Seed Sslsniff In Kernel")
    def measure_https_load_with_seed_sslsniff_in_kernel(
        self, client: str = "tg", path: str = "/1kb", connections: int = 10,
        trials: str | int = 5, duration: str | int = 2, warmup: str | int = 1,
    ) -> Measurement:
        """As the kernel variant, with the seed's sslsniff binary run as root (``sudo
        ./sslsniff``) and given nginx's worker (``-p``): started before and stopped (SIGINT)
        after every traced trial; each must count events from nginx only and leave no uprobe.
        """
        if self._seed is None:
            raise HostStackError("call 'Require Seed Sslsniff On Node' first")
        seed = self._seed
        dut = context.testbed().nodes[self._server().node]
        evidence: list[dict] = []

        def traced(run: Callable[[], WrkResult], trial: Trial) -> WrkResult:
            server, seed = self._server(), self._seed  # an A/B run may switch them
            assert seed is not None
            pids = sorted(group_pids(dut, server.process.pid))
            program = SeedSslsniff(binary=seed.binary,
                                   pid=nginx_worker(pids, server.process.pid))
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
                    _no_uprobe_left(dut, failing)
            check_attachment(seen, pids, "nginx", dut.where)
            if trial.measured:
                evidence.append(_trial_evidence(seen, result))
            return result

        measurement = self._measure(client, path, connections, trials, duration, warmup,
                                    traced, variant="kernel-libbpf")
        return _with_tracer_evidence(measurement, evidence, {
            "kind": "libbpf", "program": seed.binary, "version": seed.version,
            "mode": "kernel uprobes, run as root, -p <nginx worker>",
            "output": "every event with its data, counted on the node"})

    @keyword("Measure HTTPS Load With Userspace Tracer")
    def measure_https_load_with_userspace_tracer(
        self, client: str = "tg", path: str = "/1kb", connections: int = 10,
        trials: str | int = 5, duration: str | int = 2, warmup: str | int = 1,
    ) -> Measurement:
        """As the kernel variant, with the same sslsniff binary under bpftime: every traced
        trial runs ``bpftime load <sslsniff>`` and a second nginx (same config, port 8447)
        under ``bpftime start``, stops both and checks that bpftime left nothing behind; wrk
        alternates between the untraced server and the bpftime one. Skips with the reason
        where bpftime, its libraries or its sslsniff program is absent (topology
        ``tools.bpftime`` and ``tools.bpftime_sslsniff``, environment from
        ``tool_env.bpftime``, the libraries' folder from ``tool_dirs.bpftime`` or found beside
        the binary)."""
        server = self._server()
        testbed = context.testbed()
        dut = testbed.nodes[server.node]
        spec = testbed.topology.nodes[dut.name]
        refuse_in_ab("A/B runs do not compare the bpftime variant: its traced nginx is a copy "
                     "of the server's config made once per test")
        if "bpftime" not in spec.tools or "bpftime_sslsniff" not in spec.tools:
            raise SkipExecution(f"bpftime not declared on {dut.name} in topology "
                                f"{testbed.topology.name} (tools.bpftime, "
                                "tools.bpftime_sslsniff)")
        setup = BpftimeSetup(binary=spec.tools["bpftime"],
                             sslsniff=spec.tools["bpftime_sslsniff"],
                             env=spec.tool_env.get("bpftime", {}),
                             install_dir=spec.tool_dirs.get("bpftime"))
        try:
            detected = detect_bpftime(dut, setup)
            program = detect_seed_sslsniff(dut, setup.sslsniff)
        except ToolMissing as error:
            raise SkipExecution(str(error)) from None
        setup, version = detected.setup, detected.version
        prefix = f"{server.prefix}-bpftime"
        dut.run(f"mkdir -p {shlex.quote(prefix)}/logs", timeout=10, sudo=True)
        dut.put(traced_config(dut.get(server.config_path, sudo=True), server.prefix, prefix,
                              server.ports, BPFTIME_PORT), f"{prefix}/nginx.conf", sudo=True)
        nginx = spec.tools.get("nginx", "nginx")
        binary = dut.which(nginx)
        if binary is None:
            raise HostStackError(f"{dut.where}: nginx ({nginx}) not found on the login PATH "
                                 "or sudo's PATH")
        target = TracedNginx(binary=binary, config=f"{prefix}/nginx.conf", prefix=prefix + "/",
                             port=BPFTIME_PORT,
                             error_log=server.error_log.replace(server.prefix, prefix))
        shm_name = f"hoststack_bpftime_{server.process.pid}"
        evidence: list[dict] = []

        def traced(run: Callable[[], WrkResult], trial: Trial) -> WrkResult:
            outcome = run_bpftime_trial(dut, setup, SeedSslsniff(binary=setup.sslsniff), target,
                                        run, shm_name)
            if trial.measured:
                evidence.append(_trial_evidence(outcome.seen, outcome.result))
            return outcome.result

        measurement = self._measure(client, path, connections, trials, duration, warmup,
                                    traced, variant="bpftime", traced_port=BPFTIME_PORT)
        return _with_tracer_evidence(measurement, evidence, {
            "kind": "bpftime", "bpftime": setup.binary, "install_dir": setup.install_dir,
            "version": version,
            "program": setup.sslsniff, "program_version": program.version,
            "env": dict(setup.env), "mode": "bpftime userspace uprobes (load + start)",
            "output": "every event with its data, counted on the node"})

    def _measure(self, client: str, path: str, connections: int, trials: str | int,
                 duration: str | int, warmup: str | int, traced: Callable | None,
                 variant: str,
                 traced_port: int | None = None) -> Measurement:
        testbed = context.testbed()
        server = self._server()
        dut = testbed.nodes[server.node]
        tg = testbed.node(client)
        first, flavour = choose_load_tool(tg, tools := testbed.topology.nodes[tg.name].tools)
        address = testbed.topology.address_of(dut.name, seen_from=tg.name)
        cpus = testbed.topology.cpus_of(tg.name, "load")
        plan = parse_plan(trials, duration, warmup)
        telemetry = TrialTelemetry.for_current_suite(testbed)

        def wrk(port: int, seconds: int) -> WrkResult:
            binary, kind = choose_load_tool(tg, testbed.topology.nodes[tg.name].tools)
            options = WrkOptions(url=f"https://{address}:{port}{path}", threads=1,
                                 connections=int(connections), duration=seconds,
                                 rate=100000000 if kind == "wrk2" else None, cpus=cpus)
            result = run_wrk(tg, binary, options, flavour=kind,
                             env=tool_env(testbed, tg.name, kind),
                             cpu_ledger=telemetry.ledger(tg.name))
            if result.total_requests == 0 or result.total_errors:
                raise HostStackError(f"wrk against port {port}: {result.total_requests} "
                                     f"requests, {result.total_errors} errors")
            nginx_is_alive(dut, self._server())
            return result

        def baseline(trial: Trial) -> WrkResult:
            return wrk(server.ports[0], trial.seconds)

        def with_tracer(trial: Trial) -> WrkResult:
            port = traced_port or server.ports[0]  # userspace: the traced server is another
            if traced is None:
                return wrk(port, trial.seconds)
            return traced(lambda: wrk(port, trial.seconds), trial)

        judge = context.judge()

        def build(results: dict[str, list[WrkResult]], seconds: float) -> Measurement:
            measurement = Measurement(
                case="sslsniff", stack="kernel",
                parameters={"tracer": variant, "file": path, "connections": int(connections),
                            "tool": flavour, "trials": plan.trials, "duration_s": plan.duration,
                            "warmup_s": plan.warmup},
                trial_seconds=seconds, alpha=judge.settings.alpha if judge else DEFAULT_ALPHA,
            )
            base = [r.requests_per_second for r in results["baseline"]]
            with_ = [r.requests_per_second for r in results["traced"]]
            measurement.add("baseline_rps", base, "requests/s")
            measurement.add("traced_rps", with_, "requests/s")
            measurement.add("overhead_pct", [100.0 * (1.0 - t / b) for t, b in
                                             zip(with_, base, strict=True)], "%",
                            "lower_is_better")
            _tracer_costs(measurement, telemetry, dut.name, server.process.name, traced)
            return measurement

        # A/B: the traced server's rate is compared (its baseline beside it)
        case = Case("sslsniff", "kernel", {"baseline": baseline, "traced": with_tracer}, plan,
                    build, {"traced_rps": "higher_is_better"},
                    {"tracer": variant, "file": path, "connections": int(connections)},
                    frozenset(closed_loop_uses(tg.name, tools, first)), output="wrk output",
                    generator=(tg.name, "wrk"))
        return run_case(case, telemetry)


def _stopped(dut: Any, running: Any, again: bool) -> SslsniffResult | None:
    """The tracer's counts; None when it hung on SIGTERM (killed, no maps) and may run again."""
    try:
        return stop_sslsniff(dut, running)
    except ParseError as error:
        if not again or "killed or cut off" not in str(error):
            raise
        logger.warn(f"{dut.where}: the tracer hung on SIGTERM; the trial runs again ({error})")
        return None


def _tracer_costs(measurement: Measurement, telemetry: TrialTelemetry, dut: str,
                  server: str, traced: Callable | None) -> None:
    """Telemetry and the CPU metrics of both variants (the tracer's own, under bpftime)."""
    telemetry.attach(measurement)
    add_rate_costs(measurement, telemetry.trials, [
        RateCost(v, f"{v}_rps", "rps", prefix=f"{v}_", dut=dut)
        for v in ("baseline", "traced")])
    traced_server = "nginx-bpftime" if traced is None else server
    add_process_costs(measurement, telemetry.trials, [
        ProcessCost("baseline", dut, f"{server} worker", "baseline_nginx_worker_cpu"),
        ProcessCost("traced", dut, f"{traced_server} worker", "traced_nginx_worker_cpu")])
    if traced is None:
        add_process_costs(measurement, telemetry.trials, [
            ProcessCost("traced", dut, "bpftime-sslsniff", "tracer_cpu")])
    else:
        measurement.notes.append(
            "kernel tracer CPU: the tracer runs only inside each traced trial, so it "
            "shows in the per-core table (sys/soft of the DUT), not as a process")


def _no_uprobe_left(dut: Any, failing: bool) -> None:
    """Fail when a uprobe on libssl is still in the kernel after the tracer stopped (only log
    it when the trial is already failing, so the first error is the one reported)."""
    leftovers = uprobe_leftovers(dut)
    if leftovers and failing:
        LOG.error("%s: the tracer left probes attached: %s", dut.where, leftovers)
    elif leftovers:
        raise HostStackError(f"{dut.where}: the tracer left probes attached: {leftovers}")


def _trial_evidence(seen: SslsniffResult, result: WrkResult) -> dict:
    """One traced trial's proof: events seen (per PID), events lost, requests served."""
    return {"events": seen.total_events, "lost": seen.lost_events,
            "events_per_pid": {str(p): n for p, n in seen.events_per_pid.items()},
            "wrk_requests": result.total_requests}


def _with_tracer_evidence(measurement: Measurement, evidence: list[dict],
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
