"""Keywords for the sslsniff overhead case (seed 004): nginx HTTPS throughput untraced and with
a tracer, measured interleaved in one run. Tracers: the packaged kernel path (bcc, or the
project's bpftrace script), and the seed's sslsniff program (bpftime's libbpf example) attached
by the kernel or run under bpftime."""

from __future__ import annotations

from robot.api.deco import keyword, library

from libraries.cases.sslsniff import (
    SniffRequest,
    measure_with_kernel_tracer,
    measure_with_seed_sslsniff,
    measure_with_userspace_tracer,
)
from libraries.cases.tracers import require_kernel_tracer, require_seed_sslsniff
from libraries.keywords import context
from libraries.results.measurement import Measurement


@library(scope="SUITE", auto_keywords=False)
class SslsniffKeywords:
    """Keywords of the sslsniff overhead case (seed 004): HTTPS throughput with an SSL tracer.

    The case measures what tracing nginx's TLS calls costs: wrk loads an nginx HTTPS server
    untraced and with a tracer on libssl's ``SSL_read`` and ``SSL_write``, interleaved round
    by round in one run, and reports the throughput lost (``overhead_pct``). Three tracers:
    the packaged kernel tracer (bcc's sslsniff where kernel headers exist, else the
    project's bpftrace script), the seed's own sslsniff program (bpftime's libbpf example)
    attached by the kernel, and the same program under bpftime in userspace. Each traced
    trial must prove the tracer saw nginx's calls, and nothing else.

    The HTTPS server is the SSL proxy library's (``Start HTTPS Server On Node``), so a suite
    imports both, through ``resources/sslsniff.resource``, and the testbed library. A test,
    as that resource writes it:

    | =Setting= | =Value= |
    | Library | libraries.keywords.sslsniff.SslsniffKeywords |

    | =Keyword= | =Arguments= | | | |
    | Require Kernel SSL Tracer On Node | dut | | | |
    | Create Content File On Node | dut | 1kb | | |
    | Start HTTPS Server On Node | dut | | | |
    | ${result} = | Measure HTTPS Load With Kernel Tracer | tg | path=/1kb | per_event=${True} |
    | Record Result | ${result} | | | |
    """

    @keyword("Require Kernel SSL Tracer On Node")
    def require_kernel_ssl_tracer_on_node(self, node: str = "dut") -> str:
        """Choose the kernel SSL tracer a node can run and return its kind, or skip the test.

        bcc's sslsniff where the node has kernel headers (why bcc could not run is logged),
        else the project's bpftrace script (the topology's ``tools.bpftrace``). Call it
        before `Measure HTTPS Load With Kernel Tracer`, which uses the tracer chosen here.

        Args:
            node: The node the HTTPS server and the tracer run on: a node name or a role.
                Default ``dut``.

        Returns:
            The tracer's kind, e.g. ``bcc`` or ``bpftrace``.

        Skips the test, with the reason, when neither tracer can run on the node.

        Examples:
        | Require Kernel SSL Tracer On Node | dut |
        | ${kind} = | Require Kernel SSL Tracer On Node | dut |
        """
        return require_kernel_tracer(context.case_context(), context.suite().tracers, node)

    @keyword("Measure HTTPS Load With Kernel Tracer")
    def measure_https_load_with_kernel_tracer(
        self, client: str = "tg", path: str = "/1kb", connections: int = 10,
        per_event: bool = True,
    ) -> Measurement:
        """Measure the HTTPS server's throughput untraced and with the kernel SSL tracer.

        wrk from ``client`` loads the HTTPS server of ``Start HTTPS Server On Node``,
        untraced and with the tracer chosen by `Require Kernel SSL Tracer On Node` on
        nginx's libssl ``SSL_read`` and ``SSL_write`` (entry and return probes), interleaved:
        a warm-up, then ``-v TRIALS`` rounds, and more while a pass criterion is inconclusive.
        The tracer is started before and stopped after every traced trial (failures
        included).

        Metrics: ``baseline_rps``, ``traced_rps``, ``overhead_pct`` (100 x (1 - traced /
        baseline), per round) and ``events_per_request``; the tracer and its per-trial
        counts are evidence.

        Args:
            client: The node wrk runs on: a node name or a role. Default ``tg``.
            path: The URL path of the file requested, as ``Create Content File On Node``
                of the SSL proxy library returned it. Default ``/1kb``.
            connections: wrk's open connections (``-c``, one thread). Default 10.
            per_event: ``${True}`` (default) prints one line per ``SSL_read`` or
                ``SSL_write`` event, as sslsniff does; ``${False}`` only counts the events
                (the cost of the probes alone).

        Returns:
            The measurement to give to ``Record Result`` and ``Check Criteria``.

        Fails when a wrk run answers no request or has errors, when no tracer was chosen or
        no HTTPS server started, or when a traced trial counts no event from nginx's PIDs,
        catches another program (wrk) or leaves a uprobe behind.

        Examples:
        | ${result} = | Measure HTTPS Load With Kernel Tracer | tg | path=/1kb |
        | ${result} = | Measure HTTPS Load With Kernel Tracer | tg | per_event=${False} |
        """
        return measure_with_kernel_tracer(context.case_context(), context.suite().proxy,
                                          context.suite().tracers,
                                          _request(client, path, connections), bool(per_event))

    @keyword("Require Seed Sslsniff On Node")
    def require_seed_sslsniff_on_node(self, node: str = "dut") -> str:
        """Check that a node has the seed's sslsniff program and bpftool; return its version.

        The program is bpftime's libbpf sslsniff example, declared as the topology's
        ``tools.bpftime_sslsniff`` of the node. Call it before `Measure HTTPS Load With Seed
        Sslsniff In Kernel`.

        Args:
            node: The node the HTTPS server and the tracer run on: a node name or a role.
                Default ``dut``.

        Returns:
            The program's version as the node reports it.

        Skips the test, with the reason, where the program is not declared or it or
        bpftool is not installed.

        Examples:
        | Require Seed Sslsniff On Node | dut |
        """
        return require_seed_sslsniff(context.case_context(), context.suite().tracers, node)

    @keyword("Measure HTTPS Load With Seed Sslsniff In Kernel")
    def measure_https_load_with_seed_sslsniff_in_kernel(
        self, client: str = "tg", path: str = "/1kb", connections: int = 10,
    ) -> Measurement:
        """Measure the HTTPS server's throughput untraced and with the seed's sslsniff.

        As `Measure HTTPS Load With Kernel Tracer`, with the program found by `Require
        Seed Sslsniff On Node` run as root (``sudo ./sslsniff``) and given nginx's worker
        (``-p``): started before and stopped (SIGINT) after every traced trial. Metrics
        ``baseline_rps``, ``traced_rps``, ``overhead_pct`` and ``events_per_request``.

        Args:
            client: The node wrk runs on: a node name or a role. Default ``tg``.
            path: The URL path of the file requested, as ``Create Content File On Node``
                of the SSL proxy library returned it. Default ``/1kb``.
            connections: wrk's open connections (``-c``, one thread). Default 10.

        Returns:
            The measurement to give to ``Record Result`` and ``Check Criteria``.

        Fails when a wrk run answers no request or has errors, when the program was not
        checked first or no HTTPS server started, or when a traced trial counts no event
        from nginx only or leaves a uprobe behind.

        Examples:
        | ${result} = | Measure HTTPS Load With Seed Sslsniff In Kernel | tg | path=/1kb |
        """
        return measure_with_seed_sslsniff(context.case_context(), context.suite().proxy,
                                          context.suite().tracers,
                                          _request(client, path, connections))

    @keyword("Measure HTTPS Load With Userspace Tracer")
    def measure_https_load_with_userspace_tracer(
        self, client: str = "tg", path: str = "/1kb", connections: int = 10,
    ) -> Measurement:
        """Measure the HTTPS server's throughput untraced and with sslsniff under bpftime.

        As `Measure HTTPS Load With Kernel Tracer`, with the seed's sslsniff program under
        bpftime, in userspace: every traced trial runs ``bpftime load <sslsniff>`` and a
        second nginx (the server's config, port 8447) under ``bpftime start``, stops both
        and checks that bpftime left nothing behind; wrk alternates between the untraced
        server and the bpftime one.

        Args:
            client: The node wrk runs on: a node name or a role. Default ``tg``.
            path: The URL path of the file requested, as ``Create Content File On Node``
                of the SSL proxy library returned it. Default ``/1kb``.
            connections: wrk's open connections (``-c``, one thread). Default 10.

        Returns:
            The measurement to give to ``Record Result`` and ``Check Criteria``.

        Skips the test, with the reason, where bpftime, its libraries or its sslsniff
        program is absent (topology ``tools.bpftime`` and ``tools.bpftime_sslsniff``,
        environment from ``tool_env.bpftime``, the libraries' folder from
        ``tool_dirs.bpftime`` or found beside the binary), and in an A/B run (which does not
        compare this variant). Fails when a wrk run answers no request or has errors, no
        HTTPS server started or bpftime left something behind.

        Examples:
        | ${result} = | Measure HTTPS Load With Userspace Tracer | tg | path=/1kb |
        """
        return measure_with_userspace_tracer(context.case_context(), context.suite().proxy,
                                             _request(client, path, connections))


def _request(client: str, path: str, connections: int) -> SniffRequest:
    """The load of a traced test, at the suite's trial plan (``-v TRIALS``, ``DURATION``,
    ``WARMUP``)."""
    return SniffRequest(client, path, int(connections), context.settings().plan)
