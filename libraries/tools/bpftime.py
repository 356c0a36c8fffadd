"""bpftime, the userspace eBPF runtime: its command lines, environment, detection and leftovers.

The sslsniff family runs seed 004's program under it (:mod:`libraries.tools.sslsniff.userspace`).

Two processes (checked with bpftime built from source): ``bpftime load
<sslsniff> [ARGS]`` loads the program into bpftime's shared memory and keeps running;
``bpftime start /usr/sbin/nginx -c CONF -p PREFIX`` then starts nginx with bpftime's agent
preloaded, which attaches the uprobes inside nginx only (master and workers; nothing in the
kernel). The seed's ``bpftime start nginx -- -c ...`` form passes ``--`` to nginx, which exits.
A bpftime built without its LLVM JIT needs ``BPFTIME_VM_NAME=ubpf`` in *both* processes'
environment: the topology's per-tool environment goes in :attr:`BpftimeSetup.env`.

What bpftime leaves behind, and how :func:`run_env` avoids it: its maps live in
``/dev/shm/<BPFTIME_GLOBAL_SHM_NAME>`` (default ``bpftime_maps_shm``), never removed, so each
run names its own and :func:`cleanup_command` removes it; without ``BPFTIME_LOG_OUTPUT`` every
process logs to ``~/.bpftime/runtime.log`` (created on first use), so it is set to a file of
the run. :func:`bpftime_state` / :func:`bpftime_leftovers` prove a run left nothing (shared
memory, log growth, a process with bpftime's agent or syscall server still mapped).

nginx under the agent may outlive one SIGTERM (the agent's thread can take the signal while
the master waits in sigsuspend): :func:`stop_group` repeats the signal. ``bpftime --version``
prints argparse's default "1.0", not a bpftime version: :func:`detect_bpftime` adds the
binary's SHA-256 to tell builds apart. bpftime is not packaged; :func:`detect_bpftime` raises
:class:`ToolMissing` with the reason so the suite skips the variant.
"""

from __future__ import annotations

import logging
import re
import shlex
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from libraries.testbed.errors import NodeError, ToolMissing

LOG = logging.getLogger(__name__)
DEFAULT_BINARY = "~/.bpftime/bpftime"
SHM_DIR = "/dev/shm"
DEFAULT_SHM_NAME = "bpftime_maps_shm"
SHM_PATH = f"{SHM_DIR}/{DEFAULT_SHM_NAME}"
RUNTIME_LOG = ".bpftime/runtime.log"  # under the node user's home
#: shared objects whose presence in a process's maps means bpftime is (still) injected
INJECTED = ("libbpftime-agent", "libbpftime-syscall-server")
#: what ``bpftime load`` and ``bpftime start`` preload, from the install folder (``-i DIR``)
LIBRARIES = ("libbpftime-agent.so", "libbpftime-syscall-server.so")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SHM_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


def _path(value: object, what: str) -> str:
    """A path that is absolute or starts at the home directory (``~/``)."""
    if not isinstance(value, str) or not (value.startswith(("/", "~/"))) or any(
        c in value for c in "\n\0"
    ):
        raise ValueError(f"bpftime {what}: expected an absolute or ~/ path, got {value!r}")
    return value


def _shell_path(path: str) -> str:
    """Quote ``path`` for sh, keeping a leading ``~/`` expandable (as ``"$HOME"/...``)."""
    if path.startswith("~/"):
        return '"$HOME"/' + shlex.quote(path[2:])
    return shlex.quote(path)


@dataclass(frozen=True, kw_only=True)
class BpftimeSetup:
    """Where bpftime and its sslsniff program are on a node.

    Fields: ``binary`` (the bpftime CLI; default ``~/.bpftime/bpftime``), ``sslsniff`` (the
    bpftime example's sslsniff loader binary), ``env`` (environment for both processes, e.g.
    ``{"BPFTIME_VM_NAME": "ubpf"}`` for a build without LLVM; from the topology's tool entry),
    ``install_dir`` (the folder holding :data:`LIBRARIES`, given to ``bpftime -i``; ``None``:
    bpftime's own default, ``~/.bpftime``; :func:`detect_bpftime` finds it beside the binary
    when the topology names none).
    """

    binary: str = DEFAULT_BINARY
    sslsniff: str
    env: Mapping[str, str] = field(default_factory=dict)
    install_dir: str | None = None

    def __post_init__(self) -> None:
        _path(self.binary, "binary")
        _path(self.sslsniff, "sslsniff")
        if self.install_dir is not None:
            _path(self.install_dir, "install_dir")
        env = dict(self.env)
        for key, value in env.items():
            if not isinstance(key, str) or not _ENV_NAME.match(key) or not isinstance(value, str):
                raise ValueError(
                    f"bpftime env: expected NAME=string pairs, got {key!r}={value!r}"
                )
        object.__setattr__(self, "env", env)


def _cli(setup: BpftimeSetup) -> str:
    """The bpftime CLI with its install folder (``-i DIR``, a global option) when known."""
    if setup.install_dir is None:
        return _shell_path(setup.binary)
    return f"{_shell_path(setup.binary)} -i {_shell_path(setup.install_dir)}"


def load_command(setup: BpftimeSetup, args: tuple[str, ...] | list[str] = ()) -> str:
    """``bpftime [-i DIR] load <sslsniff> [ARGS]``: loads the program and keeps running (start
    it in the background with :func:`run_env`; stop it with SIGINT so it detaches and exits)."""
    quoted = "".join(" " + shlex.quote(str(arg)) for arg in args)
    return f"{_cli(setup)} load {_shell_path(setup.sslsniff)}{quoted}"


def start_command(setup: BpftimeSetup, nginx: str, config: str, prefix: str) -> str:
    """``bpftime start /usr/sbin/nginx -c CONF -p PREFIX``: nginx with bpftime's agent.

    ``nginx`` must be the binary's absolute path (bpftime execs it; no ``--`` separator).
    """
    for value, what in ((nginx, "nginx binary"), (config, "nginx config"),
                        (prefix, "nginx prefix")):
        if not isinstance(value, str) or not value.startswith("/"):
            raise ValueError(f"bpftime start: expected an absolute {what} path, got {value!r}")
    argv = [nginx, "-c", config, "-p", prefix]
    return f"{_cli(setup)} start " + " ".join(shlex.quote(a) for a in argv)


def run_env(setup: BpftimeSetup, log_path: str, shm_name: str) -> dict[str, str]:
    """Environment of a bpftime process: the topology's, a log file of the run instead of
    ``~/.bpftime/runtime.log``, and the run's own shared-memory name (both processes of a run
    must use the same)."""
    if not isinstance(log_path, str) or not log_path.startswith("/"):
        raise ValueError(f"bpftime log: expected an absolute path, got {log_path!r}")
    if not isinstance(shm_name, str) or not _SHM_NAME.match(shm_name):
        raise ValueError(f"bpftime shared memory name: expected 1-64 letters, digits or _.-, "
                         f"got {shm_name!r}")
    return {**setup.env, "BPFTIME_LOG_OUTPUT": log_path, "BPFTIME_GLOBAL_SHM_NAME": shm_name}


def interrupt_command(pgid: int, signal: str = "INT") -> str:
    """``signal`` (default SIGINT) to a process group: libbpf-style loaders print totals and
    detach only on SIGINT."""
    if isinstance(pgid, bool) or not isinstance(pgid, int) or pgid < 2:
        raise ValueError(f"process group: expected a PID > 1, got {pgid!r}")
    if signal not in ("INT", "TERM"):
        raise ValueError(f"signal: expected INT or TERM, got {signal!r}")
    return f"kill -s {signal} -- -{pgid}"


def cleanup_command(shm_name: str = DEFAULT_SHM_NAME) -> str:
    """Remove the run's shared-memory maps (bpftime never does)."""
    if not _SHM_NAME.match(shm_name):
        raise ValueError(f"bpftime shared memory name: got {shm_name!r}")
    return f"rm -f {SHM_DIR}/{shm_name}"


@dataclass(frozen=True)
class DetectedBpftime:
    """bpftime found on a node: ``version`` (its answer and the binary's digest) and the
    ``setup`` to run it with, its install folder filled in."""

    version: str
    setup: BpftimeSetup


def detect_bpftime(node: Any, setup: BpftimeSetup) -> DetectedBpftime:
    """bpftime's version line and its binary's SHA-256 (first 16 hex digits) when bpftime, its
    libraries and the sslsniff program are on ``node``.

    The libraries (:data:`LIBRARIES`) are looked for in ``setup.install_dir`` when given, else
    beside the binary and in ``../lib`` from it: bpftime's own default, ``~/.bpftime``, holds
    them only for a binary installed there. Raises :class:`ToolMissing` naming what is absent
    ("bpftime not installed on dut: ~/.bpftime/bpftime missing") so the suite skips the
    userspace variant with that reason.
    """
    if setup.install_dir is not None:
        candidates = [_shell_path(setup.install_dir)]
    else:
        candidates = ['"$(dirname "$b")"', '"$(dirname "$b")/../lib"']
    libraries = " && ".join(f'[ -f "$d"/{name} ]' for name in LIBRARIES)
    script = (
        f"b={_shell_path(setup.binary)}; s={_shell_path(setup.sslsniff)}; "
        'if [ ! -x "$b" ]; then b=$(command -v "$b") || { echo "missing=bpftime"; exit 0; }; fi; '
        'test -x "$s" || echo "missing=sslsniff"; '
        f"for d in {' '.join(candidates)}; do echo \"looked=$d\"; "
        f'if {libraries}; then echo "install=$(cd "$d" && pwd -P)"; break; fi; done; '
        'echo "version=$("$b" --version 2>&1 | head -n 1)"; '
        'echo "sha256=$(sha256sum "$b" | cut -c1-16)"'
    )
    out = node.run(script, timeout=20, check=False).stdout
    if "missing=bpftime" in out:
        raise ToolMissing(f"bpftime not installed on {node.name}: {setup.binary} missing "
                          "(not packaged; build it from source)")
    if "missing=sslsniff" in out:
        raise ToolMissing(f"bpftime sslsniff program missing on {node.name}: {setup.sslsniff}")
    install = re.search(r"^install=(/.*)$", out, re.MULTILINE)
    if install is None:
        looked = re.findall(r"^looked=(.*)$", out, re.MULTILINE)
        raise ToolMissing(
            f"bpftime's libraries not found on {node.name}: {' and '.join(LIBRARIES)} are in "
            f"none of {', '.join(looked) or '(no folder)'} (the folder `bpftime -i` takes; "
            "name it in the topology as tool_dirs: {bpftime: DIR})")
    version = re.search(r"^version=(.+)$", out, re.MULTILINE)
    digest = re.search(r"^sha256=([0-9a-f]{16})$", out, re.MULTILINE)
    if version is None or digest is None:
        raise ToolMissing(f"{node.name}: {setup.binary} does not answer --version: {out!r}")
    found = replace(setup, install_dir=install.group(1))
    return DetectedBpftime(f"{version.group(1).strip()} sha256:{digest.group(1)}", found)


@dataclass(frozen=True)
class BpftimeState:
    """What bpftime may leave on a node: ``shm`` (the run's shared memory exists),
    ``runtime_log_bytes`` (size of ``~/.bpftime/runtime.log``; None when absent),
    ``injected`` ("PID COMM" of processes with bpftime's agent or syscall server mapped)."""

    shm: bool
    runtime_log_bytes: int | None
    injected: tuple[str, ...]


def bpftime_state(node: Any, shm_name: str = DEFAULT_SHM_NAME) -> BpftimeState:
    """Look at ``node`` for bpftime's shared memory, runtime log and injected processes."""
    if not _SHM_NAME.match(shm_name):
        raise ValueError(f"bpftime shared memory name: got {shm_name!r}")
    pattern = "|".join(INJECTED)
    script = (
        f"test -e {SHM_DIR}/{shm_name} && echo shm=present; "
        f'test -e "$HOME"/{RUNTIME_LOG} && echo "log=$(stat -c %s "$HOME"/{RUNTIME_LOG})"; '
        f"for m in /proc/[0-9]*/maps; do grep -qE '{pattern}' \"$m\" 2>/dev/null || continue; "
        'p=${m#/proc/}; p=${p%/maps}; echo "injected=$p $(cat /proc/$p/comm 2>/dev/null)"; done; '
        "echo done"
    )
    out = node.run(script, timeout=30, check=False, sudo=True).stdout
    if "done" not in out.splitlines():
        raise NodeError(f"{node.name}: bpftime state check printed no end marker: {out!r}")
    size = re.search(r"^log=(\d+)$", out, re.MULTILINE)
    return BpftimeState(
        shm="shm=present" in out.splitlines(),
        runtime_log_bytes=int(size.group(1)) if size else None,
        injected=tuple(line.split("=", 1)[1].strip() for line in out.splitlines()
                       if line.startswith("injected=")),
    )


def bpftime_leftovers(before: BpftimeState, after: BpftimeState,
                      shm_name: str = DEFAULT_SHM_NAME) -> list[str]:
    """What a bpftime run left, comparing the state before it with the state after its
    cleanup: one line per problem; empty when clean."""
    problems = []
    if after.shm:
        problems.append(f"{SHM_DIR}/{shm_name} still exists")
    grown = (after.runtime_log_bytes or 0) - (before.runtime_log_bytes or 0)
    if after.runtime_log_bytes is not None and (before.runtime_log_bytes is None or grown > 0):
        problems.append(f"~/{RUNTIME_LOG} grew by {grown} bytes (BPFTIME_LOG_OUTPUT not "
                        "honoured)")
    problems += [f"bpftime still injected in pid {p}" for p in after.injected
                 if p not in before.injected]
    return problems


def _group_alive_command(pgid: int) -> str:
    return f"ps -eo pgid=,stat= | awk '$1 == {int(pgid)} && $2 !~ /^Z/' | grep -q ."


def stop_group(node: Any, process: Any, signal: str = "INT", wait: float = 5.0,
               repeat: float | None = None) -> str:
    """Send ``signal`` to ``process``'s group (again every ``repeat`` s if given), wait up to
    ``wait`` s for *every* process of the group to exit (a counter behind a pipe prints its
    totals after the tracer is gone), then stop it the Node way (SIGTERM, SIGKILL).
    Returns its log."""
    command = interrupt_command(process.pid, signal)
    node.run(command, timeout=10, check=False, sudo=True)
    deadline = time.monotonic() + wait
    last = time.monotonic()
    while time.monotonic() < deadline:
        alive = node.run(_group_alive_command(process.pid), timeout=10, check=False)
        if alive.exit_code != 0:
            break
        if repeat is not None and time.monotonic() - last >= repeat:
            node.run(command, timeout=10, check=False, sudo=True)
            last = time.monotonic()
        time.sleep(0.1)
    else:
        LOG.warning("%s: %s still running %g s after SIG%s", node.name, process.name, wait,
                    signal)
    try:
        return node.stop(process)
    except NodeError as error:
        LOG.warning("%s: stopping %s after SIG%s: %s", node.name, process, signal, error)
        raise


def stop_with_sigint(node: Any, process: Any, wait: float = 5.0) -> str:
    """SIGINT to ``process``'s group (libbpf-style loaders detach and exit on it), then
    :func:`stop_group`'s wait and fallback. Returns its log."""
    return stop_group(node, process, "INT", wait)
