"""The ssl_proxy per-trial proof that responses are the file, on wrk summaries."""

from __future__ import annotations

import pytest

from libraries.cases.https_paths import check_responses
from libraries.testbed.errors import HostStackError
from libraries.tools.wrk.output import WrkErrors, WrkResult


def summary(requests: int, total_bytes: float) -> WrkResult:
    return WrkResult(requests_per_second=requests / 1.0, transfer_bytes_per_second=total_bytes,
                     total_requests=requests, total_bytes=total_bytes, duration_s=1.0,
                     latency_avg_s=None, latency_stdev_s=None, latency_max_s=None,
                     thread_req_per_sec=None, percentiles={}, errors=WrkErrors(),
                     non_2xx_3xx=0, threads=1, connections=20, url=None, flavour="wrk")


def test_a_short_run_of_large_files_counts_the_responses_still_in_flight():
    """Seen on the 3node kernel proxy: a 1 s warm-up, 20 connections, 64 KiB files, 6
    requests done and 160782 bytes per request read (the other connections' partial files)."""
    check_responses(summary(6, 6 * 160782), 65536, "proxy", connections=20)


def test_responses_that_are_not_the_file_still_fail():
    with pytest.raises(HostStackError, match="bytes per response, expected the 1024-byte file"):
        check_responses(summary(50000, 50000 * 65800), 1024, "proxy", connections=20)
    with pytest.raises(HostStackError, match="expected the 65536-byte file"):
        check_responses(summary(50000, 50000 * 300), 65536, "direct", connections=20)
