"""Keywords for the SSL reverse proxy case (seed 000, upstream mutual TLS from seed 002):
an nginx HTTPS file server, an nginx HTTPS reverse proxy, and wrk/wrk2 load through it."""

from __future__ import annotations

from robot.api.deco import keyword, library

from libraries.cases.ssl_proxy import (
    LoadRequest,
    SslProxyCase,
    create_content_file,
    search_capacity,
    start_https_reverse_proxy,
    start_https_server,
)
from libraries.keywords import context
from libraries.results.measurement import Measurement
from libraries.tools.wrk.run import CONNECTIONS


@library(scope="SUITE", auto_keywords=False)
class SslProxyKeywords:
    """Keywords of the SSL reverse proxy case (seed 000; upstream mutual TLS from seed 002).

    An nginx HTTPS file server serves files of a given size; an nginx HTTPS reverse proxy
    on the DUT forwards to it; wrk (or wrk2) on the TG loads the proxy and, interleaved in
    the same run, the server directly, so that the proxy's cost is a ratio measured under
    the same conditions. The capacity variant then searches, per path, the highest rate
    that keeps a latency goal. Both stacks: the Linux kernel's (``stack=kernel``) and VPP's
    host stack (``stack=vpp``, set up by the VPP library first). Results are measurements
    for ``Record Result`` and ``Check Criteria`` of the results library.

    The library needs the testbed library (``Set Up Testbed``) in the same suite; suites
    import it through ``resources/proxy.resource``, whose test reads:

    | =Setting= | =Value= |
    | Library | libraries.keywords.ssl_proxy.SslProxyKeywords |

    | =Keyword= | =Arguments= | | | |
    | ${path} = | Create Content File On Node | server | 1kb | |
    | Start HTTPS Server On Node | server | stack=kernel | | |
    | Start HTTPS Reverse Proxy On Node | dut | upstream=server | stack=kernel | |
    | ${result} = | Measure HTTPS Load Through Proxy | tg | path=${path} | connections=10 |
    | Record Result | ${result} | | | |
    | Check Criteria | ${result} | | | |
    """

    @keyword("Create Content File On Node")
    def create_content_file_on_node(self, node: str, size: str = "1kb") -> str:
        """Create a file of random bytes in a node's web root and return its URL path.

        The HTTPS server of `Start HTTPS Server On Node` serves it; the file is named after
        its size (1024 bytes: ``1kb``, 1048576: ``1mb``, 1000: ``1000b``).

        Args:
            node: The node the HTTPS server runs on: a node name or a role.
            size: The file's size: bytes (``512``) or a size with a unit, ``kb``, ``mb``,
                ``gb`` (``KiB``... and ``k``, ``m`` too; all powers of 1024), e.g. ``64kb``
                or ``1m``. Default ``1kb``.

        Returns:
            The file's URL path, e.g. ``/1kb``, to give to `Measure HTTPS Load Through
            Proxy` as ``path``.

        Fails when ``size`` is not a size of at least one byte, or the file cannot be
        written.

        Examples:
        | ${path} = | Create Content File On Node | server | 64kb |
        """
        return create_content_file(context.case_context(), node, size)

    @keyword("Start HTTPS Server On Node")
    def start_https_server_on_node(self, node: str, require_client_cert: bool = False,
                                   stack: str = "kernel") -> None:
        """Start seed 000's nginx HTTPS file server on a node.

        nginx serves the web root over TLSv1.3 (TLS_AES_128_GCM_SHA256) on port 8445, with
        the run's certificates, its worker pinned to the node's ``server`` CPU. On the
        kernel stack a stub_status counter on 127.0.0.1:8446 counts the requests (the proof
        that the proxy forwarded them). The rendered config is attached to the log. In an
        A/B run a side that changes nginx restarts it.

        Args:
            node: The node to run the server on: a node name or a role (e.g. ``server``).
            require_client_cert: ``${True}`` makes the server demand a client certificate
                signed by the run's CA (the upstream mutual-TLS variant: only the proxy,
                started with ``mtls=${True}``, can then reach it). Default ``${False}``.
            stack: ``kernel`` (default) or ``vpp``: with ``vpp`` nginx runs on VPP's host
                stack (LD_PRELOAD + VCL, its config logged), without the stub_status
                counter, where the suite runs VPP on the node; elsewhere (e.g. the server
                node of ``3node``) on the kernel's.

        Fails when nginx does not start or does not listen on its ports.

        Examples:
        | Start HTTPS Server On Node | server | | |
        | Start HTTPS Server On Node | server | require_client_cert=${True} | stack=vpp |
        """
        start_https_server(context.case_context(), context.suite().proxy, node,
                           bool(require_client_cert), stack)

    @keyword("Start HTTPS Reverse Proxy On Node")
    def start_https_reverse_proxy_on_node(self, node: str, upstream: str = "server",
                                          stack: str = "kernel", mtls: bool = False) -> None:
        """Start seed 000's nginx HTTPS reverse proxy on a node towards the HTTPS server.

        nginx listens on port 8089 of ``node`` and forwards to the server of `Start HTTPS
        Server On Node` (port 8445) with upstream keepalive 1024, HTTP/1.1 and TLSv1.3,
        its worker pinned to the node's ``proxy`` CPU. The rendered config is attached to
        the log. In an A/B run a side that changes nginx restarts it.

        Args:
            node: The node to run the proxy on: a node name or a role (e.g. ``dut``).
            upstream: The node the HTTPS server runs on. Default ``server``.
            stack: ``kernel`` (default) or ``vpp``: with ``vpp`` the proxy runs on VPP's
                host stack where the suite runs VPP on the node (else on the kernel's) and,
                in the one-node loopback layout, reaches the server at its VPP address.
            mtls: ``${True}`` presents the run's client certificate to the upstream and
                verifies the upstream's certificate against the run's CA (seed 002 in
                today's nginx terms). Default ``${False}``.

        Fails when nginx does not start or does not listen on its ports.

        Examples:
        | Start HTTPS Reverse Proxy On Node | dut | upstream=server | |
        | Start HTTPS Reverse Proxy On Node | dut | upstream=server | mtls=${True} |
        """
        start_https_reverse_proxy(context.case_context(), context.suite().proxy, node,
                                  upstream, stack, bool(mtls))

    @keyword("Measure HTTPS Load Through Proxy")
    def measure_https_load_through_proxy(
        self, client: str = "tg", path: str = "/1kb", connections: int = CONNECTIONS,
        stack: str = "kernel",
    ) -> Measurement:
        """Measure HTTPS load through the proxy and directly to the server, interleaved.

        Runs wrk (or wrk2 at maximum rate) from ``client`` against the proxy and, in the
        same run, directly against the server, round by round: a warm-up, then ``-v TRIALS``
        rounds, and more while a pass criterion is inconclusive (up to the budget). When the
        server demands a client certificate only the proxied path is measured.

        Metrics: ``rps`` (through the proxy), ``direct_rps``, ``proxy_direct_ratio`` (per
        round), ``errors`` (non-2xx/3xx + socket errors through the proxy). Evidence: the
        requests the server counted during each proxied trial (the proxy forwarded them)
        and the bytes per response (full files were served). Latency percentiles come from
        a second, constant-rate wrk2 pass at half the measured maximum against ``-v
        LATENCY_SLO``; with plain wrk they are recorded as unavailable. Every node's
        CPU is read around each measured trial (record ``telemetry``); from it
        ``rps_per_dut_core``, ``dut_busy_cores``, ``dut_softirq_share`` and
        ``proxy_nginx_worker_cpu`` (``vpp_cpu`` on VPP).

        Args:
            client: The node wrk runs on: a node name or a role. Default ``tg``.
            path: The URL path requested, as `Create Content File On Node` returned it.
                Default ``/1kb``.
            connections: wrk's open connections (``-c``). Default: wrk's own default
                (the seeds' count, in the signature).
            stack: ``kernel`` (default) or ``vpp``: the stack the test measures; with
                ``vpp`` wrk runs over VPP where the suite runs VPP on its node.

        Returns:
            The measurement to give to `Search Capacity Under Latency SLO` (capacity
            tests), ``Record Result`` and ``Check Criteria``.

        Fails when the server or the proxy was not started.

        Examples:
        | ${result} = | Measure HTTPS Load Through Proxy | tg | path=/1kb | connections=10 |
        | ${result} = | Measure HTTPS Load Through Proxy | tg | path=/64kb | stack=vpp |
        """
        ctx, state = context.case_context(), context.suite()
        state.last_proxy_case = SslProxyCase(ctx, state.proxy, LoadRequest(
            client, path, int(connections), ctx.settings.plan, stack))
        return state.last_proxy_case.measure()

    @keyword("Search Capacity Under Latency SLO")
    def search_capacity_under_latency_slo(self, measurement: Measurement) -> Measurement:
        """Search the capacity of the proxied and the direct path under a latency goal.

        Searches each path measured by `Measure HTTPS Load Through Proxy` with MLRsearch,
        the two paths' trials interleaved, each search's highest load 10 % over the path's
        closed-loop maximum; then fits the figure over windows: the rate where a window
        misses the goal with the probability ``-v CAPACITY_MISS_SHARE`` allows. The goals
        are ``-v LATENCY_SLO``, the range and MLRsearch's knobs the ``-v CAPACITY_*``
        settings (``docs/reference/settings.md``), resolved at the suite set-up.

        Adds the metrics ``capacity``, ``direct_capacity`` (each with its interval) and
        ``capacity_ratio`` to ``measurement``, with MLRsearch's result, the windows, their
        miss curve and every trial as evidence
        (``libraries.capacity.limits.search_paths_capacity``: the checks of the
        recorded figures, generator-bound paths). An A/B test compares the closed-loop rate
        of its sides instead: its measurement comes back as it is.

        Args:
            measurement: The result of `Measure HTTPS Load Through Proxy` in this test.

        Returns:
            ``measurement`` with the capacity metrics and evidence added.

        Skips the test where the load node has no constant-rate generator. Fails when `Measure
        HTTPS Load Through Proxy` has not run first.

        Examples:
        | ${result} = | Measure HTTPS Load Through Proxy | tg | path=/1kb |
        | Search Capacity Under Latency SLO | ${result} | | |
        """
        return search_capacity(context.case_context(), measurement,
                               context.suite().last_proxy_case)
