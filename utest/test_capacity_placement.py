"""``Skip Capacity Where VPP Shares Its Cores`` (:mod:`libraries.cases.capacity`): a capacity
under a latency goal is searched on VPP only where VPP's cores are its own; the skip names the
placements that share them. No Robot: the case takes a context built here."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import yaml

from libraries.cases.capacity import skip_where_vpp_shares_its_cores
from libraries.cases.context import CaseContext, Skip
from libraries.cases.run_settings import resolve_settings
from libraries.testbed.topology import TOPOLOGY_DIR
from libraries.testbed.topology_file import load_topology, parse_topology


class _Log:
    def __init__(self) -> None:
        self.warnings: list[str] = []

    def info(self, text: str) -> None:
        pass

    def warn(self, text: str) -> None:
        self.warnings.append(text)

    def folded(self, title: str, text: str) -> None:
        pass


def _run(topology, stack: str = "vpp", ab: object = None, anyway: str = "no",
         log: _Log | None = None) -> None:
    """The skip as a suite given ``-v CAPACITY_SHARED_CORES:<anyway>`` runs it."""
    settings = resolve_settings(
        lambda name, default: anyway if name == "CAPACITY_SHARED_CORES" else default)
    ctx = CaseContext(SimpleNamespace(topology=topology), settings,  # type: ignore[arg-type]
                      log=log or _Log(), ab=ab)  # type: ignore[arg-type]
    skip_where_vpp_shares_its_cores(ctx, "dut", stack)


def test_vpp_sharing_cpu_0_with_the_proxy_and_the_server_skips_naming_them():
    with pytest.raises(Skip, match=r"^dut: VPP forwards on CPU 0, which "
                       r"nodes\.dut\.cpus\.proxy, nodes\.dut\.cpus\.server, "
                       r"nodes\.server\.cpus\.server also pin programs to: .* give VPP cores "
                       r"of its own in the topology \(nodes\.dut\.cpus\.vpp_main / "
                       r"vpp_workers\), or measure it anyway with -v "
                       r"CAPACITY_SHARED_CORES:yes$"):
        _run(load_topology("3node"))


def test_the_skip_is_robots_skip():
    """Robot marks a test skipped on an exception with ``ROBOT_SKIP_EXECUTION``, as on its own
    ``SkipExecution``; the message alone is the test's (no exception name)."""
    assert Skip.ROBOT_SKIP_EXECUTION is True and Skip.ROBOT_SUPPRESS_NAME is True


def test_unpinned_vpp_skips_and_says_which_key_is_missing():
    lab = yaml.safe_load((TOPOLOGY_DIR / "examples" / "lab-3node.yaml").read_text())
    lab["nodes"]["dut"]["cpus"] = {"proxy": [3]}
    with pytest.raises(Skip, match=r"nodes\.dut\.cpus\.vpp_main is not set"):
        _run(parse_topology(lab, "lab.yaml"))


def test_the_kernel_stack_an_ab_run_and_vpp_on_cores_of_its_own_go_on():
    shared = load_topology("3node")
    _run(shared, stack="kernel")
    _run(shared, ab=SimpleNamespace())  # an A/B session: the run compares closed-loop rates
    own = parse_topology(yaml.safe_load(
        (TOPOLOGY_DIR / "examples" / "lab-3node.yaml").read_text()), "lab.yaml")
    _run(own)


def test_capacity_shared_cores_yes_measures_anyway_with_a_warning():
    log = _Log()
    _run(load_topology("3node"), anyway="yes", log=log)
    assert log.warnings == ["dut: capacity measured with VPP's cores shared (-v "
                            "CAPACITY_SHARED_CORES:yes): nodes.dut.cpus.proxy, "
                            "nodes.dut.cpus.server, nodes.server.cpus.server; the figure "
                            "includes how the programs take turns on the core"]
    with pytest.raises(ValueError, match=r"-v CAPACITY_SHARED_CORES:maybe: expected yes "
                       r"or no"):  # refused when the suite resolves its settings
        _run(load_topology("3node"), anyway="maybe")
