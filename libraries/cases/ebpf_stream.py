"""The eBPF stream-proxy case (seed 003): iperf3 directly to the server, through a native nginx
stream proxy and through nginx's stream eBPF (sockmap) module, interleaved in one run, each
eBPF trial with proof that the eBPF path engaged.

:class:`EbpfStreamCase` is one test: its ``trial`` (one iperf3 client run against a path, the
engagement proof of an eBPF trial, every process still alive) and ``build`` (the measurement)
are what the case runner calls; before it, the set-up finds the eBPF nginx
(:func:`require_ebpf_nginx`) and starts the server and the proxies
(:func:`start_stream_test_server`, :func:`start_stream_proxy`, kept in a
:class:`StreamSetup`). The keyword library (``libraries.keywords.ebpf_stream``) makes one
call per keyword.
"""

from __future__ import annotations

from contextlib import ExitStack
from dataclasses import dataclass, field

from libraries.cases.case_runner import Case, run_case
from libraries.cases.context import CaseContext, Skip
from libraries.cases.trial_observer import TrialTelemetry, dut_cores, judged_costs
from libraries.results.cost import CostSpec, add_costs
from libraries.results.efficiency import (
    ProcessCost,
    RateCost,
    add_process_costs,
    add_rate_costs,
    add_ratio,
)
from libraries.results.inference import DEFAULT_ALPHA
from libraries.results.measurement import Measurement, Trial
from libraries.results.plan import TrialPlan
from libraries.testbed.errors import HostStackError
from libraries.testbed.node import Process
from libraries.tools.ebpf_stream.bpf_stats import StatsHold, bpf_stats_enabled
from libraries.tools.ebpf_stream.module import (
    EngagementEvidence,
    check_ebpf_config,
    collect_engagement,
    has_ebpf_module,
    mark_engagement,
)
from libraries.tools.iperf3 import (
    IperfClientOptions,
    IperfResult,
    IperfServerOptions,
    run_iperf3_client,
    start_iperf3_server,
)
from libraries.tools.nginx.config import NginxInstance
from libraries.tools.nginx.service import (
    NginxHandle,
    instance_prefix,
    nginx_is_alive,
    start_nginx,
    stream_module_of,
)
from libraries.tools.nginx.stream import StreamProxyParams, StreamServer

IPERF_PORT = 20001  # the seed's ports
NATIVE_PORT = 10001
EBPF_PORT = 10000


@dataclass
class StreamSetup:
    """What the set-up keywords started: the iperf3 server ``(node, process)``, the stream
    proxies by kind (``native``, ``ebpf``) and whether they are ``pinned``. An A/B switch
    restarts them and replaces them here, so a trial reads the running ones."""

    server: tuple[str, Process] | None = None
    proxies: dict[str, NginxHandle] = field(default_factory=dict)
    pinned: bool = False


@dataclass(frozen=True)
class StreamRequest:
    """One test's load: from node ``client``, ``reverse`` (``-R``: download, as in the seed),
    the trial ``plan``."""

    client: str
    reverse: bool
    plan: TrialPlan


def require_ebpf_nginx(ctx: CaseContext, node: str) -> str:
    """The eBPF-capable nginx of ``node`` (topology ``tools.nginx_ebpf``); a skip with the
    reason when it is not declared or lacks the module."""
    testbed = ctx.testbed
    name = testbed.topology.resolve_node(node)
    binary = testbed.topology.nodes[name].tools.get("nginx_ebpf")
    if binary is None:
        raise Skip(f"no eBPF nginx declared on {name} in topology {testbed.topology.name} "
                   "(tools.nginx_ebpf)")
    ok, reason = has_ebpf_module(testbed.nodes[name], binary)
    if not ok:
        raise Skip(reason)
    ctx.log.info(reason)
    return binary


def start_stream_test_server(ctx: CaseContext, setup: StreamSetup, node: str,
                             pinned: bool) -> None:
    """``iperf3 -s -p 20001`` on ``node`` (pinned to its ``server`` CPUs when ``pinned``),
    listening before it returns; an A/B side restarts it."""
    testbed = ctx.testbed
    target = testbed.node(node)
    binary = testbed.topology.nodes[target.name].tools.get("iperf3", "iperf3")
    cpus = testbed.topology.cpus_of(target.name, "server") if pinned else None
    target.ensure_port_free(IPERF_PORT)
    process = start_iperf3_server(target, binary, IperfServerOptions(port=IPERF_PORT,
                                                                     cpus=cpus),
                                  env=testbed.topology.env_of(target.name, "iperf3"))
    target.wait_for_listener(IPERF_PORT, process)
    setup.server = (target.name, process)
    setup.pinned = bool(pinned)
    ctx.component_started("iperf3-server", {("tool", target.name, "iperf3"), ("env", "iperf3")},
                          lambda: target.stop(process),
                          lambda: start_stream_test_server(ctx, setup, node, pinned))


def start_stream_proxy(ctx: CaseContext, setup: StreamSetup, node: str, upstream: str,
                       ebpf: bool, pinned: bool) -> None:
    """An nginx stream proxy on ``node`` towards the iperf3 server on ``upstream``: native
    (port 10001, its own stream module) or, with ``ebpf``, the eBPF-module build (port 10000,
    notice-level log for the engagement evidence); ``pinned``: its worker on the node's
    ``proxy`` CPU. The rendered config in the log; an A/B side restarts it."""
    testbed = ctx.testbed
    target = testbed.node(node)
    address = testbed.topology.address_of(upstream, seen_from=target.name)
    cpus = testbed.topology.cpus_of(target.name, "proxy") if pinned else None
    name = "nginx-stream-ebpf" if ebpf else "nginx-stream"
    http, servers = ctx.side_nginx("stream")
    instance = NginxInstance(prefix=instance_prefix(target, name), user="root",
                             worker_cpus=(cpus[0],) if cpus else None,
                             error_log_level="notice" if ebpf else "crit",
                             extra_http=http, extra_server=servers)
    server = StreamServer(listen_port=EBPF_PORT if ebpf else NATIVE_PORT,
                          upstreams=(f"{address}:{IPERF_PORT}",),
                          ebpf=True if ebpf else None)
    if ebpf:
        binary = require_ebpf_nginx(ctx, target.name)
        params = StreamProxyParams(instance=instance, servers=(server,), load_module=None)
        check_ebpf_config(params)
    else:
        binary = testbed.topology.nodes[target.name].tools.get("nginx", "nginx")
        params = StreamProxyParams(instance=instance, servers=(server,),
                                   load_module=stream_module_of(target, binary))
    config = params.render()
    ctx.log.folded(f"nginx stream proxy ({'eBPF' if ebpf else 'native'}) on {target.name}",
                   config)
    tool = "nginx_ebpf" if ebpf else "nginx"
    handle = start_nginx(target, name, config, [server.listen_port], binary=binary,
                         env=testbed.topology.env_of(target.name, tool))
    setup.proxies["ebpf" if ebpf else "native"] = handle
    ctx.component_started(name, {("tool", target.name, tool), ("nginx", "stream"),
                                 ("env", tool)},
                          lambda: target.stop(handle.process),
                          lambda: start_stream_proxy(ctx, setup, node, upstream, ebpf, pinned))


class EbpfStreamCase:
    """One test of the eBPF stream-proxy case in ``ctx``: a path per started proxy beside the
    direct one."""

    def __init__(self, ctx: CaseContext, setup: StreamSetup, request: StreamRequest) -> None:
        if setup.server is None:
            raise HostStackError("start the stream test server first")
        testbed = ctx.testbed
        self.ctx, self.setup, self.request = ctx, setup, request
        self.tg = testbed.node(request.client)
        self.server_name = setup.server[0]
        self.targets = {"direct": (testbed.topology.address_of(self.server_name, self.tg.name),
                                   IPERF_PORT)}
        for variant, handle in setup.proxies.items():
            self.targets[variant] = (testbed.topology.address_of(handle.node, self.tg.name),
                                     handle.ports[0])
        self.cpus = testbed.topology.cpus_of(self.tg.name, "load") if setup.pinned else None
        self.evidence: list[EngagementEvidence] = []
        self.bpftool = "bpftool"
        ebpf = setup.proxies.get("ebpf")
        self.dut = testbed.nodes[ebpf.node] if ebpf else None
        if self.dut is not None:
            self.bpftool = testbed.topology.nodes[self.dut.name].tools.get("bpftool", "bpftool")
        self.telemetry = TrialTelemetry.of(ctx)
        self.stats: StatsHold | None = None  # set by measure

    def trial(self, run: Trial) -> IperfResult:
        """One iperf3 client run against ``run.variant``'s path; an eBPF trial must show the
        eBPF path engaged; every proxy and the server must still run."""
        testbed, tg, variant = self.ctx.testbed, self.tg, run.variant
        host, port = self.targets[variant]
        options = IperfClientOptions(server=host, port=port, duration=run.seconds,
                                     reverse=self.request.reverse, cpus=self.cpus)
        # binary, proxies and server read per trial: an A/B run switches them
        binary = testbed.topology.nodes[tg.name].tools.get("iperf3", "iperf3")
        ebpf = self.setup.proxies.get("ebpf")
        mark = (mark_engagement(self.dut, ebpf.error_log, self.bpftool)
                if variant == "ebpf" and ebpf is not None and self.dut is not None else None)
        result = run_iperf3_client(tg, binary, options, cpu_ledger=self.telemetry.ledger(tg.name),
                                   env=testbed.topology.env_of(tg.name, "iperf3"))
        if mark is not None and self.dut is not None:
            assert self.stats is not None, "eBPF trials run inside measure (statistics on)"
            engaged = collect_engagement(self.dut, mark, self.stats, self.bpftool)
            engaged.require_engaged()
            if run.measured:
                self.evidence.append(engaged)
        for handle in self.setup.proxies.values():
            nginx_is_alive(testbed.nodes[handle.node], handle)
        if self.setup.server is None or not testbed.nodes[self.server_name].is_running(
                self.setup.server[1]):
            raise HostStackError("the iperf3 server died")
        return result

    def build(self, results: dict[str, list[IperfResult]], seconds: float) -> Measurement:
        """The measurement of the trials: each path's Gbit/s and their ratios, the engagement
        evidence, the telemetry and the CPU metrics."""
        plan, proxies = self.request.plan, self.setup.proxies
        measurement = Measurement(
            case="ebpf_stream", stack="kernel",
            parameters={"reverse": self.request.reverse, "pinned": self.setup.pinned,
                        "ebpf": "ebpf" in proxies, "variants": sorted(self.targets),
                        "trials": plan.trials, "duration_s": plan.duration,
                        "warmup_s": plan.warmup},
            trial_seconds=seconds, alpha=self.ctx.alpha(DEFAULT_ALPHA),
        )
        gbps = {name: [r.gbps for r in runs] for name, runs in results.items()}
        for name, values in gbps.items():
            measurement.add(name, values, "Gbit/s")
        for a, b in (("native", "direct"), ("ebpf", "native"), ("ebpf", "direct")):
            if a in gbps and b in gbps:
                measurement.add(f"{a}_{b}_ratio",
                                [x / y for x, y in zip(gbps[a], gbps[b], strict=True)],
                                "ratio")
        if self.evidence:
            measurement.evidence["ebpf_engagement"] = [e.as_record() for e in self.evidence]
        measurement.evidence["sender_gbps"] = {
            name: [r.sender_bps / 1e9 for r in runs] for name, runs in results.items()}
        self._cpu_metrics(measurement, results)
        return measurement

    def _cpu_metrics(self, measurement: Measurement,
                     results: dict[str, list[IperfResult]]) -> None:
        """Seed 003's CPU evidence: per-variant DUT cost and the proxies' worker CPU, and each
        proxy's CPU per GB (the path under test's first: the one an A/B test judges)."""
        proxies = self.setup.proxies
        self.telemetry.attach(measurement, results)
        trials = measurement.trial_telemetry or {}
        dut = next(iter(proxies.values())).node if proxies else "dut"
        add_rate_costs(measurement, trials,
                       [RateCost(v, v, "gbps", prefix=f"{v}_", dut=dut) for v in trials])
        add_process_costs(measurement, trials, [
            ProcessCost(v, handle.node, f"{handle.process.name} worker",
                        f"{v}_nginx_worker_cpu") for v, handle in proxies.items()])
        if "ebpf" in proxies:
            add_ratio(measurement, "ebpf_nginx_worker_cpu", "native_nginx_worker_cpu",
                      "ebpf_nginx_worker_cpu_ratio")
        ordered = sorted(proxies.items(), key=lambda item: item[0] != self.subject())
        specs = [CostSpec(v, handle.node, (handle.process.name,), "GB",
                          f"the {v} nginx stream proxy", dut_cores(self.ctx.testbed, handle.node),
                          prefix=f"{v}_") for v, handle in ordered if v in results]
        if specs:
            add_costs(measurement, specs,
                      {v: [r.receiver_bytes / 1e9 for r in runs] for v, runs in results.items()},
                      trials)

    def subject(self) -> str:
        """The path an A/B run compares: through the eBPF proxy, else the native one, else
        the direct path."""
        return next(v for v in ("ebpf", "native", "direct") if v in self.targets)

    def case(self) -> Case:
        """The test as the runner measures it (an A/B run compares the path through the
        proxy under test)."""
        tg = self.tg.name
        subject = self.subject()
        uses = {("tool", tg, "iperf3"), ("env", "iperf3")}
        uses |= {("tool", self.dut.name, "bpftool")} if self.dut is not None else set()
        return Case("ebpf_stream", "kernel", dict.fromkeys(self.targets, self.trial),
                    self.request.plan, self.build, {subject: "higher_is_better"},
                    {"reverse": self.request.reverse, "pinned": self.setup.pinned,
                     "ebpf": "ebpf" in self.setup.proxies, "variants": [subject]},
                    frozenset(uses), ab_variants=(subject,), output="iperf3 JSON",
                    generator=(tg, "iperf3-client"),
                    costs=judged_costs(f"{subject}_", False) if subject != "direct" else {})

    def measure(self) -> Measurement:
        """Measure the paths (plainly or as an A/B test) with the kernel's BPF run statistics
        on on the eBPF proxy's node (:func:`bpf_stats_enabled`), off again afterwards."""
        with ExitStack() as stack:
            if self.dut is not None:
                self.stats = stack.enter_context(bpf_stats_enabled(self.dut))
                self.ctx.log.info(self.stats.describe())
            try:
                return run_case(self.ctx, self.case(), self.telemetry)
            finally:
                self.stats = None
