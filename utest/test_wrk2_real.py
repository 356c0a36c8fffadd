"""wrk2's real outputs (built from source, captured here): max rate, constant-rate latency,
a 1-s run with nothing recorded, usage, connection refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from libraries.testbed.errors import ParseError
from libraries.tools.wrk.output import parse_wrk_output
from libraries.tools.wrk.run import detect_wrk_flavour

FIXTURES = Path(__file__).parent / "fixtures" / "wrk"
ONE_SECOND_AT_MAX_RATE = """Running 1s test @ https://198.18.1.1:8089/1kb
  1 threads and 10 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     -nanus    -nanus   0.00us    0.00%
    Req/Sec       -nan      -nan   0.00      0.00%
  1 requests in 1.04s, 1.25KB read
Requests/sec:      0.96
Transfer/sec:      1.20KB
"""


def test_max_rate_run_parses_with_its_nan_req_per_sec():
    result = parse_wrk_output((FIXTURES / "wrk2_real_maxrate.txt").read_text())
    assert result.requests_per_second == pytest.approx(9525.72)
    assert result.total_requests == 47631
    assert result.thread_req_per_sec is None
    assert result.percentiles == {}


def test_constant_rate_latency_summary_gives_eight_percentiles_in_seconds():
    result = parse_wrk_output((FIXTURES / "wrk2_real_latency.txt").read_text())
    assert result.flavour == "wrk2"
    assert result.requests_per_second == pytest.approx(1997.57)
    assert sorted(result.percentiles) == [50.0, 75.0, 90.0, 99.0, 99.9, 99.99, 99.999, 100.0]
    assert result.percentiles[50.0] == pytest.approx(0.00109)
    assert result.percentiles[99.9] == pytest.approx(0.00954)


def test_nan_latency_with_a_unit_is_not_a_number_and_not_an_error():
    result = parse_wrk_output(ONE_SECOND_AT_MAX_RATE)
    assert result.latency_avg_s is None and result.latency_stdev_s is None
    assert result.latency_max_s == 0.0
    assert result.total_requests == 1


def test_usage_text_says_wrk2_and_refused_connection_is_an_error():
    assert detect_wrk_flavour((FIXTURES / "wrk2_real_help.txt").read_text()) == "wrk2"
    with pytest.raises(ParseError, match="unable to connect to 127.0.0.1:1"):
        parse_wrk_output((FIXTURES / "wrk2_real_refused.txt").read_text())


def test_the_count_over_a_limit_comes_from_the_corrected_spectrum():
    """Real wrk2 at 2000 req/s for 30 s: its histogram holds the 39,900 requests after its
    calibration (~10 s in) of the 59,928 completed; 23 recorded ones lie above the last row
    within 10 ms (9.775 ms at 39,877), so 23/39,900 of every completed request is over."""
    result = parse_wrk_output((FIXTURES / "wrk2_real_latency.txt").read_text())
    assert len(result.spectrum) == 79 and result.spectrum[-1] == (0.011975, 39900)
    assert result.over(0.010) == round(23 / 39900 * 59928)
    assert result.over(0.020) == 0
    assert result.over(0.0004) == round((39900 - 1) / 39900 * 59928)


def test_a_spectrum_cut_short_is_a_parse_error():
    text = (FIXTURES / "wrk2_real_latency.txt").read_text()
    cut = text.replace("#[Max     =       11.968, Total count    =        39900]",
                       "#[Max     =       11.968, Total count    =        39999]")
    with pytest.raises(ParseError, match="Total count"):
        parse_wrk_output(cut)
    assert parse_wrk_output((FIXTURES / "wrk2_real_maxrate.txt").read_text()).spectrum == ()
    with pytest.raises(ValueError, match="no latency spectrum"):
        parse_wrk_output((FIXTURES / "wrk2_real_maxrate.txt").read_text()).over(0.01)
