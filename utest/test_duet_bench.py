"""benchmarks/duet_bench.py's pure parts: the summary of a method's pairs and the side-b sysctl
argument (the runs themselves need two namespace testbeds: benchmarks/README.md has them)."""

from __future__ import annotations

import argparse
import math
import statistics

import pytest

from benchmarks.duet_bench import _summary, _sysctl
from libraries.ab.rounds import ratio_interval


def test_the_summary_is_the_ab_engines_interval_and_the_spread_of_log_ratios() -> None:
    pairs = [(10.0, 9.0), (10.0, 9.9), (8.0, 7.6), (12.0, 11.4), (10.0, 9.7), (9.0, 8.8),
             (11.0, 10.4), (10.0, 9.6)]
    ratios = tuple(b / a for a, b in pairs)
    interval = ratio_interval(ratios, 0.05)
    summary = _summary(pairs)
    assert summary["change_pct"] == pytest.approx(100 * (interval.change - 1))
    assert summary["low_pct"] == pytest.approx(100 * (interval.low - 1))
    assert summary["high_pct"] == pytest.approx(100 * (interval.high - 1))
    assert summary["low_pct"] < summary["change_pct"] < summary["high_pct"] < 0  # all slower
    assert summary["spread_pct"] == pytest.approx(
        100 * statistics.stdev(math.log(r) for r in ratios))
    assert (summary["median_a"], summary["median_b"]) == pytest.approx((10.0, 9.65))


def test_too_few_rounds_for_an_interval_give_no_bounds() -> None:
    summary = _summary([(10.0, 9.0), (10.0, 9.5)])
    assert math.isnan(summary["low_pct"]) and math.isnan(summary["high_pct"])
    assert summary["change_pct"] == pytest.approx(100 * (ratio_interval((0.9, 0.95), 0.05)
                                                         .change - 1))


def test_side_b_takes_only_per_namespace_sysctls() -> None:
    assert _sysctl("net.ipv4.tcp_rmem=4096 131072 262144") == (
        "net.ipv4.tcp_rmem", "4096 131072 262144")
    with pytest.raises(argparse.ArgumentTypeError, match="expected KEY=VALUE"):
        _sysctl("net.ipv4.tcp_rmem")
    with pytest.raises(argparse.ArgumentTypeError, match="only per-namespace net"):
        _sysctl("vm.swappiness=10")
