"""Keywords for the SSL reverse proxy case (seed 000, upstream mutual TLS from seed 002):
an nginx HTTPS file server, an nginx HTTPS reverse proxy, and wrk/wrk2 load through it."""

from __future__ import annotations

from robot.api.deco import keyword, library
from robot.libraries.BuiltIn import BuiltIn

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
from libraries.results.settings import DEFAULT_RANGE, DEFAULT_SLO, parse_plan
from libraries.tools.nginx.service import NginxHandle


@library(scope="SUITE", auto_keywords=False)
class SslProxyKeywords:
    """Start an HTTPS file server and an HTTPS reverse proxy, and measure HTTPS load through
    the proxy and directly to the server, interleaved in the same run."""

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
        """Create a file of ``size`` random bytes (``1kb``, ``64kb``, ``1m``, bytes) in the
        node's web root and return its URL path, e.g. ``/1kb``."""
        return create_content_file(context.case_context(), node, size)

    @keyword("Start HTTPS Server On Node")
    def start_https_server_on_node(self, node: str, require_client_cert: bool = False,
                                   stack: str = "kernel") -> None:
        """Start seed 000's nginx HTTPS file server (TLSv1.3, TLS_AES_128_GCM_SHA256) on port
        8445 of ``node``, with a stub_status counter on 127.0.0.1:8446.

        ``require_client_cert`` makes it demand a client certificate signed by the run's CA
        (the upstream mutual-TLS variant). The rendered config is attached to the log.
        """
        start_https_server(context.case_context(), self._setup, node,
                           bool(require_client_cert), stack)

    @keyword("Start HTTPS Reverse Proxy On Node")
    def start_https_reverse_proxy_on_node(self, node: str, upstream: str = "server",
                                          stack: str = "kernel", mtls: bool = False) -> None:
        """Start seed 000's nginx HTTPS reverse proxy on port 8089 of ``node`` towards the
        HTTPS server on ``upstream`` (keepalive 1024, HTTP/1.1, TLSv1.3 upstream).

        ``mtls`` presents the run's client certificate to the upstream and verifies the
        upstream's certificate against the run's CA (seed 002 in today's nginx terms).
        """
        start_https_reverse_proxy(context.case_context(), self._setup, node, upstream, stack,
                                  bool(mtls))

    @keyword("Measure HTTPS Load Through Proxy")
    def measure_https_load_through_proxy(
        self, client: str = "tg", path: str = "/1kb", connections: int = 10,
        trials: str | int = 5, duration: str | int = 2, warmup: str | int = 1,
        stack: str = "kernel",
    ) -> Measurement:
        """Run wrk (or wrk2 at maximum rate) from ``client`` against the proxy and, in the
        same run, directly against the server, interleaved: warm-up, then ``trials`` rounds.

        Metrics: ``rps`` (through the proxy), ``direct_rps``, ``proxy_direct_ratio`` (per
        round), ``errors`` (non-2xx/3xx + socket errors through the proxy). Evidence: requests
        the server counted during each proxied trial (proves the proxy forwarded them) and
        bytes per response (proves full files were served). Latency percentiles come from a
        second, constant-rate wrk2 pass at half the measured maximum; with plain wrk they are
        recorded as unavailable. Every node's CPU is read around each measured trial (record
        ``telemetry``); from it ``rps_per_dut_core``, ``dut_busy_cores``,
        ``dut_softirq_share`` and ``proxy_nginx_worker_cpu`` (``vpp_cpu`` on VPP).
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
        """Search the capacity of the proxied and the direct path of ``measurement`` (the
        result of ``Measure HTTPS Load Through Proxy``) with MLRsearch, the two paths'
        trials interleaved: latency goals ``slo`` (``p99<=10ms``, several comma-separated; a
        bare ``10ms`` is p99), within ``search_range`` (``bottom..top`` requests/s), each
        search's highest load 10 % over the path's closed-loop maximum; MLRsearch's
        ``exceed_ratio``, ``trial_duration`` (``initial..final`` s), ``duration_sum`` (s) and
        relative ``width``; ``budget``: seconds of trials per search; ``confirm``: seconds of
        each window the figure is fitted over (0: MLRsearch's knee, unconfirmed);
        ``miss_share``: the share of those windows that may miss the goal at the figure;
        ``windows``: the windows planned per path; ``verify``: seconds of one more window at
        each figure, counted when as long (0: none); ``holdout``: windows at the figure after
        it is fixed, never counted (a benchmark's check; 0: none).

        Adds ``capacity``, ``direct_capacity`` (the rates where a window misses the goal with
        probability ``miss_share``, each with its interval) and ``capacity_ratio`` with
        MLRsearch's result, the windows, their miss curve and every trial as evidence
        (:func:`libraries.capacity.limits.search_paths_capacity`: the checks of the recorded
        figures, generator-bound paths). Skips where the load node has no constant-rate
        generator; an A/B test compares the closed-loop rate of its sides instead.
        """
        return search_capacity(context.case_context(), measurement, self._measured, {
            "goals": slo, "search_range": search_range, "exceed_ratio": exceed_ratio,
            "durations": trial_duration, "duration_sum": duration_sum, "width": width,
            "max_seconds": budget, "confirm_seconds": confirm, "verify_seconds": verify,
            "miss_share": miss_share, "windows": windows, "holdout": holdout})
