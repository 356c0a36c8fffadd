"""Keywords for the SSL reverse proxy case (seed 000, upstream mutual TLS from seed 002):
an nginx HTTPS file server, an nginx HTTPS reverse proxy, and wrk/wrk2 load through it."""

from __future__ import annotations

from robot.api.deco import keyword, library
from robot.libraries.BuiltIn import BuiltIn

from libraries.capacity.settings import DEFAULT_RANGE, DEFAULT_SLO
from libraries.cases.ssl_proxy import (
    LoadRequest,
    ProxySetup,
    SslProxyCase,
    create_content_file,
    search_capacity,
    start_https_reverse_proxy,
    start_https_server,
)
from libraries.keywords import context
from libraries.results.measurement import Measurement
from libraries.results.settings import parse_plan
from libraries.tools.nginx.service import NginxHandle


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

    def __init__(self) -> None:
        self._setup = ProxySetup()
        self._measured: SslProxyCase | None = None

    @property
    def setup(self) -> ProxySetup:
        """The HTTPS server and reverse proxy this suite's set-up keywords started."""
        return self._setup

    @property
    def server(self) -> NginxHandle | None:
        """The running HTTPS server started by ``Start HTTPS Server On Node`` (or None)."""
        return self._setup.server.handle if self._setup.server else None

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
        start_https_server(context.case_context(), self._setup, node,
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
        start_https_reverse_proxy(context.case_context(), self._setup, node, upstream, stack,
                                  bool(mtls))

    @keyword("Measure HTTPS Load Through Proxy")
    def measure_https_load_through_proxy(
        self, client: str = "tg", path: str = "/1kb", connections: int = 10,
        trials: str | int = 5, duration: str | int = 2, warmup: str | int = 1,
        stack: str = "kernel",
    ) -> Measurement:
        """Measure HTTPS load through the proxy and directly to the server, interleaved.

        Runs wrk (or wrk2 at maximum rate) from ``client`` against the proxy and, in the
        same run, directly against the server, round by round: a warm-up, then ``trials``
        rounds, and more while a pass criterion is inconclusive (up to the budget). When the
        server demands a client certificate only the proxied path is measured.

        Metrics: ``rps`` (through the proxy), ``direct_rps``, ``proxy_direct_ratio`` (per
        round), ``errors`` (non-2xx/3xx + socket errors through the proxy). Evidence: the
        requests the server counted during each proxied trial (the proxy forwarded them)
        and the bytes per response (full files were served). Latency percentiles come from
        a second, constant-rate wrk2 pass at half the measured maximum against
        ``${LATENCY_SLO}``; with plain wrk they are recorded as unavailable. Every node's
        CPU is read around each measured trial (record ``telemetry``); from it
        ``rps_per_dut_core``, ``dut_busy_cores``, ``dut_softirq_share`` and
        ``proxy_nginx_worker_cpu`` (``vpp_cpu`` on VPP).

        Args:
            client: The node wrk runs on: a node name or a role. Default ``tg``.
            path: The URL path requested, as `Create Content File On Node` returned it.
                Default ``/1kb``.
            connections: wrk's open connections (``-c``). Default 10.
            trials: Measured rounds, a whole number >= 1 (``${TRIALS}``, default 5).
            duration: Seconds of each trial, whole seconds >= 1 (``${DURATION}``, default 2).
            warmup: Seconds of the unmeasured warm-up, whole seconds >= 0 (``${WARMUP}``,
                default 1).
            stack: ``kernel`` (default) or ``vpp``: the stack the test measures; with
                ``vpp`` wrk runs over VPP where the suite runs VPP on its node.

        Returns:
            The measurement to give to `Search Capacity Under Latency SLO` (capacity
            tests), ``Record Result`` and ``Check Criteria``.

        Fails when the server or the proxy was not started, a setting is not a whole
        number or ``${LATENCY_SLO}`` is not a latency goal.

        Examples:
        | ${result} = | Measure HTTPS Load Through Proxy | tg | path=/1kb | connections=10 |
        | ${result} = | Measure HTTPS Load Through Proxy | tg | path=/64kb | stack=vpp |
        """
        request = LoadRequest(client, path, int(connections),
                              parse_plan(trials, duration, warmup), stack,
                              BuiltIn().get_variable_value("${LATENCY_SLO}", DEFAULT_SLO))
        self._measured = SslProxyCase(context.case_context(), self._setup, request)
        return self._measured.measure()

    @keyword("Search Capacity Under Latency SLO")
    def search_capacity_under_latency_slo(
        self, measurement: Measurement, slo: str = DEFAULT_SLO,
        search_range: str = DEFAULT_RANGE, exceed_ratio: str | float = 0.5,
        trial_duration: str = "0.5..1", duration_sum: str | float = 8,
        width: str | float = 0.02, budget: str | float = 60, confirm: str | float = 30,
        verify: str | float = 0, miss_share: str | float = 0.1, windows: str | int = 12,
        holdout: str | int = 0,
    ) -> Measurement:
        """Search the capacity of the proxied and the direct path under a latency goal.

        Searches each path measured by `Measure HTTPS Load Through Proxy` with MLRsearch,
        the two paths' trials interleaved, each search's highest load 10 % over the path's
        closed-loop maximum; then fits the figure over windows of ``confirm`` seconds: the
        rate where a window misses the goal with probability ``miss_share``. The defaults
        are the ``${CAPACITY_*}`` variables' of ``resources/proxy.resource``.

        Adds the metrics ``capacity``, ``direct_capacity`` (each with its interval) and
        ``capacity_ratio`` to ``measurement``, with MLRsearch's result, the windows, their
        miss curve and every trial as evidence
        (``libraries.capacity.limits.search_paths_capacity``: the checks of the
        recorded figures, generator-bound paths). An A/B test compares the closed-loop rate
        of its sides instead: its measurement comes back as it is.

        Args:
            measurement: The result of `Measure HTTPS Load Through Proxy` in this test.
            slo: The latency goals (``${LATENCY_SLO}``): ``p99<=10ms``, several
                comma-separated (``p99<=10ms,p50<=1ms``); a bare duration (``10ms``, the
                default) is p99.
            search_range: ``bottom..top`` requests/s searched (``${CAPACITY_RANGE}``,
                default ``1000..1000000``); the top must be above the bottom.
            exceed_ratio: MLRsearch's exceed ratio, a fraction in [0, 1)
                (``${CAPACITY_EXCEED_RATIO}``, default 0.5).
            trial_duration: MLRsearch's trial durations, ``initial..final`` seconds or one
                duration for both (``${CAPACITY_TRIAL_DURATION}``, default ``0.5..1``).
            duration_sum: MLRsearch's duration sum in seconds, at least the final trial
                duration (``${CAPACITY_DURATION_SUM}``, default 8).
            width: MLRsearch's relative width, a fraction in (0, 1)
                (``${CAPACITY_WIDTH}``, default 0.02).
            budget: Seconds of trials per search (``${CAPACITY_BUDGET}``, default 60).
            confirm: Seconds of each window the figure is fitted over; 0: MLRsearch's knee,
                unconfirmed (``${CAPACITY_CONFIRM}``, default 30).
            verify: Seconds of one more window at each figure, counted when as long as the
                others; 0 (default): none (``${CAPACITY_VERIFY}``).
            miss_share: The share of the windows that may miss the goal at the figure, in
                (0, 0.5) (``${CAPACITY_MISS_SHARE}``, default 0.1).
            windows: The windows planned per path, a whole number >= 6
                (``${CAPACITY_WINDOWS}``, default 12).
            holdout: Windows at the figure after it is fixed, never counted (a benchmark's
                check); 0 (default): none (``${CAPACITY_HOLDOUT}``).

        Returns:
            ``measurement`` with the capacity metrics and evidence added.

        Skips the test where the load node has no constant-rate generator. Fails when `Measure
        HTTPS Load Through Proxy` has not run first, or a setting is out of its range
        (naming the ``-v`` variable).

        Examples:
        | Search Capacity Under Latency SLO | ${result} | slo=p99<=10ms | |
        | Search Capacity Under Latency SLO | ${result} | slo=${LATENCY_SLO} | windows=6 |
        """
        return search_capacity(context.case_context(), measurement, self._measured, {
            "goals": slo, "search_range": search_range, "exceed_ratio": exceed_ratio,
            "durations": trial_duration, "duration_sum": duration_sum, "width": width,
            "max_seconds": budget, "confirm_seconds": confirm, "verify_seconds": verify,
            "miss_share": miss_share, "windows": windows, "holdout": holdout})
