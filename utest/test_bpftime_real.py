"""The seed's sslsniff program for real, in the kernel and under bpftime: nginx HTTPS on
127.0.0.1, wrk load.

Needs root, nginx, wrk, bpftool and the programs the local topologies declare
(``/opt/bpftime/example/sslsniff``, ``/opt/bpftime/bin/bpftime``: built from source, not
packaged); skips naming what is missing. Every process is started through ``LocalNode`` and
stopped; each test checks that nothing stays behind (uprobes; bpftime's shared memory, log and
agent).
"""

from __future__ import annotations

import os
import shutil
import signal
import time
import uuid
from pathlib import Path

import pytest

from libraries.testbed.errors import ParseError
from libraries.tools.bpftime import BpftimeSetup, bpftime_state, detect_bpftime
from libraries.tools.certs import make_run_certificates, write_cert_key
from libraries.tools.content import content_file_command
from libraries.tools.nginx.config import HttpsServerParams, NginxInstance
from libraries.tools.sslsniff.kernel import group_pids, uprobe_leftovers
from libraries.tools.sslsniff.seed import (
    SeedSslsniff,
    detect_seed_sslsniff,
    nginx_worker,
    start_kernel_sslsniff,
    stop_kernel_sslsniff,
)
from libraries.tools.sslsniff.tracer import TracerError, check_attachment
from libraries.tools.sslsniff.userspace import TracedNginx, run_bpftime_trial
from libraries.tools.wrk.run import WrkOptions, run_wrk
from utest.localnode import LocalNode, free_port, wait_for_port

SSLSNIFF = "/opt/bpftime/example/sslsniff"
BPFTIME = "/opt/bpftime/bin/bpftime"
MISSING = [tool for tool in ("nginx", "wrk", "bpftool") if shutil.which(tool) is None]
pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="uprobes and bpftime's agent need root"),
    pytest.mark.skipif(bool(MISSING), reason=f"not installed: {', '.join(MISSING)}"),
    pytest.mark.skipif(not os.access(SSLSNIFF, os.X_OK),
                       reason=f"{SSLSNIFF} missing (bpftime's sslsniff example, built from "
                              "source)"),
]
needs_bpftime = pytest.mark.skipif(not os.access(BPFTIME, os.X_OK),
                                   reason=f"{BPFTIME} missing (not packaged)")


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    return LocalNode(workdir=str(tmp_path_factory.mktemp("seed-sslsniff")))


def https_config(base: Path, prefix: Path, port: int) -> Path:
    certs = make_run_certificates(["127.0.0.1"], ["proxy.test"])
    files = write_cert_key(certs.server, base, "server")
    prefix.mkdir()
    params = HttpsServerParams(
        instance=NginxInstance(prefix=str(prefix), user="root"),
        cert_path=files.cert_path, key_path=files.key_path, listen_port=port,
        listen_address="127.0.0.1", root_dir=f"{base}/www",
    )
    config = base / f"{prefix.name}.conf"
    config.write_text(params.render())
    return config


@pytest.fixture(scope="module")
def nginx(node, tmp_path_factory):
    """nginx HTTPS (1 KiB file) on 127.0.0.1; yields (base dir, port, master pid, worker pid)."""
    base = tmp_path_factory.mktemp("nginx")
    node.run(content_file_command(f"{base}/www/1kb", "1kb"))
    port = free_port()
    config = https_config(base, base / "prefix", port)
    process = node.start(f"nginx -c {config} -p {base}/prefix", name="nginx")
    try:
        wait_for_port(port)
        pids: list[int] = []
        for _ in range(50):  # the worker appears just after the listener
            pids = sorted(group_pids(node, process.pid))
            if len(pids) >= 2:
                break
            time.sleep(0.1)
        yield base, port, process.pid, nginx_worker(pids, process.pid)
    finally:
        node.stop(process)


def load(node, port: int, seconds: int = 2):
    options = WrkOptions(url=f"https://127.0.0.1:{port}/1kb", threads=1, connections=10,
                         duration=seconds)
    return run_wrk(node, "wrk", options)


# ---------------------------------------------------------------------------- kernel
def test_kernel_mode_traces_the_worker_two_events_per_request_and_detaches(node, nginx):
    _, port, master, worker = nginx
    tracer = detect_seed_sslsniff(node, SSLSNIFF)
    running = start_kernel_sslsniff(node, SeedSslsniff(binary=SSLSNIFF, pid=worker), tracer)
    try:
        group = group_pids(node, running.process.pid)
        attached = [line for line in uprobe_leftovers(node, settle=0)
                    if line.startswith("bpftool perf: pid ") and int(line.split()[3]) in group]
        assert len(attached) == 4  # SSL_read and SSL_write, entry and return
        wrk = load(node, port)
    finally:
        seen = stop_kernel_sslsniff(node, running)
    check_attachment(seen, [master, worker])
    assert set(seen.events_per_pid) == {worker}
    fired = seen.total_events + seen.lost_events
    assert 2 * wrk.total_requests <= fired <= 2 * (wrk.total_requests + 10)
    assert uprobe_leftovers(node) == []


def test_kernel_mode_given_a_dead_pid_fails_fast_naming_libbpf_error(node, nginx):
    tracer = detect_seed_sslsniff(node, SSLSNIFF)
    gone = node.start("true", name="short-lived")
    gone.popen.wait(timeout=10)
    started = time.monotonic()
    with pytest.raises(TracerError, match=r"(?s)a probe did not attach.*-ESRCH"):
        start_kernel_sslsniff(node, SeedSslsniff(binary=SSLSNIFF, pid=gone.pid), tracer)
    assert time.monotonic() - started < 15  # not the 30 s attach timeout
    assert uprobe_leftovers(node) == []


def test_killed_program_leaves_no_uprobe_and_its_cut_output_is_refused(node, nginx):
    _, _, _, worker = nginx
    tracer = detect_seed_sslsniff(node, SSLSNIFF)
    running = start_kernel_sslsniff(node, SeedSslsniff(binary=SSLSNIFF, pid=worker), tracer)
    os.killpg(running.process.pid, signal.SIGKILL)
    running.process.popen.wait(timeout=10)
    assert uprobe_leftovers(node) == []
    with pytest.raises(ParseError, match="cut off before printing its maps"):
        stop_kernel_sslsniff(node, running)


# ---------------------------------------------------------------------------- bpftime
@pytest.fixture
def traced_nginx(nginx, tmp_path):
    base, _, _, _ = nginx
    port = free_port()
    config = https_config(base, tmp_path / f"bpftime-{port}", port)
    return TracedNginx(binary=shutil.which("nginx"), config=str(config),
                       prefix=f"{tmp_path}/bpftime-{port}/", port=port,
                       error_log=f"{tmp_path}/bpftime-{port}/error.log")


@needs_bpftime
def test_bpftime_traces_nginx_only_and_leaves_nothing(node, traced_nginx):
    detected = detect_bpftime(node, BpftimeSetup(binary=BPFTIME, sslsniff=SSLSNIFF,
                                                 env={"BPFTIME_VM_NAME": "ubpf"}))
    assert detected.version.startswith("1.0 sha256:")
    setup = detected.setup  # with the folder of its libraries (bpftime -i)
    shm = f"hoststack_utest_{uuid.uuid4().hex[:8]}"
    before = bpftime_state(node, shm)
    trial = run_bpftime_trial(node, setup, SeedSslsniff(binary=SSLSNIFF), traced_nginx,
                              lambda: load(node, traced_nginx.port), shm)
    assert len(trial.nginx_pids) == 2  # master and worker, not the bpftime CLI
    check_attachment(trial.seen, trial.nginx_pids)  # checked inside too
    assert "wrk" not in trial.seen.events_per_comm  # same libssl file, no agent in wrk
    # bpftime drops records silently when its buffer is full: at most 2 per request
    requests = trial.result.total_requests
    assert 1.5 * requests <= trial.seen.total_events <= 2 * (requests + 10)
    after = bpftime_state(node, shm)
    assert not after.shm and after.injected == before.injected
    assert after.runtime_log_bytes == before.runtime_log_bytes
    assert "Attach successfully" in (Path(node.workdir) / "bpftime-runtime.log").read_text()


@needs_bpftime
def test_bpftime_loader_without_the_vm_name_attaches_nothing_and_says_why(node, traced_nginx):
    setup = detect_bpftime(node, BpftimeSetup(binary=BPFTIME, sslsniff=SSLSNIFF)).setup
    # no BPFTIME_VM_NAME
    shm = f"hoststack_utest_{uuid.uuid4().hex[:8]}"
    try:
        run_bpftime_trial(node, setup, SeedSslsniff(binary=SSLSNIFF), traced_nginx,
                          lambda: load(node, traced_nginx.port, seconds=1), shm)
    except TracerError as error:
        assert "attached nothing" in str(error)
        assert "No VM factory registered for name: llvm" in str(error)
    else:
        pytest.skip(f"{BPFTIME} has its LLVM JIT: it attaches without BPFTIME_VM_NAME")
    after = bpftime_state(node, shm)
    assert not after.shm and not any("nginx" in p for p in after.injected)


@needs_bpftime
def test_bpftime_refuses_to_run_beside_a_kernel_uprobe_on_the_same_library(node, nginx,
                                                                         traced_nginx):
    # a kernel uprobe puts an int3 in libssl; bpftime's hook relocates it and nginx's workers
    # die of SIGTRAP (seen here: 154 workers in 2 s, 0 requests served)
    _, _, _, worker = nginx
    tracer = detect_seed_sslsniff(node, SSLSNIFF)
    running = start_kernel_sslsniff(node, SeedSslsniff(binary=SSLSNIFF, pid=worker), tracer)
    try:
        setup = detect_bpftime(node, BpftimeSetup(binary=BPFTIME, sslsniff=SSLSNIFF,
                                                  env={"BPFTIME_VM_NAME": "ubpf"})).setup
        with pytest.raises(TracerError, match=r"kernel uprobes on .*libssl.so.3 are attached "
                                              r"\(another tracer: pids \[\d+\]\).*SIGTRAP"):
            run_bpftime_trial(node, setup, SeedSslsniff(binary=SSLSNIFF), traced_nginx,
                              lambda: pytest.fail("must not run"), "hoststack_utest_refused")
    finally:
        stop_kernel_sslsniff(node, running)
    assert uprobe_leftovers(node) == []
