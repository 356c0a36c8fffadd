"""The userspace sslsniff variant: bpftime runs the sslsniff eBPF program with its own uprobes.

Two processes (LAB-NOTES): ``bpftime load <sslsniff>`` loads the program into bpftime's shared
memory and waits; ``bpftime start /usr/sbin/nginx -c CONF -p PREFIX`` starts nginx with the
bpftime agent injected, which attaches the uprobes inside nginx only. (The seed's
``bpftime start nginx -- -c ...`` form passes ``--`` to nginx, which exits.) A bpftime built
without its LLVM JIT needs ``BPFTIME_VM_NAME=ubpf`` in *both* processes' environment or nothing
attaches: the topology's per-tool environment goes in :attr:`BpftimeSetup.env`. bpftime leaves
``/dev/shm/bpftime_maps_shm`` and ``~/.bpftime/runtime.log`` behind: :func:`cleanup_bpftime`.

bpftime is not packaged; :func:`detect_bpftime` raises :class:`ToolMissing` with the reason so
the suite skips the variant.
"""

from __future__ import annotations

import logging
import re
import shlex
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from libraries.testbed.errors import NodeError, ToolMissing

LOG = logging.getLogger(__name__)
DEFAULT_BINARY = "~/.bpftime/bpftime"
SHM_PATH = "/dev/shm/bpftime_maps_shm"
RUNTIME_LOG = ".bpftime/runtime.log"  # under the node user's home
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


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
    ``{"BPFTIME_VM_NAME": "ubpf"}`` for a build without LLVM; from the topology's tool entry).
    """

    binary: str = DEFAULT_BINARY
    sslsniff: str
    env: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _path(self.binary, "binary")
        _path(self.sslsniff, "sslsniff")
        env = dict(self.env)
        for key, value in env.items():
            if not isinstance(key, str) or not _ENV_NAME.match(key) or not isinstance(value, str):
                raise ValueError(
                    f"bpftime env: expected NAME=string pairs, got {key!r}={value!r}"
                )
        object.__setattr__(self, "env", env)


def load_command(setup: BpftimeSetup) -> str:
    """``bpftime load <sslsniff>``: loads the program and keeps running (start it in the
    background with ``env=setup.env``; stop it with SIGINT so it prints its totals)."""
    return f"{_shell_path(setup.binary)} load {_shell_path(setup.sslsniff)}"


def start_command(setup: BpftimeSetup, nginx: str, config: str, prefix: str) -> str:
    """``bpftime start /usr/sbin/nginx -c CONF -p PREFIX``: nginx with bpftime's agent.

    ``nginx`` must be the binary's absolute path (bpftime execs it; no ``--`` separator).
    """
    for value, what in ((nginx, "nginx binary"), (config, "nginx config"),
                        (prefix, "nginx prefix")):
        if not isinstance(value, str) or not value.startswith("/"):
            raise ValueError(f"bpftime start: expected an absolute {what} path, got {value!r}")
    argv = [nginx, "-c", config, "-p", prefix]
    return f"{_shell_path(setup.binary)} start " + " ".join(shlex.quote(a) for a in argv)


def interrupt_command(pgid: int) -> str:
    """SIGINT to a process group: libbpf-style loaders print totals only on SIGINT."""
    if isinstance(pgid, bool) or not isinstance(pgid, int) or pgid < 2:
        raise ValueError(f"process group: expected a PID > 1, got {pgid!r}")
    return f"kill -s INT -- -{pgid}"


def cleanup_command() -> str:
    """Remove what bpftime leaves behind: its shared-memory maps and runtime log."""
    return f"rm -f {SHM_PATH} \"$HOME\"/{RUNTIME_LOG}"


def detect_bpftime(node: Any, setup: BpftimeSetup) -> str:
    """The bpftime version line when bpftime and the sslsniff program are on ``node``.

    Raises :class:`ToolMissing` naming what is absent ("bpftime not installed on dut:
    ~/.bpftime/bpftime missing") so the suite skips the userspace variant with that reason.
    """
    script = (
        f"b={_shell_path(setup.binary)}; s={_shell_path(setup.sslsniff)}; "
        'if [ ! -x "$b" ]; then b=$(command -v "$b") || { echo "missing=bpftime"; exit 0; }; fi; '
        'test -x "$s" || echo "missing=sslsniff"; '
        'echo "version=$("$b" --version 2>&1 | head -n 1)"'
    )
    out = node.run(script, timeout=20, check=False).stdout
    if "missing=bpftime" in out:
        raise ToolMissing(f"bpftime not installed on {node.name}: {setup.binary} missing "
                          "(not packaged; build it from source)")
    if "missing=sslsniff" in out:
        raise ToolMissing(f"bpftime sslsniff program missing on {node.name}: {setup.sslsniff}")
    match = re.search(r"^version=(.*)$", out, re.MULTILINE)
    return match.group(1).strip() if match else "unknown"


def cleanup_bpftime(node: Any) -> None:
    """Remove bpftime's shared memory and runtime log on ``node`` (idempotent)."""
    node.run(cleanup_command(), timeout=20, sudo=True)


def stop_with_sigint(node: Any, process: Any, wait: float = 5.0) -> str:
    """Send SIGINT to ``process``'s group, give it ``wait`` s to print and exit, then stop it
    the Node way (SIGTERM, SIGKILL). Returns its log."""
    node.run(interrupt_command(process.pid), timeout=10, check=False, sudo=True)
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        state = node.run(f"ps -o stat= -p {int(process.pid)}", timeout=10, check=False)
        if state.exit_code != 0 or state.stdout.strip().startswith("Z"):
            break
        time.sleep(0.1)
    try:
        return node.stop(process)
    except NodeError as error:
        LOG.warning("%s: stopping %s after SIGINT: %s", node.name, process, error)
        raise
