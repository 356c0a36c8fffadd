"""VCL and VPP startup.conf templates: the seeds' blocks exactly (modulo whitespace)."""

from __future__ import annotations

from pathlib import Path

import pytest

from libraries.testbed.errors import RenderError
from libraries.vpp.conf_params import DpdkDevice, VclParams, VppStartupParams

GOLDEN = Path(__file__).parent / "golden"


def lines(text: str) -> list[str]:
    """Non-empty lines with whitespace normalised: the comparison 'modulo whitespace'."""
    return [" ".join(line.split()) for line in text.splitlines() if line.strip()]


def sections(text: str) -> dict[str, list[str]]:
    """startup.conf -> {section: its lines}; nested ``{ ... }`` kept inline on one line."""
    result: dict[str, list[str]] = {}
    current: str | None = None
    depth = 0
    for line in lines(text):
        if current is None:
            assert line.endswith("{"), f"expected a section start, got {line!r}"
            current = line[:-1].strip()
            assert current not in result, f"section {current} twice"
            result[current] = []
            continue
        if line == "}" and depth == 0:
            current = None
            continue
        if depth > 0:
            result[current][-1] += " " + line
        else:
            result[current].append(line)
        depth += line.count("{") - line.count("}")
    assert current is None, "unterminated section"
    return result


@pytest.mark.parametrize(
    ("golden", "params"),
    [
        ("seed000_vcl_nginx_server.conf", VclParams(namespace_id="server", namespace_secret=1234)),
        ("seed000_vcl_nginx_proxy.conf", VclParams(namespace_id="proxy", namespace_secret=1234)),
        ("seed000_vcl_wrk2.conf",
         VclParams(namespace_id="client", namespace_secret=1234, use_mq_eventfd=True)),
        ("seed000_vcl_nginx_proxy_pn.conf", VclParams(app_scope_global=False)),
        ("seed001_vcl_iperf3_server_lb.conf",
         VclParams(heapsize=None, segment_size=None, add_segment_size=None,
                   namespace_id="server", namespace_secret=1234)),
        ("seed001_vcl_iperf3_client.conf",
         VclParams(heapsize=None, segment_size=None, add_segment_size=None,
                   namespace_id="client", namespace_secret=5678)),
        ("seed001_vcl_iperf3_server_pn.conf",
         VclParams(heapsize=None, segment_size=None, add_segment_size=None)),
    ],
)
def test_vcl_matches_the_seed_block(golden, params):
    assert lines(params.render()) == lines((GOLDEN / golden).read_text())


def test_vcl_explicit_socket_local_scope_and_sizes():
    text = VclParams(
        heapsize="128M", rx_fifo_size=65536, tx_fifo_size=131072, namespace_id="ns1",
        app_scope_global=False, app_scope_local=True,
        app_socket_api="/run/vpp/app_ns_sockets/ns1",
    ).render()
    assert lines(text) == [
        "vcl {", "heapsize 128M", "segment-size 4000000000", "add-segment-size 4000000000",
        "rx-fifo-size 65536", "tx-fifo-size 131072", "namespace-id ns1", "app-scope-local",
        "app-socket-api /run/vpp/app_ns_sockets/ns1", "}",
    ]


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: VclParams(heapsize="lots"), r"VclParams.heapsize: expected a size like"),
        (lambda: VclParams(rx_fifo_size=0), r"rx_fifo_size: expected an integer >= 1, got 0"),
        (lambda: VclParams(namespace_secret=1234), "no secret without a namespace_id"),
        (lambda: VclParams(namespace_id="a b"), "namespace_id"),
        (lambda: VclParams(app_socket_api="relative/sock"), "app_socket_api"),
    ],
)
def test_bad_vcl_parameters_are_refused(build, message):
    with pytest.raises(RenderError, match=message):
        build()


def test_no_hugepages_startup_has_the_lab_notes_stanzas():
    """LAB-NOTES: the stanza set VPP 26.10 ran with here without hugepages."""
    got = sections(VppStartupParams(no_hugepages=True, tcp_cc_algo=None).render())
    assert got == {
        "unix": ["nodaemon", "cli-listen /run/vpp/cli.sock"],
        "socksvr": ["socket-name /run/vpp/api.sock"],
        "memory": ["main-heap-size 1G", "main-heap-page-size 4k"],
        "buffers": ["buffers-per-numa 16384", "page-size 4k"],
        "statseg": ["page-size 4k"],
        "session": ["enable", "use-app-socket-api"],
        "plugins": ["plugin dpdk_plugin.so { disable }"],
    }


def test_no_hugepages_keeps_explicit_values():
    params = VppStartupParams(no_hugepages=True, buffers_per_numa=4096, statseg_page_size="2M")
    got = sections(params.render())
    assert got["buffers"] == ["buffers-per-numa 4096", "page-size 4k"]
    assert got["statseg"] == ["page-size 2M"]


def test_jumbo_suggestion_of_seed_001():
    got = sections(VppStartupParams(tcp_mtu=9000, default_data_size=10000).render())
    seed = sections((GOLDEN / "seed001_startup_jumbo.conf").read_text())
    assert got["tcp"] == seed["tcp"] == ["cc-algo cubic", "mtu 9000"]
    assert got["buffers"] == seed["buffers"] == ["default data-size 10000"]


def test_seed_000_command_line_as_a_startup_file():
    """Seed 000 (Ethernet): unix {cli-listen} cpu {main-core 1} tcp {cc-algo cubic}
    dpdk {dev 0000:01:00.0 {name eth0} dev 0000:01:00.1 {name eth1}} session {...}."""
    params = VppStartupParams(
        nodaemon=False, main_core=1, main_heap_size=None,
        dpdk_devices=[DpdkDevice(pci="0000:01:00.0", name="eth0"),
                      DpdkDevice(pci="0000:01:00.1", name="eth1")],
    )
    got = sections(params.render())
    assert got == {
        "unix": ["cli-listen /run/vpp/cli.sock"],
        "socksvr": ["socket-name /run/vpp/api.sock"],
        "cpu": ["main-core 1"],
        "tcp": ["cc-algo cubic"],
        "session": ["enable", "use-app-socket-api"],
        "dpdk": ["dev 0000:01:00.0 { name eth0 }", "dev 0000:01:00.1 { name eth1 }"],
    }


@pytest.mark.parametrize(("golden", "devices", "cpu"), [
    ("seed000_startup_dpdk.conf", [("0000:01:00.0", "eth0"), ("0000:01:00.1", "eth1")],
     {"main_core": 1}),
    ("seed001_startup_dpdk.conf", [("0000:01:00.0", "eth0")], {"main_core": 1, "workers": 0}),
])
def test_dpdk_ethernet_command_lines_of_the_seeds(golden, devices, cpu):
    """Seed 000/001's 'DPDK Ethernet Connection' VPP command lines, as startup files: every
    section of the seed renders exactly; the only addition is the API socket PAPI needs."""
    params = VppStartupParams(nodaemon=False, main_heap_size=None, **cpu,
                              dpdk_devices=[DpdkDevice(pci=p, name=n) for p, n in devices])
    got = sections(params.render())
    seed = sections((GOLDEN / golden).read_text())
    assert {k: v for k, v in got.items() if k != "socksvr"} == seed
    assert got["socksvr"] == ["socket-name /run/vpp/api.sock"]


def test_workers_event_queue_and_dpdk_virtual_devices():
    params = VppStartupParams(main_core=0, corelist_workers=[1, 2],
                              session_event_queue_length=16384,
                              dpdk_vdevs=["net_af_packet0,iface=eth1"],
                              plugins_path="/opt/vpp/lib/vpp_plugins:/opt/extra/vpp_plugins")
    got = sections(params.render())
    assert got["cpu"] == ["main-core 0", "corelist-workers 1,2"]
    assert got["session"] == ["enable", "use-app-socket-api", "event-queue-length 16384"]
    assert got["dpdk"] == ["no-pci", "vdev net_af_packet0,iface=eth1"]
    assert got["plugins"] == ["path /opt/vpp/lib/vpp_plugins:/opt/extra/vpp_plugins"]


def test_workers_log_plugins_path_and_plugin_switches():
    params = VppStartupParams(
        main_core=0, corelist_workers=[2, 3], log_path="/tmp/vpp/vpp.log",
        api_socket="/tmp/vpp/api.sock", cli_listen="/tmp/vpp/cli.sock",
        plugins_path="/usr/lib/x86_64-linux-gnu/vpp_plugins",
        enable_plugins=["af_packet_plugin.so"], disable_plugins=["quic_plugin.so"],
    )
    got = sections(params.render())
    assert got["unix"] == ["nodaemon", "cli-listen /tmp/vpp/cli.sock", "log /tmp/vpp/vpp.log"]
    assert got["socksvr"] == ["socket-name /tmp/vpp/api.sock"]
    assert got["cpu"] == ["main-core 0", "corelist-workers 2,3"]
    assert got["plugins"] == [
        "path /usr/lib/x86_64-linux-gnu/vpp_plugins",
        "plugin af_packet_plugin.so { enable }",
        "plugin quic_plugin.so { disable }",
        "plugin dpdk_plugin.so { disable }",
    ]
    assert sections(VppStartupParams(workers=2).render())["cpu"] == ["workers 2"]


def test_dpdk_plugin_left_alone_when_explicitly_enabled():
    got = sections(VppStartupParams(enable_plugins=["dpdk_plugin.so"]).render())
    assert got["plugins"] == ["plugin dpdk_plugin.so { enable }"]


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: VppStartupParams(corelist_workers=[1], workers=1),
         "workers: expected workers unset when corelist_workers is given"),
        (lambda: VppStartupParams(corelist_workers=[]), "corelist_workers"),
        (lambda: VppStartupParams(main_core=-1), "main_core"),
        (lambda: VppStartupParams(main_heap_page_size="huge"), "main_heap_page_size"),
        (lambda: VppStartupParams(tcp_mtu=10), "tcp_mtu"),
        (lambda: VppStartupParams(cli_listen="cli.sock"), "cli_listen"),
        (lambda: VppStartupParams(disable_plugins=["dpdk"]), "plugin file names"),
        (lambda: VppStartupParams(enable_plugins=["a.so"], disable_plugins=["a.so"]),
         "both enabled and disabled"),
        (lambda: VppStartupParams(
            dpdk_devices=[DpdkDevice(pci="0000:01:00.0", name="eth0")],
            disable_plugins=["dpdk_plugin.so"]), "not disabled when dpdk_devices"),
        (lambda: DpdkDevice(pci="01:00.0", name="eth0"),
         r"DpdkDevice.pci: expected a PCI address like '0000:01:00.0', got '01:00.0'"),
        (lambda: VppStartupParams(dpdk_devices=["0000:01:00.0"]), "a list of DpdkDevice"),
        (lambda: VppStartupParams(session_event_queue_length=100),
         "session_event_queue_length: expected an integer >= 2048"),
        (lambda: VppStartupParams(dpdk_vdevs=["net_tap0,iface=x"]),
         "dpdk_vdevs: expected DPDK af_packet virtual devices"),
        (lambda: VppStartupParams(dpdk_vdevs=["net_af_packet0,iface=eth1"],
                                  dpdk_devices=[DpdkDevice(pci="0000:01:00.0", name="e")]),
         "no virtual devices together with dpdk_devices"),
        (lambda: VppStartupParams(dpdk_vdevs=["net_af_packet0,iface=eth1"],
                                  disable_plugins=["dpdk_plugin.so"]),
         "not disabled when dpdk_devices or dpdk_vdevs"),
        (lambda: VppStartupParams(plugins_path="/a:relative"), "plugins_path"),
    ],
)
def test_bad_startup_parameters_are_refused(build, message):
    with pytest.raises(RenderError, match=message):
        build()
