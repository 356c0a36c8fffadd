"""The run report's A/B section shows what each side sets (the comparison file's content),
not only the file's name and sha."""

from __future__ import annotations

import copy
import json
from pathlib import Path

from libraries.report.ab_section import ab_section, change_lines, side_changes

AB_RECORD = json.loads((Path(__file__).parent / "fixtures" / "records" / "ab_record.json")
                       .read_text())


def test_every_setting_of_a_side_is_one_line():
    changes = {"tools": {"dut": {"nginx": "/opt/nginx-candidate/sbin/nginx"}},
               "nginx": {"proxy": {"server": ["access_log off;", "ssl_buffer_size 4k;"]}},
               "sysctl": {"dut": {"net.ipv4.tcp_rmem": "4096 4096 4096"}},
               "env": {"nginx": {"OPENSSL_ia32cap": "~0x200000200000000"}}}
    assert change_lines(changes) == [
        "tools dut nginx = /opt/nginx-candidate/sbin/nginx",
        "nginx proxy server: access_log off; ssl_buffer_size 4k;",
        "sysctl dut net.ipv4.tcp_rmem = 4096 4096 4096",
        "env nginx OPENSSL_ia32cap = ~0x200000200000000"]
    assert side_changes({"name": "a", "changes": {}}) == "as the topology has it"
    assert side_changes({"name": "a"}) == "(not recorded)"


def test_the_section_says_what_side_b_changed():
    record = copy.deepcopy(AB_RECORD)
    page = ab_section([record], {}, [], lambda test: "")
    assert "<b>a vpp</b>: as the topology has it; <b>b vpp-copy</b>: vpp dut api_dir = " \
        "/opt/vpp-copy/share/vpp/api; vpp dut bin = /opt/vpp-copy/bin/vpp;" in page
    assert "vpp dut vppctl = /opt/vpp-copy/bin/vppctl.</p>" in page
    assert "<code>topologies/examples/ab-vpp-installs.yaml</code>, sha256 5a5ac540a3bf" in page
    # and beside each side's figures in the table
    assert "<small>sets: vpp dut api_dir = /opt/vpp-copy/share/vpp/api;" in page
    assert "<small>sets: as the topology has it</small>" in page
