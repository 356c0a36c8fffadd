"""Keywords for the sslsniff overhead case (seed 004): nginx HTTPS throughput untraced and with
a tracer, measured interleaved in one run. Tracers: the packaged kernel path (bcc, or the
project's bpftrace script), and the seed's sslsniff program (bpftime's libbpf example) attached
by the kernel or run under bpftime."""

from __future__ import annotations

from robot.api.deco import keyword, library

from libraries.cases.ssl_proxy import ProxySetup
from libraries.cases.sslsniff import (
    SniffRequest,
    measure_with_kernel_tracer,
    measure_with_seed_sslsniff,
    measure_with_userspace_tracer,
)
from libraries.cases.tracers import TracerSetup, require_kernel_tracer, require_seed_sslsniff
from libraries.keywords import context
from libraries.results.measurement import Measurement
from libraries.results.settings import parse_plan
from libraries.testbed.errors import HostStackError


@library(scope="SUITE", auto_keywords=False)
class SslsniffKeywords:
    """Measure an nginx HTTPS server's throughput with and without an SSL tracer attached."""

    def __init__(self) -> None:
        self._tracers = TracerSetup()

    @staticmethod
    def _server() -> ProxySetup:
        """The SSL proxy library's set-up: the HTTPS server the tracers attach to."""
        setup = context.proxy_setup()
        if setup is None:
            raise HostStackError("start the HTTPS server first ('Start HTTPS Server On Node')")
        return setup

    @keyword("Require Kernel SSL Tracer On Node")
    def require_kernel_ssl_tracer_on_node(self, node: str = "dut") -> str:
        """Choose the kernel tracer ``node`` can run (bcc sslsniff where kernel headers exist,
        else the project's bpftrace script) and return its kind; skip with the reason when
        neither can run."""
        return require_kernel_tracer(context.case_context(), self._tracers, node)

    @keyword("Measure HTTPS Load With Kernel Tracer")
    def measure_https_load_with_kernel_tracer(
        self, client: str = "tg", path: str = "/1kb", connections: int = 10,
        per_event: bool = True, trials: str | int = 5, duration: str | int = 2,
        warmup: str | int = 1,
    ) -> Measurement:
        """wrk from ``client`` against the HTTPS server: untraced and with the kernel tracer on
        nginx's libssl ``SSL_read``/``SSL_write`` (entry and return probes), interleaved.

        The tracer is started before and stopped after every traced trial (failures
        included); each traced trial must count events from nginx's PIDs only (a tracer that
        attached nothing, or caught wrk, fails the test) and leave no uprobe behind.
        Metrics: ``baseline_rps``, ``traced_rps``, ``overhead_pct`` (100 x (1 - traced /
        baseline), per round) and ``events_per_request``.
        """
        return measure_with_kernel_tracer(context.case_context(), self._server(),
                                          self._tracers, _request(client, path, connections,
                                                                  trials, duration, warmup),
                                          bool(per_event))

    @keyword("Require Seed Sslsniff On Node")
    def require_seed_sslsniff_on_node(self, node: str = "dut") -> str:
        """Check that ``node`` has the seed's sslsniff program (bpftime's libbpf example;
        topology ``tools.bpftime_sslsniff``) and bpftool; return its version. Skips with the
        reason where it is not declared or not installed."""
        return require_seed_sslsniff(context.case_context(), self._tracers, node)

    @keyword("Measure HTTPS Load With Seed Sslsniff In Kernel")
    def measure_https_load_with_seed_sslsniff_in_kernel(
        self, client: str = "tg", path: str = "/1kb", connections: int = 10,
        trials: str | int = 5, duration: str | int = 2, warmup: str | int = 1,
    ) -> Measurement:
        """As the kernel variant, with the seed's sslsniff binary run as root (``sudo
        ./sslsniff``) and given nginx's worker (``-p``): started before and stopped (SIGINT)
        after every traced trial; each must count events from nginx only and leave no uprobe.
        """
        return measure_with_seed_sslsniff(context.case_context(), self._server(), self._tracers,
                                          _request(client, path, connections, trials, duration,
                                                   warmup))

    @keyword("Measure HTTPS Load With Userspace Tracer")
    def measure_https_load_with_userspace_tracer(
        self, client: str = "tg", path: str = "/1kb", connections: int = 10,
        trials: str | int = 5, duration: str | int = 2, warmup: str | int = 1,
    ) -> Measurement:
        """As the kernel variant, with the same sslsniff binary under bpftime: every traced
        trial runs ``bpftime load <sslsniff>`` and a second nginx (same config, port 8447)
        under ``bpftime start``, stops both and checks that bpftime left nothing behind; wrk
        alternates between the untraced server and the bpftime one. Skips with the reason
        where bpftime, its libraries or its sslsniff program is absent (topology
        ``tools.bpftime`` and ``tools.bpftime_sslsniff``, environment from
        ``tool_env.bpftime``, the libraries' folder from ``tool_dirs.bpftime`` or found beside
        the binary)."""
        return measure_with_userspace_tracer(context.case_context(), self._server(),
                                             _request(client, path, connections, trials,
                                                      duration, warmup))


def _request(client: str, path: str, connections: int, trials: str | int,
             duration: str | int, warmup: str | int) -> SniffRequest:
    return SniffRequest(client, path, int(connections), parse_plan(trials, duration, warmup))
