"""Keywords for the SSL reverse proxy case (seed 000, upstream mutual TLS from seed 002):
an nginx HTTPS file server, an nginx HTTPS reverse proxy, and wrk/wrk2 load through it."""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace

from robot.api import SkipExecution, logger
from robot.api.deco import keyword, library
from robot.libraries.BuiltIn import BuiltIn

from libraries.capacity.generators import (
    CAPACITY_PREFERENCE,
    Generator,
    find_generator,
    latency_pass,
)
from libraries.capacity.limits import search_paths_capacity
from libraries.keywords import context, log_folded, tool_env
from libraries.keywords.ab import closed_loop_uses, component_started, side_nginx
from libraries.keywords.case import Case, run_case
from libraries.keywords.https_paths import (
    add_path_metrics,
    check_responses,
    nginx_uses,
    one_cpu,
    worker_connections,
)
from libraries.keywords.telemetry import TrialTelemetry
from libraries.keywords.vpp import (
    app_address,
    app_environment,
    client_environment,
    wait_until_listed,
)
from libraries.results.efficiency import ProcessCost, RateCost, add_process_costs, add_rate_costs
from libraries.results.inference import DEFAULT_ALPHA
from libraries.results.measurement import Measurement, Trial
from libraries.results.plan import TrialPlan
from libraries.results.settings import (
    DEFAULT_RANGE,
    DEFAULT_SLO,
    parse_capacity_settings,
    parse_goals,
    parse_plan,
)
from libraries.testbed.errors import HostStackError
from libraries.testbed.node import Node
from libraries.testbed.provision import Testbed
from libraries.tools.certs import RunCertificates, make_run_certificates
from libraries.tools.content import content_file_command, parse_size, size_name
from libraries.tools.nginx.config import (
    HttpsServerParams,
    NginxInstance,
    SslProxyParams,
    UpstreamTls,
)
from libraries.tools.nginx.service import (
    NginxHandle,
    instance_prefix,
    nginx_is_alive,
    start_nginx,
    stub_status_requests,
)
from libraries.tools.wrk.output import Flavour, WrkResult
from libraries.tools.wrk.run import WrkOptions, choose_load_tool, run_wrk

LOG = logging.getLogger(__name__)
SERVER_PORT = 8445
STATUS_PORT = 8446
PROXY_PORT = 8089
SERVER_NAME = "server.hoststack.test"
LATENCY_SHARE = 0.5
"""The latency pass offers this share of the measured maximum (the proxied rps median)."""


@dataclass(frozen=True)
class _Server:
    handle: NginxHandle
    mtls: bool
    status: bool


@library(scope="SUITE", auto_keywords=False)
class SslProxyKeywords:
    """Start an HTTPS file server and an HTTPS reverse proxy, and measure HTTPS load through
    the proxy and directly to the server, interleaved in the same run."""

    def __init__(self) -> None:
        self._certs: RunCertificates | None = None
        self._cert_dirs: dict[str, str] = {}
        self._server: _Server | None = None
        self._proxy: NginxHandle | None = None
        self._paths: dict[str, str] = {}
        self._searcher: Generator | None = None

    @property
    def server(self) -> NginxHandle | None:
        """The running HTTPS server started by ``Start HTTPS Server On Node`` (or None)."""
        return self._server.handle if self._server else None

    # -- helpers -----------------------------------------------------------------------------

    def _certificates(self, node: Node) -> str:
        """Upload the run's CA and certificates to ``node`` once; return their directory."""
        if self._certs is None:
            self._certs = make_run_certificates(
                server_names=[SERVER_NAME, "localhost", "127.0.0.1"],
                proxy_names=["proxy.hoststack.test", "localhost", "127.0.0.1"],
            )
        if node.name not in self._cert_dirs:
            directory = f"{node.workdir}/certs"
            files = {"ca.crt": (self._certs.ca.cert_pem, 0o644)}
            for name in ("server", "proxy", "client"):
                pair = getattr(self._certs, name)
                files[f"{name}.crt"] = (pair.cert_pem, 0o644)
                files[f"{name}.key"] = (pair.key_pem, 0o600)
            node.put_files(directory, files)
            self._cert_dirs[node.name] = directory
        return self._cert_dirs[node.name]

    @staticmethod
    def _binary(testbed: Testbed, node: str, tool: str) -> str:
        binary = testbed.topology.nodes[node].tools.get(tool)
        if binary is None:
            raise HostStackError(f"topology {testbed.topology.name}: node {node} declares no "
                                 f"{tool} (tools: {sorted(testbed.topology.nodes[node].tools)})")
        return binary

    # -- keywords ----------------------------------------------------------------------------

    @keyword("Create Content File On Node")
    def create_content_file_on_node(self, node: str, size: str = "1kb") -> str:
        """Create a file of ``size`` random bytes (``1kb``, ``64kb``, ``1m``, bytes) in the
        node's web root and return its URL path, e.g. ``/1kb``."""
        target = context.testbed().node(node)
        name = size_name(size)
        target.run(content_file_command(f"{target.workdir}/www/{name}", size), timeout=60)
        return f"/{name}"

    @keyword("Start HTTPS Server On Node")
    def start_https_server_on_node(self, node: str, require_client_cert: bool = False,
                                   stack: str = "kernel") -> None:
        """Start seed 000's nginx HTTPS file server (TLSv1.3, TLS_AES_128_GCM_SHA256) on port
        8445 of ``node``, with a stub_status counter on 127.0.0.1:8446.

        ``require_client_cert`` makes it demand a client certificate signed by the run's CA
        (the upstream mutual-TLS variant). The rendered config is attached to the log.
        """
        testbed = context.testbed()
        target = testbed.node(node)
        env = app_environment(target.name, "server", stack, program="nginx")
        certs = self._certificates(target)
        prefix = instance_prefix(target, "nginx-server")
        # stub_status counts requests for the forwarding proof; over VPP it would listen on
        # VPP's stack, out of reach of a kernel curl, so the VPP variant goes without it.
        status_port = None if env else STATUS_PORT
        http, server = side_nginx("server")
        params = HttpsServerParams(
            instance=NginxInstance(prefix=prefix, user="root",
                                   worker_connections=worker_connections(env),
                                   worker_cpus=one_cpu(testbed, target.name, "server"),
                                   extra_http=http, extra_server=server),
            cert_path=f"{certs}/server.crt", key_path=f"{certs}/server.key",
            root_dir=f"{target.workdir}/www", listen_port=SERVER_PORT, status_port=status_port,
            client_ca_path=f"{certs}/ca.crt" if require_client_cert else None,
        )
        config = params.render()
        log_folded(f"nginx HTTPS server on {target.name}", config)
        ports = [SERVER_PORT] if env else [SERVER_PORT, STATUS_PORT]
        handle = start_nginx(target, "nginx-server", config, [] if env else ports,
                             binary=self._binary(testbed, target.name, "nginx"),
                             env=tool_env(testbed, target.name, "nginx", env))
        if env:
            wait_until_listed(target.name, SERVER_PORT, "nginx HTTPS server", handle.process)
        self._server = _Server(handle, require_client_cert, status=not env)
        component_started("nginx-server", nginx_uses(target.name, "server", env),
                          lambda: target.stop(handle.process),
                          lambda: self.start_https_server_on_node(node, require_client_cert,
                                                                  stack))

    @keyword("Start HTTPS Reverse Proxy On Node")
    def start_https_reverse_proxy_on_node(self, node: str, upstream: str = "server",
                                          stack: str = "kernel", mtls: bool = False) -> None:
        """Start seed 000's nginx HTTPS reverse proxy on port 8089 of ``node`` towards the
        HTTPS server on ``upstream`` (keepalive 1024, HTTP/1.1, TLSv1.3 upstream).

        ``mtls`` presents the run's client certificate to the upstream and verifies the
        upstream's certificate against the run's CA (seed 002 in today's nginx terms).
        """
        testbed = context.testbed()
        target = testbed.node(node)
        env = app_environment(target.name, "proxy", stack, program="nginx")
        upstream_node = testbed.topology.resolve_node(upstream)
        certs = self._certificates(target)
        upstream_tls = None
        if mtls:
            upstream_tls = UpstreamTls(
                client_cert_path=f"{certs}/client.crt", client_key_path=f"{certs}/client.key",
                trusted_ca_path=f"{certs}/ca.crt", verify=True, ssl_name=SERVER_NAME,
            )
        address = app_address(testbed, "server", upstream_node, target.name, stack)
        http, server = side_nginx("proxy")
        params = SslProxyParams(
            instance=NginxInstance(prefix=instance_prefix(target, "nginx-proxy"), user="root",
                                   worker_connections=worker_connections(env),
                                   worker_cpus=one_cpu(testbed, target.name, "proxy"),
                                   extra_http=http, extra_server=server),
            cert_path=f"{certs}/proxy.crt", key_path=f"{certs}/proxy.key",
            listen_port=PROXY_PORT, upstreams=(f"{address}:{SERVER_PORT}",),
            upstream_tls=upstream_tls,
        )
        config = params.render()
        log_folded(f"nginx HTTPS reverse proxy on {target.name}", config)
        proxy = start_nginx(target, "nginx-proxy", config, [] if env else [PROXY_PORT],
                            binary=self._binary(testbed, target.name, "nginx"),
                            env=tool_env(testbed, target.name, "nginx", env))
        self._proxy = proxy
        if env:
            wait_until_listed(target.name, PROXY_PORT, "nginx HTTPS reverse proxy",
                              proxy.process)
        component_started("nginx-proxy", nginx_uses(target.name, "proxy", env),
                          lambda: target.stop(proxy.process),
                          lambda: self.start_https_reverse_proxy_on_node(node, upstream, stack,
                                                                         mtls))

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
        if self._server is None or self._proxy is None:
            raise HostStackError("start the HTTPS server and the reverse proxy first")
        testbed = context.testbed()
        tg = testbed.node(client)
        server = testbed.node(self._server.handle.node)
        proxy = testbed.node(self._proxy.node)
        chosen: dict[tuple[str | None, str | None], tuple[str, Flavour]] = {}

        def load_tool() -> tuple[str, Flavour]:
            """The load node's wrk (per trial: an A/B run may switch it), probed once."""
            tools = testbed.topology.nodes[tg.name].tools
            key = (tools.get("wrk2"), tools.get("wrk"))
            if key not in chosen:
                chosen[key] = choose_load_tool(tg, tools)
            return chosen[key]

        flavour = load_tool()[1]
        plan = parse_plan(trials, duration, warmup)
        cpus = testbed.topology.cpus_of(tg.name, "load")
        size = parse_size(path.lstrip("/"))
        client_env = client_environment(tg.name, stack, program="wrk")
        urls = {
            "proxy": f"https://{app_address(testbed, 'proxy', proxy.name, tg.name, stack)}:"
                     f"{PROXY_PORT}{path}",
            "direct": f"https://{app_address(testbed, 'server', server.name, tg.name, stack)}:"
                      f"{SERVER_PORT}{path}",
        }
        if self._server.mtls:
            del urls["direct"]  # the server demands the proxy's client certificate
        forwarded: dict[int, int] = {}  # id of a proxied trial's result -> server's count
        status = self._server.status
        telemetry = TrialTelemetry.for_current_suite(testbed)

        def trial(run: Trial) -> WrkResult:
            variant, measured = run.variant, run.measured  # warm-ups only warm up
            binary, kind = load_tool()
            options = WrkOptions(url=urls[variant], threads=1, connections=int(connections),
                                 duration=run.seconds,
                                 rate=100000000 if kind == "wrk2" else None, cpus=cpus)
            count = status and measured and variant == "proxy"
            before = stub_status_requests(server, STATUS_PORT) if count else 0
            result = run_wrk(tg, binary, options, flavour=kind,
                             env=tool_env(testbed, tg.name, kind, client_env()),
                             cpu_ledger=telemetry.ledger(tg.name))
            if count:
                forwarded[id(result)] = stub_status_requests(server, STATUS_PORT) - before - 1
            if measured:
                nginx_is_alive(proxy, self._proxy)
                nginx_is_alive(server, self._server.handle)
            check_responses(result, size, variant, int(connections))
            return result

        judge = context.judge()
        alpha = judge.settings.alpha if judge else DEFAULT_ALPHA

        def build(results: dict[str, list[WrkResult]], seconds: float) -> Measurement:
            measurement = Measurement(
                case="ssl_proxy", stack=stack,
                parameters={"file_size": size_name(size), "connections": int(connections),
                            "threads": 1, "tool": flavour, "mtls": self._server.mtls,
                            "trials": plan.trials, "duration_s": plan.duration,
                            "warmup_s": plan.warmup},
                trial_seconds=seconds, alpha=alpha,
            )
            add_path_metrics(measurement, results, forwarded, status)
            telemetry.attach(measurement)
            add_rate_costs(measurement, telemetry.trials,
                           [RateCost("proxy", "rps", "rps", dut=proxy.name)])
            costs = [ProcessCost("proxy", proxy.name, f"{self._proxy.process.name} worker",
                                 "proxy_nginx_worker_cpu")]
            if stack == "vpp":
                costs.append(ProcessCost("proxy", proxy.name, "vpp", "vpp_cpu"))
            add_process_costs(measurement, telemetry.trials, costs)
            return measurement

        self._paths = dict(urls)
        uses = closed_loop_uses(tg.name, testbed.topology.nodes[tg.name].tools, load_tool()[0])
        uses |= {("vcl", "client"), ("vpp", tg.name)} if stack == "vpp" else set()
        case = Case("ssl_proxy", stack, dict.fromkeys(urls, trial), plan, build,
                    {"rps": "higher_is_better"},  # A/B: the proxied path is under test
                    {"file_size": size_name(size), "connections": int(connections),
                     "mtls": self._server.mtls}, frozenset(uses), ab_variants=("proxy",),
                    output="wrk output", generator=(tg.name, "wrk"))
        return run_case(case, telemetry, after=lambda measurement: self._latency_pass(
            measurement, tg, client_env(), cpus, telemetry.ledger(tg.name), urls["proxy"],
            plan))

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
        if measurement.ab:
            logger.info("A/B run: the capacity search is not made (the sides' rates are "
                        "compared round by round instead)")
            return measurement
        if not self._paths:
            raise HostStackError("measure the paths first: Measure HTTPS Load Through Proxy")
        try:
            settings = parse_capacity_settings(slo, search_range, exceed_ratio, trial_duration,
                                               duration_sum, width, budget, confirm,
                                               verify, miss_share, windows, holdout)
        except ValueError as error:
            raise HostStackError(str(error)) from None
        if self._searcher is None:
            raise SkipExecution(f"no constant-rate generator on the load node: "
                                f"{measurement.notes[-1] if measurement.notes else ''}")
        return search_paths_capacity(measurement, self._searcher, dict(self._paths), settings,
                                     str(search_range), log_folded)

    def _latency_pass(self, measurement: Measurement, tg: Node, env: dict[str, str] | None,
                      cpus: list[int] | None, ledger: str, url: str, plan: TrialPlan) -> None:
        """The constant-rate pass at half the measured maximum
        (:func:`libraries.capacity.generators.latency_pass`)."""
        tools = context.testbed().topology.nodes[tg.name].tools
        connections = int(measurement.parameters["connections"])
        generator, why = find_generator(tg, tools, cpus, env, ledger)
        if generator is not None:
            generator = replace(generator, connections=connections)
        searcher = find_generator(tg, tools, cpus, env, ledger, CAPACITY_PREFERENCE)[0]
        self._searcher = replace(searcher, connections=connections) if searcher else None
        wrk2 = generator is not None and generator.tool == "wrk2"
        seconds = max(plan.duration, 30 if wrk2 else 3)  # wrk2 recalibrates for ~10 s
        goals = BuiltIn().get_variable_value("${LATENCY_SLO}", DEFAULT_SLO)
        try:
            limit = parse_goals(goals)[0].limit_ms
        except ValueError as error:
            raise HostStackError(str(error)) from None
        latency_pass(measurement, generator, why, url, LATENCY_SHARE, seconds, limit)
