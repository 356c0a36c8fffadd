"""The BPF statistics holder for real (root, python3, Linux 5.8+; skipped otherwise): it holds
a ``BPF_ENABLE_STATS`` descriptor while the context lasts, two holds overlap without touching
``kernel.bpf_stats_enabled``, and each holder is gone when its context ends."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from libraries.tools.ebpf_stream.bpf_stats import bpf_stats_enabled, read_bpf_stats_setting
from utest.localnode import LocalNode

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="BPF_ENABLE_STATS needs root"),
    pytest.mark.skipif(shutil.which("python3") is None, reason="python3 not installed"),
]


def held_descriptors(pid: int) -> list[str]:
    """The BPF statistics descriptors process ``pid`` holds."""
    fds = Path(f"/proc/{pid}/fd")
    return [link for link in (os.readlink(fd) for fd in fds.iterdir())
            if link == "anon_inode:bpf-stats"]


def test_overlapping_holds_each_hold_a_descriptor_and_leave_the_sysctl_alone(tmp_path):
    node = LocalNode(workdir=str(tmp_path))
    setting = read_bpf_stats_setting(node)
    with bpf_stats_enabled(node) as first:
        with bpf_stats_enabled(node) as second:
            assert first.holder.pid != second.holder.pid
            assert held_descriptors(first.holder.pid) == ["anon_inode:bpf-stats"]
            assert held_descriptors(second.holder.pid) == ["anon_inode:bpf-stats"]
            assert read_bpf_stats_setting(node) == setting
        assert not node.is_running(second.holder)
        assert first.counting() == (True, None)  # the other run's end left this one counting
        assert held_descriptors(first.holder.pid) == ["anon_inode:bpf-stats"]
    assert not node.is_running(first.holder) and node.processes == ()
    assert read_bpf_stats_setting(node) == setting
