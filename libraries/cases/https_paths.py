"""What the HTTPS cases check of their paths and how they place their nginx instances: every
response the file (wrk's counts), every proxied request forwarded (the server's count), the
rates and the per-round proxy/direct ratio of the trials, the worker connections and CPU of an
instance, and what an instance or a closed-loop load uses that an A/B side may change. Plain
functions of :mod:`libraries.cases.ssl_proxy` and :mod:`libraries.cases.sslsniff`."""

from __future__ import annotations

from collections.abc import Mapping

from libraries.ab.session import Use
from libraries.results.measurement import Measurement
from libraries.testbed.errors import HostStackError
from libraries.testbed.provision import Testbed
from libraries.tools.nginx.config import WORKER_CONNECTIONS
from libraries.tools.wrk.output import WrkResult


def nginx_uses(node: str, role: str, vpp_env: dict[str, str] | None) -> set[tuple[str, ...]]:
    """What an nginx of ``role`` on ``node`` uses that an A/B side may change."""
    uses = {("tool", node, "nginx"), ("nginx", role), ("env", "nginx")}
    return uses | ({("vpp", node), ("vcl", role)} if vpp_env else set())


def closed_loop_uses(node: str, tools: Mapping[str, str], binary: str) -> set[Use]:
    """What a closed-loop HTTP trial on ``node`` uses that an A/B side may change: the ``wrk``
    entry (a side that declares it runs it: ``CLOSED_LOOP_ORDER``), the ``wrk2`` entry only
    where ``binary``, the tool side a runs, is not wrk's, and both tools' environments."""
    uses: set[Use] = {("tool", node, "wrk"), ("env", "wrk"), ("env", "wrk2")}
    if binary != tools.get("wrk"):
        uses.add(("tool", node, "wrk2"))
    return uses


LDP_WORKER_CONNECTIONS = 10240
"""``worker_connections`` of an nginx over VPP's LDP: room for VCL's high fd numbers (as
measured on a VPP lab)."""


def worker_connections(env: dict[str, str] | None) -> int:
    """:data:`LDP_WORKER_CONNECTIONS` for an nginx over VPP (``env``: its LD_PRELOAD), else
    the instance's own default (:data:`~libraries.tools.nginx.config.WORKER_CONNECTIONS`)."""
    return LDP_WORKER_CONNECTIONS if env else WORKER_CONNECTIONS


def one_cpu(testbed: Testbed, node: str, purpose: str) -> tuple[int, ...] | None:
    cpus = testbed.topology.cpus_of(node, purpose)
    return (cpus[0],) if cpus else None


def check_responses(result: WrkResult, size: int, variant: str, connections: int) -> None:
    if result.total_requests == 0:
        raise HostStackError(f"{variant}: wrk completed no request: {result.raw[-500:]!r}")
    if result.non_2xx_3xx:
        raise HostStackError(
            f"{variant}: {result.non_2xx_3xx} of {result.total_requests} responses were not "
            f"2xx/3xx: the path is broken (e.g. 400 for a rejected client certificate, 502 "
            f"for an unreachable upstream)")
    per_response = result.total_bytes / result.total_requests
    # wrk prints the bytes read with 2 decimals ("1.23GB"): allow 1% for that rounding. Its
    # byte count also holds the responses each connection was still reading when it stopped
    # (at most one per connection): a short run of few large responses (a 1 s warm-up of
    # 64 KiB files seen at 6 requests) is inflated by them.
    in_flight = connections * (size + 1024) / result.total_requests
    if not 0.99 * size <= per_response <= 1.01 * size + 1024 + in_flight:
        raise HostStackError(
            f"{variant}: {per_response:.0f} bytes per response, expected the {size}-byte file "
            f"plus headers: responses are not the file")


def check_forwarded(counted: list[int], sent: list[int]) -> None:
    for index, (server_count, wrk_count) in enumerate(zip(counted, sent, strict=True)):
        if server_count < 0.95 * wrk_count:
            raise HostStackError(
                f"proxy trial {index + 1}: the server counted {server_count} requests but wrk "
                f"completed {wrk_count} through the proxy: the proxy did not forward them all")


def add_path_metrics(measurement: Measurement, results: dict[str, list[WrkResult]],
                     counted: dict[int, int], status: bool) -> None:
    """Rates, errors, the per-round ratio and the forwarding evidence of the trials."""
    proxied = results["proxy"]
    forwarded = [counted[id(r)] for r in proxied if id(r) in counted]
    measurement.add("rps", [r.requests_per_second for r in proxied], "requests/s")
    measurement.add("errors", [float(r.total_errors) for r in proxied], "count",
                    "lower_is_better")
    measurement.evidence["server_counted_requests"] = list(forwarded)
    measurement.evidence["wrk_requests"] = [r.total_requests for r in proxied]
    measurement.evidence["bytes_per_response"] = [round(r.total_bytes / r.total_requests)
                                                  for r in proxied]
    if status:
        check_forwarded(forwarded, [r.total_requests for r in proxied])
    else:
        measurement.evidence["server_counted_requests"] = None
        measurement.notes.append("server-side request count unavailable over VPP: the "
                                 "proof of the path is every response 2xx with the file")
    if "direct" in results:
        direct = results["direct"]
        measurement.add("direct_rps", [r.requests_per_second for r in direct], "requests/s")
        measurement.add("proxy_direct_ratio",
                        [p.requests_per_second / d.requests_per_second
                         for p, d in zip(proxied, direct, strict=True)], "ratio")
    else:
        measurement.notes.append("direct path not measured: the server requires the "
                                 "proxy's client certificate (mTLS row)")
