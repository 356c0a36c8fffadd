"""VPP lifecycle over real SSH against a process-level fake VPP (VPP itself is not installed
here): start from a rendered startup.conf, reach the API through the SSH-forwarded socket with
definitions fetched from the node, configure the host stack, stop and leave nothing behind."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from libraries.testbed.errors import HostStackError, PapiError, RenderError
from libraries.testbed.provision import Testbed
from libraries.testbed.topology_file import parse_topology
from libraries.vpp.instance import VppLayout, start_vpp, stop_vpp, vcl_config
from libraries.vpp.loopback import (
    LoopbackHostStackPlan,
    configure_loopback_host_stack,
    teardown_loopback_host_stack,
)
from libraries.vpp.ports import (
    attach_ports,
    check_ports,
    detach_ports,
    plan_ports,
    return_kernel_addresses,
    startup_contribution,
)
from utest.fake_vpp_daemon import fake_vpp_install

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root to build network namespaces"),
    pytest.mark.skipif(shutil.which("ssh") is None, reason="openssh-client not installed"),
]


@pytest.fixture(scope="module")
def node():
    testbed = Testbed.up("1node")
    try:
        yield testbed.node("dut")
    finally:
        testbed.down()


def test_start_configure_and_stop_leave_nothing_behind(node, tmp_path):
    install = fake_vpp_install(node, tmp_path)
    instance = start_vpp(node, install, main_core=0)
    try:
        startup = node.get(instance.startup_path)
        assert f"socket-name {node.workdir}/vpp/api.sock" in startup  # this run's, not /run/vpp
        assert f"runtime-dir {node.workdir}/vpp" in startup
        assert "main-core 0" in startup
        assert instance.hoststack.show_version().version == "26.10-rc0~fake"
        plan = LoopbackHostStackPlan.tcp_term(addresses=("198.18.101.1/24", "198.18.103.1/24"))
        stack = configure_loopback_host_stack(instance.hoststack, plan)
        assert [ns.namespace_id for ns in stack.namespaces] == ["server", "client"]
        teardown_loopback_host_stack(instance.hoststack, stack)
        with pytest.raises(PapiError, match="is not defined by the VPP API definitions"):
            instance.papi.call("no_such_message")
    finally:
        output = stop_vpp(instance)
    assert "fake vpp: stopped" in output
    assert not node.is_running(instance.process)
    assert instance.forward.poll() is not None
    assert node.run(f"test -e {node.workdir}/vpp", check=False).exit_code == 1
    assert not Path(instance.local_dir.name).exists()


def test_vpp_failing_at_start_up_reports_its_output(node, tmp_path):
    install = fake_vpp_install(node, tmp_path, fail="vlib_physmem_init: pmalloc error")
    with pytest.raises(HostStackError, match="VPP exited during start-up.*pmalloc error"):
        start_vpp(node, install, timeout=10)
    assert node.processes == ()


@pytest.fixture(scope="module")
def two_node():
    testbed = Testbed.up("2node")
    try:
        yield testbed
    finally:
        testbed.down()


@pytest.mark.parametrize(("driver", "vpp_name", "startup_lines"), [
    ("af_packet", "host-eth1", []),
    ("dpdk_vdev", "Ethernet0", ["no-pci", "vdev net_af_packet0,iface=eth1"]),
])
def test_a_link_interface_goes_to_vpp_and_comes_back(two_node, tmp_path, driver, vpp_name,
                                                       startup_lines):
    """The kernel side of the Ethernet layout over real SSH: the kernel address leaves the veth
    while VPP has it (by the driver's name, up, addressed) and comes back after."""
    node = two_node.node("dut")
    data = two_node.topology.model_dump(mode="json")
    data["nodes"]["dut"]["interfaces"] = {"eth1": {"vpp_driver": driver}}
    ports = plan_ports(parse_topology(data, "2node-variant.yaml"), "dut")
    check_ports(node, ports)
    instance = start_vpp(node, fake_vpp_install(node, tmp_path),
                         layout=VppLayout(main_core=0, ports=startup_contribution(ports)))
    try:
        startup = [line.strip() for line in node.get(instance.startup_path).splitlines()]
        assert all(line in startup for line in startup_lines)
        attached = attach_ports(node, instance.hoststack, ports)
        assert "198.18.1.1" not in node.run("ip -o addr show dev eth1").stdout
        interface = instance.hoststack.interface_by_name(vpp_name)
        assert interface.admin_up
        addresses = instance.hoststack.papi.call("ip_address_dump", is_ipv6=False,
                                                 sw_if_index=interface.sw_if_index)
        assert [str(d.prefix) for d in addresses] == ["198.18.1.1/24"]
        assert detach_ports(instance.hoststack, attached) == []
    finally:
        stop_vpp(instance)
    assert return_kernel_addresses(node, attached) == []
    assert "inet 198.18.1.1/24" in node.run("ip -o addr show dev eth1").stdout


def test_vcl_config_per_program_is_the_seeds_block():
    nginx = vcl_config("nginx", "server", 1234, "/var/run/vpp/app_ns_sockets")
    assert "namespace-id server" in nginx and "namespace-secret 1234" in nginx
    assert "heapsize 64M" in nginx and "use-mq-eventfd" in nginx  # seed 000 + LAB-NOTES
    assert "app-socket-api /var/run/vpp/app_ns_sockets/server" in nginx
    iperf3 = vcl_config("iperf3", None, None, "/run/vpp/app_ns")
    assert "namespace-id" not in iperf3 and "use-mq-eventfd" not in iperf3
    assert "heapsize" not in iperf3 and "rx-fifo-size 4000000" in iperf3  # seed 001
    assert "app-socket-api /run/vpp/app_ns/default" in iperf3
    with pytest.raises(RenderError, match="no VCL profile for program 'curl'"):
        vcl_config("curl", None, None, "/run/vpp/app_ns")
