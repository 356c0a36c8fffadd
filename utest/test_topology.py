"""Topology loading and validation: shipped files load, bad files name file and key path."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from libraries.testbed.errors import TopologyError
from libraries.testbed.topology import TOPOLOGY_DIR
from libraries.testbed.topology_file import load_topology, parse_topology

SHIPPED = sorted(p for p in TOPOLOGY_DIR.glob("*.yaml") if p.name != "criteria.yaml") + sorted(
    p for p in TOPOLOGY_DIR.glob("examples/*.yaml") if not p.name.startswith("ab-"))
"""Every topology shipped (``examples/ab-*.yaml`` are A/B comparison files: test_comparison)."""
GOOD = yaml.safe_load((TOPOLOGY_DIR / "3node.yaml").read_text())


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_every_shipped_topology_loads(path: Path):
    topology = load_topology(str(path))
    assert topology.nodes
    assert topology.node_with_role("dut") in topology.nodes


def test_3node_addresses_as_seen_from_each_node():
    topology = load_topology("3node")
    assert topology.address_of("server", seen_from="dut") == "198.18.2.2"
    assert topology.address_of("dut", seen_from="tg") == "198.18.1.1"
    assert topology.address_of("server", seen_from="tg") == "198.18.2.2"  # routed via the DUT
    assert topology.address_of("dut", seen_from="dut") == "127.0.0.1"
    assert topology.cpus_of("tg", "load") == [1]
    assert topology.cpus_of("tg", "nothing") is None


def test_a_tools_environment_is_the_nodes_tool_env_with_the_stacks_over_it():
    topology = load_topology("3node")  # dut: tool_env {bpftime: {BPFTIME_VM_NAME: ubpf}}
    assert topology.env_of("dut", "bpftime") == {"BPFTIME_VM_NAME": "ubpf"}
    assert topology.env_of("dut", "bpftime", {"BPFTIME_VM_NAME": "llvm", "X": "1"}) == \
        {"BPFTIME_VM_NAME": "llvm", "X": "1"}
    assert topology.env_of("tg", "wrk") is None  # neither: no environment at all
    assert topology.env_of("tg", "wrk", {"LD_PRELOAD": "/v.so"}) == {"LD_PRELOAD": "/v.so"}
    one = load_topology("1node")  # every role is its one node, which declares the same
    assert one.env_of("server", "bpftime") == {"BPFTIME_VM_NAME": "ubpf"}


def test_1node_resolves_every_role_to_the_one_node():
    topology = load_topology("1node")
    assert {topology.resolve_node(r) for r in ("tg", "dut", "server")} == {"dut"}


def _mutated(change) -> dict:
    data = copy.deepcopy(GOOD)
    change(data)
    return data


def _set(path: str, value):
    def change(data):
        keys = path.split(".")
        target = data
        for key in keys[:-1]:
            target = target[int(key)] if isinstance(target, list) else target[key]
        target[keys[-1]] = value
    return change


def _delete(path: str):
    def change(data):
        keys = path.split(".")
        target = data
        for key in keys[:-1]:
            target = target[int(key)] if isinstance(target, list) else target[key]
        del target[keys[-1]]
    return change


BAD = [
    ("unknown top-level key", _set("nodez", {}), "nodez: unknown key"),
    ("unknown node key (typo)", _set("nodes.dut.tols", {}), "nodes.dut.tols: unknown key"),
    ("cpus not a list", _set("nodes.dut.cpus.proxy", "zero"), "nodes.dut.cpus.proxy:"),
    ("negative cpu", _set("nodes.dut.cpus.proxy", [-1]), "nodes.dut.cpus.proxy.0:"),
    ("unknown role", _set("nodes.tg.roles", ["client"]), "nodes.tg.roles.0:"),
    ("no roles", _set("nodes.tg.roles", []), "nodes.tg.roles:"),
    ("missing roles", _delete("nodes.tg.roles"), "nodes.tg.roles: required key is missing"),
    ("missing name", _delete("name"), "name: required key is missing"),
    ("unknown tool", _set("nodes.dut.tools.ngnix", "nginx"), "nodes.dut.tools:"),
    ("folder of an undeclared tool", _set("nodes.tg.tool_dirs", {"bpftime": "/opt/bpftime"}),
     "nodes.tg.tool_dirs: 'bpftime' is not in this node's tools"),
    ("relative tool folder", _set("nodes.dut.tool_dirs", {"nginx": "opt/nginx"}),
     "nodes.dut.tool_dirs.nginx: String should match pattern"),
    ("bad port", _set("nodes.dut.port", 70000), "nodes.dut.port:"),
    ("port wrong type", _set("nodes.dut.port", "ssh"), "nodes.dut.port:"),
    ("link to unknown node", _set("links.0.b", "dutt:eth1"), "links.0.b: unknown node 'dutt'"),
    ("bad address", _set("links.0.a_ip", "198.18.1.300/24"), "links.0.a_ip:"),
    ("duplicate address",
     lambda d: d["links"][1].update(a_ip="198.18.1.5/24", b_ip="198.18.1.1/24"),
     "links.1.b_ip: duplicate address 198.18.1.1 (also on dut:eth1)"),
    ("link ends in two subnets", _set("links.0.b_ip", "198.18.9.1/24"), "links.0:"),
    ("interface used twice", _set("links.1.a", "dut:eth1"), "links.1.a: interface dut:eth1"),
    ("bad link end syntax", _set("links.0.a", "tg-eth1"), "links.0.a: expected 'node:interface'"),
    ("interface name longer than the kernel's 15",
     _set("links.1.a", "dut:ethernet0123456789"),
     "links.1.a: interface name 'ethernet0123456789' has 18 characters: Linux allows at most 15"),
    ("declared interface name too long",
     _set("nodes.dut.interfaces", {"ethernet0123456789": {"vpp_driver": "af_packet"}}),
     "nodes.dut.interfaces.ethernet0123456789: invalid name: interface name"),
    ("host with netns", _set("nodes.tg.host", "10.0.0.1"), "nodes.tg.host: must be absent"),
    ("bad provision", _set("provision", "docker"), "provision:"),
    ("bad node name", _set("nodes.Bad-Name", {"roles": ["tg"]}), "nodes.Bad-Name: invalid name"),
    ("route not a network", _set("nodes.tg.routes.0.to", "somewhere"), "nodes.tg.routes.0.to:"),
    ("mtu too big", _set("links.0.mtu", 65000), "links.0.mtu:"),
    ("bad pci address", _set("nodes.dut.interfaces", {"eth1": {"pci": "01:00.0"}}),
     "nodes.dut.interfaces.eth1.pci:"),
    ("vpp unknown key", _set("nodes.dut.vpp", {"binary": "/usr/bin/vpp"}),
     "nodes.dut.vpp.binary: unknown key"),
    ("unknown vpp driver", _set("nodes.dut.interfaces", {"eth1": {"vpp_driver": "rdma"}}),
     "nodes.dut.interfaces.eth1.vpp_driver: Input should be 'af_packet', 'dpdk' or "
     "'dpdk_vdev', got 'rdma'"),
    ("dpdk on a netns testbed",
     _set("nodes.dut.interfaces", {"eth1": {"vpp_driver": "dpdk", "pci": "0000:01:00.0"}}),
     "nodes.dut.interfaces.eth1.vpp_driver: dpdk drives a PCI NIC, which a netns testbed's "
     "veths are not"),
    ("dpdk without pci", _set("nodes.dut.interfaces", {"eth1": {"vpp_driver": "dpdk"}}),
     "nodes.dut.interfaces.eth1.pci: required with vpp_driver dpdk"),
    ("dpdk_vdev with pci",
     _set("nodes.dut.interfaces", {"eth1": {"vpp_driver": "dpdk_vdev", "pci": "0000:01:00.0"}}),
     "nodes.dut.interfaces.eth1.pci: must be absent with vpp_driver dpdk_vdev"),
    ("dpdk_vdev on a node without vpp",
     _set("nodes.server.interfaces", {"eth1": {"vpp_driver": "dpdk_vdev"}}),
     "nodes.server.interfaces.eth1.vpp_driver: dpdk_vdev needs VPP on this node"),
    ("vpp driver on an interface no link uses",
     _set("nodes.dut.interfaces", {"eth9": {"vpp_driver": "dpdk_vdev"}}),
     "nodes.dut.interfaces.eth9.vpp_driver: dpdk_vdev on an interface no link uses"),
    ("same pci twice", _set("nodes.dut.interfaces", {"eth1": {"pci": "0000:01:00.0"},
                                                     "eth2": {"pci": "0000:01:00.0"}}),
     "nodes.dut.interfaces.eth2.pci: PCI address 0000:01:00.0 is also interface eth1's"),
    ("two vpp_main cores", _set("nodes.dut.cpus.vpp_main", [0, 1]),
     "nodes.dut.cpus.vpp_main: expected exactly one CPU"),
    ("worker on the main core", _set("nodes.dut.cpus.vpp_workers", [1, 0]),
     "nodes.dut.cpus.vpp_workers: CPU 0 is also vpp_main"),
    ("worker listed twice", _set("nodes.dut.cpus.vpp_workers", [1, 1]),
     "nodes.dut.cpus.vpp_workers: a CPU listed twice"),
]


@pytest.mark.parametrize(("change", "expected"), [(c, e) for _, c, e in BAD],
                         ids=[name for name, _, _ in BAD])
def test_bad_topology_names_file_and_key_path(change, expected):
    with pytest.raises(TopologyError) as error:
        parse_topology(_mutated(change), "topologies/broken.yaml")
    message = str(error.value)
    assert message.startswith("topologies/broken.yaml: "), message
    assert expected in message, message


def test_lab_with_dpdk_and_dpdk_vdev_on_one_node_is_refused():
    data = yaml.safe_load((TOPOLOGY_DIR / "examples" / "lab-3node.yaml").read_text())
    data["nodes"]["dut"]["interfaces"]["enp1s0f1"] = {"vpp_driver": "dpdk_vdev"}
    with pytest.raises(TopologyError, match=r"nodes\.dut\.interfaces: dpdk and dpdk_vdev on "
                                            r"one node"):
        parse_topology(data, "lab.yaml")


def test_lab_dpdk_nics_by_pci_address():
    topology = load_topology(str(TOPOLOGY_DIR / "examples" / "lab-3node.yaml"))
    assert [(name, spec.vpp_driver, spec.pci) for name, spec, _, _ in
            topology.link_interfaces("dut")] == [("enp1s0f0", "dpdk", "0000:01:00.0"),
                                                 ("enp1s0f1", "dpdk", "0000:01:00.1")]
    assert topology.cpus_of("dut", "vpp_workers") == [2]


def test_lab_node_without_host_is_an_error():
    data = _mutated(_delete("provision"))
    with pytest.raises(TopologyError, match=r"nodes\.tg\.host: expected a host name"):
        parse_topology(data, "lab.yaml")


def test_key_and_password_together_are_refused():
    data = yaml.safe_load((TOPOLOGY_DIR / "examples" / "lab-3node.yaml").read_text())
    data["nodes"]["tg"]["password"] = "secret"
    with pytest.raises(TopologyError, match=r"nodes\.tg\.password: give either key or password"):
        parse_topology(data, "lab.yaml")


def test_unreadable_and_invalid_yaml_files(tmp_path: Path):
    with pytest.raises(TopologyError, match=r"nosuch\.yaml: cannot read topology.*known"):
        load_topology(str(tmp_path / "nosuch.yaml"))
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: x\nnodes: [unclosed\n")
    with pytest.raises(TopologyError, match=r"broken\.yaml: not valid YAML"):
        load_topology(str(broken))
    scalar = tmp_path / "scalar.yaml"
    scalar.write_text("just a string\n")
    with pytest.raises(TopologyError, match=r"scalar\.yaml: expected a mapping"):
        load_topology(str(scalar))


def test_unknown_role_query_names_roles_present():
    topology = load_topology("2node")
    with pytest.raises(TopologyError, match=r"no node or role 'client'"):
        topology.resolve_node("client")


def _lab() -> dict:
    return yaml.safe_load((TOPOLOGY_DIR / "examples" / "lab-3node.yaml").read_text())


def test_a_lab_may_not_change_mtus_or_addresses_unless_it_says_so():
    data = _lab()
    del data["may_change"]
    lab = parse_topology(data, "lab.yaml")
    assert not lab.allows_change("mtu") and not lab.allows_change("addresses")
    data["may_change"] = ["mtu"]
    lab = parse_topology(data, "lab.yaml")
    assert lab.allows_change("mtu") and not lab.allows_change("addresses")
    built = load_topology("3node")  # the library's own testbed
    assert built.allows_change("mtu") and built.allows_change("addresses")
    data["may_change"] = ["routes"]
    with pytest.raises(TopologyError, match=r"lab\.yaml: may_change\.0: Input should be 'mtu' "
                       r"or 'addresses', got 'routes'"):
        parse_topology(data, "lab.yaml")


def test_known_hosts_files_per_node_first_then_top_level():
    data = _lab()
    data["nodes"]["dut"]["known_hosts"] = "dut_known_hosts"
    lab = parse_topology(data, "lab.yaml")
    assert lab.known_hosts_files("dut") == ("dut_known_hosts", "topologies/lab-known_hosts")
    assert lab.known_hosts_files("tg") == ("topologies/lab-known_hosts",)


def test_known_hosts_is_refused_on_a_testbed_the_library_builds():
    data = copy.deepcopy(GOOD)
    data["known_hosts"] = "x"
    with pytest.raises(TopologyError, match=r"3node\.yaml: known_hosts: must be absent with "
                       r"provision: netns"):
        parse_topology(data, "3node.yaml")


def test_only_kernel_interfaces_need_permission_to_move_addresses_into_vpp():
    lab = load_topology(str(TOPOLOGY_DIR / "examples" / "lab-3node.yaml"))
    assert lab.kernel_interfaces_for_vpp("dut") == []  # both DUT NICs are dpdk by PCI address
    assert not lab.allows_change("addresses")
    local = load_topology("3node")
    assert local.kernel_interfaces_for_vpp("dut") == ["eth1", "eth2"]  # af_packet on veths
    assert local.allows_change("addresses")


def test_vpp_core_sharers_are_the_placements_on_vpps_cores_of_the_same_machine():
    built = load_topology("3node")  # one machine: every node's placement counts
    assert built.vpp_core_sharers("dut") == [
        "nodes.dut.cpus.proxy", "nodes.dut.cpus.server", "nodes.server.cpus.server"]
    lab = _lab()  # VPP's workers on cores of their own; CPU 1 elsewhere is another machine
    assert parse_topology(lab, "lab.yaml").vpp_core_sharers("dut") == []
    lab["nodes"]["dut"]["cpus"]["proxy"] = [2]  # a worker's core
    assert parse_topology(lab, "lab.yaml").vpp_core_sharers("dut") == ["nodes.dut.cpus.proxy"]
    lab["nodes"]["dut"]["cpus"] = {"proxy": [3]}
    assert parse_topology(lab, "lab.yaml").vpp_core_sharers("dut") is None
