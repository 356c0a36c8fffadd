"""Keywords for the eBPF stream-proxy case (seed 003): iperf3 direct, through a native nginx
stream proxy, and through nginx's stream eBPF (sockmap) module, interleaved in one run."""

from __future__ import annotations

from robot.api.deco import keyword, library

from libraries.cases.ebpf_stream import (
    EbpfStreamCase,
    StreamRequest,
    StreamSetup,
    require_ebpf_nginx,
    start_stream_proxy,
    start_stream_test_server,
)
from libraries.keywords import context
from libraries.results.measurement import Measurement
from libraries.results.settings import parse_plan


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
        return require_ebpf_nginx(context.case_context(), node)

    @keyword("Start Stream Test Server On Node")
    def start_stream_test_server_on_node(self, node: str = "server",
                                         pinned: bool = False) -> None:
        """Start ``iperf3 -s -p 20001`` on ``node`` (pinned to its ``server`` CPUs when
        ``pinned``) and wait until it listens."""
        start_stream_test_server(context.case_context(), self._setup, node, pinned)

    @keyword("Start Stream Proxy On Node")
    def start_stream_proxy_on_node(self, node: str = "dut", upstream: str = "server",
                                   ebpf: bool = False, pinned: bool = False) -> None:
        """Start an nginx stream proxy on ``node`` towards the iperf3 server on ``upstream``:
        native (the topology's nginx, port 10001, its own stream module: loaded from its
        modules path when the build has it as a dynamic module) or, with ``ebpf``, the
        eBPF-module build (``ebpf_enable on``, port 10000, user root, notice-level log for
        the engagement evidence). ``pinned`` sets ``worker_cpu_affinity`` to the node's
        ``proxy`` CPU (seed 003: worker, client and server on different cores)."""
        start_stream_proxy(context.case_context(), self._setup, node, upstream, ebpf, pinned)

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
