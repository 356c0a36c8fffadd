"""The kernel's BPF run statistics (``run_cnt``, ``run_time_ns``) kept on for a measurement.

The kernel counts a BPF program's runs only while statistics are enabled. There are two
switches:

- a ``BPF_ENABLE_STATS`` file descriptor (Linux 5.8+): counted while any process holds one.
  The kernel counts the holders, so two runs sharing a machine each hold their own and neither
  turns the other's counting off; the count drops when the holder ends, killed or crashed
  included, so nothing is left switched on. :func:`bpf_stats_enabled` starts a small holder on
  the node (``python3``, as root) and stops it afterwards.
- the machine-wide sysctl ``kernel.bpf_stats_enabled``: the fallback on a node without
  ``python3``. It is one value for the whole machine: a run that puts back the ``0`` it found
  turns counting off under another run that set it meanwhile, and the other then leaves it at
  ``1``. :meth:`StatsHold.counting` reads it again at every check and says so when it is off.

Typical use::

    with bpf_stats_enabled(dut) as hold:
        ...
        counted, reason = hold.counting()
"""

from __future__ import annotations

import logging
import shlex
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from libraries.testbed.errors import HostStackError, ParseError
from libraries.testbed.process_output import wait_for_output

if TYPE_CHECKING:
    from libraries.testbed.node import Node

LOG = logging.getLogger(__name__)

BPF_STATS_SYSCTL = "/proc/sys/kernel/bpf_stats_enabled"
HOLDER_NAME = "bpf-stats"
HOLDER_READY = "bpf stats enabled"
HOLDER_SCRIPT = """\
import ctypes, os, signal, sys
# bpf(2)'s number per machine; BPF_ENABLE_STATS is command 32, BPF_STATS_RUN_TIME type 0
NR_BPF = {"x86_64": 321, "aarch64": 280, "riscv64": 280, "armv7l": 386, "ppc64le": 361,
          "s390x": 351, "i686": 357}
machine = os.uname().machine
if machine not in NR_BPF:
    sys.exit("no bpf(2) syscall number known for machine " + machine)
libc = ctypes.CDLL(None, use_errno=True)
attr = ctypes.create_string_buffer(16)
fd = libc.syscall(ctypes.c_long(NR_BPF[machine]), ctypes.c_long(32), attr, ctypes.c_long(16))
if fd < 0:
    sys.exit("BPF_ENABLE_STATS failed: " + os.strerror(ctypes.get_errno()))
print("bpf stats enabled, fd", fd, flush=True)
signal.pause()
"""
"""Holds a ``BPF_ENABLE_STATS`` descriptor until it is stopped (SIGTERM ends it)."""


@dataclass(frozen=True)
class StatsHold:
    """Statistics kept on on ``node``: by ``holder`` (the process holding the descriptor), or
    through the sysctl, whose value before was ``previous``."""

    node: Any
    holder: Any | None = None
    previous: int | None = None

    def describe(self) -> str:
        """One line for the log: how the statistics are on, and what is put back."""
        if self.holder is not None:
            return (f"BPF run statistics on {self.node.name}: on while {self.holder.name} "
                    f"(pid {self.holder.pid}) holds a BPF_ENABLE_STATS descriptor; "
                    "kernel.bpf_stats_enabled untouched")
        return (f"BPF run statistics on {self.node.name}: kernel.bpf_stats_enabled was "
                f"{self.previous}; set to 1 for the measurement, put back afterwards (no "
                "python3 on the node to hold a BPF_ENABLE_STATS descriptor)")

    def counting(self) -> tuple[bool, str | None]:
        """Whether the kernel counts runs now, and why not when it does not."""
        if self.holder is not None:
            if self.node.is_running(self.holder):
                return True, None
            return False, (f"the BPF statistics holder on {self.node.name} ended: "
                           f"{self.node.read_log(self.holder).strip()[-300:]!r}")
        if read_bpf_stats_setting(self.node) == 1:
            return True, None
        return False, (f"kernel.bpf_stats_enabled is 0 on {self.node.name} (another run "
                       "sharing the machine may have put it back): run counts not measured")


def read_bpf_stats_setting(node: Node) -> int:
    """Current ``kernel.bpf_stats_enabled`` (0 or 1) on ``node``."""
    text = node.run(f"cat {BPF_STATS_SYSCTL}", timeout=10, check=True).stdout
    if text.strip() not in ("0", "1"):
        raise ParseError(f"{node.name}: {BPF_STATS_SYSCTL}", "expected 0 or 1", text)
    return int(text)


def set_bpf_stats(node: Node, value: int) -> None:
    """Write ``kernel.bpf_stats_enabled`` (0 or 1) on ``node``."""
    if value not in (0, 1):
        raise ValueError(f"kernel.bpf_stats_enabled: expected 0 or 1, got {value!r}")
    node.run(f"echo {value} > {BPF_STATS_SYSCTL}", timeout=10, sudo=True)


def start_holder(node: Node, timeout: float = 10.0) -> Any:
    """Start the descriptor's holder (as root) and wait until it holds it; HostStackError
    with its output when it ends first (an old kernel: EINVAL) or says nothing in time."""
    holder = node.start(f"python3 -c {shlex.quote(HOLDER_SCRIPT)}", HOLDER_NAME, sudo=True)
    output = wait_for_output(node, holder, HOLDER_READY, timeout)
    if output.found:
        return holder
    text = node.stop(holder)
    what = "ended" if output.ended else f"said nothing in {timeout:g} s"
    raise HostStackError(
        f"{node.name}: could not keep BPF run statistics on (BPF_ENABLE_STATS, Linux 5.8+): "
        f"the holder {what}; its output: {text.strip()[-500:]!r}")


@contextmanager
def bpf_stats_enabled(node: Node) -> Iterator[StatsHold]:
    """Context in which the kernel counts BPF program runs on ``node``: a holder of a
    ``BPF_ENABLE_STATS`` descriptor, stopped on exit (a failure included); on a node without
    ``python3``, the sysctl set to 1 and put back. Yields the :class:`StatsHold`."""
    if node.which("python3"):
        holder = start_holder(node)
        LOG.info("%s: BPF run statistics held by pid %d", node.name, holder.pid)
        try:
            yield StatsHold(node, holder=holder)
        finally:
            node.stop(holder)
        return
    previous = read_bpf_stats_setting(node)
    if previous != 1:
        set_bpf_stats(node, 1)
    LOG.info("%s: kernel.bpf_stats_enabled 1 (was %d)", node.name, previous)
    try:
        yield StatsHold(node, previous=previous)
    finally:
        if previous != 1:
            set_bpf_stats(node, previous)
            LOG.info("%s: kernel.bpf_stats_enabled restored to %d", node.name, previous)
