"""Every keyword library renders with libdoc, without warnings, and documents each keyword."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

LIBRARIES = [
    "libraries.keywords.testbed.TestbedKeywords",
    "libraries.keywords.results.ResultsKeywords",
    "libraries.keywords.ssl_proxy.SslProxyKeywords",
    "libraries.keywords.tcp_term.TcpTermKeywords",
    "libraries.keywords.vpp.VppKeywords",
    "libraries.keywords.ebpf_stream.EbpfStreamKeywords",
    "libraries.keywords.sslsniff.SslsniffKeywords",
]


@pytest.mark.parametrize("library", LIBRARIES)
def test_libdoc_renders_without_warnings(library, tmp_path):
    out = tmp_path / "doc.json"
    result = subprocess.run([sys.executable, "-m", "robot.libdoc", "--format", "JSON",
                             library, str(out)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "[ WARN ]" not in result.stdout + result.stderr
    doc = json.loads(out.read_text())
    assert doc["keywords"], f"{library} has no keywords"
    undocumented = [kw["name"] for kw in doc["keywords"] if not kw["doc"].strip()]
    assert undocumented == []
