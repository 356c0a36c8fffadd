"""DUT interfaces handed to VPP: the ports planned from a topology, their startup.conf part,
the DPDK path's PAPI sequence call by call on the fake VPP, the NIC binding check, and the
thread check of ``cpus.vpp_workers``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from libraries.testbed.errors import HostStackError, PapiError
from libraries.testbed.node import CommandResult
from libraries.testbed.topology import TOPOLOGY_DIR, Topology
from libraries.testbed.topology_file import load_topology, parse_topology
from libraries.vpp.hoststack import HostStack, VppThread
from libraries.vpp.instance import VppLayout, check_threads, jumbo_needs_hugepages, startup_params
from libraries.vpp.papi import PapiConnection
from libraries.vpp.ports import (
    attach_ports,
    check_ports,
    complete_peer_checksums,
    detach_ports,
    mtu_unsupported,
    plan_ports,
    restore_peer_checksums,
    startup_contribution,
)
from utest.fake_vpp import FIXTURE_API_DIR, FakeVpp, RecordedCall, serve
from utest.test_render_vpp import sections

LAB = TOPOLOGY_DIR / "examples" / "lab-3node.yaml"
NO_INDEX = 0xFFFFFFFF


def lab() -> Topology:
    return load_topology(str(LAB))


@pytest.fixture
def fake():
    with serve(dpdk_interfaces=["enp1s0f0", "enp1s0f1"], main_core=1, workers=[2]) as server:
        yield server


@pytest.fixture
def hs(fake: FakeVpp):
    with PapiConnection(fake.socket_path, FIXTURE_API_DIR, read_timeout=2.0) as conn:
        yield HostStack(conn)


class UnusedNode:
    """A DPDK NIC is not a kernel interface: attaching one must not run node commands."""

    name = "dut"
    where = "dut (lab)"

    def run(self, *args: Any, **kwargs: Any) -> CommandResult:
        raise AssertionError(f"no node command expected, got {args}")


class AnsweringNode(UnusedNode):
    """Answers the one sysfs check command with canned words (a lab's drivers)."""

    def __init__(self, stdout: str) -> None:
        self.stdout = stdout
        self.commands: list[str] = []

    def run(self, command: str, *args: Any, **kwargs: Any) -> CommandResult:
        self.commands.append(command)
        return CommandResult(command=command, exit_code=0, stdout=self.stdout, stderr="",
                             duration=0.0)


def brief(call: RecordedCall) -> tuple[Any, ...]:
    f = call.fields
    match call.name:
        case "sw_interface_dump":
            return (call.name, f["name_filter_valid"], f["name_filter"])
        case "hw_interface_set_mtu":
            return (call.name, f["sw_if_index"], f["mtu"])
        case "sw_interface_set_flags":
            return (call.name, f["sw_if_index"], int(f["flags"]))
        case "sw_interface_add_del_address":
            return (call.name, f["sw_if_index"], f["is_add"], str(f["prefix"]))
    return (call.name, f)


def test_lab_ports_are_its_dpdk_nics_named_as_in_the_topology():
    ports = plan_ports(lab(), "dut")
    assert [(p.ifname, p.driver, p.pci, p.vpp_name, p.address, p.mtu) for p in ports] == [
        ("enp1s0f0", "dpdk", "0000:01:00.0", "enp1s0f0", "198.18.1.1/24", 1500),
        ("enp1s0f1", "dpdk", "0000:01:00.1", "enp1s0f1", "198.18.2.1/24", 1500),
    ]
    assert not any(p.kernel_netdev for p in ports)
    assert {p.mtu for p in plan_ports(lab(), "dut", mtu=9000)} == {9000}


def test_lab_startup_conf_has_the_seeds_dpdk_block_and_the_worker_cores():
    topology = lab()
    layout = VppLayout(main_core=1, workers=(2,),
                       ports=startup_contribution(plan_ports(topology, "dut")))
    got = sections(startup_params(topology.nodes["dut"].vpp, layout, "/tmp/w", True).render())
    assert got["cpu"] == ["main-core 1", "corelist-workers 2"]
    assert got["dpdk"] == ["dev 0000:01:00.0 { name enp1s0f0 }",
                           "dev 0000:01:00.1 { name enp1s0f1 }"]
    assert got["session"] == ["enable", "use-app-socket-api", "event-queue-length 16384"]
    assert got["plugins"] == ["path /usr/lib/x86_64-linux-gnu/vpp_plugins"]  # dpdk not disabled
    assert "buffers" not in got and "statseg" not in got  # hugepages: VPP's defaults


def test_no_workers_is_seed_001s_workers_0_and_jumbo_is_its_suggestion():
    install = lab().nodes["dut"].vpp
    got = sections(startup_params(install, VppLayout(main_core=1, mtu=9000), "/w", True).render())
    assert got["cpu"] == ["main-core 1", "workers 0"]
    assert got["session"] == ["enable", "use-app-socket-api"]
    assert got["tcp"] == ["cc-algo cubic", "mtu 9000"]
    assert got["buffers"] == ["default data-size 10000"]
    assert "plugin dpdk_plugin.so { disable }" in got["plugins"]  # no NIC for the plugin


def test_jumbo_without_hugepages_is_refused_with_the_reason():
    assert jumbo_needs_hugepages(VppLayout(mtu=9000), hugepages=True) is None
    assert jumbo_needs_hugepages(VppLayout(mtu=1500), hugepages=False) is None
    assert jumbo_needs_hugepages(VppLayout(), hugepages=False) is None
    reason = jumbo_needs_hugepages(VppLayout(mtu=9000), hugepages=False)
    assert "default data-size 10000" in reason and "nr_hugepages is 0" in reason


def test_dpdk_vdev_ports_are_af_packet_pmd_devices_with_no_pci():
    data = load_topology("3node").model_dump(mode="json")
    data["nodes"]["dut"]["interfaces"] = {"eth1": {"vpp_driver": "dpdk_vdev"},
                                          "eth2": {"vpp_driver": "dpdk_vdev"}}
    ports = plan_ports(parse_topology(data, "vdev.yaml"), "dut")
    assert [(p.vpp_name, p.vdev, p.kernel_netdev) for p in ports] == [
        ("", "net_af_packet0,iface=eth1", True),  # found by MAC: VPP names it
        ("", "net_af_packet1,iface=eth2", True)]
    assert mtu_unsupported(ports) is None
    assert "eth1, eth2: DPDK's af_packet PMD takes 2048-byte frames" in mtu_unsupported(
        plan_ports(parse_topology(data, "vdev.yaml"), "dut", mtu=9000))
    assert mtu_unsupported(plan_ports(lab(), "dut", mtu=9000)) is None
    layout = VppLayout(ports=startup_contribution(ports))
    install = load_topology("3node").nodes["dut"].vpp
    got = sections(startup_params(install, layout, "/w", False).render())
    assert got["dpdk"] == ["no-pci", "vdev net_af_packet0,iface=eth1",
                           "vdev net_af_packet1,iface=eth2"]


def test_af_packet_is_the_default_on_the_local_testbeds():
    assert [(p.driver, p.vpp_name) for p in plan_ports(load_topology("3node"), "dut")] == [
        ("af_packet", "host-eth1"), ("af_packet", "host-eth2")]


def test_dpdk_path_papi_sequence_call_by_call(hs: HostStack, fake: FakeVpp):
    """Seed 000's DPDK set-up by name: 'set interface state eth0 up', 'set interface ip
    address eth0 ...', for both NICs; then everything taken off again, in reverse."""
    ports = plan_ports(lab(), "dut", mtu=9000)
    attached = attach_ports(UnusedNode(), hs, ports)
    assert [brief(c) for c in fake.api_calls()] == [
        ("sw_interface_dump", True, "enp1s0f0"),
        ("hw_interface_set_mtu", 1, 9000),
        ("sw_interface_set_flags", 1, 1),
        ("sw_interface_add_del_address", 1, True, "198.18.1.1/24"),
        ("sw_interface_dump", True, "enp1s0f1"),
        ("hw_interface_set_mtu", 2, 9000),
        ("sw_interface_set_flags", 2, 1),
        ("sw_interface_add_del_address", 2, True, "198.18.2.1/24"),
    ]
    nic = fake.state.interfaces[1]
    assert (nic.admin_up, nic.link_mtu, [str(a) for a in nic.addresses]) == (
        True, 9000, ["198.18.1.1/24"])
    assert [a.previous_mtu for a in attached] == [1500, 1500]

    before = len(fake.api_calls())
    assert detach_ports(hs, attached) == []
    assert [brief(c) for c in fake.api_calls()[before:]] == [
        ("sw_interface_add_del_address", 2, False, "198.18.2.1/24"),
        ("sw_interface_set_flags", 2, 0),
        ("hw_interface_set_mtu", 2, 1500),
        ("sw_interface_add_del_address", 1, False, "198.18.1.1/24"),
        ("sw_interface_set_flags", 1, 0),
        ("hw_interface_set_mtu", 1, 1500),
    ]
    for index in (1, 2):
        nic = fake.state.interfaces[index]
        assert (nic.admin_up, nic.link_mtu, nic.addresses) == (False, 1500, [])


def test_a_nic_the_dpdk_plugin_did_not_take_is_named_with_what_vpp_has():
    expected = (r"VPP has no interface named 'enp1s0f0'; it has: local0: VPP's dpdk plugin "
                r"did not take 0000:01:00.0")
    with (serve() as bare, PapiConnection(bare.socket_path, FIXTURE_API_DIR) as conn,
          pytest.raises(HostStackError, match=expected)):
        attach_ports(UnusedNode(), HostStack(conn), plan_ports(lab(), "dut"))


def test_a_failing_call_names_itself_and_undoes_the_ports_done(hs: HostStack, fake: FakeVpp):
    fake.fail_next("sw_interface_add_del_address", 0)  # the first NIC's address goes on ...
    fake.fail_next("sw_interface_add_del_address", -2)  # ... the second NIC's does not
    with pytest.raises(PapiError, match=r"sw_interface_add_del_address\(.*sw_if_index=2\) "
                                        r"-> retval -2"):
        attach_ports(UnusedNode(), hs, plan_ports(lab(), "dut"))
    for index in (1, 2):
        nic = fake.state.interfaces[index]
        assert (nic.admin_up, nic.addresses) == (False, [])


@pytest.mark.parametrize(("answers", "message"), [
    ("vfio-pci vfio-pci", None),
    ("mlx5_core uio_pci_generic", None),
    ("i40e vfio-pci", r"0000:01:00.0 is bound to i40e, not to a DPDK-capable driver.*never "
                      r"rebinds NICs.*dpdk-devbind.py --bind=vfio-pci 0000:01:00.0"),
    ("vfio-pci missing", r"interface enp1s0f1 \(vpp_driver dpdk\): no PCI device 0000:01:00.1"),
    ("vfio-pci unbound", r"0000:01:00.1 is bound to unbound"),
])
def test_nics_must_already_be_on_a_dpdk_capable_driver(answers: str, message: str | None):
    node = AnsweringNode(answers)
    if message is None:
        check_ports(node, plan_ports(lab(), "dut"))
    else:
        with pytest.raises(HostStackError, match=message):
            check_ports(node, plan_ports(lab(), "dut"))
    assert "/sys/bus/pci/devices/0000:01:00.0" in node.commands[0]


def test_a_missing_kernel_interface_is_named():
    with pytest.raises(HostStackError, match=r"interface eth1 \(vpp_driver af_packet\): the "
                                             r"kernel has no interface eth1"):
        check_ports(AnsweringNode("missing ok"), plan_ports(load_topology("3node"), "dut"))


def test_worker_threads_must_be_the_declared_ones(hs: HostStack):
    threads = hs.list_threads()
    assert [(t.name, t.type, t.cpu_id) for t in threads] == [
        ("vpp_main", "", 1), ("vpp_wk_0", "workers", 2)]
    check_threads(threads, VppLayout(main_core=1, workers=(2,)))
    with pytest.raises(HostStackError, match=r"VPP runs 1 workers on CPUs \[2\]; the topology "
                                             r"declares vpp_workers \[2, 3\]"):
        check_threads(threads, VppLayout(main_core=1, workers=(2, 3)))
    with pytest.raises(HostStackError, match="main thread runs on CPU 1, not on vpp_main 0"):
        check_threads(threads, VppLayout(main_core=0, workers=(2,)))
    check_threads([VppThread(0, "vpp_main", "", 0)], VppLayout())


def test_shipped_lab_example_says_what_it_declares():
    text = Path(LAB).read_text()
    assert "vpp_driver: dpdk" in text and "vpp_workers: [2]" in text
    assert "never rebinds" in text


class RecordingNode(UnusedNode):
    """Records the commands a peer node is asked to run; all succeed."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.commands: list[str] = []

    def run(self, command: str, *args: Any, **kwargs: Any) -> CommandResult:
        self.commands.append(command)
        return CommandResult(command=command, exit_code=0, stdout="", stderr="", duration=0.0)


def test_veth_peers_of_dpdk_vdev_ports_complete_their_checksums_and_get_them_back():
    data = load_topology("3node").model_dump(mode="json")
    data["nodes"]["dut"]["interfaces"] = {"eth2": {"vpp_driver": "dpdk_vdev"}}
    topology = parse_topology(data, "vdev.yaml")
    nodes = {name: RecordingNode(name) for name in topology.nodes}
    changed: list = []
    complete_peer_checksums(topology, nodes, "dut", plan_ports(topology, "dut"), changed)
    assert nodes["server"].commands == ["ethtool -K eth1 tx off"]  # eth2's peer only
    assert nodes["tg"].commands == [] and nodes["dut"].commands == []
    assert restore_peer_checksums(changed) == []
    assert nodes["server"].commands[-1] == "ethtool -K eth1 tx on"
    lab_changed: list = []
    complete_peer_checksums(lab(), nodes, "dut", plan_ports(lab(), "dut"), lab_changed)
    assert lab_changed == []  # physical links: checksums are complete on the wire
