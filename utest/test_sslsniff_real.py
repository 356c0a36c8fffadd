"""sslsniff (bpftrace) for real: nginx HTTPS on 127.0.0.1, wrk load, uprobes on libssl.

Needs root, bpftrace, bpftool, nginx and wrk (Debian packages); skips naming what is missing.
Every process is started through ``LocalNode`` and stopped by a finalizer; each test also
checks that no uprobe stays attached once its tracer is gone.
"""

from __future__ import annotations

import http.client
import os
import re
import shutil
import signal
import ssl
import subprocess
import sys
import time
from pathlib import Path

import pytest

from libraries.testbed.errors import ParseError
from libraries.tools.certs import make_run_certificates, write_cert_key
from libraries.tools.content import content_file_command
from libraries.tools.nginx.config import HttpsServerParams, NginxInstance
from libraries.tools.sslsniff.kernel import (
    KernelTracer,
    RunningTracer,
    detect_kernel_tracer,
    group_pids,
    interrupt_bpftrace,
    start_sslsniff,
    stop_sslsniff,
    uprobe_leftovers,
)
from libraries.tools.sslsniff.tracer import (
    DEFAULT_LIBSSL,
    SslsniffParams,
    TracerError,
    check_attachment,
)
from libraries.tools.wrk.run import WrkOptions, run_wrk
from utest.localnode import LocalNode, free_port, wait_for_port

MISSING = [tool for tool in ("bpftrace", "bpftool", "nginx", "wrk") if shutil.which(tool) is None]
pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="bpftrace uprobes need root"),
    pytest.mark.skipif(bool(MISSING), reason=f"not installed: {', '.join(MISSING)}"),
]
CONNECTIONS = 10


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    return LocalNode(workdir=str(tmp_path_factory.mktemp("sslsniff")))


@pytest.fixture(scope="module")
def tracer(node):
    return detect_kernel_tracer(node)


@pytest.fixture(scope="module")
def nginx(node, tmp_path_factory):
    """nginx HTTPS (1 KiB file) on 127.0.0.1; yields (url, pids of master and workers)."""
    base = tmp_path_factory.mktemp("nginx")
    certs = make_run_certificates(["127.0.0.1"], ["proxy.test"])
    files = write_cert_key(certs.server, base, "server")
    node.run(content_file_command(f"{base}/www/1kb", "1kb"))
    port = free_port()
    (base / "prefix").mkdir()
    params = HttpsServerParams(
        instance=NginxInstance(prefix=str(base / "prefix"), user="root"),
        cert_path=files.cert_path, key_path=files.key_path, listen_port=port,
        listen_address="127.0.0.1", root_dir=f"{base}/www",
    )
    config = base / "nginx.conf"
    config.write_text(params.render())
    process = node.start(f"nginx -c {config} -p {base}/prefix", name="nginx")
    try:
        wait_for_port(port)
        pids: list[int] = []
        for _ in range(50):  # the workers appear just after the listener
            pids = sorted(group_pids(node, process.pid))
            if len(pids) >= 2:
                break
            time.sleep(0.1)
        assert process.pid in pids  # the master leads the group
        yield f"https://127.0.0.1:{port}/1kb", pids
    finally:
        node.stop(process)


@pytest.fixture
def tracers(node):
    """Start tracers through this; every one is stopped at teardown, then nothing may stay
    attached."""
    started = []

    def start(params: SslsniffParams, tracer, **kwargs):
        running = start_sslsniff(node, params, tracer, **kwargs)
        started.append(running)
        return running

    yield start
    for running in started:
        node.stop(running.process)
    # each tracer's own probes (its footprint): CI's e2e job, running beside the unit tests
    # (tox p), traces libssl too, and its probes are not this test's leftovers
    for running in started:
        assert uprobe_leftovers(node, footprint=running.footprint) == []


def load(node, url: str, seconds: int = 2):
    options = WrkOptions(url=url, threads=1, connections=CONNECTIONS, duration=seconds)
    return run_wrk(node, "wrk", options)


def test_count_only_tracer_sees_nginx_only_two_events_per_request(node, tracer, nginx,
                                                                  tracers):
    url, pids = nginx
    running = tracers(SslsniffParams(pids=tuple(pids), per_event=False), tracer)
    wrk = load(node, url)
    result = stop_sslsniff(node, running)
    assert wrk.total_requests > 100
    check_attachment(result, pids)  # events > 0, all from nginx
    assert "wrk" not in result.events_per_comm
    assert set(result.events_per_comm) == {"nginx"}
    # one SSL_read + one SSL_write per request; in-flight requests at the end add a few
    assert 2 * wrk.total_requests <= result.total_events
    assert result.total_events <= 2 * (wrk.total_requests + CONNECTIONS)
    assert result.lost_events == 0
    assert uprobe_leftovers(node, footprint=running.footprint) == []


def test_per_event_tracer_prints_or_reports_lost_every_event(node, tracer, nginx, tracers):
    url, pids = nginx
    running = tracers(SslsniffParams(pids=tuple(pids)), tracer)
    wrk = load(node, url)
    result = stop_sslsniff(node, running)
    check_attachment(result, pids)
    assert 1.9 * wrk.total_requests <= result.total_events
    assert result.total_events <= 2 * (wrk.total_requests + CONNECTIONS)
    # every counted event was printed or reported lost, except the few still in the perf
    # buffer when bpftrace stopped reading it at exit
    accounted = result.printed_events + result.lost_events
    assert 0.99 * result.total_events <= accounted <= result.total_events
    assert uprobe_leftovers(node, footprint=running.footprint) == []


def test_unfiltered_tracer_also_counts_wrk_and_the_proof_names_it(node, tracer, nginx,
                                                                  tracers):
    url, pids = nginx
    running = tracers(SslsniffParams(all_processes=True, per_event=False), tracer)
    load(node, url, seconds=1)
    result = stop_sslsniff(node, running)
    assert result.events_per_comm.get("wrk", 0) > 0
    with pytest.raises(TracerError, match=r"events came from other processes: .*wrk \(pid"):
        check_attachment(result, pids)


def test_idle_tracer_attached_nothing(node, tracer, nginx, tracers):
    _, pids = nginx
    running = tracers(SslsniffParams(pids=tuple(pids)), tracer)
    time.sleep(0.5)
    result = stop_sslsniff(node, running)
    with pytest.raises(TracerError, match="attached nothing"):
        check_attachment(result, pids)


DEAF_TRACER = """
import signal, sys, time
received = []
def on_term(signum, frame):
    received.append(signum)
    if len(received) == 2:  # the first one is missed, as bpftrace 0.17 may miss it
        print("=== sslsniff summary ===\\n\\n=== sslsniff end ===", flush=True)
        sys.exit(0)
signal.signal(signal.SIGTERM, on_term)
print("Attaching 6 probes...\\nFUNC         TIME(s)            COMM             PID     LEN",
      flush=True)
while True:
    time.sleep(0.1)
"""


def test_a_tracer_that_missed_sigterm_is_sent_it_again_and_prints_its_summary(node, tmp_path):
    """bpftrace before 0.19 reads its exit flag only when epoll_wait is interrupted: idle, it
    can miss a SIGTERM until SIGKILL and lose its summary (seen once in CI). A stand-in that
    misses the first SIGTERM must still stop with its summary, on the second."""
    script = tmp_path / "deaf.py"
    script.write_text(DEAF_TRACER)
    process = node.start(f"{sys.executable} {script}", name="deaf")
    try:
        deadline = time.monotonic() + 10
        while "FUNC" not in Path(process.log_path).read_text():
            assert time.monotonic() < deadline, "the stand-in tracer did not start"
            time.sleep(0.05)
        tracer = KernelTracer("bpftrace", "/usr/bin/bpftrace", "v0.17.0", None, ())
        running = RunningTracer(process, tracer, str(script), DEFAULT_LIBSSL,
                                SslsniffParams(pids=(process.pid,)))
        assert interrupt_bpftrace(node, process, grace=5) >= 1  # more only when slow
        assert not node._group_alive(process.pid)  # gone on the second SIGTERM, not killed
        assert stop_sslsniff(node, running).total_events == 0  # its summary is whole
    finally:
        if node._group_alive(process.pid):  # a failed check leaves nothing running
            os.killpg(process.pid, signal.SIGKILL)


def wait_until_idle(pids: list[int], timeout: float = 5.0) -> None:
    """Wait until nginx's workers sleep in epoll_wait again (its master in sigsuspend). The
    client holds the whole response as soon as nginx's write() syscall delivered it, but
    SSL_write's uretprobe fires only when nginx returns to user space after it: stopping the
    tracer in between (2 of 15 runs on the 2-core VM) misses the last SSL_write."""
    deadline = time.monotonic() + timeout
    while True:
        channels = []
        for pid in pids:
            with open(f"/proc/{pid}/wchan") as stream:
                channels.append(stream.read())
        if all("epoll" in channel or "sigsuspend" in channel for channel in channels):
            return
        assert time.monotonic() < deadline, f"nginx not idle after {timeout} s: {channels}"
        time.sleep(0.01)


def test_data_mode_shows_the_http_exchange(node, tracer, nginx, tracers):
    url, pids = nginx
    running = tracers(SslsniffParams(pids=tuple(pids), show_data=True, data_bytes=200),
                      tracer)
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    host_port = url.split("/")[2]
    for _ in range(3):
        conn = http.client.HTTPSConnection(host_port, context=context, timeout=5)
        conn.request("GET", "/1kb")
        assert len(conn.getresponse().read()) == 1024
        conn.close()
    wait_until_idle(pids)
    result = stop_sslsniff(node, running)
    log = node.run(f"cat {running.process.log_path}").stdout
    # this test's own python also calls libssl; the PID filter keeps it out
    assert result.events_per_function == {"READ/RECV": 3, "WRITE/SEND": 3}
    assert "GET /1kb HTTP/1.1" in log
    assert "Content-Length: 1024" in log  # beyond bpftrace's default 64-byte strings


def test_missing_library_fails_with_the_tracer_log(node, tracer, nginx, tracers):
    _, pids = nginx
    params = SslsniffParams(library="/usr/lib/x86_64-linux-gnu/libssl-none.so.3",
                            pids=tuple(pids))
    with pytest.raises(TracerError) as caught:
        tracers(params, tracer, attach_timeout=10)
    # the reason, not bpftrace's start-up notice (RLIMIT_MEMLOCK), whatever the timing
    assert re.search(r"(?s)exited before attaching.*its output:.*does not exist",
                     str(caught.value)), str(caught.value)
    assert "couldn't set RLIMIT_MEMLOCK" not in str(caught.value)


def test_killed_tracer_leaves_no_uprobe_behind(node, tracer, nginx, tracers):
    _, pids = nginx
    running = tracers(SslsniffParams(pids=tuple(pids)), tracer)
    os.killpg(running.process.pid, signal.SIGKILL)
    running.process.popen.wait(timeout=10)
    # the kernel detaches a killed tracer's probes
    assert uprobe_leftovers(node, footprint=running.footprint) == []
    # and its output, cut before the summary, is refused rather than read as zero
    with pytest.raises(ParseError, match="cut off before printing its maps"):
        stop_sslsniff(node, running)


def test_leftover_check_sees_a_running_tracer(node, tracer, nginx, tracers):
    _, pids = nginx
    running = tracers(SslsniffParams(pids=tuple(pids), per_event=False), tracer)
    attached = uprobe_leftovers(node, settle=0)
    assert len([line for line in attached if f"pid {running.process.pid} " in line]) == 4
    stop_sslsniff(node, running)
    assert uprobe_leftovers(node, footprint=running.footprint) == []
    assert subprocess.run(["mountpoint", "-q", "/sys/kernel/tracing"]).returncode == 0
