"""The VPP layer against a real VPP (skipped with the reason where /opt/vpp is absent):
start, the seed's loopback host stack through PAPI, an app over LD_PRELOAD proven on VPP's
host stack, the error paths (LD_PRELOAD that did not take, non-zero retval, VPP dying), and
nothing left behind."""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

import pytest

from libraries.testbed.errors import HostStackError, NodeError, PapiError
from libraries.testbed.provision import Testbed
from libraries.testbed.topology_file import load_topology
from libraries.vpp.instance import VppLayout, start_vpp, stop_vpp, vcl_config
from libraries.vpp.loopback import (
    LoopbackHostStackPlan,
    configure_loopback_host_stack,
    teardown_loopback_host_stack,
)
from libraries.vpp.vppctl import parse_show_session_verbose, require_listener, run_vppctl

INSTALL = load_topology("1node").nodes["dut"].vpp

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root to build network namespaces"),
    pytest.mark.skipif(INSTALL is None or not Path(INSTALL.bin).exists(),
                       reason=f"VPP not installed: {INSTALL.bin if INSTALL else '?'} missing"),
]


@pytest.fixture
def vpp(request):
    testbed = Testbed.up("1node")
    node = testbed.node("dut")
    layout = getattr(request, "param", VppLayout(main_core=0))
    instance = start_vpp(node, INSTALL, layout=layout)
    try:
        yield node, instance
    finally:
        try:
            if instance.process.stopped:
                pass  # the test stopped it
            else:
                with contextlib.suppress(HostStackError):  # e.g. PAPI of a VPP that died
                    stop_vpp(instance)
            assert not node.is_running(instance.process)
        finally:
            testbed.down()
        # every socket (API, CLI, stats, app namespaces) was in the run's runtime directory
        runtime = Path(instance.install.app_socket_dir).parent
        assert runtime == Path(node.workdir) / "vpp"
        assert not runtime.exists()


@pytest.mark.parametrize("vpp", [VppLayout(main_core=0, workers=(1,))], indirect=True)
def test_a_worker_runs_on_its_declared_core(vpp):
    """cpu { main-core 0 corelist-workers 1 }: start_vpp checked show_threads already; the
    rendered file and VPP's own thread list say the same."""
    node, instance = vpp
    assert "corelist-workers 1" in node.get(instance.startup_path, sudo=True)
    assert "event-queue-length 16384" in node.get(instance.startup_path, sudo=True)
    threads = instance.hoststack.list_threads()
    assert [(t.name, t.type, t.cpu_id) for t in threads] == [
        ("vpp_main", "", 0), ("vpp_wk_0", "workers", 1)]


def _sessions(node, instance):
    return parse_show_session_verbose(run_vppctl(node, "show session verbose",
                                                 socket=instance.install.cli_socket,
                                                 vppctl=INSTALL.vppctl))


def _iperf_server(node, instance, name: str, ldpreload: str):
    path = f"{node.workdir}/vcl-{name}.conf"
    node.put(vcl_config("iperf3", "server", 1234, instance.install.app_socket_dir), path)
    return node.start("iperf3 -4 -s -p 5201", name,
                      env={"LD_PRELOAD": ldpreload, "VCL_CONFIG": path})


def test_loopback_host_stack_and_an_app_proven_on_vpp(vpp):
    node, instance = vpp
    plan = LoopbackHostStackPlan.tcp_term(addresses=("198.18.101.1/24", "198.18.103.1/24"))
    stack = configure_loopback_host_stack(instance.hoststack, plan)
    server = _iperf_server(node, instance, "iperf3-vpp", INSTALL.ldpreload)
    deadline = time.monotonic() + 10
    while not require_listener_or_none(node, instance, 5201):
        assert time.monotonic() < deadline, "iperf3 never listened on VPP"
        time.sleep(0.2)
    node.stop(server)
    teardown_loopback_host_stack(instance.hoststack, stack)


def require_listener_or_none(node, instance, port):
    try:
        return require_listener(_sessions(node, instance), port, "iperf3 server")
    except HostStackError:
        return None


def test_an_app_whose_preload_did_not_take_is_not_on_vpp(vpp):
    node, instance = vpp
    configure_loopback_host_stack(instance.hoststack, LoopbackHostStackPlan.tcp_term(
        addresses=("198.18.101.1/24", "198.18.103.1/24")))
    server = _iperf_server(node, instance, "iperf3-kernel",
                           "/nonexistent/libvcl_ldpreload.so")
    node.wait_for_listener(5201, server)  # it listens, but on the kernel stack
    with pytest.raises(HostStackError, match="not on VPP's host stack"):
        require_listener(_sessions(node, instance), 5201, "iperf3 server")
    node.stop(server)


def test_a_non_zero_retval_names_the_call(vpp):
    _, instance = vpp
    with pytest.raises(PapiError, match=r"VPP PAPI app_namespace_add_del_v4\(.*"
                                        r"sw_if_index=4242.*\) -> retval -?\d+"):
        instance.hoststack.add_app_namespace("ghost", 1234, 4242)


def test_vpp_dying_mid_test_is_reported(vpp):
    node, instance = vpp
    node.run(f"kill -s KILL {instance.process.pid}")
    time.sleep(0.5)
    with pytest.raises(PapiError):
        instance.hoststack.create_loopback()
    with pytest.raises(NodeError, match="(?s)vppctl .*show version' exited 1:.*Connection refused"):
        run_vppctl(node, "show version", socket=instance.install.cli_socket,
                   vppctl=INSTALL.vppctl)
