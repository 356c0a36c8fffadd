"""Keywords for the eBPF stream-proxy case (seed 003): iperf3 direct, through a native nginx
stream proxy, and through nginx's stream eBPF (sockmap) module, interleaved in one run."""

from __future__ import annotations

import logging

from robot.api import SkipExecution, logger
from robot.api.deco import keyword, library

from libraries.cases.context import tool_env
from libraries.cases.ebpf_stream import (
    EBPF_PORT,
    IPERF_PORT,
    NATIVE_PORT,
    EbpfStreamCase,
    StreamRequest,
    StreamSetup,
)
from libraries.keywords import context, log_folded
from libraries.results.measurement import Measurement
from libraries.results.settings import parse_plan
from libraries.tools.ebpf_stream.module import check_ebpf_config, has_ebpf_module
from libraries.tools.iperf3 import IperfServerOptions, start_iperf3_server
from libraries.tools.nginx.config import NginxInstance
from libraries.tools.nginx.service import instance_prefix, start_nginx, stream_module_of
from libraries.tools.nginx.stream import StreamProxyParams, StreamServer

LOG = logging.getLogger(__name__)


@library(scope="SUITE", auto_keywords=False)
class EbpfStreamKeywords:
    """Start the iperf3 server, the native and the eBPF nginx stream proxies, and measure
    iperf3 throughput through each, interleaved, with proof that the eBPF path engaged."""

    def __init__(self) -> None:
        self._setup = StreamSetup()

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
        ctx = context.case_context()
        testbed = ctx.testbed
        target = testbed.node(node)
        binary = testbed.topology.nodes[target.name].tools.get("iperf3", "iperf3")
        cpus = testbed.topology.cpus_of(target.name, "server") if pinned else None
        target.ensure_port_free(IPERF_PORT)
        process = start_iperf3_server(target, binary, IperfServerOptions(port=IPERF_PORT,
                                                                         cpus=cpus),
                                      env=tool_env(testbed, target.name, "iperf3"))
        target.wait_for_listener(IPERF_PORT, process)
        self._setup.server = (target.name, process)
        self._setup.pinned = bool(pinned)
        ctx.component_started("iperf3-server",
                              {("tool", target.name, "iperf3"), ("env", "iperf3")},
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
        ctx = context.case_context()
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
        self._setup.proxies["ebpf" if ebpf else "native"] = handle
        ctx.component_started(name, {("tool", target.name, tool), ("nginx", "stream"),
                                     ("env", tool)},
                              lambda: target.stop(handle.process),
                              lambda: self.start_stream_proxy_on_node(node, upstream, ebpf,
                                                                      pinned))

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
        request = StreamRequest(client, bool(reverse), parse_plan(trials, duration, warmup))
        return EbpfStreamCase(context.case_context(), self._setup, request).measure()
