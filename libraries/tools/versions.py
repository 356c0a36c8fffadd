"""Ask a node's tools for their versions, to record them with every result.

Each tool has a version command and a pattern that its answer must match: a tool that does not
answer (missing binary, crash, unexpected output) is reported with what it printed. A bare tool
name is resolved the way the node runs it (:meth:`Node.which`: the login PATH, and sudo's
secure_path for a sudo user, where /usr/sbin tools such as nginx and bpftool live). The patterns
accept every answer of the packaged tools (fixtures in ``utest/fixtures/versions/``), e.g.
bpftool's, which starts with the path it was called by.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Collection
from dataclasses import dataclass

from libraries.testbed.errors import ToolMissing
from libraries.testbed.node import Node


@dataclass(frozen=True)
class VersionProbe:
    """How to ask ``tool`` its version: ``args`` appended to the binary, ``pattern`` group 1;
    or ``command``, a shell command naming the binary as ``{path}`` (quoted), for a tool that
    cannot say it itself."""

    args: str
    pattern: str
    command: str | None = None


PROBES: dict[str, VersionProbe] = {
    "nginx": VersionProbe("-v", r"nginx version: nginx/(\S+)"),
    "nginx_ebpf": VersionProbe("-v", r"nginx version: nginx/(\S+)"),
    "iperf3": VersionProbe("--version", r"^iperf (\S+)"),
    "wrk": VersionProbe("-v", r"^wrk (\S+)"),
    "wrk2": VersionProbe("-v", r"^wrk (\S+)"),
    "openssl": VersionProbe("version", r"^OpenSSL (\S+)"),
    "bpftrace": VersionProbe("--version", r"^bpftrace v?(\S+)"),
    "bpftool": VersionProbe("version", r"^(?:\S*/)?bpftool v?(\S+)"),
    "sslsniff": VersionProbe("-h", r"(usage|Usage)()"),
    # bpftime's CLI answers argparse's default "1.0" (no release version is compiled in)
    "bpftime": VersionProbe("--version", r"^(?:bpftime\S*\s+v?)?(\d+\.\d+\S*)\s*$"),
    "bpftime_sslsniff": VersionProbe("--version", r"^sslsniff (\S+)$"),
    "taskset": VersionProbe("--version", r"util-linux (\S+)"),
    # vegeta built with `go install` prints an empty version: its module's is in the binary
    "oha": VersionProbe("--version", r"^oha (\S+)"),
    "perf": VersionProbe("--version", r"^perf version (\S+)"),
    "vegeta": VersionProbe("", r"vegeta/v\d+\s(v[0-9.]+)",
                           command="grep -a -o -m 1 'mod.github.com/tsenart/vegeta/v[0-9]*."
                                   "v[0-9.]*' {path}"),
}


def parse_version(tool: str, output: str) -> str | None:
    """The version in ``output`` of ``tool``'s version command (``present`` for tools that
    only print a usage), or None when the output is not that tool's answer."""
    match = re.search(PROBES[tool].pattern, output, flags=re.M)
    if match is None:
        return None
    return match.group(1) or "present"


def version_command(tool: str, path: str) -> str:
    """The shell command asking ``path`` (``tool``'s binary) its version."""
    probe = PROBES[tool]
    return (probe.command.format(path=shlex.quote(path)) if probe.command
            else f"{shlex.quote(path)} {probe.args}")


def tool_version(node: Node, tool: str, binary: str) -> str:
    """Version string of ``binary`` (the topology's path for ``tool``) on ``node``.

    Raises :class:`ToolMissing` naming the node, tool, binary and what it printed.
    """
    probe = PROBES.get(tool)
    if probe is None:
        raise ValueError(f"no version probe for tool {tool!r}: known {sorted(PROBES)}")
    path = node.which(binary)
    if path is None:
        where = "PATH" + (" nor in sudo's secure_path" if node.target.sudo else "")
        raise ToolMissing(f"{node.name}: tool {tool} ({binary}) not found: not in "
                          f"{node.target.user}'s {where}")
    command = version_command(tool, path)
    result = node.run(f"{command} 2>&1", timeout=15, check=False, quiet=True)
    version = parse_version(tool, result.stdout)
    if version is None:
        output = result.stdout.strip()[-300:] or "(no output)"
        raise ToolMissing(
            f"{node.name}: tool {tool} ({path}) does not answer `{command}` "
            f"(exit {result.exit_code}): {output}"
        )
    return version


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


def versions_line(versions: dict[str, str], optional: Collection[str]) -> str:
    """One node's versions as one line (Robot's ``Versions <node>`` metadata): each tool and
    its version, the ``optional`` tools that are absent (``missing: ...``) named once at the
    end as absent, not each with its shell's ``exit 127: ... not found``; a declared tool
    that is missing keeps its reason (the smoke suite fails on it)."""
    absent = [tool for tool, version in versions.items()
              if tool in optional and version.startswith("missing: ")]
    shown = [f"{tool} {version}" for tool, version in versions.items() if tool not in absent]
    if absent:
        shown.append(f"absent (optional): {', '.join(absent)}")
    return ", ".join(shown)
