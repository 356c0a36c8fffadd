"""Side b's slowdowns for the A/B and nightly benchmarks: wrappers that run the real tool
slower (a burner beside it, SIGSTOP pauses, a CPU weight, a smaller iperf3 window), each passing
a version probe through untouched, and the removal of the CPU cgroups the weight wrapper
leaves. What each costs is measured, not assumed (benchmarks/README.md, ``--truth`` runs)."""

from __future__ import annotations

import sys
from pathlib import Path

BURNER = """#!/bin/sh
# side b of the A/B benchmark: the real {tool}, and beside it in its process group a burner
# busy {share} of every 10 ms on CPU {cpu} (a slowdown from outside); version probes pass.
case " $* " in *" -v "*|*" --version "*|*" -V "*|*" -t "*) exec {binary} "$@";; esac
taskset -c {cpu} {python} -c 'import time
while True:
    t = time.perf_counter()
    while time.perf_counter() - t < {busy}: pass
    time.sleep({idle})' </dev/null >/dev/null 2>&1 &
exec {binary} "$@"
"""


PAUSER = """#!/bin/sh
# side b of the A/B benchmark: the real {tool}, stopped (SIGSTOP) {share} of every {period} ms with
# all its processes but this loop, by a loop beside it in its process group; version probes
# pass.
case " $* " in *" -v "*|*" --version "*|*" -V "*|*" -t "*) exec {binary} "$@";; esac
{python} -c 'import os, signal, sys, time
root, busy, idle = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
def tree():
    kids = {{}}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                parent = int(open(f"/proc/{{name}}/stat").read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            kids.setdefault(parent, []).append(int(name))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        if pid != os.getpid():
            found.append(pid)
            todo += kids.get(pid, [])
    return found
def signal_all(pids, sig):
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass
pids, scanned = [root], 0.0
def leave(*_):
    signal_all(pids, signal.SIGCONT)
    sys.exit(0)
signal.signal(signal.SIGTERM, leave)
signal.signal(signal.SIGINT, leave)
time.sleep(0.2)
while os.path.exists(f"/proc/{{root}}"):
    if time.monotonic() - scanned > 1:
        pids, scanned = tree(), time.monotonic()
    signal_all(pids, signal.SIGSTOP)
    time.sleep(busy)
    signal_all(pids, signal.SIGCONT)
    time.sleep(idle)' $$ {busy} {idle} </dev/null >/dev/null 2>&1 &
exec {binary} "$@"
"""


def _wrapper(path: Path, text: str) -> Path:
    """Write the executable wrapper ``path``; its path."""
    path.write_text(text)
    path.chmod(0o755)
    return path


def pauser(folder: Path, tool: str, binary: str, share: float, period_ms: float = 10) -> Path:
    """Write the :data:`PAUSER` wrapper of ``binary``, stopped ``share`` of every
    ``period_ms``, into ``folder``; its path. Unlike a burner, it slows side b alone when both
    sides run at once (a duet): it takes side b's time, not a core's."""
    return _wrapper(folder / f"{tool}-pause-{share:g}-{period_ms:g}ms", PAUSER.format(
        tool=tool, share=f"{share:.1%}", binary=binary, python=sys.executable,
        busy=period_ms / 1000 * share, idle=period_ms / 1000 * (1 - share),
        period=f"{period_ms:g}"))


WEIGHTED = """#!/bin/sh
# side b of the A/B benchmark: the real {tool} in a CPU cgroup of its own whose weight is
# {fraction} of a process's: slower only where it competes for a core (in a duet, with side
# a's); version probes pass. `ip netns exec` hides the cgroup file system: it is mounted
# again here (the same hierarchy), then let go. bench_cgroups_removed() removes the
# emptied cgroups.
case " $* " in *" -v "*|*" --version "*|*" -V "*|*" -t "*) exec {binary} "$@";; esac
top=$(mktemp -d /tmp/{prefix}mount.XXXXXX)
if mount -t cgroup -o cpu cgroup "$top" 2>/dev/null; then
  mkdir "$top/{prefix}$$" && echo {v1} > "$top/{prefix}$$/cpu.shares"
elif mount -t cgroup2 cgroup2 "$top"; then
  mkdir "$top/{prefix}$$" && echo {v2} > "$top/{prefix}$$/cpu.weight"
fi
echo $$ > "$top/{prefix}$$/cgroup.procs"
umount -l "$top"; rmdir "$top"
exec {binary} "$@"
"""
CGROUP_PREFIX = "abbench-"


WINDOWED = """#!/bin/sh
# side b of the A/B benchmark: the real {tool} whose client asks for a {size}-byte socket
# buffer at both ends (-w); a server and a version probe pass untouched.
case " $* " in *" -c "*) exec {binary} "$@" -w {size};; esac
exec {binary} "$@"
"""


def windowed(folder: Path, tool: str, binary: str, size: int) -> Path:
    """Write the :data:`WINDOWED` wrapper of the iperf3 ``binary`` into ``folder``; its path."""
    return _wrapper(folder / f"{tool}-window-{size}", WINDOWED.format(
        tool=tool, binary=binary, size=size))


def weighted(folder: Path, tool: str, binary: str, fraction: float) -> Path:
    """Write the :data:`WEIGHTED` wrapper of ``binary`` (CPU weight ``fraction`` of the
    default) into ``folder``; its path."""
    return _wrapper(folder / f"{tool}-weight-{fraction:g}", WEIGHTED.format(
        tool=tool, fraction=f"{fraction:g}", binary=binary, prefix=CGROUP_PREFIX,
        v2=max(1, round(100 * fraction)), v1=max(2, round(1024 * fraction))))


def bench_cgroups_removed() -> None:
    """Remove the emptied cgroups the :data:`WEIGHTED` wrappers made (a cgroup with a
    process left in it stays, and is named)."""
    for root in (Path("/sys/fs/cgroup"), Path("/sys/fs/cgroup/cpu")):
        for group in root.glob(f"{CGROUP_PREFIX}*") if root.is_dir() else ():
            try:
                group.rmdir()
            except OSError as error:
                print(f"{group}: not removed ({error})", flush=True)


def burner(folder: Path, tool: str, binary: str, share: float) -> Path:
    """Write the :data:`BURNER` wrapper of ``binary`` taking ``share`` of CPU 0 into
    ``folder``; its path."""
    return _wrapper(folder / f"{tool}-burn-{share:g}", BURNER.format(
        tool=tool, share=f"{share:.0%}", cpu=0, binary=binary, python=sys.executable,
        busy=0.01 * share, idle=0.01 * (1 - share)))
