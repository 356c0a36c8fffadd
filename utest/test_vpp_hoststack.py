"""Host-stack operations and the seeds' loopback layouts, asserted call by call on the fake VPP."""

from __future__ import annotations

import ipaddress
from typing import Any

import pytest

from libraries.testbed.errors import PapiError
from libraries.vpp.hoststack import HostStack
from libraries.vpp.loopback import (
    CrossTableRoute,
    LoopbackHostStackPlan,
    NamespaceSpec,
    configure_loopback_host_stack,
    teardown_loopback_host_stack,
)
from libraries.vpp.papi import PapiConnection
from utest.fake_vpp import FIXTURE_API_DIR, FakeVpp, RecordedCall, serve

NO_INDEX = 0xFFFFFFFF
SEED_000_ADDRESSES = ("172.16.1.1/24", "172.16.2.1/24", "172.16.3.1/24")


@pytest.fixture
def fake():
    with serve() as server:
        yield server


@pytest.fixture
def hs(fake: FakeVpp):
    with PapiConnection(fake.socket_path, FIXTURE_API_DIR, read_timeout=2.0) as conn:
        yield HostStack(conn)


def brief(call: RecordedCall) -> tuple[Any, ...]:
    """The arguments that carry the meaning of each call, in a comparable form."""
    f = call.fields
    match call.name:
        case "create_loopback":
            return (call.name,)
        case "sw_interface_set_flags":
            return (call.name, f["sw_if_index"], int(f["flags"]))
        case "ip_table_add_del":
            return (call.name, f["is_add"], f["table"].table_id, f["table"].is_ip6)
        case "sw_interface_set_table":
            return (call.name, f["sw_if_index"], f["vrf_id"], f["is_ipv6"])
        case "sw_interface_add_del_address":
            return (call.name, f["sw_if_index"], f["is_add"], str(f["prefix"]))
        case "app_namespace_add_del_v4":
            return (call.name, f["is_add"], f["namespace_id"], f["secret"], f["sw_if_index"])
        case "ip_route_add_del":
            route = f["route"]
            (path,) = route.paths
            assert route.n_paths == 1
            assert path.sw_if_index == NO_INDEX  # no interface ...
            assert ipaddress.ip_address(path.nh.address.ip4) == ipaddress.ip_address("0.0.0.0")
            assert (int(path.type), int(path.proto), path.weight) == (0, 0, 1)  # NORMAL, IP4
            return (call.name, f["is_add"], str(route.prefix), route.table_id, path.table_id)
        case "delete_loopback":
            return (call.name, f["sw_if_index"])
    return (call.name, f)


def test_seed_000_loopback_host_stack_sequence(hs: HostStack, fake: FakeVpp):
    plan = LoopbackHostStackPlan.ssl_proxy(addresses=SEED_000_ADDRESSES, secret=1234)
    stack = configure_loopback_host_stack(hs, plan)

    assert [brief(c) for c in fake.api_calls()] == [
        ("create_loopback",),                                   # create loopback interface
        ("sw_interface_set_flags", 1, 1),                       # set interface state loop0 up
        ("create_loopback",),
        ("sw_interface_set_flags", 2, 1),                       # loop1 up
        ("create_loopback",),
        ("sw_interface_set_flags", 3, 1),                       # loop2 up
        ("ip_table_add_del", True, 1, False),                   # ip table add 1
        ("sw_interface_set_table", 1, 1, False),                # set interface ip table loop0 1
        ("ip_table_add_del", True, 2, False),
        ("sw_interface_set_table", 2, 2, False),
        ("ip_table_add_del", True, 3, False),
        ("sw_interface_set_table", 3, 3, False),
        ("sw_interface_add_del_address", 1, True, "172.16.1.1/24"),
        ("sw_interface_add_del_address", 2, True, "172.16.2.1/24"),
        ("sw_interface_add_del_address", 3, True, "172.16.3.1/24"),
        ("app_namespace_add_del_v4", True, "server", 1234, 1),  # app ns add id server ... loop0
        ("app_namespace_add_del_v4", True, "proxy", 1234, 2),
        ("app_namespace_add_del_v4", True, "client", 1234, 3),
        ("ip_route_add_del", True, "172.16.1.1/32", 2, 1),      # table 2 via lookup in table 1
        ("ip_route_add_del", True, "172.16.3.1/32", 2, 3),
        ("ip_route_add_del", True, "172.16.2.1/32", 1, 2),
        ("ip_route_add_del", True, "172.16.2.1/32", 3, 2),
    ]
    assert [(ns.namespace_id, ns.sw_if_index, ns.table_id, ns.address, ns.secret)
            for ns in stack.namespaces] == [
        ("server", 1, 1, "172.16.1.1/24", 1234),
        ("proxy", 2, 2, "172.16.2.1/24", 1234),
        ("client", 3, 3, "172.16.3.1/24", 1234)]
    assert stack.namespace("proxy").appns_index == fake.state.namespaces["proxy"]["appns_index"]
    # what the fake VPP now holds is the seed's layout
    loops = {i.name: i for i in fake.state.interfaces.values() if i.dev_type == "Loopback"}
    assert {name: (i.admin_up, i.table_id, [str(a) for a in i.addresses])
            for name, i in loops.items()} == {
        "loop0": (True, 1, ["172.16.1.1/24"]),
        "loop1": (True, 2, ["172.16.2.1/24"]),
        "loop2": (True, 3, ["172.16.3.1/24"])}
    assert sorted(fake.state.routes) == [(1, "172.16.2.1/32"), (2, "172.16.1.1/32"),
                                         (2, "172.16.3.1/32"), (3, "172.16.2.1/32")]


def test_teardown_undoes_the_seed_000_layout(hs: HostStack, fake: FakeVpp):
    stack = configure_loopback_host_stack(hs, LoopbackHostStackPlan.ssl_proxy())
    before = len(fake.api_calls())
    teardown_loopback_host_stack(hs, stack)
    undo = [brief(c) for c in fake.api_calls()[before:]]
    assert [u[0] for u in undo] == (["ip_route_add_del"] * 4 + ["app_namespace_add_del_v4"] * 3
                                    + ["sw_interface_add_del_address"] * 3
                                    + ["sw_interface_set_table"] * 3
                                    + ["delete_loopback"] * 3 + ["ip_table_add_del"] * 3)
    assert undo[0] == ("ip_route_add_del", False, "198.19.2.1/32", 3, 2)
    assert undo[4] == ("app_namespace_add_del_v4", False, "client", 1234, 3)
    assert undo[-1] == ("ip_table_add_del", False, 1, False)
    assert list(fake.state.interfaces) == [0]
    assert fake.state.tables == {0}
    assert fake.state.routes == {}
    assert fake.state.namespaces == {}


def test_teardown_reports_every_step_that_failed(hs: HostStack, fake: FakeVpp):
    stack = configure_loopback_host_stack(hs, LoopbackHostStackPlan.tcp_term())
    fake.fail_next("delete_loopback", -2)
    with pytest.raises(PapiError) as caught:
        teardown_loopback_host_stack(hs, stack)
    assert "VPP PAPI delete_loopback(sw_if_index=2) -> retval -2" in str(caught.value)
    # the other steps still ran
    assert fake.state.routes == {}
    assert [i.name for i in fake.state.interfaces.values()] == ["local0", "loop1"]


def test_seed_001_tcp_term_layout_routes_and_secrets(hs: HostStack, fake: FakeVpp):
    plan = LoopbackHostStackPlan.tcp_term(addresses=("172.16.1.1/24", "172.16.2.1/24"))
    assert plan.routes() == (CrossTableRoute("172.16.1.1/32", 2, 1),
                             CrossTableRoute("172.16.2.1/32", 1, 2))
    configure_loopback_host_stack(hs, plan)
    namespaces = [brief(c) for c in fake.api_calls() if c.name == "app_namespace_add_del_v4"]
    assert namespaces == [("app_namespace_add_del_v4", True, "server", 1234, 1),
                          ("app_namespace_add_del_v4", True, "client", 5678, 2)]


def test_failure_midway_undoes_the_partial_layout_and_names_the_call(hs: HostStack,
                                                                     fake: FakeVpp):
    fake.fail_next("app_namespace_add_del_v4", -2)
    with pytest.raises(PapiError) as caught:
        configure_loopback_host_stack(hs, LoopbackHostStackPlan.ssl_proxy())
    assert str(caught.value).startswith("VPP PAPI app_namespace_add_del_v4(")
    assert "namespace_id='server'" in str(caught.value)
    assert str(caught.value).endswith("-> retval -2")
    assert not any(c.name == "ip_route_add_del" for c in fake.api_calls())
    assert list(fake.state.interfaces) == [0]
    assert fake.state.tables == {0}


def test_plan_with_session_enable_uses_v2_and_the_socket_api(hs: HostStack, fake: FakeVpp):
    fake.state.session_enabled = fake.state.sapi_enabled = False
    configure_loopback_host_stack(hs, LoopbackHostStackPlan.tcp_term(enable_session=True))
    first = fake.api_calls()[:2]
    assert [c.name for c in first] == ["session_enable_disable_v2",
                                       "session_sapi_enable_disable"]
    assert int(first[0].fields["rt_engine_type"]) == 1  # RT_BACKEND_ENGINE_API_RULE_TABLE
    assert first[1].fields["is_enable"] is True
    assert fake.state.session_enabled and fake.state.sapi_enabled


def test_session_enable_falls_back_on_a_vpp_without_v2():
    with serve(omit={"session_enable_disable_v2"}) as fake:
        with PapiConnection(fake.socket_path, FIXTURE_API_DIR) as conn:
            HostStack(conn).enable_session_layer(socket_api=False)
        assert [(c.name, c.fields) for c in fake.api_calls()] == [
            ("session_enable_disable", {"is_enable": True})]


def test_route_into_a_missing_table_fails_with_vpp_retval(hs: HostStack):
    hs.add_ip_table(2)
    with pytest.raises(PapiError, match=r"ip_route_add_del\(.*\) -> retval -3$"):
        hs.add_route_via_table_lookup("198.19.1.1/32", table_id=2, via_table_id=7)


def test_af_packet_interface_mtu_and_lookup_by_name(hs: HostStack, fake: FakeVpp):
    sw_if_index = hs.create_af_packet_interface("veth-dut1")
    hs.set_hardware_mtu(sw_if_index, 1500)
    hs.set_interface_up(sw_if_index)
    hs.add_interface_address(sw_if_index, "198.18.1.1/24")
    create = fake.api_calls()[0]
    assert create.name == "af_packet_create_v3"
    assert create.fields["host_if_name"] == "veth-dut1"
    assert int(create.fields["mode"]) == 1  # AF_PACKET_API_MODE_ETHERNET
    assert create.fields["use_random_hw_addr"] is True
    assert (create.fields["num_rx_queues"], create.fields["num_tx_queues"]) == (1, 1)
    assert (fake.api_calls()[1].name, fake.api_calls()[1].fields["mtu"]) == (
        "hw_interface_set_mtu", 1500)
    interface = hs.interface_by_name("host-veth-dut1")
    assert (interface.sw_if_index, interface.admin_up, interface.mtu) == (sw_if_index, True, 1500)
    addresses = hs.papi.call("ip_address_dump", sw_if_index=sw_if_index, is_ipv6=False)
    assert [str(d.prefix) for d in addresses] == ["198.18.1.1/24"]
    hs.delete_af_packet_interface("veth-dut1")
    assert [i.name for i in hs.list_interfaces()] == ["local0"]


def test_interface_by_name_lists_what_vpp_has(hs: HostStack):
    hs.create_loopback()
    with pytest.raises(PapiError, match=r"no interface named 'loop7'; it has: local0, loop0$"):
        hs.interface_by_name("loop7")


def test_show_version(hs: HostStack):
    assert hs.show_version().version == "26.10-rc0~fake"


def test_invalid_addresses_are_rejected_before_any_call(hs: HostStack, fake: FakeVpp):
    with pytest.raises(PapiError, match="invalid interface address '172.16.1.1/33'"):
        hs.add_interface_address(1, "172.16.1.1/33")
    with pytest.raises(PapiError, match="invalid route prefix"):
        hs.add_route_via_table_lookup("172.16.1.1/24", 1, 2)  # host bits set
    assert fake.api_calls() == []


@pytest.mark.parametrize(("namespaces", "links", "problem"), [
    ((("a", 1), ("b", 1)), (), "distinct namespace ids and tables"),
    ((("a", 1), ("a", 2)), (), "distinct namespace ids and tables"),
    ((("a", 0),), (), "table 0 is VPP's default table"),
    ((("a", 1), ("b", 2)), (("a", "c"),), r"link \(a, c\) names an unknown namespace"),
])
def test_plan_validation(namespaces, links, problem):
    specs = tuple(NamespaceSpec(n, t, f"198.19.{t}.1/24", 1) for n, t in namespaces)
    with pytest.raises(PapiError, match=problem):
        LoopbackHostStackPlan(specs, links)
