"""Tool version probes on the real answers of the packaged tools (``fixtures/versions/``), and
the resolution of bare tool names the way a node runs them (login PATH, then sudo's)."""

from __future__ import annotations

from pathlib import Path

import pytest

from libraries.testbed.errors import ToolMissing
from libraries.testbed.node import CommandResult, Node
from libraries.testbed.ssh import SshTarget
from libraries.tools.versions import PROBES, parse_version, tool_version

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
