"""Sysctls read and written as the node runs privileged commands, errors that say what failed,
and the originals kept on the node until they are back (libraries.tools.sysctl)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from types import SimpleNamespace

import pytest

from libraries.testbed.errors import ToolMissing
from libraries.tools.sysctl import (
    SysctlError,
    pending_originals,
    read_sysctls,
    save_originals,
    state_file,
    write_sysctls,
)


@dataclass
class Node:
    """Answers ``sysctl``-like commands from ``answers`` (command prefix -> exit, out, err)."""

    name: str = "dut"
    sysctl: str | None = "/usr/sbin/sysctl"
    answers: dict[str, tuple[int, str, str]] = field(default_factory=dict)
    seen: list[tuple[str, bool]] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)

    @property
    def where(self) -> str:
        return f"{self.name} (perflab@198.18.0.2)"

    def which(self, binary: str) -> str | None:
        return self.sysctl

    def run(self, command: str, timeout: float, sudo: bool = False, check: bool = True,
            quiet: bool = False, stdin: bytes | None = None):
        self.seen.append((command, sudo))
        for prefix, (code, out, err) in self.answers.items():
            if prefix in command:
                return SimpleNamespace(exit_code=code, stdout=out, stderr=err)
        return SimpleNamespace(exit_code=0, stdout="4096\t131072\t6291456\n", stderr="")

    def put(self, text: str, path: str, mode: int = 0o644, sudo: bool = False) -> None:
        self.files[path] = text
        self.seen.append((f"put {path}", sudo))


def test_the_binary_is_the_one_the_node_resolves_and_writes_run_with_sudo():
    node = Node()
    assert read_sysctls(node, ["net.ipv4.tcp_rmem"]) == {
        "net.ipv4.tcp_rmem": "4096 131072 6291456"}
    assert node.seen[0] == ("/usr/sbin/sysctl -n net.ipv4.tcp_rmem", False)
    write_sysctls(node, {"net.ipv4.tcp_rmem": "4096 4096 4096"})
    assert node.seen[-1] == ("set -e; /usr/sbin/sysctl -q -w "
                             "'net.ipv4.tcp_rmem=4096 4096 4096' >/dev/null", True)


def test_a_node_without_sysctl_says_command_not_found():
    """Issue 34: a sudo user's PATH lacks /usr/sbin; the error said 'no such sysctl'."""
    with pytest.raises(ToolMissing, match=r"dut \(perflab@198.18.0.2\): sysctl: command not "
                                          r"found \(in the login PATH and sudo's secure_path"):
        read_sysctls(Node(sysctl=None), ["net.ipv4.tcp_rmem"])


@pytest.mark.parametrize(("err", "why"), [
    ("sysctl: cannot stat /proc/sys/net/ipv4/no_such: No such file or directory", "no such key"),
    ("sysctl: permission denied on key 'net.ipv4.tcp_rmem'", "permission denied"),
    ("sh: 1: sysctl: not found", "command not found"),
])
def test_a_failed_read_or_write_says_what_failed(err, why):
    node = Node(answers={"sysctl": (1, "", err)})
    with pytest.raises(SysctlError, match=f"dut .*: sysctl net.ipv4.x: {why} "):
        read_sysctls(node, ["net.ipv4.x"])
    with pytest.raises(SysctlError, match=f"sysctl -w net.ipv4.x: {why} "):
        write_sysctls(node, {"net.ipv4.x": "1"})


def test_the_originals_are_kept_per_node_and_read_back():
    node = Node()
    save_originals(node, {"net.ipv4.tcp_rmem": "4096 131072 6291456"}, {"pid": 7})
    path = state_file(node)
    assert path == "/var/lib/hoststack-perf/sysctl-originals-dut.json"
    assert node.seen[-1] == (f"put {path}", True)
    node.answers = {"cat ": (0, node.files[path], "")}
    assert pending_originals(node) == {"values": {"net.ipv4.tcp_rmem": "4096 131072 6291456"},
                                       "owner": {"pid": 7}}


def test_no_state_file_is_nothing_pending_and_a_broken_one_is_named():
    assert pending_originals(Node(answers={"cat ": (1, "", "No such file")})) is None
    broken = Node(answers={"cat ": (0, json.dumps({"owner": 1}), "")})
    with pytest.raises(SysctlError, match=r"sysctl-originals-dut.json: not the originals a run "
                                          r"keeps \(no 'values' object\)"):
        pending_originals(broken)
