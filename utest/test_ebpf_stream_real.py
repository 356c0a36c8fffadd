"""The real nginx stream eBPF module on loopback: engagement proven, fallback caught, nothing
left behind.

Needs an nginx built with mrpre/nginx-stream-ebpf-module at /opt/nginx-ebpf/sbin/nginx
(built outside the project), bpftool, iperf3 and root; skips with the reason otherwise.
iperf3 server and nginx listen on 127.0.0.1 high ports; runs are 3 s; every process started
is stopped by a finalizer, the BPF statistics' holder too; kernel.bpf_stats_enabled is never
touched.
"""

from __future__ import annotations

import os
import shlex
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from libraries.testbed.errors import HostStackError
from libraries.tools.ebpf_stream.bpf_stats import bpf_stats_enabled, read_bpf_stats_setting
from libraries.tools.ebpf_stream.evidence import VerdictStats
from libraries.tools.ebpf_stream.module import (
    EngagementEvidence,
    check_ebpf_config,
    collect_engagement,
    has_ebpf_module,
    mark_engagement,
    read_verdict_stats,
)
from libraries.tools.iperf3 import (
    IperfClientOptions,
    IperfResult,
    IperfServerOptions,
    run_iperf3_client,
    start_iperf3_server,
)
from libraries.tools.nginx.config import NginxInstance
from libraries.tools.nginx.stream import StreamProxyParams, StreamServer
from utest.localnode import LocalNode, LocalProcess, free_port, wait_for_listener

NGINX_EBPF = "/opt/nginx-ebpf/sbin/nginx"

pytestmark = [
    pytest.mark.skipif(not Path(NGINX_EBPF).exists(),
                       reason=f"no eBPF-capable nginx: {NGINX_EBPF} missing (build it with "
                              "mrpre/nginx-stream-ebpf-module)"),
    pytest.mark.skipif(shutil.which("bpftool") is None, reason="bpftool not installed"),
    pytest.mark.skipif(shutil.which("iperf3") is None, reason="iperf3 not installed"),
    pytest.mark.skipif(os.geteuid() != 0, reason="the eBPF module needs root"),
]


@dataclass
class Loopback:
    """This machine as a one-node testbed with an iperf3 server on ``upstream_port``."""

    node: LocalNode
    upstream_port: int
    started: list[LocalProcess]

    def start_nginx(self, config: str, prefix: Path, port: int) -> LocalProcess:
        prefix.mkdir()
        config_path = prefix / "nginx.conf"
        self.node.put(config, str(config_path))
        command = f"{NGINX_EBPF} -c {shlex.quote(str(config_path))} -p {shlex.quote(str(prefix))}/"
        process = self.node.start(command, name=f"nginx-{prefix.name}")
        self.started.append(process)
        wait_for_listener(port)
        return process

    def stop(self, process: LocalProcess) -> None:
        self.node.stop(process)
        self.started.remove(process)

    def download(self, port: int) -> IperfResult:
        options = IperfClientOptions(server="127.0.0.1", port=port, duration=3, reverse=True)
        return run_iperf3_client(self.node, "iperf3", options)


@pytest.fixture
def loopback(tmp_path: Path) -> Iterator[Loopback]:
    node = LocalNode(workdir=str(tmp_path))
    port = free_port()
    server = start_iperf3_server(node, "iperf3", IperfServerOptions(port=port, bind="127.0.0.1"))
    bed = Loopback(node, port, [server])
    try:
        wait_for_listener(port)
        yield bed
    finally:
        for process in reversed(bed.started):
            node.stop(process)


def stream_config(prefix: Path, listen_port: int, upstream_port: int) -> StreamProxyParams:
    params = StreamProxyParams(
        instance=NginxInstance(prefix=str(prefix), user="root", error_log_level="notice"),
        servers=[StreamServer(listen_port=listen_port, listen_address="127.0.0.1",
                              upstreams=[f"127.0.0.1:{upstream_port}"], ebpf=True)],
        load_module=None,
    )
    check_ebpf_config(params)
    return params


def wait_until_unloaded(node: LocalNode, ours: frozenset[int]) -> VerdictStats:
    """Verdict programs once ours are gone (the kernel frees them with the last fd)."""
    deadline = time.monotonic() + 5
    while True:
        stats = read_verdict_stats(node)
        if not stats.ids & ours or time.monotonic() > deadline:
            return stats
        time.sleep(0.1)


def processes_in_group(node: LocalNode, group: int) -> list[str]:
    listing = node.run("ps -eo pgid=,pid=,args=").stdout.splitlines()
    return [line for line in listing if line.split()[0] == str(group)]


def test_binaries_are_told_apart(tmp_path: Path):
    node = LocalNode(workdir=str(tmp_path))
    assert has_ebpf_module(node, NGINX_EBPF)[0]
    if Path("/usr/sbin/nginx").exists():
        found, reason = has_ebpf_module(node, "/usr/sbin/nginx")
        assert not found and "has no stream eBPF module" in reason


def test_build_whose_nginx_v_does_not_name_the_module_is_detected(tmp_path: Path):
    """The issue's build, configured with --add-module=../module: the real eBPF nginx behind a
    wrapper whose ``-V`` shows that path."""
    wrapper = tmp_path / "nginx"
    wrapper.write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = -V ]; then {NGINX_EBPF} -V 2>&1 | '
        "sed 's#--add-module=[^ ]*#--add-module=../module#'; exit 0; fi\n"
        f'exec {NGINX_EBPF} "$@"\n')
    wrapper.chmod(0o755)
    node = LocalNode(workdir=str(tmp_path))
    assert "--add-module=../module" in node.run(f"{wrapper} -V").stdout
    found, reason = has_ebpf_module(node, str(wrapper))
    assert found, reason


def test_ebpf_proxy_engages_and_leaves_nothing_behind(loopback: Loopback, tmp_path: Path):
    node = loopback.node
    stats_setting = read_bpf_stats_setting(node)
    preexisting = read_verdict_stats(node).ids
    port = free_port()
    params = stream_config(tmp_path / "ebpf", port, loopback.upstream_port)
    nginx = loopback.start_nginx(params.render(), tmp_path / "ebpf", port)
    ours = read_verdict_stats(node).ids - preexisting
    assert len(ours) == 1  # one eBPF server, one worker: one program

    with bpf_stats_enabled(node) as stats:
        # counted while the holder keeps its descriptor; the machine-wide sysctl untouched
        holder = stats.holder
        assert holder is not None and read_bpf_stats_setting(node) == stats_setting
        assert "anon_inode:bpf-stats" in node.run(f"ls -l /proc/{holder.pid}/fd").stdout
        mark = mark_engagement(node, params.instance.error_log)
        result = loopback.download(port)
        evidence = collect_engagement(node, mark, stats)

    assert read_bpf_stats_setting(node) == stats_setting and not node.is_running(holder)
    assert result.gbps > 0.1
    evidence.require_engaged()
    assert evidence.spliced_connections == 2  # iperf3's control and data connections
    assert evidence.verdict_runs is not None and evidence.verdict_runs > 100
    assert evidence.verdict_run_time_ns is not None and evidence.verdict_run_time_ns > 0
    assert len(set(evidence.client_fds)) == 2

    assert len(processes_in_group(node, nginx.pid)) == 2  # master and one worker
    loopback.stop(nginx)
    assert not wait_until_unloaded(node, ours).ids & ours
    assert not wait_until_unloaded(node, ours).ids - preexisting
    assert not processes_in_group(node, nginx.pid)  # master and worker both gone


def test_ebpf_server_after_native_one_is_caught(loopback: Loopback, tmp_path: Path):
    node = loopback.node
    ebpf_port, native_port = free_port(), free_port(18000, 18999)
    prefix = tmp_path / "misordered"
    params = StreamProxyParams(
        instance=NginxInstance(prefix=str(prefix), user="root", error_log_level="notice"),
        servers=[
            StreamServer(listen_port=native_port, listen_address="127.0.0.1",
                         upstreams=[f"127.0.0.1:{loopback.upstream_port}"], ebpf=False),
            StreamServer(listen_port=ebpf_port, listen_address="127.0.0.1",
                         upstreams=[f"127.0.0.1:{loopback.upstream_port}"]),
        ],
        load_module=None,
    )
    # The renderer refuses "ebpf_enable on" after "off", so write the misordered server by
    # hand: the module then proxies it natively without a word at start-up.
    config = params.render().replace(
        "\t\tproxy_pass stream_upstream_" + str(ebpf_port),
        "\t\tebpf_enable on;\n\t\tproxy_pass stream_upstream_" + str(ebpf_port),
    )
    assert config.index("ebpf_enable off") < config.index("ebpf_enable on")
    nginx = loopback.start_nginx(config, prefix, ebpf_port)

    with bpf_stats_enabled(node) as stats:
        mark = mark_engagement(node, params.instance.error_log)
        result = loopback.download(ebpf_port)
        evidence = collect_engagement(node, mark, stats)
    loopback.stop(nginx)

    assert result.gbps > 0.1  # the data went through, natively
    assert evidence.fallbacks == 2 and evidence.spliced_connections == 0
    with pytest.raises(HostStackError, match=r"^eBPF path not engaged \(fell back to native "
                                             r"proxying\): 0 connection"):
        evidence.require_engaged()
    assert isinstance(evidence, EngagementEvidence)
