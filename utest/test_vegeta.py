"""vegeta: command line, strict parser of its reports (real outputs captured here), and real
runs against nginx on loopback, among them the reason an open-loop generator is needed: a
server stall shows in the latency of every request scheduled during it (no coordinated
omission).

Fixtures in utest/fixtures/vegeta/ (vegeta v12.13.0 against nginx 1.22 HTTPS, 1 KiB file, this
project's VM, printed by vegeta_command's command): ``ok.txt`` (2000 req/s for 2 s),
``refused.txt`` (nothing listening).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from libraries.testbed.command import TIMES_MARKER, Ledger, NodeCommand
from libraries.testbed.errors import ParseError, ToolMissing
from libraries.tools.open_loop import temporary_folder
from libraries.tools.vegeta import (
    PLOT_MARKER,
    SLO_MARKER,
    VegetaOptions,
    parse_vegeta_output,
    run_vegeta,
    vegeta_command,
    vegeta_version,
)
from utest.localnode import LocalNode, free_port, wait_for_port
from utest.test_wrk import NGINX_CONF

FIXTURES = Path(__file__).parent / "fixtures" / "vegeta"
VEGETA = "/opt/hoststack-perf/bin/vegeta"

needs_vegeta = pytest.mark.skipif(not os.access(VEGETA, os.X_OK),
                                  reason=f"{VEGETA} missing (./setup.sh installs it)")


def test_a_real_report_parses_with_its_percentiles():
    result = parse_vegeta_output((FIXTURES / "ok.txt").read_text())
    assert result.requests == 4000 and result.success == 1.0 and result.failed == 0
    assert result.status_codes == {"200": 4000}
    assert result.attack_cpu_s == pytest.approx(0.26)  # the shell's times: 0.18 + 0.08 s
    assert result.duration_s == pytest.approx(2.0, abs=0.01)
    assert result.achieved == pytest.approx(2000, rel=0.01)
    p = result.percentiles
    assert 0 < p[0.5] <= p[0.9] <= p[0.99] <= p[0.999] < 1.0


def test_refused_connections_are_failed_requests_with_vegetas_error():
    result = parse_vegeta_output((FIXTURES / "refused.txt").read_text())
    assert result.success == 0.0 and result.failed == result.requests > 0
    assert any("connection refused" in error for error in result.errors)
    assert result.achieved == 0.0


def test_a_report_without_the_cpu_section_has_no_cpu_figure():
    text = (FIXTURES / "ok.txt").read_text().split("\n", 3)[3]
    assert parse_vegeta_output(text).attack_cpu_s is None


@pytest.mark.parametrize("garbage", [
    "", "not json\n" + PLOT_MARKER + "\n", '{"latencies": {}}',
    TIMES_MARKER + "\nnot times\n{}\n" + PLOT_MARKER + "\n",
    '{"latencies": {"50th": 1}, "requests": 0}\n' + PLOT_MARKER + "\n1 0.5 1 2\n",
    (FIXTURES / "ok.txt").read_text().replace("Value(ms)", "Value(ms)\nnot a row"),
])
def test_garbage_is_a_parse_error_quoting_it(garbage):
    with pytest.raises(ParseError, match="output was"):
        parse_vegeta_output(garbage, "vegeta test")


def test_the_command_pins_quotes_and_cleans_up():
    options = VegetaOptions(url="https://198.18.1.1:8089/1kb", rate=5000, duration=3,
                            cpus=[1], max_workers=200)
    command = vegeta_command("/opt/x y/vegeta", options, "/tmp/run").script
    assert command.startswith("d=; trap '[ -n \"$d\" ] && rm -rf \"$d\"' EXIT; trap 'exit 143' "
                              "TERM INT HUP; n=$(mktemp -u /tmp/run/vegeta.XXXXXX) || exit 1; "
                              "d=$n; mkdir -m 700 \"$d\" || exit 1; "
                              "printf '%s\\n' "
                              "'GET https://198.18.1.1:8089/1kb' > \"$d/targets\"; "
                              "taskset -c 1 '/opt/x y/vegeta' attack -name=g0 -rate=5000/1s ")
    assert "-max-workers=200" in command and "-insecure" in command
    assert "-max-body=0" in command and "encode" not in command  # no limits: no counting
    assert command.endswith("exit $rc")


def test_the_command_is_a_script_value_with_its_ledger_and_timeout():
    options = VegetaOptions(url="https://198.18.1.1:8089/1kb", rate=5000, duration=4, cpus=[1])
    value = vegeta_command("vegeta", options, "/tmp/run", cpu_ledger="/w/cpu-ledger")
    assert value == NodeCommand.shell(value.script, 4 + options.timeout + 15.0,
                                      ledger=Ledger("/w/cpu-ledger", "vegeta"))
    assert value.line().startswith("mkdir -p /w/cpu-ledger; (d=; trap")
    assert vegeta_command("vegeta", options, "/tmp/run").ledger is None


@pytest.mark.parametrize("killer", ["mktemp", "mkdir"])
def test_a_term_while_the_folder_is_made_leaves_no_folder(tmp_path, killer):
    """CI, a loaded machine: the timeout's TERM reached ``mktemp -d`` after it made the
    folder and before it printed the name, and the folder stayed. Here the named tool does
    its work, then the shell gets its TERM and the tool dies without printing."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    real = shutil.which(killer)
    (bin_dir / killer).write_text(f'#!/bin/sh\nout=$({real} "$@") || exit; kill -TERM $PPID; '
                                  "sleep 0.2; exit 143\n")
    (bin_dir / killer).chmod(0o755)
    work = tmp_path / "work"
    work.mkdir()
    lines = [*temporary_folder(str(work), "vegeta"), "sleep 5"]
    result = subprocess.run(["sh", "-c", "; ".join(lines)], timeout=10, capture_output=True,
                            env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"})
    assert result.returncode == 143
    assert list(work.iterdir()) == []


@pytest.mark.integration
@needs_vegeta
def test_a_run_killed_by_its_timeout_leaves_no_files(nginx, tmp_path):
    """Issue 34: a vegeta timeout left its temporary folder in the work folder."""
    node, port, _ = nginx
    command = vegeta_command(VEGETA, VegetaOptions(
        url=f"https://127.0.0.1:{port}/1kb", rate=100, duration=20), str(tmp_path)).script
    # as testbed.node.Node runs it on a node: `timeout -k 2 N sh -c ...` (TERM, then KILL)
    rendered = NodeCommand.shell(command, 2).rendered()
    result = node.run(rendered, timeout=15, check=False)
    assert result.exit_code == 124  # timed out
    assert list(tmp_path.glob("vegeta.*")) == []


def test_one_attack_per_load_cpu_shares_the_rate_and_the_counts_read_every_file():
    options = VegetaOptions(url="https://198.18.1.1:8089/1kb", rate=9001, duration=0.5,
                            cpus=[1, 2, 3], max_workers=300, max_connections=10,
                            slo_ms=(10.0, 1.0))
    command = vegeta_command("vegeta", options, "/tmp/run").script
    for cpu in range(3):
        assert (f"taskset -c {cpu + 1} vegeta attack -name=g{cpu} -rate=9001/3s "
                f"-duration=0.5s") in command
        assert f'-output="$d/{cpu}.bin" & p{cpu}=$!' in command
    assert command.count("-max-workers=100 -max-connections=4") == 3
    assert "wait $p0 || rc=$?; wait $p1 || rc=$?; wait $p2 || rc=$?" in command
    assert f"-v lim='10000000 1000000' -v iv={3e9 / 9001:.3f}" in command
    assert options.processes == 3 and options.intended == 4500


def _with_counts(line: str) -> str:
    return (FIXTURES / "ok.txt").read_text() + line + "\n"


def test_the_per_request_counts_are_read_for_every_limit():
    text = _with_counts(f"{SLO_MARKER} rows=4000 failed=2 late_max_ns=1250000 over=17,900")
    result = parse_vegeta_output(text, slo_ms=(10.0, 1.0), processes=2)
    assert (result.failed_rows, result.over, result.processes) == (2, (17, 900), 2)
    assert result.over_limit(10.0) == 17 and result.over_limit(1.0) == 900
    assert result.max_late_s == pytest.approx(0.00125)
    with pytest.raises(KeyError, match="no count for 5 ms"):
        result.over_limit(5.0)


@pytest.mark.parametrize("line", ["", f"{SLO_MARKER} rows=4000 failed=0 late_max_ns=0 over=17",
                                  f"{SLO_MARKER} rows=x failed=0 late_max_ns=0 over=1,2"])
def test_missing_or_short_counts_are_a_parse_error(line):
    with pytest.raises(ParseError, match="output was"):
        parse_vegeta_output(_with_counts(line), slo_ms=(10.0, 1.0))


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"url": "ftp://x/"}, "url: expected an http"), ({"rate": 0}, "rate: expected a positive"),
    ({"duration": -1}, "duration: expected a positive"),
])
def test_bad_options_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        VegetaOptions(**{"url": "https://127.0.0.1/", "rate": 10, "duration": 1, **kwargs})


def test_a_missing_binary_is_tool_missing(tmp_path):
    with pytest.raises(ToolMissing, match="vegeta not installed on local: /no/vegeta missing"):
        vegeta_version(LocalNode(workdir=str(tmp_path)), "/no/vegeta")


# -- real runs --------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def nginx(tmp_path_factory):
    """A real nginx on 127.0.0.1 (HTTPS, self-signed, a 1 KiB file), as in test_wrk."""
    for tool in ("nginx", "openssl"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed on this machine")
    workdir = tmp_path_factory.mktemp("nginx")
    (workdir / "www").mkdir()
    (workdir / "www" / "1kb").write_bytes(bytes(range(256)) * 4)
    subprocess.run(["openssl", "req", "-x509", "-nodes", "-days", "1", "-newkey", "rsa:2048",
                    "-keyout", str(workdir / "server.key"), "-out", str(workdir / "server.crt"),
                    "-subj", "/CN=localhost"], check=True, capture_output=True)
    http, https = free_port(), free_port()
    (workdir / "nginx.conf").write_text(NGINX_CONF.format(d=workdir, http=http, https=https))
    node = LocalNode(workdir=str(workdir))
    process = node.start(f"nginx -c {workdir}/nginx.conf -p {workdir}", name="nginx")
    try:
        wait_for_port(https)
        yield node, https, workdir
    finally:
        node.stop(process)


@pytest.mark.integration
@needs_vegeta
def test_a_real_run_offers_the_rate_and_reads_its_version(nginx):
    node, port, _ = nginx
    result = run_vegeta(node, VEGETA, VegetaOptions(url=f"https://127.0.0.1:{port}/1kb",
                                                    rate=1000, duration=2))
    assert result.failed == 0 and result.requests == pytest.approx(2000, rel=0.02)
    assert result.achieved == pytest.approx(1000, rel=0.02)
    assert re.fullmatch(r"v\d+\.\d+\.\d+", vegeta_version(node, VEGETA))


def _stall(workdir: Path, after: float, seconds: float) -> threading.Thread:
    """SIGSTOP nginx's worker ``after`` s from now, for ``seconds``."""
    def run() -> None:
        time.sleep(after)
        master = int((workdir / "nginx.pid").read_text())
        workers = [int(p) for p in subprocess.run(["pgrep", "-P", str(master)],
                                                  capture_output=True, text=True).stdout.split()]
        for pid in workers:
            os.kill(pid, signal.SIGSTOP)
        time.sleep(seconds)
        for pid in workers:
            os.kill(pid, signal.SIGCONT)
    thread = threading.Thread(target=run)
    thread.start()
    return thread


@pytest.mark.integration
@needs_vegeta
def test_a_stall_shows_as_the_latency_of_the_requests_scheduled_during_it(nginx):
    """Latency correctness, the reason an open-loop generator is needed: nginx stopped for
    0.5 s in a 4 s run at 2000 req/s. The ~1000 requests scheduled inside the stall (12.5 %)
    wait from their scheduled time until it ends, so about 1 % wait more than 0.46 s and 10 %
    more than 0.1 s (more with the backlog's drain after it). A generator that timed requests
    from when it got around to sending them would report far less (coordinated omission):
    p90 and p99 of a few ms, which the lower bounds catch. Measured here: p90 0.15-0.20 s, p99
    0.46-0.49 s, p99.9 0.50 s; with two CPU burners and a robot run beside it p90 0.16-0.35 s
    (the backlog drains slower), p99 0.47-0.51 s; on a slower VM beside a nice-19 build and
    another test worker, p50 0.11 s (the drain reached half of the requests).

    The upper bounds leave room for a slow drain on a busy machine (beside CI's e2e job, which
    tox p runs at the same time, and a build: p50 0.40 s) and still catch latency timed from
    the wrong origin (from the run's start: p50 about 2 s, p90 over 3 s)."""
    node, port, workdir = nginx
    url = f"https://127.0.0.1:{port}/1kb"
    stall = _stall(workdir, 1.5, 0.5)
    result = run_vegeta(node, VEGETA, VegetaOptions(url=url, rate=2000, duration=4))
    stall.join()
    assert result.failed == 0 and result.requests == pytest.approx(8000, rel=0.01)
    p = result.percentiles
    assert p[0.5] < 1.0  # half the requests waited less than the stall and its drain
    assert 0.08 < p[0.9] < 1.5  # ~10 % waited 0.1 s or more
    assert 0.4 < p[0.99] < 2.0  # ~1 % waited most of the 0.5 s


@pytest.mark.integration
@needs_vegeta
def test_a_stall_is_counted_per_request_from_the_schedule_by_two_attack_processes(nginx):
    """The same stall, counted as the capacity search counts: two attack processes (one per
    CPU) at 1000 req/s each; the requests scheduled inside the 0.5 s stall (~1000 of 8000) wait
    for its end, so about 12 % are later than 10 ms and ~2.5 % (those of its first 0.1 s)
    later than 400 ms, plus the backlog's drain after it.

    20 workers per process, as a capacity trial's workers all hang on a stalled path: the
    generator falls behind its schedule during the stall, and only lateness counted from the
    schedule shows the stall. Counted from the send time instead (coordinated omission), the
    stall adds a handful: only the requests in flight when it began wait it out (measured
    with the count so broken: 46 -> 105 and 29 -> 135 over 10 ms, 0 -> 40 over 400 ms), far
    below the lower bounds. With vegeta's default 2000 workers the requests are sent on time
    and wait at the server, which a send-time count sees as well (1231 over 10 ms): that tests
    nothing of the schedule.

    The stall's effect is what the stalled run counts beyond a quiet run of the same load on
    the same machine: a busy machine makes requests late in both (quiet up to 1618 of 8000
    over 10 ms with two CPU burners and the other unit worker beside it, none over 400 ms),
    so the difference over 400 ms is the stall's (225-295, ~3 %); over 10 ms the stalled run
    counts at least those and the stall's ~12 %.
    A wrong schedule (one process's interval not scaled by the process count) makes nearly
    every request late, quiet or not (7969 of 8000), past the upper bounds and the quiet
    run's."""
    node, port, workdir = nginx
    url = f"https://127.0.0.1:{port}/1kb"
    options = VegetaOptions(url=url, rate=2000, duration=4, cpus=[0, 1], max_workers=40,
                            slo_ms=(10.0, 400.0))
    quiet = run_vegeta(node, VEGETA, options)
    assert quiet.processes == 2 and quiet.failed == quiet.failed_rows == 0
    assert quiet.requests == pytest.approx(8000, rel=0.01)
    stall = _stall(workdir, 1.5, 0.5)
    stalled = run_vegeta(node, VEGETA, options)
    stall.join()
    assert stalled.failed == 0 and stalled.requests == pytest.approx(8000, rel=0.01)
    added = {limit: stalled.over_limit(limit) - quiet.over_limit(limit)
             for limit in (10.0, 400.0)}
    shown = f"quiet {quiet.over}, stalled {stalled.over} of {stalled.requests} (10, 400 ms)"
    requests = stalled.requests
    # 400 ms is the stall's own signature: no busy machine made a request that late
    assert 0.01 < added[400.0] / requests < 0.1, shown
    assert quiet.over_limit(400.0) < added[400.0] / 2, shown
    # over 10 ms: every request 400 ms late, and the stall's ~12 %, whatever else was late
    # (a busy quiet run had up to 20 % over 10 ms, 1618 of 8000, and 56 %, 4472, on a machine
    # running CI beside five other jobs, which the stall's requests partly were already); a
    # wrong schedule makes nearly all late (7969 of 8000), in the quiet run too
    assert stalled.over_limit(10.0) >= max(stalled.over_limit(400.0), 0.05 * requests), shown
    assert quiet.over_limit(10.0) < 0.9 * requests and \
        stalled.over_limit(10.0) < 0.95 * requests, shown
