"""benchmarks/duet_bench.py's pure parts: the summary of a method's pairs and the side-b sysctl
argument (the runs themselves need two namespace testbeds: benchmarks/README.md has them)."""

from __future__ import annotations

import argparse
import math

import pytest

from benchmarks.duet_bench import _summary, _sysctl


def test_the_summary_is_the_mean_log_ratio_with_its_t_interval() -> None:
    pairs = [(10.0, 9.0), (10.0, 9.9), (8.0, 7.6), (12.0, 11.4)]
    logs = [math.log(b / a) for a, b in pairs]
    mean = sum(logs) / 4
    summary = _summary(pairs)
    assert summary["change_pct"] == pytest.approx(100 * math.expm1(mean))
    assert summary["low_pct"] < summary["change_pct"] < summary["high_pct"]
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / 3)
    assert summary["spread_pct"] == pytest.approx(100 * sd)
    half = 3.182446305284263 * sd / 2  # t(0.975, 3 df) * sd / sqrt(4)
    assert summary["high_pct"] == pytest.approx(100 * math.expm1(mean + half))
    assert (summary["median_a"], summary["median_b"]) == (10.0, 9.45)


def test_side_b_takes_only_per_namespace_sysctls() -> None:
    assert _sysctl("net.ipv4.tcp_rmem=4096 131072 262144") == (
        "net.ipv4.tcp_rmem", "4096 131072 262144")
    with pytest.raises(argparse.ArgumentTypeError, match="expected KEY=VALUE"):
        _sysctl("net.ipv4.tcp_rmem")
    with pytest.raises(argparse.ArgumentTypeError, match="only per-namespace net"):
        _sysctl("vm.swappiness=10")
