"""``show runtime`` / ``show session`` parsing (fixtures: utest/fixtures/vpp_runtime/README.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from libraries.testbed.errors import ParseError
from libraries.vpp.runtime import parse_session_counts, parse_show_runtime, runtime_summary
from libraries.vpp.vppctl import parse_show_session_verbose

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "vpp_runtime"
RUNTIME = (FIXTURES / "show_runtime_two_threads.txt").read_text()
SESSIONS = (FIXTURES / "show_session.txt").read_text()
REAL = (FIXTURES / "show_runtime_vpp2610_one_thread.txt").read_bytes().decode()
REAL_SESSIONS = (FIXTURES / "show_session_vpp2610.txt").read_bytes().decode()


def test_real_capture_of_vpp_26_10():
    assert "\r\n" in REAL  # as vppctl prints it
    (main,) = parse_show_runtime(REAL)  # one thread: no "Thread" line
    assert (main.index, main.name, main.lcore) == (0, "vpp_main", None)
    assert (main.time_s, main.vector_rate, main.loops_per_sec) == (3.2, 1.09, 6367473.22)
    assert main.rates == {"in": 1.4018e4, "out": 7.0802e3, "drop": 9.4796e-1, "punt": 0.0}
    nodes = {n.name: n for n in main.nodes}
    assert len(nodes) == 27
    assert nodes["af-packet-input"].state == "interrupt wa"  # cut to its column by VPP
    assert (nodes["fib-walk"].state, nodes["fib-walk"].suspends) == ("any wait", 1)
    walker = nodes["ip4-full-reassembly-expire-wal"]
    assert (walker.state, walker.suspends, walker.clocks_per) == ("any wait", 61, 1.80e4)
    queue = nodes["session-queue"]
    assert (queue.state, queue.calls, queue.vectors, queue.clocks_per) == \
        ("polling", 7681350, 22153, 1.07e5)
    summary = runtime_summary(REAL, REAL_SESSIONS)
    assert next(iter(summary["threads"]["vpp_main"]["top_nodes"])) == "session-queue"
    assert summary["sessions"] == {"0": 1}


def test_threads_nodes_and_rates():
    main, worker = parse_show_runtime(RUNTIME)
    assert (main.index, main.name, main.lcore) == (0, "vpp_main", 0)
    assert (worker.index, worker.name, worker.lcore) == (1, "vpp_wk_0", 1)
    assert worker.time_s == 3.1 and worker.loops_per_sec == 84211.90
    assert worker.vector_rate == 12.41
    assert worker.rates == {"in": 6.1153e5, "out": 6.1152e5, "drop": 0.6, "punt": 0.0}
    by_name = {n.name: n for n in worker.nodes}
    af = by_name["af-packet-input"]
    assert (af.state, af.calls, af.vectors, af.suspends) == ("interrupt wa", 152881, 1895772, 0)
    assert (af.clocks_per, af.vectors_per_call) == (412.0, 12.40)
    assert af.clocks == pytest.approx(412.0 * 1895772)
    api = {n.name: n for n in main.nodes}["api-rx-from-ring"]
    assert (api.state, api.suspends) == ("any wait", 31)
    assert api.clocks == pytest.approx(1.32e4 * 31)  # per suspend when no vectors, no calls


def test_summary_totals_and_top_nodes():
    summary = runtime_summary(RUNTIME, SESSIONS)
    worker = summary["threads"]["vpp_wk_0"]
    assert worker["calls"] == sum(n.calls for n in parse_show_runtime(RUNTIME)[1].nodes)
    assert worker["vectors_per_call"] == pytest.approx(worker["vectors"] / worker["calls"],
                                                       abs=1e-3)
    assert list(worker["top_nodes"])[:2] == ["af-packet-input", "tcp4-established"]
    assert len(worker["top_nodes"]) == 5
    assert summary["threads"]["vpp_main"]["vectors"] == 0
    assert summary["sessions"] == {"0": 0, "1": 14}


def test_single_thread_vpp_has_no_thread_line():
    text = RUNTIME.split("---------------")[0].split("\n", 1)[1]
    (only,) = parse_show_runtime(text)
    assert (only.index, only.name, only.lcore) == (0, "vpp_main", None)


@pytest.mark.parametrize("text", [
    "", "garbage", "unknown input `runtime'\n",
    RUNTIME.replace("Time 3.1, 10.000000 sec", "Tim 3.1"),
    RUNTIME.replace("  152881         1895772", "  lots          1895772", 1),
    REAL.replace("7681350", "7681x50", 1), REAL.replace("1.07e5", "1.07e5 extra", 1),
])
def test_garbage_runtime_raises_quoting_it(text):
    with pytest.raises(ParseError, match="show runtime.*output was"):
        parse_show_runtime(text)


def test_truncated_runtime_raises():
    with pytest.raises(ParseError):
        parse_show_runtime(RUNTIME[:len(RUNTIME) // 2].rsplit("\n", 1)[0] + "\nunix-ep")


def test_session_counts_of_every_form_and_garbage():
    verbose = ("Connection                                        State          Rx-f      Tx-f\n"
               "[0:0][T] 198.18.1.1:5201->0.0.0.0:0               LISTEN         0         0\n"
               "Thread 0: active sessions 1\n"
               "Thread 1: 60 sessions. Verbose output suppressed. For more details use "
               "filters.\n")
    assert parse_session_counts(verbose) == {"0": 1, "1": 60}
    assert len(parse_show_session_verbose(verbose)) == 1  # past 50 sessions: no rows
    with pytest.raises(ParseError, match="show session"):
        parse_session_counts("clib_socket_init: connect (fd 3, '/run/vpp/cli.sock'): refused")
