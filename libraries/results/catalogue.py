"""What each case can measure: its metric names and its parameters.

The criteria file is checked against this before anything runs (a criterion on a metric the
case never measures, or a ``when`` on a parameter it does not have, would otherwise be found
only after the trials, or never), and :meth:`~libraries.results.measurement.Measurement.add`
refuses a metric not listed here, so the catalogue cannot fall behind the case libraries.

Names are regular expressions matched whole (variant-prefixed metrics such as
``ebpf_dut_busy_cores`` are written once).

A case's ``correctness`` metrics count, per trial, what must not happen at all (the SSL
proxy's ``errors``: socket errors and non-2xx/3xx answers through the proxy). A criterion on
one of them is a correctness check (:mod:`libraries.results.criteria`): its bound holds in
every measured trial (one figure per round, in round order), never on a median's interval.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_COSTS = r"(rps_per_dut_core|gbps_per_dut_core|dut_busy_cores|dut_softirq_share)"
_PER_UNIT = r"(cost|kernel_cost|vpp_cost|foreign_share)"
"""The cost of a unit of work and what sits beside it (:mod:`libraries.results.cost`)."""
_TRIALS = ("trials", "duration_s", "warmup_s", "ab")
_AB = r"ab_\w+_ratio"
"""An A/B test's metric: the per-round ratio candidate / baseline of one of the case's."""


@dataclass(frozen=True)
class CaseCatalogue:
    """The metric name patterns and parameter names of one case (``stack`` is every case's),
    and the patterns of its ``correctness`` metrics (counts of what must not happen in any
    trial; each is one of its metrics too)."""

    metrics: tuple[str, ...]
    parameters: tuple[str, ...]
    correctness: tuple[str, ...] = ()

    def has_metric(self, name: str) -> bool:
        """True when ``name`` is one of this case's metrics."""
        return any(re.fullmatch(pattern, name) for pattern in self.metrics)

    def is_correctness(self, name: str) -> bool:
        """True when ``name`` counts what must not happen in any trial (a criterion on it is
        judged per trial)."""
        return any(re.fullmatch(pattern, name) for pattern in self.correctness)

    def has_parameter(self, name: str) -> bool:
        """True when a test of this case can have parameter ``name``."""
        return name == "stack" or name in self.parameters


CASES: dict[str, CaseCatalogue] = {
    "tcp_term": CaseCatalogue(
        metrics=("throughput", "gbps_per_dut_core", "dut_busy_cores", "dut_softirq_share",
                 "iperf3_server_cpu", "vpp_cpu", _PER_UNIT, _AB),
        parameters=("reverse", "streams", "mtu", "path", *_TRIALS),
    ),
    "ssl_proxy": CaseCatalogue(
        metrics=("rps", "errors", "direct_rps", "proxy_direct_ratio",
                 r"latency_p(50|90|99|99_9)", "rps_per_dut_core", "dut_busy_cores",
                 "dut_softirq_share", "proxy_nginx_worker_cpu", "vpp_cpu", _PER_UNIT,
                 "capacity", "direct_capacity", "capacity_ratio", _AB),
        parameters=("file_size", "connections", "threads", "tool", "mtls", "latency_slo_ms",
                    *_TRIALS),
        correctness=("errors",),
    ),
    "ebpf_stream": CaseCatalogue(
        metrics=("direct", "native", "ebpf", "(native_direct|ebpf_native|ebpf_direct)_ratio",
                 rf"(direct|native|ebpf)_{_COSTS}", "(native|ebpf)_nginx_worker_cpu",
                 "ebpf_nginx_worker_cpu_ratio", rf"(native|ebpf)_{_PER_UNIT}", _AB),
        parameters=("reverse", "pinned", "ebpf", "variants", *_TRIALS),
    ),
    "sslsniff": CaseCatalogue(
        metrics=("baseline_rps", "traced_rps", "overhead_pct", "events_per_request",
                 rf"(baseline|traced)_{_COSTS}", "(baseline|traced)_nginx_worker_cpu",
                 "tracer_cpu", rf"(baseline|traced)_{_PER_UNIT}", _AB),
        parameters=("tracer", "per_event", "tool", "file", "connections", *_TRIALS),
    ),
}


def case_catalogue(case: str) -> CaseCatalogue:
    """The catalogue of ``case``; ``KeyError`` naming the known cases otherwise."""
    if case not in CASES:
        raise KeyError(f"unknown case {case!r}: expected one of {', '.join(sorted(CASES))}")
    return CASES[case]
