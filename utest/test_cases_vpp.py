"""VPP's host stack under a suite's applications (``libraries.cases.vpp``) without Robot: a
context built here, a real one-node testbed over SSH, and the process-level fake VPP (VPP
itself is not installed here) speaking vpp_papi's own protocol."""

from __future__ import annotations

import os
import shutil
from types import SimpleNamespace

import pytest

from libraries.cases.context import CaseContext
from libraries.cases.vpp import LOOPBACK_ADDRESSES, VppHostStack
from libraries.testbed.errors import HostStackError
from libraries.testbed.provision import Testbed
from utest.fake_vpp_daemon import fake_vpp_install

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root to build network namespaces"),
    pytest.mark.skipif(shutil.which("ssh") is None, reason="openssh-client not installed"),
]


class Log:
    """A case's log, kept."""

    def __init__(self) -> None:
        self.folded_titles: list[str] = []
        self.texts: dict[str, str] = {}

    def info(self, text: str) -> None:
        pass

    def warn(self, text: str) -> None:
        pass

    def folded(self, title: str, text: str) -> None:
        self.folded_titles.append(title)
        self.texts[title] = text


class Session:
    """An A/B session's registry of started components."""

    def __init__(self) -> None:
        self.registered: list[tuple[str, set]] = []

    def register(self, name, uses, stop, restart) -> None:
        self.registered.append((name, uses))

    def startup(self, node: str) -> tuple[tuple[str, str], ...]:
        return (("session", "evt_qs_memfd_seg"),)


@pytest.fixture(scope="module")
def testbed():
    built = Testbed.up("1node")
    try:
        yield built
    finally:
        built.down()


def _context(testbed, tmp_path, vpp: bool = True, ab=None) -> tuple[CaseContext, Log]:
    """The suite's context, its topology's dut running the fake VPP (``vpp``: or declaring
    none)."""
    topology = testbed.topology
    install = fake_vpp_install(testbed.node("dut"), tmp_path) if vpp else None
    nodes = {**topology.nodes, "dut": topology.nodes["dut"].model_copy(update={"vpp": install})}
    log = Log()
    view = SimpleNamespace(topology=topology.model_copy(update={"nodes": nodes}),
                           nodes=testbed.nodes, removed=False)
    return CaseContext(view, log=log, ab=ab), log  # type: ignore[arg-type]


def test_one_node_layout_places_each_application_and_stop_undoes_everything(testbed, tmp_path):
    ctx, log = _context(testbed, tmp_path)
    stack = VppHostStack()
    stack.set_up(ctx, "dut", ("server", "client"))
    try:
        instance = stack.placement.instances["dut"]
        assert stack.placement.runs_vpp("dut")
        assert {app: p.address for app, p in stack.placement.apps.items()} == {
            "server": "198.18.101.1", "client": "198.18.103.1"}
        assert [ns.namespace_id for ns in stack.loopbacks["dut"].namespaces] == [
            "server", "client"]
        assert "main-core 0" in log.texts["dut: VPP startup.conf"]  # the topology's vpp_main
    finally:
        stack.stop_all(ctx)
    assert stack.placement.instances == {} and stack.placement.apps == {}
    assert stack.loopbacks == {}
    assert "fake vpp: stopped" in log.texts["dut: VPP output"]
    assert "dut: vppctl show session verbose" in log.folded_titles
    assert not testbed.node("dut").is_running(instance.process)


def test_an_ab_side_restarts_vpp_with_its_startup_sections(testbed, tmp_path):
    session = Session()
    ctx, log = _context(testbed, tmp_path, ab=session)
    stack = VppHostStack()
    stack.set_up(ctx, "dut")
    try:
        assert session.registered == [("vpp-dut", {("vpp", "dut")})]
        assert "evt_qs_memfd_seg" in log.texts["dut: VPP startup.conf"]
        assert set(stack.placement.apps) == set(LOOPBACK_ADDRESSES)
    finally:
        stack.stop_all(ctx)


def test_refusals_name_the_node_and_what_is_wrong(testbed, tmp_path):
    ctx, _ = _context(testbed, tmp_path, vpp=False)
    with pytest.raises(HostStackError, match=r"^topology 1node: dut declares no vpp$"):
        VppHostStack().start(ctx, "dut")
    ctx, _ = _context(testbed, tmp_path)
    stack = VppHostStack()
    stack.start(ctx, "dut")
    try:
        with pytest.raises(HostStackError, match=r"^VPP already runs on dut$"):
            stack.start(ctx, "dut")
        with pytest.raises(HostStackError, match=r"unknown application\(s\) \['cache'\]; "
                           r"expected any of server, proxy, client"):
            stack.configure_loopback(ctx, "dut", ("server", "cache"))
        assert stack.loopbacks == {}
    finally:
        stack.stop_all(ctx)


def test_after_an_interrupt_removed_the_testbed_only_the_local_side_is_closed(testbed,
                                                                              tmp_path):
    ctx, log = _context(testbed, tmp_path)
    stack = VppHostStack()
    stack.start(ctx, "dut")
    instance = stack.placement.instances["dut"]
    ctx.testbed.removed = True  # the second signal's emergency removal ran
    stack.stop_all(ctx)
    assert stack.placement.instances == {}
    assert instance.forward.poll() is not None  # the SSH socket forward is closed
    assert "dut: VPP output" not in log.texts  # nothing was asked of the (gone) node
    testbed.node("dut").stop(instance.process, grace=5)  # the testbed is still here
