"""A/B comparison files: validated like a topology (file and key path in every error), checked
against the topology they are used with, and applied to it per side."""

from __future__ import annotations

from pathlib import Path

import pytest

from libraries.ab.comparison import load_comparison, side_topology
from libraries.testbed.errors import TopologyError
from libraries.testbed.topology import TOPOLOGY_DIR
from libraries.testbed.topology_file import load_topology

EXAMPLES = sorted(TOPOLOGY_DIR.glob("examples/ab-*.yaml"))
THREE = load_topology("3node")


def _file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "ab.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_every_example_loads_against_the_local_testbed(path: Path):
    loaded = load_comparison(path, THREE)
    assert loaded.comparison.a.name and loaded.comparison.b.name
    assert len(loaded.sha256) == 64 and loaded.text == path.read_text()


def test_the_examples_hold_an_aa_file_builds_knobs_a_sysctl_and_vpp_sides():
    kinds = {p.name: load_comparison(p, THREE).comparison for p in EXAMPLES}
    assert kinds["ab-aa.yaml"].aa
    assert kinds["ab-nginx-builds.yaml"].b.tools["dut"]["nginx"].startswith("/opt/")
    assert kinds["ab-nginx-knob.yaml"].b.nginx["proxy"].server
    # the README's first: no second build, side b's nginx with OpenSSL's AES-NI masked off
    aesni = kinds["ab-openssl-aesni.yaml"].b
    assert aesni.env == {"nginx": {"OPENSSL_ia32cap": "~0x200000200000000"}} and not aesni.tools
    assert kinds["ab-sysctl.yaml"].b.sysctl["dut"]["net.ipv4.tcp_rmem"]
    assert kinds["ab-vpp-startup.yaml"].b.startup["dut"]["tcp"] == "mtu 1000"
    assert kinds["ab-vpp-installs.yaml"].b.vpp["dut"].bin == "/opt/vpp-copy/bin/vpp"


@pytest.mark.parametrize(("text", "message"), [
    ("a: {name: x}\nb: {name: y, tools: {client: {nginx: /x}}}\n",
     r"b\.tools\.client: no node 'client' in topology 3node \(nodes: tg, dut, server\)"),
    ("a: {name: x}\nb: {name: y, tools: {tg: {nginx: /x}}}\n",
     r"b\.tools\.tg\.nginx: tg declares no nginx in topology 3node"),
    ("a: {name: x}\nb: {name: y, nginx: {balancer: {http: ['a b;']}}}\n",
     r"b\.nginx\.balancer: invalid name: Input should be 'proxy', 'server' or 'stream'"),
    ("a: {name: x}\nb: {name: y, vpp: {tg: {bin: /x}}}\n",
     r"b\.vpp\.tg: tg has no VPP in topology 3node"),
    ("a: {name: x}\nb: {name: y, sysctl: {dut: {'net.core.rmem_max; reboot': 1}}}\n",
     r"b\.sysctl\.dut\.net\.core\.rmem_max; reboot: invalid name"),
    ("a: {name: x}\nb: {name: y, sysctl: {dut: {net.core.rmem_max: '1; reboot'}}}\n",
     r"b\.sysctl\.dut\.net\.core\.rmem_max: String should match pattern"),
    ("a: {name: x}\nb: {name: y, nginx: {proxy: {server: ['access_log off']}}}\n",
     r"b\.nginx\.proxy\.server\.0: String should match pattern"),
    ("a: {name: x}\nb: {name: y, nginx: {proxy: {server: ['} server { listen 1;']}}}\n",
     r"b\.nginx\.proxy\.server\.0: .*expected braces that close only the blocks the line opens"),
    ("a: {name: x}\nb: {name: y, nginx: {proxy: {server: ['if ($x) { return 503;']}}}\n",
     r"b\.nginx\.proxy\.server\.0: .*expected every '\{' closed on the same line"),
    ("a: {name: x}\nb: {name: y, env: {nginx: {'BAD-NAME': x}}}\n",
     r"b\.env\.nginx\.BAD-NAME: invalid name"),
    ("a: {name: x}\nb: {name: y, env: {nginks: {A: x}}}\n",
     r"b\.env\.nginks: unknown tool"),
    ("a: {name: x}\nb: {name: y, tool: {}}\n", r"b\.tool: unknown key \(typo\?\)"),
    ("a: {name: x}\n", r"\(top level\)\.b|b: required key is missing"),
    ("a: {name: x}\nb: {name: y}\n",
     r"a and b change the same things .*: that is an A/A check: say `aa: true`"),
    ("- a\n- b\n", r"expected a mapping with sides a and b"),
    ("a: {name: x\n", r"not valid YAML"),
])
def test_bad_input_is_named_with_file_and_key_path(tmp_path: Path, text: str, message: str):
    path = _file(tmp_path, text)
    with pytest.raises(TopologyError, match=message) as error:
        load_comparison(path, THREE)
    assert str(error.value).startswith(str(path))


def test_a_missing_file_is_named(tmp_path: Path):
    with pytest.raises(TopologyError, match="cannot read the comparison file"):
        load_comparison(tmp_path / "none.yaml", THREE)


def test_identical_sides_pass_when_the_file_says_it_is_an_aa_check(tmp_path: Path):
    loaded = load_comparison(_file(tmp_path, "aa: true\na: {name: x}\nb: {name: y}\n"), THREE)
    assert loaded.title == "x vs y" and loaded.comparison.aa


def test_a_side_sees_the_topology_with_its_binaries_environment_and_vpp(tmp_path: Path):
    loaded = load_comparison(_file(tmp_path, (
        "a: {name: old}\nb: {name: new, tools: {dut: {nginx: /opt/n/sbin/nginx}},\n"
        "   env: {nginx: {OPENSSL_ia32cap: '~0x200000200000000'}},\n"
        "   vpp: {dut: {bin: /opt/vpp-b/bin/vpp}}}\n")), THREE)
    b = side_topology(THREE, loaded.comparison.b)
    assert b.nodes["dut"].tools["nginx"] == "/opt/n/sbin/nginx"
    assert b.nodes["server"].tools["nginx"] == "nginx"  # only the DUT's was named
    assert b.nodes["dut"].tool_env["nginx"] == {"OPENSSL_ia32cap": "~0x200000200000000"}
    assert b.nodes["dut"].tool_env["bpftime"] == THREE.nodes["dut"].tool_env["bpftime"]
    assert b.nodes["dut"].vpp.bin == "/opt/vpp-b/bin/vpp"
    assert b.nodes["dut"].vpp.vppctl == THREE.nodes["dut"].vpp.vppctl
    assert side_topology(THREE, loaded.comparison.a) == THREE


def test_a_one_line_block_is_a_directive_a_side_may_add(tmp_path: Path):
    text = ("a: {name: x}\nb:\n  name: y\n  nginx: {proxy: {server: "
            "['if ($request_id ~ \"^0[0-2]\") { return 503; }']}}\n")
    loaded = load_comparison(_file(tmp_path, text), THREE)
    assert loaded.comparison.b.nginx["proxy"].server == (
        'if ($request_id ~ "^0[0-2]") { return 503; }',)
