"""The SSL reverse proxy case (seed 000, upstream mutual TLS from seed 002): wrk/wrk2 load from
the TG through the DUT's nginx HTTPS reverse proxy and, in the same run, directly to the HTTPS
server, interleaved; then the constant-rate latency pass at half the measured maximum, and in
CAPACITY tests the capacity search of both paths.

:class:`SslProxyCase` is one test: its ``trial`` (one wrk run against a path, its checks),
``build`` (the measurement from the trials) and ``latency_pass`` (after a plain run's trials)
are what the case runner (:func:`libraries.cases.case_runner.run_case`) and
:func:`libraries.results.adaptive.measure` call; :func:`search_capacity` is the capacity
search after it. The set-up before it: the content file, the HTTPS server and the reverse
proxy (:func:`start_https_server`, :func:`start_https_reverse_proxy`, which keep what they
start in a :class:`ProxySetup`). The keyword library (``libraries.keywords.ssl_proxy``) makes
one call per keyword.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from libraries.capacity.generators import (
    CAPACITY_PREFERENCE,
    Generator,
    find_generator,
    latency_pass,
)
from libraries.capacity.limits import search_paths_capacity
from libraries.cases.case_runner import Case, run_case
from libraries.cases.context import CaseContext, Skip
from libraries.cases.https_paths import (
    add_path_metrics,
    check_responses,
    closed_loop_uses,
    nginx_uses,
    one_cpu,
    worker_connections,
)
from libraries.cases.stack import (
    app_address,
    app_environment,
    client_environment,
    wait_until_listed,
)
from libraries.cases.trial_observer import TrialTelemetry, dut_cores, judged_costs
from libraries.results.cost import CostSpec, add_costs
from libraries.results.efficiency import ProcessCost, RateCost, add_process_costs, add_rate_costs
from libraries.results.inference import DEFAULT_ALPHA
from libraries.results.measurement import Measurement, Trial
from libraries.results.plan import TrialPlan
from libraries.testbed.errors import HostStackError
from libraries.testbed.node import Node
from libraries.testbed.provision import Testbed
from libraries.tools.certs import RunCertificates, make_run_certificates
from libraries.tools.content import content_file_command, parse_size, size_name
from libraries.tools.nginx.config import (
    PROXY_PORT,
    SERVER_PORT,
    STATUS_PORT,
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
from libraries.tools.wrk.run import (
    THREADS,
    WrkOptions,
    choose_load_tool,
    closed_loop_rate,
    run_wrk,
)

SERVER_NAME = "server.hoststack.test"
SERVER_INSTANCE = "nginx-server"
"""The HTTPS server's nginx: its process name, its folder under the node's workdir
(``instance_prefix``) and its A/B component."""
PROXY_INSTANCE = "nginx-proxy"
"""The reverse proxy's nginx, named as :data:`SERVER_INSTANCE` is."""
LATENCY_SHARE = 0.5
"""The latency pass offers this share of the measured maximum (the proxied rps median)."""


@dataclass(frozen=True)
class HttpsServer:
    """The running HTTPS server: its nginx, whether it demands a client certificate
    (``mtls``) and whether it counts requests (``status``: stub_status, kernel stack only)."""

    handle: NginxHandle
    mtls: bool
    status: bool


@dataclass
class ProxySetup:
    """What the case's set-up started: the HTTPS server and the reverse proxy (an A/B switch
    restarts them and replaces them here, so a trial reads the running ones), and the run's
    certificates with the folder each node has them in."""

    server: HttpsServer | None = None
    proxy: NginxHandle | None = None
    certs: RunCertificates | None = None
    cert_dirs: dict[str, str] = field(default_factory=dict)

    def certificates(self, node: Node) -> str:
        """Upload the run's CA and certificates to ``node`` once; return their directory."""
        if self.certs is None:
            self.certs = make_run_certificates(
                server_names=[SERVER_NAME, "localhost", "127.0.0.1"],
                proxy_names=["proxy.hoststack.test", "localhost", "127.0.0.1"],
            )
        if node.name not in self.cert_dirs:
            directory = f"{node.workdir}/certs"
            files = {"ca.crt": (self.certs.ca.cert_pem, 0o644)}
            for name in ("server", "proxy", "client"):
                pair = getattr(self.certs, name)
                files[f"{name}.crt"] = (pair.cert_pem, 0o644)
                files[f"{name}.key"] = (pair.key_pem, 0o600)
            node.put_files(directory, files)
            self.cert_dirs[node.name] = directory
        return self.cert_dirs[node.name]


def declared_binary(testbed: Testbed, node: str, tool: str) -> str:
    """The topology's binary of ``tool`` on ``node`` (fails naming what the node declares)."""
    binary = testbed.topology.nodes[node].tools.get(tool)
    if binary is None:
        raise HostStackError(f"topology {testbed.topology.name}: node {node} declares no "
                             f"{tool} (tools: {sorted(testbed.topology.nodes[node].tools)})")
    return binary


def create_content_file(ctx: CaseContext, node: str, size: str) -> str:
    """A file of ``size`` random bytes in ``node``'s web root; its URL path (``/1kb``)."""
    target = ctx.testbed.node(node)
    name = size_name(size)
    target.run(content_file_command(f"{target.workdir}/www/{name}", size), timeout=60)
    return f"/{name}"


def start_https_server(ctx: CaseContext, setup: ProxySetup, node: str,
                       require_client_cert: bool, stack: str) -> None:
    """Seed 000's nginx HTTPS file server on ``SERVER_PORT`` of ``node`` (a stub_status
    counter on ``STATUS_PORT`` on the kernel stack), demanding the run CA's client certificate with
    ``require_client_cert``; the rendered config in the log; an A/B side restarts it."""
    testbed = ctx.testbed
    target = testbed.node(node)
    env = app_environment(ctx, target.name, "server", stack, program="nginx")
    certs = setup.certificates(target)
    prefix = instance_prefix(target, SERVER_INSTANCE)
    # stub_status counts requests for the forwarding proof; over VPP it would listen on
    # VPP's stack, out of reach of a kernel curl, so the VPP suite goes without it.
    status_port = None if env else STATUS_PORT
    http, server = ctx.side_nginx("server")
    params = HttpsServerParams(
        instance=NginxInstance(prefix=prefix, user="root",
                               worker_connections=worker_connections(env),
                               worker_cpus=one_cpu(testbed, target.name, "server"),
                               extra_http=http, extra_server=server),
        cert_path=f"{certs}/server.crt", key_path=f"{certs}/server.key",
        root_dir=f"{target.workdir}/www", status_port=status_port,
        client_ca_path=f"{certs}/ca.crt" if require_client_cert else None,
    )
    config = params.render()
    ctx.log.folded(f"nginx HTTPS server on {target.name}", config)
    ports = [SERVER_PORT] if env else [SERVER_PORT, STATUS_PORT]
    handle = start_nginx(target, SERVER_INSTANCE, config, [] if env else ports,
                         binary=declared_binary(testbed, target.name, "nginx"),
                         env=testbed.topology.env_of(target.name, "nginx", env))
    if env:
        wait_until_listed(ctx, target.name, SERVER_PORT, "nginx HTTPS server", handle.process)
    setup.server = HttpsServer(handle, require_client_cert, status=not env)
    ctx.component_started(SERVER_INSTANCE, nginx_uses(target.name, "server", env),
                          lambda: target.stop(handle.process),
                          lambda: start_https_server(ctx, setup, node, require_client_cert,
                                                     stack))


def start_https_reverse_proxy(ctx: CaseContext, setup: ProxySetup, node: str, upstream: str,
                              stack: str, mtls: bool) -> None:
    """Seed 000's nginx HTTPS reverse proxy on ``PROXY_PORT`` of ``node`` towards the HTTPS server
    on ``upstream``; with ``mtls`` it presents the run's client certificate and verifies the
    upstream's; the rendered config in the log; an A/B side restarts it."""
    testbed = ctx.testbed
    target = testbed.node(node)
    env = app_environment(ctx, target.name, "proxy", stack, program="nginx")
    upstream_node = testbed.topology.resolve_node(upstream)
    certs = setup.certificates(target)
    upstream_tls = None
    if mtls:
        upstream_tls = UpstreamTls(
            client_cert_path=f"{certs}/client.crt", client_key_path=f"{certs}/client.key",
            trusted_ca_path=f"{certs}/ca.crt", verify=True, ssl_name=SERVER_NAME,
        )
    address = app_address(ctx, "server", upstream_node, target.name, stack)
    http, server = ctx.side_nginx("proxy")
    params = SslProxyParams(
        instance=NginxInstance(prefix=instance_prefix(target, PROXY_INSTANCE), user="root",
                               worker_connections=worker_connections(env),
                               worker_cpus=one_cpu(testbed, target.name, "proxy"),
                               extra_http=http, extra_server=server),
        cert_path=f"{certs}/proxy.crt", key_path=f"{certs}/proxy.key",
        upstreams=(f"{address}:{SERVER_PORT}",),
        upstream_tls=upstream_tls,
    )
    config = params.render()
    ctx.log.folded(f"nginx HTTPS reverse proxy on {target.name}", config)
    proxy = start_nginx(target, PROXY_INSTANCE, config, [] if env else [PROXY_PORT],
                        binary=declared_binary(testbed, target.name, "nginx"),
                        env=testbed.topology.env_of(target.name, "nginx", env))
    setup.proxy = proxy
    if env:
        wait_until_listed(ctx, target.name, PROXY_PORT, "nginx HTTPS reverse proxy",
                          proxy.process)
    ctx.component_started(PROXY_INSTANCE, nginx_uses(target.name, "proxy", env),
                          lambda: target.stop(proxy.process),
                          lambda: start_https_reverse_proxy(ctx, setup, node, upstream, stack,
                                                            mtls))


@dataclass(frozen=True)
class LoadRequest:
    """One test's load: from node ``client``, file ``path`` (``/1kb``), wrk ``connections``,
    the trial ``plan`` and the ``stack`` (the latency pass's goal: the context's
    ``-v LATENCY_SLO``). ``plan`` is the suite's ``RunSettings.plan``: ``-v TRIALS``,
    ``DURATION`` and ``WARMUP``, declared with their defaults in
    ``libraries/results/trial_settings.py``; a measured trial runs ``plan.duration`` s, the
    warm-up ``plan.warmup`` s (``libraries/results/adaptive.py``)."""

    client: str
    path: str
    connections: int
    plan: TrialPlan
    stack: str


class SslProxyCase:
    """One test of the SSL proxy case in ``ctx``: the paths (``proxy``, and ``direct`` unless
    the server demands the proxy's client certificate), each trial one wrk run from the load
    node. After :meth:`measure`, :attr:`urls` and :attr:`searcher` (the constant-rate
    generator a capacity search uses, None where the load node has none) serve
    :func:`search_capacity`."""

    def __init__(self, ctx: CaseContext, setup: ProxySetup, request: LoadRequest) -> None:
        if setup.server is None or setup.proxy is None:
            raise HostStackError("start the HTTPS server and the reverse proxy first")
        testbed = ctx.testbed
        self.ctx, self.setup, self.request = ctx, setup, request
        self.tg = testbed.node(request.client)
        self.server_node = testbed.node(setup.server.handle.node)
        self.proxy_node = testbed.node(setup.proxy.node)
        self._chosen: dict[tuple[str | None, str | None], tuple[str, Flavour]] = {}
        self.flavour = self.load_tool()[1]
        self.cpus = testbed.topology.cpus_of(self.tg.name, "load")
        self.size = parse_size(request.path.lstrip("/"))
        self.client_env = client_environment(ctx, self.tg.name, request.stack, program="wrk")
        stack, tg = request.stack, self.tg.name
        self.urls = {
            "proxy": f"https://{app_address(ctx, 'proxy', self.proxy_node.name, tg, stack)}"
                     f":{PROXY_PORT}{request.path}",
            "direct": f"https://{app_address(ctx, 'server', self.server_node.name, tg, stack)}"
                      f":{SERVER_PORT}{request.path}",
        }
        if setup.server.mtls:
            del self.urls["direct"]  # the server demands the proxy's client certificate
        self.forwarded: dict[int, int] = {}  # id of a proxied trial's result -> server's count
        self.status = setup.server.status
        self.telemetry = TrialTelemetry.of(ctx)
        self.searcher: Generator | None = None

    def load_tool(self) -> tuple[str, Flavour]:
        """The load node's wrk (per trial: an A/B run may switch it), probed once."""
        tools = self.ctx.testbed.topology.nodes[self.tg.name].tools
        key = (tools.get("wrk2"), tools.get("wrk"))
        if key not in self._chosen:
            self._chosen[key] = choose_load_tool(self.tg, tools)
        return self._chosen[key]

    def trial(self, run: Trial) -> WrkResult:
        """One wrk run against ``run.variant``'s path: every response the file, and in a
        measured proxied trial the server's count of forwarded requests; both nginx alive."""
        variant, measured = run.variant, run.measured  # warm-ups only warm up
        server, proxy = self.setup.server, self.setup.proxy
        assert server is not None and proxy is not None
        binary, kind = self.load_tool()
        connections = self.request.connections
        # Where the line's parts come from: run.seconds is the plan's DURATION (WARMUP in the
        # warm-up; results/adaptive.py), self.cpus the topology's cpus.load of the load node,
        # self.urls the app's address (cases/stack.py: app_address) and the port the config
        # module defines, the environment the node's tool_env for the probed tool with the
        # client's VCL one over it, the ledger a folder of the node's workdir.
        options = WrkOptions(url=self.urls[variant], connections=connections,
                             duration=run.seconds, rate=closed_loop_rate(kind),
                             cpus=self.cpus)
        count = self.status and measured and variant == "proxy"
        before = stub_status_requests(self.server_node, STATUS_PORT) if count else 0
        env = self.ctx.testbed.topology.env_of(self.tg.name, kind, self.client_env())
        result = run_wrk(self.tg, binary, options, flavour=kind, env=env,
                         cpu_ledger=self.telemetry.ledger(self.tg.name))
        if count:
            self.forwarded[id(result)] = stub_status_requests(self.server_node, STATUS_PORT) \
                - before - 1
        if measured:
            nginx_is_alive(self.proxy_node, proxy)
            nginx_is_alive(self.server_node, server.handle)
        check_responses(result, self.size, variant, connections)
        return result

    def build(self, results: dict[str, list[WrkResult]], seconds: float) -> Measurement:
        """The measurement of the trials: the paths' rates and checks, the telemetry of these
        very trials, the efficiency metrics and the proxy's cost per request
        (:mod:`libraries.results.cost`)."""
        server, proxy = self.setup.server, self.setup.proxy
        assert server is not None and proxy is not None
        plan, stack = self.request.plan, self.request.stack
        measurement = Measurement(
            case="ssl_proxy", stack=stack,
            parameters={"file_size": size_name(self.size),
                        "connections": self.request.connections, "threads": THREADS,
                        "tool": self.flavour, "mtls": server.mtls, "trials": plan.trials,
                        "duration_s": plan.duration, "warmup_s": plan.warmup},
            trial_seconds=seconds, alpha=self.ctx.alpha(DEFAULT_ALPHA),
        )
        add_path_metrics(measurement, results, self.forwarded, self.status)
        self.telemetry.attach(measurement, results)
        trials = measurement.trial_telemetry or {}
        add_rate_costs(measurement, trials,
                       [RateCost("proxy", "rps", "rps", dut=self.proxy_node.name)])
        costs = [ProcessCost("proxy", self.proxy_node.name, f"{proxy.process.name} worker",
                             "proxy_nginx_worker_cpu")]
        if stack == "vpp":
            costs.append(ProcessCost("proxy", self.proxy_node.name, "vpp", "vpp_cpu"))
        add_process_costs(measurement, trials, costs)
        add_costs(measurement, [CostSpec(
            "proxy", self.proxy_node.name, (proxy.process.name,), "request", "the reverse proxy",
            dut_cores(self.ctx.testbed, self.proxy_node.name), vpp=stack == "vpp")],
            {"proxy": [r.total_requests for r in results["proxy"]]}, trials)
        return measurement

    def case(self) -> Case:
        """The test as the runner measures it (an A/B run compares the proxied path)."""
        assert self.setup.server is not None
        tg, stack = self.tg.name, self.request.stack
        uses = closed_loop_uses(tg, self.ctx.testbed.topology.nodes[tg].tools,
                                self.load_tool()[0])
        uses |= {("vcl", "client"), ("vpp", tg)} if stack == "vpp" else set()
        return Case("ssl_proxy", stack, dict.fromkeys(self.urls, self.trial),
                    self.request.plan, self.build,
                    {"rps": "higher_is_better"},  # A/B: the proxied path is under test
                    {"file_size": size_name(self.size),
                     "connections": self.request.connections,
                     "mtls": self.setup.server.mtls}, frozenset(uses), ab_variants=("proxy",),
                    output="wrk output", generator=(tg, "wrk"),
                    costs=judged_costs("", stack == "vpp"))

    def measure(self) -> Measurement:
        """Measure the paths (plainly or as an A/B test), then, in a plain run, the latency
        pass."""
        return run_case(self.ctx, self.case(), self.telemetry, after=self.latency_pass)

    def latency_pass(self, measurement: Measurement) -> None:
        """The constant-rate pass at half the measured maximum
        (:func:`libraries.capacity.generators.latency_pass`); finds the capacity search's
        generator too."""
        tools = self.ctx.testbed.topology.nodes[self.tg.name].tools
        connections = int(measurement.parameters["connections"])
        env, ledger = self.client_env(), self.telemetry.ledger(self.tg.name)
        generator, why = find_generator(self.tg, tools, self.cpus, env, ledger)
        if generator is not None:
            generator = replace(generator, connections=connections)
        searcher = find_generator(self.tg, tools, self.cpus, env, ledger,
                                  CAPACITY_PREFERENCE)[0]
        self.searcher = replace(searcher, connections=connections) if searcher else None
        wrk2 = generator is not None and generator.tool == "wrk2"
        seconds = max(self.request.plan.duration, 30 if wrk2 else 3)  # wrk2 recalibrates ~10 s
        limit = self.ctx.settings.capacity.goals[0].limit_ms
        latency_pass(measurement, generator, why, self.urls["proxy"], LATENCY_SHARE, seconds,
                     limit)


def search_capacity(ctx: CaseContext, measurement: Measurement,
                    measured: SslProxyCase | None) -> Measurement:
    """The capacity of the proxied and the direct path of ``measurement`` (``measured``: the
    test that measured them) under the suite's capacity settings (``ctx.settings.capacity``:
    ``-v LATENCY_SLO``, ``CAPACITY_*``; :func:`libraries.capacity.limits.search_paths_capacity`);
    an A/B test's measurement as it is, a load node without a constant-rate generator a
    skip."""
    if measurement.ab:
        ctx.log.info("A/B run: the capacity search is not made (the sides' rates are "
                     "compared round by round instead)")
        return measurement
    if measured is None:
        raise HostStackError("measure the paths first: Measure HTTPS Load Through Proxy")
    if measured.searcher is None:
        raise Skip(f"no constant-rate generator on the load node: "
                   f"{measurement.notes[-1] if measurement.notes else ''}")
    return search_paths_capacity(measurement, measured.searcher, dict(measured.urls),
                                 ctx.settings.capacity, ctx.settings.capacity_range,
                                 ctx.log.folded, ctx.say)
