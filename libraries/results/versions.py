"""Ask a node's tools for their versions, to record them with every result.

Each tool has a version command and a pattern that its answer must match: a tool that does not
answer (missing binary, crash, unexpected output) is reported with what it printed.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from libraries.testbed.errors import ToolMissing
from libraries.testbed.node import Node


@dataclass(frozen=True)
class VersionProbe:
    """How to ask ``tool`` its version: ``args`` appended to the binary, ``pattern`` group 1."""

    args: str
    pattern: str


PROBES: dict[str, VersionProbe] = {
    "nginx": VersionProbe("-v", r"nginx version: nginx/(\S+)"),
    "nginx_ebpf": VersionProbe("-v", r"nginx version: nginx/(\S+)"),
    "iperf3": VersionProbe("--version", r"^iperf (\S+)"),
    "wrk": VersionProbe("-v", r"^wrk (\S+)"),
    "wrk2": VersionProbe("-v", r"^wrk (\S+)"),
    "openssl": VersionProbe("version", r"^OpenSSL (\S+)"),
    "bpftrace": VersionProbe("--version", r"^bpftrace v?(\S+)"),
    "bpftool": VersionProbe("version", r"^bpftool v?(\S+)"),
    "sslsniff": VersionProbe("-h", r"(usage|Usage)()"),
    # bpftime's CLI answers argparse's default "1.0" (no release version is compiled in)
    "bpftime": VersionProbe("--version", r"^(?:bpftime\S*\s+v?)?(\d+\.\d+\S*)\s*$"),
    "bpftime_sslsniff": VersionProbe("--version", r"^sslsniff (\S+)$"),
    "taskset": VersionProbe("--version", r"util-linux (\S+)"),
}


def tool_version(node: Node, tool: str, binary: str) -> str:
    """Version string of ``binary`` (the topology's path for ``tool``) on ``node``.

    Raises :class:`ToolMissing` naming the node, tool, binary and what it printed.
    """
    probe = PROBES.get(tool)
    if probe is None:
        raise ValueError(f"no version probe for tool {tool!r}: known {sorted(PROBES)}")
    result = node.run(f"{shlex.quote(binary)} {probe.args} 2>&1", timeout=15, check=False,
                      quiet=True)
    match = re.search(probe.pattern, result.stdout, flags=re.M)
    if match is None:
        output = result.stdout.strip()[-300:] or "(no output)"
        raise ToolMissing(
            f"{node.name}: tool {tool} ({binary}) does not answer `{binary} {probe.args}` "
            f"(exit {result.exit_code}): {output}"
        )
    return match.group(1) or "present"


def node_versions(node: Node, tools: dict[str, str]) -> dict[str, str]:
    """Kernel and OpenSSL versions plus every declared tool's; a silent tool reads
    ``missing: <reason>`` (the smoke suite fails on it, measuring suites skip)."""
    versions = {"kernel": node.run("uname -r", timeout=10, quiet=True).stdout.strip()}
    wanted = {"openssl": "openssl", **tools}
    for tool, binary in wanted.items():
        if tool not in PROBES:
            continue
        try:
            versions[tool] = tool_version(node, tool, binary)
        except ToolMissing as error:
            versions[tool] = f"missing: {error}"
    return versions
