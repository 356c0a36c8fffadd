"""Tool version probes on the real answers of the packaged tools (``fixtures/versions/``), and
the resolution of bare tool names the way a node runs them (login PATH, then sudo's)."""

from __future__ import annotations

from pathlib import Path

import pytest

from libraries.testbed.errors import ToolMissing
from libraries.testbed.node import CommandResult, Node
from libraries.testbed.ssh import SshTarget
from libraries.tools.versions import (
    PROBES,
    node_versions,
    parse_version,
    tool_version,
    versions_line,
)

FIXTURES = Path(__file__).parent / "fixtures" / "versions"


@pytest.mark.parametrize(("tool", "fixture", "version"), [
    ("nginx", "nginx.txt", "1.22.1"),
    ("nginx", "nginx-sbin.txt", "1.22.1"),
    ("nginx_ebpf", "nginx-ebpf-build.txt", "1.24.0"),
    ("iperf3", "iperf3.txt", "3.12"),
    ("wrk", "wrk.txt", "debian/4.1.0-3+b2"),
    ("wrk2", "wrk2-build.txt", "4.0.0"),
    ("bpftrace", "bpftrace.txt", "0.17.0"),
    ("bpftool", "bpftool.txt", "7.1.0"),
    ("bpftool", "bpftool-sbin.txt", "7.1.0"),  # the issue: "/usr/sbin/bpftool v7.1.0 ..."
    ("openssl", "openssl.txt", "3.0.19"),
    ("taskset", "taskset.txt", "2.38.1"),
    ("perf", "perf.txt", "6.1.192"),  # Debian 12's linux-perf
    ("vegeta", "vegeta-go-install.txt", "v12.13.0"),  # its build info (`go install`)
])
def test_every_packaged_answer_is_accepted(tool, fixture, version):
    assert parse_version(tool, (FIXTURES / fixture).read_text()) == version


@pytest.mark.parametrize("tool", sorted(PROBES))
def test_a_shell_error_is_not_a_version(tool):
    assert parse_version(tool, "sh: 1: x: not found\n") is None


class ScriptedNode(Node):
    """A Node whose commands are answered from a table of (command, sudo) -> (exit, output);
    records what ran."""

    def __init__(self, user: str, sudo: bool, answers: dict[tuple[str, bool], tuple[int, str]]):
        super().__init__("dut", SshTarget(host="192.0.2.1", user=user, sudo=sudo), "/tmp/w")
        self.answers = answers
        self.ran: list[tuple[str, bool]] = []

    def run(self, command: str, timeout: float = 60.0, sudo: bool = False, check: bool = True,
            stdin: bytes | None = None, quiet: bool = False) -> CommandResult:
        self.ran.append((command, sudo))
        code, out = self.answers.get((command, sudo), (127, f"sh: 1: {command}: not found\n"))
        return CommandResult(command, code, out, "", 0.01)


def test_sbin_tool_of_a_sudo_user_is_found_through_sudos_path():
    node = ScriptedNode("perflab", True, {
        ("command -v bpftool", False): (1, ""),  # /usr/sbin is not on perflab's PATH
        ("command -v bpftool", True): (0, "/usr/sbin/bpftool\n"),
        ("/usr/sbin/bpftool version 2>&1", False): (0, (FIXTURES / "bpftool-sbin.txt")
                                                   .read_text()),
    })
    assert tool_version(node, "bpftool", "bpftool") == "7.1.0"
    assert node.which("bpftool") == "/usr/sbin/bpftool"
    assert node.ran.count(("command -v bpftool", True)) == 1  # resolved once per node


def test_a_root_login_never_asks_sudo():
    node = ScriptedNode("root", False, {
        ("command -v nginx", False): (0, "/usr/sbin/nginx\n"),
        ("/usr/sbin/nginx -v 2>&1", False): (0, (FIXTURES / "nginx.txt").read_text()),
    })
    assert tool_version(node, "nginx", "nginx") == "1.22.1"
    assert all(not sudo for _, sudo in node.ran)


def test_a_tool_found_nowhere_names_the_paths_searched():
    node = ScriptedNode("perflab", True, {("command -v bpftool", False): (1, ""),
                                          ("command -v bpftool", True): (1, "")})
    with pytest.raises(ToolMissing, match=r"^dut: tool bpftool \(bpftool\) not found: not in "
                       r"perflab's PATH nor in sudo's secure_path$"):
        tool_version(node, "bpftool", "bpftool")


def test_a_path_is_taken_as_given_and_a_wrong_answer_is_quoted():
    node = ScriptedNode("root", False, {
        ("/opt/x/bpftool version 2>&1", False): (139, "Segmentation fault\n")})
    with pytest.raises(ToolMissing, match=r"tool bpftool \(/opt/x/bpftool\) does not answer "
                       r"`/opt/x/bpftool version` \(exit 139\): Segmentation fault"):
        tool_version(node, "bpftool", "/opt/x/bpftool")
    assert node.ran == [("/opt/x/bpftool version 2>&1", False)]


def test_absent_optional_tools_are_listed_once_as_absent_in_the_versions_line():
    """Robot's ``Versions <node>`` metadata: an optional tool whose binary is not there is
    named once at the end, not with its shell's exit 127; a declared tool's reason stays."""
    node = ScriptedNode("root", False, {
        ("uname -r", False): (0, "6.1.0-41-amd64\n"),
        ("/usr/bin/openssl version 2>&1", False): (0, "OpenSSL 3.0.19 27 Jan 2026\n"),
        ("command -v openssl", False): (0, "/usr/bin/openssl\n"),
        ("/opt/wrk2/wrk -v 2>&1", False): (127, "sh: 1: /opt/wrk2/wrk: not found\n"),
        ("/opt/bpftime/bin/bpftime --version 2>&1", False): (
            127, "sh: 1: /opt/bpftime/bin/bpftime: not found\n"),
        ("/opt/x/bpftool version 2>&1", False): (127, "sh: 1: /opt/x/bpftool: not found\n")})
    versions = node_versions(node, {"wrk2": "/opt/wrk2/wrk",
                                    "bpftime": "/opt/bpftime/bin/bpftime",
                                    "bpftool": "/opt/x/bpftool"})
    assert versions["wrk2"].startswith("missing: ")
    line = versions_line(versions, ["wrk2", "bpftime", "vegeta"])
    assert line.startswith("kernel 6.1.0-41-amd64, openssl 3.0.19, bpftool missing: ")
    assert line.endswith(", absent (optional): wrk2, bpftime")
    assert line.count("exit 127") == 1  # bpftool's: declared, not optional
    assert versions_line({"wrk": "4.1.0"}, ["wrk2"]) == "wrk 4.1.0"
