"""Tests of libraries.results.headline: the one-line figures a test's message carries."""

from __future__ import annotations

import math

import pytest

from libraries.results.catalogue import CASES, CaseCatalogue
from libraries.results.headline import figure, headline
from libraries.results.measurement import Measurement


@pytest.mark.parametrize(("value", "text"), [
    (15634.2, "15.6k"), (812.3, "812"), (14.23, "14.2"), (0.8531, "0.853"), (1234567.0, "1.23M"),
    (0.0, "0"), (9999.0, "10k"), (1500.0, "1.5k"), (math.nan, "nan"),
])
def test_figure_is_three_significant_digits_with_a_suffix(value, text):
    assert figure(value) == text


def _ssl_proxy(latency: bool, errors: float = 0.0) -> Measurement:
    m = Measurement("ssl_proxy", "kernel", {"tool": "wrk2" if latency else "wrk"})
    m.add("rps", [15000.0, 15600.0, 18000.0], "requests/s")
    m.add("errors", [errors] * 3, "count", "lower_is_better")
    m.add("direct_rps", [18000.0, 18300.0, 19000.0], "requests/s")
    m.add("proxy_direct_ratio", [0.83, 0.85, 0.95], "ratio")
    if latency:
        m.add("latency_p50", [1.53], "ms", "lower_is_better")
        m.add("latency_p99_9", [8.4], "ms", "lower_is_better")
        m.evidence["latency"] = {"rate": 7800}
    else:
        m.evidence["latency"] = None
    return m


def test_ssl_proxy_headline_names_rps_ratio_direct_and_why_latency_is_missing():
    text = headline(_ssl_proxy(latency=False))
    assert text == ("rps 15.6k req/s [15k, 18k] (proxy/direct 0.85 [0.83, 0.95]; direct "
                    "18.3k); latency unavailable (wrk)")


def test_ssl_proxy_headline_with_wrk2_latency_and_errors():
    text = headline(_ssl_proxy(latency=True, errors=3.0))
    assert "errors 3" in text
    assert text.endswith("latency p50 1.53 ms p99.9 8.4 ms")


def test_tcp_term_headline_is_the_receiver_throughput():
    m = Measurement("tcp_term", "vpp", {})
    m.add("throughput", [14.0, 14.2, 14.5], "Gbit/s")
    assert headline(m) == "throughput 14.2 Gbit/s [14, 14.5] (receiver)"


def test_a_test_measured_plainly_in_an_ab_run_says_why():
    m = Measurement("tcp_term", "kernel", {})
    m.add("throughput", [14.0, 14.2, 14.5], "Gbit/s")
    m.evidence["ab_unused"] = "A/B x: the sides differ only in nginx.proxy; measured plainly"
    assert headline(m) == ("throughput 14.2 Gbit/s [14, 14.5] (receiver); A/B x: the sides "
                           "differ only in nginx.proxy; measured plainly")


def test_ebpf_stream_headline_lists_variants_then_ratios():
    m = Measurement("ebpf_stream", "kernel", {})
    for name, value in (("direct", 14.0), ("native", 6.1), ("ebpf", 5.2)):
        m.add(name, [value], "Gbit/s")
    m.add("native_direct_ratio", [0.44], "ratio")
    m.add("ebpf_native_ratio", [0.85], "ratio")
    m.add("ebpf_nginx_worker_cpu_ratio", [0.01], "ratio", "lower_is_better")
    assert headline(m) == ("ebpf 5.2 Gbit/s, native 6.1, direct 14 "
                           "(native/direct 0.44, ebpf/native 0.85, "
                           "ebpf_nginx_worker_cpu_ratio 0.01)")


def test_sslsniff_headline_is_the_overhead_with_both_rates():
    m = Measurement("sslsniff", "kernel", {})
    m.add("baseline_rps", [21500.0], "requests/s")
    m.add("traced_rps", [6500.0], "requests/s")
    m.add("overhead_pct", [69.77], "%", "lower_is_better")
    m.add("events_per_request", [2.0], "events")
    assert headline(m) == ("overhead 69.8% (baseline 21.5k -> traced 6.5k req/s; "
                           "2.00 events/request)")


def test_unknown_case_or_missing_metric_falls_back_to_every_metric(monkeypatch):
    monkeypatch.setitem(CASES, "new_case", CaseCatalogue(metrics=("speed",), parameters=()))
    m = Measurement("new_case", "kernel", {})
    m.add("speed", [3.0], "Gbit/s")
    assert headline(m) == "speed 3 Gbit/s"
    broken = Measurement("ssl_proxy", "kernel", {})
    broken.add("direct_rps", [100.0], "requests/s")
    assert headline(broken) == "direct_rps 100 req/s"


def test_a_measurement_without_metrics_says_so():
    assert headline(Measurement("tcp_term", "kernel", {})) == "no metric measured"


def test_ssl_proxy_headline_with_the_capacity_under_the_slo():
    m = _ssl_proxy(latency=True)
    m.parameters["latency_slo_ms"] = 10.0
    m.add("capacity", [12500.0], "requests/s")
    m.add("direct_capacity", [30100.0], "requests/s")
    m.add("capacity_ratio", [12500.0 / 30100.0], "ratio")
    assert headline(m).endswith("; capacity 12.5k req/s at p99<=10ms (proxy/direct 0.415; "
                                "direct 30.1k)")
    m.parameters["capacity_confirm_s"] = 10.0
    assert headline(m).endswith("; capacity 12.5k req/s at p99<=10ms over 10 s (proxy/direct "
                                "0.415; direct 30.1k)")
    m.parameters["capacity_confirm_s"] = 0
    assert "capacity 12.5k req/s at p99<=10ms (MLRsearch knee, unconfirmed) (" in headline(m)


def test_a_generator_bound_direct_path_has_no_ratio_in_the_headline():
    m = _ssl_proxy(latency=True)
    m.parameters.update(latency_slo_ms=10.0, latency_goals=["p99<=10ms", "p50<=1ms"])
    m.add("capacity", [12500.0], "requests/s")
    m.add("direct_capacity", [30100.0], "requests/s")
    m.unavailable["capacity_ratio"] = "the direct path's capacity is the load generator's"
    m.evidence["capacity_limited_by"] = {"proxy": "path", "direct": "load generator"}
    assert headline(m).endswith("; capacity 12.5k req/s at p99<=10ms (proxy/direct "
                                "unavailable; direct 30.1k (generator-bound))")


def test_a_ratio_reads_as_every_other_figure():
    """Issue 63: ``proxy/direct 0.43 [0.43, 0.44]`` in the message beside
    ``proxy_direct_ratio 0.434 [0.431, 0.442]`` on the page; one formatter now."""
    m = Measurement("ssl_proxy", "kernel", {"tool": "wrk"})
    m.add("rps", [13000.0, 12900.0, 13100.0, 12950.0, 13050.0], "requests/s")
    m.add("proxy_direct_ratio", [0.434, 0.431, 0.442, 0.433, 0.436], "ratio")
    assert "(proxy/direct 0.434 [0.431, 0.442])" in headline(m)
