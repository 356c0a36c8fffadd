"""The SSL reverse proxy case (seed 000, upstream mutual TLS from seed 002): wrk/wrk2 load from
the TG through the DUT's nginx HTTPS reverse proxy and, in the same run, directly to the HTTPS
server, interleaved; then the constant-rate latency pass at half the measured maximum, and in
CAPACITY tests the capacity search of both paths.

:class:`SslProxyCase` is one test: its ``trial`` (one wrk run against a path, its checks),
``build`` (the measurement from the trials) and ``latency_pass`` (after a plain run's trials)
are what the case runner (:func:`libraries.cases.runner.run_case`) and
:func:`libraries.results.adaptive.measure` call; :func:`search_capacity` is the capacity
search after it. The keyword library (``libraries.keywords.ssl_proxy``) starts the server and
the proxy (:class:`ProxySetup`) and hands each test here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from libraries.capacity.generators import (
    CAPACITY_PREFERENCE,
    Generator,
    find_generator,
    latency_pass,
)
from libraries.capacity.limits import search_paths_capacity
from libraries.cases.context import CaseContext, Skip, tool_env
from libraries.cases.https_paths import add_path_metrics, check_responses, closed_loop_uses
from libraries.cases.runner import Case, run_case
from libraries.cases.stack import app_address, client_environment
from libraries.cases.telemetry import TrialTelemetry
from libraries.results.efficiency import ProcessCost, RateCost, add_process_costs, add_rate_costs
from libraries.results.inference import DEFAULT_ALPHA
from libraries.results.measurement import Measurement, Trial
from libraries.results.plan import TrialPlan
from libraries.results.settings import DEFAULT_RANGE, parse_capacity_settings, parse_goals
from libraries.testbed.errors import HostStackError
from libraries.tools.content import parse_size, size_name
from libraries.tools.nginx.service import NginxHandle, nginx_is_alive, stub_status_requests
from libraries.tools.wrk.output import Flavour, WrkResult
from libraries.tools.wrk.run import WrkOptions, choose_load_tool, run_wrk

SERVER_PORT = 8445
STATUS_PORT = 8446
PROXY_PORT = 8089
SERVER_NAME = "server.hoststack.test"
LATENCY_SHARE = 0.5
"""The latency pass offers this share of the measured maximum (the proxied rps median)."""
MAX_RATE = 100000000
"""wrk2's ``-R`` for a closed-loop maximum: far above any rate it reaches."""


@dataclass(frozen=True)
class HttpsServer:
    """The running HTTPS server: its nginx, whether it demands a client certificate
    (``mtls``) and whether it counts requests (``status``: stub_status, kernel stack only)."""

    handle: NginxHandle
    mtls: bool
    status: bool


@dataclass
class ProxySetup:
    """What the set-up keywords started for the case: the HTTPS server and the reverse proxy.
    An A/B switch restarts them and replaces them here, so a trial reads the running ones."""

    server: HttpsServer | None = None
    proxy: NginxHandle | None = None


@dataclass(frozen=True)
class LoadRequest:
    """One test's load: from node ``client``, file ``path`` (``/1kb``), wrk ``connections``,
    the trial ``plan``, the ``stack`` and the latency goals of the latency pass
    (``latency_slo``, ``-v LATENCY_SLO``)."""

    client: str
    path: str
    connections: int
    plan: TrialPlan
    stack: str
    latency_slo: object


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
        self.server = testbed.node(setup.server.handle.node)
        self.proxy = testbed.node(setup.proxy.node)
        self._chosen: dict[tuple[str | None, str | None], tuple[str, Flavour]] = {}
        self.flavour = self.load_tool()[1]
        self.cpus = testbed.topology.cpus_of(self.tg.name, "load")
        self.size = parse_size(request.path.lstrip("/"))
        self.client_env = client_environment(ctx, self.tg.name, request.stack, program="wrk")
        stack = request.stack
        self.urls = {
            "proxy": f"https://{app_address(ctx, 'proxy', self.proxy.name, self.tg.name, stack)}"
                     f":{PROXY_PORT}{request.path}",
            "direct": f"https://{app_address(ctx, 'server', self.server.name, self.tg.name, stack)}"
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
        options = WrkOptions(url=self.urls[variant], threads=1, connections=connections,
                             duration=run.seconds, rate=MAX_RATE if kind == "wrk2" else None,
                             cpus=self.cpus)
        count = self.status and measured and variant == "proxy"
        before = stub_status_requests(self.server, STATUS_PORT) if count else 0
        result = run_wrk(self.tg, binary, options, flavour=kind,
                         env=tool_env(self.ctx.testbed, self.tg.name, kind, self.client_env()),
                         cpu_ledger=self.telemetry.ledger(self.tg.name))
        if count:
            self.forwarded[id(result)] = stub_status_requests(self.server, STATUS_PORT) \
                - before - 1
        if measured:
            nginx_is_alive(self.proxy, proxy)
            nginx_is_alive(self.server, server.handle)
        check_responses(result, self.size, variant, connections)
        return result

    def build(self, results: dict[str, list[WrkResult]], seconds: float) -> Measurement:
        """The measurement of the trials: the paths' rates and checks, the telemetry and the
        efficiency metrics."""
        server, proxy = self.setup.server, self.setup.proxy
        assert server is not None and proxy is not None
        plan, stack = self.request.plan, self.request.stack
        measurement = Measurement(
            case="ssl_proxy", stack=stack,
            parameters={"file_size": size_name(self.size),
                        "connections": self.request.connections, "threads": 1,
                        "tool": self.flavour, "mtls": server.mtls, "trials": plan.trials,
                        "duration_s": plan.duration, "warmup_s": plan.warmup},
            trial_seconds=seconds, alpha=self.ctx.alpha(DEFAULT_ALPHA),
        )
        add_path_metrics(measurement, results, self.forwarded, self.status)
        self.telemetry.attach(measurement)
        add_rate_costs(measurement, self.telemetry.trials,
                       [RateCost("proxy", "rps", "rps", dut=self.proxy.name)])
        costs = [ProcessCost("proxy", self.proxy.name, f"{proxy.process.name} worker",
                             "proxy_nginx_worker_cpu")]
        if stack == "vpp":
            costs.append(ProcessCost("proxy", self.proxy.name, "vpp", "vpp_cpu"))
        add_process_costs(measurement, self.telemetry.trials, costs)
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
                    output="wrk output", generator=(tg, "wrk"))

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
        try:
            limit = parse_goals(self.request.latency_slo)[0].limit_ms
        except ValueError as error:
            raise HostStackError(str(error)) from None
        latency_pass(measurement, generator, why, self.urls["proxy"], LATENCY_SHARE, seconds,
                     limit)


def search_capacity(ctx: CaseContext, measurement: Measurement, measured: SslProxyCase | None,
                    options: Mapping[str, object]) -> Measurement:
    """The capacity of the proxied and the direct path of ``measurement`` (``measured``: the
    test that measured them) under the search ``options`` (the arguments of
    :func:`~libraries.results.settings.parse_capacity_settings`, by name;
    :func:`libraries.capacity.limits.search_paths_capacity`); an A/B test's measurement as it
    is, a load node without a constant-rate generator a skip."""
    if measurement.ab:
        ctx.log.info("A/B run: the capacity search is not made (the sides' rates are "
                     "compared round by round instead)")
        return measurement
    if measured is None:
        raise HostStackError("measure the paths first: Measure HTTPS Load Through Proxy")
    try:
        settings = parse_capacity_settings(**options)
    except ValueError as error:
        raise HostStackError(str(error)) from None
    if measured.searcher is None:
        raise Skip(f"no constant-rate generator on the load node: "
                   f"{measurement.notes[-1] if measurement.notes else ''}")
    return search_paths_capacity(measurement, measured.searcher, dict(measured.urls), settings,
                                 str(options.get("search_range", DEFAULT_RANGE)),
                                 ctx.log.folded)
