"""``Skip Capacity Where VPP Shares Its Cores``: a capacity under a latency goal is searched on
VPP only where VPP's cores are its own; the skip names the placements that share them."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import yaml
from robot.api import SkipExecution

from libraries.keywords import context, vpp
from libraries.keywords.vpp import VppKeywords
from libraries.testbed.errors import HostStackError
from libraries.testbed.topology import TOPOLOGY_DIR
from libraries.testbed.topology_file import load_topology, parse_topology


def _run(monkeypatch, topology, stack: str = "vpp", ab: str = "", anyway: str = "no") -> None:
    testbed = SimpleNamespace(topology=topology)
    monkeypatch.setattr(context, "testbed", lambda: testbed)
    monkeypatch.setattr(vpp, "BuiltIn", lambda: SimpleNamespace(
        get_variable_value={"${AB}": ab, "${CAPACITY_SHARED_CORES}": anyway}.get))
    VppKeywords().skip_capacity_where_vpp_shares_its_cores("dut", stack)


def test_vpp_sharing_cpu_0_with_the_proxy_and_the_server_skips_naming_them(monkeypatch):
    with pytest.raises(SkipExecution, match=r"^dut: VPP forwards on CPU 0, which "
                       r"nodes\.dut\.cpus\.proxy, nodes\.dut\.cpus\.server, "
                       r"nodes\.server\.cpus\.server also pin programs to: .* give VPP cores "
                       r"of its own in the topology \(nodes\.dut\.cpus\.vpp_main / "
                       r"vpp_workers\), or measure it anyway with -v "
                       r"CAPACITY_SHARED_CORES:yes$"):
        _run(monkeypatch, load_topology("3node"))


def test_unpinned_vpp_skips_and_says_which_key_is_missing(monkeypatch):
    lab = yaml.safe_load((TOPOLOGY_DIR / "examples" / "lab-3node.yaml").read_text())
    lab["nodes"]["dut"]["cpus"] = {"proxy": [3]}
    with pytest.raises(SkipExecution, match=r"nodes\.dut\.cpus\.vpp_main is not set"):
        _run(monkeypatch, parse_topology(lab, "lab.yaml"))


def test_the_kernel_stack_an_ab_run_and_vpp_on_cores_of_its_own_go_on(monkeypatch):
    shared = load_topology("3node")
    _run(monkeypatch, shared, stack="kernel")
    _run(monkeypatch, shared, ab="topologies/examples/ab-nginx-builds.yaml")
    own = parse_topology(yaml.safe_load(
        (TOPOLOGY_DIR / "examples" / "lab-3node.yaml").read_text()), "lab.yaml")
    _run(monkeypatch, own)


def test_capacity_shared_cores_yes_measures_anyway_with_a_warning(monkeypatch):
    warnings: list[str] = []
    monkeypatch.setattr(vpp.logger, "warn", warnings.append)
    _run(monkeypatch, load_topology("3node"), anyway="yes")
    assert warnings == ["dut: capacity measured with VPP's cores shared (-v "
                        "CAPACITY_SHARED_CORES:yes): nodes.dut.cpus.proxy, "
                        "nodes.dut.cpus.server, nodes.server.cpus.server; the figure includes "
                        "how the programs take turns on the core"]
    with pytest.raises(HostStackError, match=r"-v CAPACITY_SHARED_CORES:maybe: expected yes "
                       r"or no"):
        _run(monkeypatch, load_topology("3node"), anyway="maybe")
