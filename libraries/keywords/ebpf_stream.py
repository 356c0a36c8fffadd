"""Keywords for the eBPF stream-proxy case (seed 003): iperf3 direct, through a native nginx
stream proxy, and through nginx's stream eBPF (sockmap) module, interleaved in one run."""

from __future__ import annotations

import logging
from contextlib import ExitStack

from robot.api import SkipExecution, logger
from robot.api.deco import keyword, library

from libraries.keywords import context, log_folded, tool_env
from libraries.keywords.ab import component_started, side_nginx
from libraries.keywords.case import Case, run_case
from libraries.keywords.telemetry import TrialTelemetry
from libraries.results.efficiency import (
    ProcessCost,
    RateCost,
    add_process_costs,
    add_rate_costs,
    add_ratio,
)
from libraries.results.inference import DEFAULT_ALPHA
from libraries.results.measurement import Measurement, Trial
from libraries.results.settings import parse_plan
from libraries.testbed.errors import HostStackError
from libraries.testbed.node import Process
from libraries.tools.ebpf_stream.module import (
    EngagementEvidence,
    bpf_stats_enabled,
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

LOG = logging.getLogger(__name__)
IPERF_PORT = 20001  # the seed's ports
NATIVE_PORT = 10001
EBPF_PORT = 10000


@library(scope="SUITE", auto_keywords=False)
class EbpfStreamKeywords:
    """Start the iperf3 server, the native and the eBPF nginx stream proxies, and measure
    iperf3 throughput through each, interleaved, with proof that the eBPF path engaged."""

    def __init__(self) -> None:
        self._server: tuple[str, Process] | None = None
        self._proxies: dict[str, NginxHandle] = {}
        self._pinned = False

    @keyword("Require EBPF Nginx On Node")
    def require_ebpf_nginx_on_node(self, node: str = "dut") -> str:
        """Return the eBPF-capable nginx of ``node`` (topology ``tools.nginx_ebpf``); skip
        the test with the reason when it is not declared or lacks the module."""
        testbed = context.testbed()
        name = testbed.topology.resolve_node(node)
        binary = testbed.topology.nodes[name].tools.get("nginx_ebpf")
        if binary is None:
            raise SkipExecution(f"no eBPF nginx declared on {name} in topology "
                                f"{testbed.topology.name} (tools.nginx_ebpf)")
        ok, reason = has_ebpf_module(testbed.nodes[name], binary)
        if not ok:
            raise SkipExecution(reason)
        logger.info(reason)
        return binary

    @keyword("Start Stream Test Server On Node")
    def start_stream_test_server_on_node(self, node: str = "server",
                                         pinned: bool = False) -> None:
        """Start ``iperf3 -s -p 20001`` on ``node`` (pinned to its ``server`` CPUs when
        ``pinned``) and wait until it listens."""
        testbed = context.testbed()
        target = testbed.node(node)
        binary = testbed.topology.nodes[target.name].tools.get("iperf3", "iperf3")
        cpus = testbed.topology.cpus_of(target.name, "server") if pinned else None
        target.ensure_port_free(IPERF_PORT)
        process = start_iperf3_server(target, binary, IperfServerOptions(port=IPERF_PORT,
                                                                         cpus=cpus),
                                      env=tool_env(testbed, target.name, "iperf3"))
        target.wait_for_listener(IPERF_PORT, process)
        self._server = (target.name, process)
        self._pinned = bool(pinned)
        component_started("iperf3-server", {("tool", target.name, "iperf3"), ("env", "iperf3")},
                          lambda: target.stop(process),
                          lambda: self.start_stream_test_server_on_node(node, pinned))

    @keyword("Start Stream Proxy On Node")
    def start_stream_proxy_on_node(self, node: str = "dut", upstream: str = "server",
                                   ebpf: bool = False, pinned: bool = False) -> None:
        """Start an nginx stream proxy on ``node`` towards the iperf3 server on ``upstream``:
        native (the topology's nginx, port 10001, its own stream module: loaded from its
        modules path when the build has it as a dynamic module) or, with ``ebpf``, the
        eBPF-module build (``ebpf_enable on``, port 10000, user root, notice-level log for
        the engagement evidence). ``pinned`` sets ``worker_cpu_affinity`` to the node's
        ``proxy`` CPU (seed 003: worker, client and server on different cores)."""
        testbed = context.testbed()
        target = testbed.node(node)
        address = testbed.topology.address_of(upstream, seen_from=target.name)
        cpus = testbed.topology.cpus_of(target.name, "proxy") if pinned else None
        name = "nginx-stream-ebpf" if ebpf else "nginx-stream"
        http, servers = side_nginx("stream")
        instance = NginxInstance(prefix=instance_prefix(target, name), user="root",
                                 worker_cpus=(cpus[0],) if cpus else None,
                                 error_log_level="notice" if ebpf else "crit",
                                 extra_http=http, extra_server=servers)
        server = StreamServer(listen_port=EBPF_PORT if ebpf else NATIVE_PORT,
                              upstreams=(f"{address}:{IPERF_PORT}",),
                              ebpf=True if ebpf else None)
        if ebpf:
            binary = self.require_ebpf_nginx_on_node(target.name)
            params = StreamProxyParams(instance=instance, servers=(server,), load_module=None)
            check_ebpf_config(params)
        else:
            binary = testbed.topology.nodes[target.name].tools.get("nginx", "nginx")
            params = StreamProxyParams(instance=instance, servers=(server,),
                                       load_module=stream_module_of(target, binary))
        config = params.render()
        log_folded(f"nginx stream proxy ({'eBPF' if ebpf else 'native'}) on {target.name}",
                   config)
        tool = "nginx_ebpf" if ebpf else "nginx"
        handle = start_nginx(target, name, config, [server.listen_port], binary=binary,
                             env=tool_env(testbed, target.name, tool))
        self._proxies["ebpf" if ebpf else "native"] = handle
        component_started(name, {("tool", target.name, tool), ("nginx", "stream"),
                                 ("env", tool)},
                          lambda: target.stop(handle.process),
                          lambda: self.start_stream_proxy_on_node(node, upstream, ebpf, pinned))

    @keyword("Measure Stream Throughput From Node")
    def measure_stream_throughput_from_node(
        self, client: str = "tg", reverse: bool = True, trials: str | int = 5,
        duration: str | int = 2, warmup: str | int = 1,
    ) -> Measurement:
        """Run iperf3 from ``client`` (``-R``: download, as in the seed) directly to the
        server and through every started proxy, interleaved (direct, native, eBPF, direct,
        ...). Metrics in Gbit/s at the receiver (in eBPF mode only the receiver's figure is
        real): ``direct``, ``native``, ``ebpf`` and the ratios ``native_direct_ratio``,
        ``ebpf_native_ratio``, ``ebpf_direct_ratio``. Each eBPF trial must show engagement
        (sockmap updates in the error log, ``stream_verdict`` run count growing with
        ``kernel.bpf_stats_enabled=1``, restored afterwards) or the test fails with
        "eBPF path not engaged".

        Every node's CPU is read around each measured trial (seed 003's ``mpstat`` tables,
        logged per variant, and the record's ``telemetry``). Efficiency metrics per variant
        ``<v>_gbps_per_dut_core``, ``<v>_dut_busy_cores``, ``<v>_dut_softirq_share``, and
        the proxies' worker CPU: ``native_nginx_worker_cpu``, ``ebpf_nginx_worker_cpu`` and
        ``ebpf_nginx_worker_cpu_ratio`` (eBPF / native, per round: the module's effect).
        """
        if self._server is None:
            raise HostStackError("start the stream test server first")
        testbed = context.testbed()
        tg = testbed.node(client)
        server_name = self._server[0]
        targets = {"direct": (testbed.topology.address_of(server_name, tg.name), IPERF_PORT)}
        for variant, handle in self._proxies.items():
            targets[variant] = (testbed.topology.address_of(handle.node, tg.name),
                                handle.ports[0])
        cpus = testbed.topology.cpus_of(tg.name, "load") if self._pinned else None
        evidence: list[EngagementEvidence] = []
        plan = parse_plan(trials, duration, warmup)
        bpftool = "bpftool"
        ebpf = self._proxies.get("ebpf")
        dut = testbed.nodes[ebpf.node] if ebpf else None
        if dut is not None:
            bpftool = testbed.topology.nodes[dut.name].tools.get("bpftool", "bpftool")
        telemetry = TrialTelemetry.for_current_suite(testbed)

        def trial(run: Trial) -> IperfResult:
            variant = run.variant
            host, port = targets[variant]
            options = IperfClientOptions(server=host, port=port, duration=run.seconds,
                                         reverse=bool(reverse), cpus=cpus)
            # binary, proxies and server read per trial: an A/B run switches them
            binary = testbed.topology.nodes[tg.name].tools.get("iperf3", "iperf3")
            ebpf = self._proxies.get("ebpf")
            mark = mark_engagement(dut, ebpf.error_log, bpftool) if variant == "ebpf" else None
            result = run_iperf3_client(tg, binary, options, cpu_ledger=telemetry.ledger(tg.name),
                                       env=tool_env(testbed, tg.name, "iperf3"))
            if mark is not None:
                engaged = collect_engagement(dut, mark, bpftool)
                engaged.require_engaged()
                if run.measured:
                    evidence.append(engaged)
            for handle in self._proxies.values():
                nginx_is_alive(testbed.nodes[handle.node], handle)
            if self._server is None or not testbed.nodes[server_name].is_running(
                    self._server[1]):
                raise HostStackError("the iperf3 server died")
            return result

        variants = dict.fromkeys(targets, trial)
        judge = context.judge()

        def build(results: dict[str, list[IperfResult]], seconds: float) -> Measurement:
            measurement = Measurement(
                case="ebpf_stream", stack="kernel",
                parameters={"reverse": bool(reverse), "pinned": self._pinned,
                            "ebpf": "ebpf" in self._proxies,
                            "variants": sorted(targets), "trials": plan.trials,
                            "duration_s": plan.duration, "warmup_s": plan.warmup},
                trial_seconds=seconds, alpha=judge.settings.alpha if judge else DEFAULT_ALPHA,
            )
            gbps = {name: [r.gbps for r in runs] for name, runs in results.items()}
            for name, values in gbps.items():
                measurement.add(name, values, "Gbit/s")
            for a, b in (("native", "direct"), ("ebpf", "native"), ("ebpf", "direct")):
                if a in gbps and b in gbps:
                    measurement.add(f"{a}_{b}_ratio",
                                    [x / y for x, y in zip(gbps[a], gbps[b], strict=True)],
                                    "ratio")
            if evidence:
                measurement.evidence["ebpf_engagement"] = [e.as_record() for e in evidence]
            measurement.evidence["sender_gbps"] = {
                name: [r.sender_bps / 1e9 for r in runs] for name, runs in results.items()}
            self._cpu_metrics(measurement, telemetry)
            return measurement

        with ExitStack() as stack:
            if dut is not None:
                previous = stack.enter_context(bpf_stats_enabled(dut))
                logger.info(f"kernel.bpf_stats_enabled was {previous}; set to 1 for the "
                            "measurement, restored afterwards")
            # A/B: the path through the proxy under test is compared
            subject = next(v for v in ("ebpf", "native", "direct") if v in targets)
            uses = {("tool", tg.name, "iperf3"), ("env", "iperf3")}
            uses |= {("tool", dut.name, "bpftool")} if dut is not None else set()
            case = Case("ebpf_stream", "kernel", variants, plan, build,
                        {subject: "higher_is_better"},
                        {"reverse": bool(reverse), "pinned": self._pinned,
                         "ebpf": "ebpf" in self._proxies, "variants": [subject]},
                        frozenset(uses), ab_variants=(subject,), output="iperf3 JSON",
                        generator=(tg.name, "iperf3-client"))
            return run_case(case, telemetry)

    def _cpu_metrics(self, measurement: Measurement, telemetry: TrialTelemetry) -> None:
        """Seed 003's CPU evidence: per-variant DUT cost and the proxies' worker CPU."""
        telemetry.attach(measurement)
        dut = next(iter(self._proxies.values())).node if self._proxies else "dut"
        add_rate_costs(measurement, telemetry.trials,
                       [RateCost(v, v, "gbps", prefix=f"{v}_", dut=dut)
                        for v in telemetry.trials])
        add_process_costs(measurement, telemetry.trials, [
            ProcessCost(v, handle.node, f"{handle.process.name} worker",
                        f"{v}_nginx_worker_cpu") for v, handle in self._proxies.items()])
        if "ebpf" in self._proxies:
            add_ratio(measurement, "ebpf_nginx_worker_cpu", "native_nginx_worker_cpu",
                      "ebpf_nginx_worker_cpu_ratio")
