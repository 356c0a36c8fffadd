"""Keywords for the eBPF stream-proxy case (seed 003): iperf3 direct, through a native nginx
stream proxy, and through nginx's stream eBPF (sockmap) module, interleaved in one run."""

from __future__ import annotations

from robot.api.deco import keyword, library

from libraries.cases.ebpf_stream import (
    EbpfStreamCase,
    StreamRequest,
    require_ebpf_nginx,
    start_stream_proxy,
    start_stream_test_server,
)
from libraries.keywords import context
from libraries.results.measurement import Measurement


@library(scope="SUITE", auto_keywords=False)
class EbpfStreamKeywords:
    """Keywords of the eBPF stream-proxy case (seed 003): iperf3 through nginx stream proxies.

    An iperf3 server runs on one node; nginx stream proxies on the DUT forward TCP to it:
    the native one (nginx's own stream module) and, where the topology declares it, the
    build with the stream eBPF (sockmap) module, which splices the connections in the
    kernel. iperf3 from the TG measures the direct path and the path through each proxy,
    interleaved in one run, and each eBPF trial must prove the eBPF path engaged. The
    result is a measurement for ``Record Result`` and ``Check Criteria`` of the results
    library.

    The library needs the testbed library (``Set Up Testbed``) in the same suite; suites
    import it through ``resources/stream.resource``, whose test reads:

    | =Setting= | =Value= |
    | Library | libraries.keywords.ebpf_stream.EbpfStreamKeywords |

    | =Keyword= | =Arguments= | | | |
    | Require EBPF Nginx On Node | dut | | | |
    | Start Stream Test Server On Node | server | pinned=${False} | | |
    | Start Stream Proxy On Node | dut | upstream=server | | |
    | Start Stream Proxy On Node | dut | upstream=server | ebpf=${True} | |
    | ${result} = | Measure Stream Throughput From Node | tg | reverse=${True} | |
    | Record Result | ${result} | | | |
    """

    @keyword("Require EBPF Nginx On Node")
    def require_ebpf_nginx_on_node(self, node: str = "dut") -> str:
        """Return the node's nginx build with the stream eBPF module, or skip the test.

        The build is the topology's ``tools.nginx_ebpf`` of the node; it must have the
        stream eBPF module (what it found is logged).

        Args:
            node: The node the eBPF proxy will run on: a node name or a role. Default
                ``dut``.

        Returns:
            The path of the eBPF-capable nginx binary on the node.

        Skips the test, with the reason, when the node declares no ``nginx_ebpf`` or the
        build lacks the module.

        Examples:
        | Require EBPF Nginx On Node | dut |
        | ${nginx} = | Require EBPF Nginx On Node | dut |
        """
        return require_ebpf_nginx(context.case_context(), node)

    @keyword("Start Stream Test Server On Node")
    def start_stream_test_server_on_node(self, node: str = "server",
                                         pinned: bool = False) -> None:
        """Start the iperf3 server the stream proxies forward to, and wait until it listens.

        Runs ``iperf3 -s -p 20001`` on the node. In an A/B run a side that changes iperf3
        restarts it.

        Args:
            node: The node to run the server on: a node name or a role. Default ``server``.
            pinned: ``${True}`` pins the server to the CPUs the topology gives the node's
                ``server`` role (seed 003's pinned rows); ``${False}`` (default) leaves it to
                the scheduler.

        Fails when the server does not start or listen.

        Examples:
        | Start Stream Test Server On Node | server | |
        | Start Stream Test Server On Node | server | pinned=${True} |
        """
        start_stream_test_server(context.case_context(), context.suite().stream, node, pinned)

    @keyword("Start Stream Proxy On Node")
    def start_stream_proxy_on_node(self, node: str = "dut", upstream: str = "server",
                                   ebpf: bool = False, pinned: bool = False) -> None:
        """Start an nginx stream proxy on a node towards the iperf3 server.

        The native proxy is the topology's nginx on port 10001 with its own stream module
        (loaded from its modules path when the build has it as a dynamic module). The eBPF
        proxy is the eBPF-module build on port 10000 with ``ebpf_enable on``, running as
        root with a notice-level error log (the evidence that the eBPF path engaged). Call
        it once per proxy the test measures; `Measure Stream Throughput From Node` measures
        through every proxy started.

        Args:
            node: The node the proxy runs on: a node name or a role. Default ``dut``.
            upstream: The node the iperf3 server of `Start Stream Test Server On Node` runs
                on. Default ``server``.
            ebpf: ``${True}`` starts the eBPF-module build (see `Require EBPF Nginx On
                Node`); ``${False}`` (default) the native proxy.
            pinned: ``${True}`` sets ``worker_cpu_affinity`` to the node's ``proxy`` CPU
                (seed 003: worker, client and server on different cores); ``${False}``
                (default) leaves the worker to the scheduler.

        Fails when the proxy does not start or listen; the rendered config is logged.

        Examples:
        | Start Stream Proxy On Node | dut | upstream=server | | |
        | Start Stream Proxy On Node | dut | upstream=server | ebpf=${True} | pinned=${True} |
        """
        start_stream_proxy(context.case_context(), context.suite().stream, node, upstream,
                           ebpf, pinned)

    @keyword("Measure Stream Throughput From Node")
    def measure_stream_throughput_from_node(
        self, client: str = "tg", reverse: bool = True,
    ) -> Measurement:
        """Measure iperf3 throughput directly and through every started proxy, interleaved.

        Runs iperf3 from ``client`` directly to the server and through every proxy started
        by `Start Stream Proxy On Node`, round by round (direct, native, eBPF, direct, ...):
        a warm-up, then ``-v TRIALS`` rounds of ``-v DURATION`` seconds, and more while a pass
        criterion is still inconclusive (up to the budget). The kernel's BPF run statistics
        are on on the eBPF proxy's node for the measurement: a process holds a
        ``BPF_ENABLE_STATS`` descriptor and is stopped afterwards (``python3`` on the node;
        without it ``kernel.bpf_stats_enabled`` is set to 1 and put back).

        Metrics, in Gbit/s at the receiver (in eBPF mode only the receiver's figure is
        real): ``direct``, ``native``, ``ebpf`` and the ratios ``native_direct_ratio``,
        ``ebpf_native_ratio``, ``ebpf_direct_ratio``. Every node's CPU is read around each
        measured trial (seed 003's ``mpstat`` tables, logged per variant, and the record's
        ``telemetry``): per variant ``<v>_gbps_per_dut_core``, ``<v>_dut_busy_cores``,
        ``<v>_dut_softirq_share``, and the proxies' worker CPU
        ``native_nginx_worker_cpu``, ``ebpf_nginx_worker_cpu`` and
        ``ebpf_nginx_worker_cpu_ratio`` (eBPF / native, per round: the module's effect).

        Args:
            client: The node iperf3's client runs on: a node name or a role. Default ``tg``.
            reverse: ``${True}`` (default) adds ``-R``: a download, the server sends, as in
                the seed; ``${False}`` uploads.

        Returns:
            The measurement to give to ``Record Result`` and ``Check Criteria``.

        Fails with "eBPF path not engaged" when an eBPF trial shows no engagement (sockmap
        updates in the error log and the ``stream_verdict`` program's run count growing),
        when the server or a proxy stopped during a trial, or when no server was started.

        Examples:
        | ${result} = | Measure Stream Throughput From Node | tg | |
        | ${result} = | Measure Stream Throughput From Node | tg | reverse=${False} |
        """
        ctx = context.case_context()
        request = StreamRequest(client, bool(reverse), ctx.settings.plan)
        return EbpfStreamCase(ctx, context.suite().stream, request).measure()
