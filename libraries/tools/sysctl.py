"""Kernel parameters on a node: read, set and put back the way every privileged command runs
there, and the originals kept on the node until they are back.

``sysctl`` is resolved as the node finds it (:meth:`Node.which`: the login PATH, and sudo's
secure_path for a sudo user, whose own PATH lacks /usr/sbin), written with sudo where the node
says so, and a failure says what actually failed: the command not found, permission denied,
no such key. The originals a run is about to change are written to a state file on the node
(:func:`state_file`, outside any run's work folder) before the first change, and removed once
they are back; a run that died in between leaves the file, and the next run puts those values
back before it reads any original.
"""

from __future__ import annotations

import json
import shlex
from typing import Any

from libraries.testbed.errors import HostStackError, ToolMissing
from libraries.testbed.node import Node

STATE_DIR = "/var/lib/hoststack-perf"


def state_file(node: Node) -> str:
    """Where ``node`` keeps the originals a run changes (one file per node name: nodes of a lab
    built in namespaces of one machine share its file system)."""
    return f"{STATE_DIR}/sysctl-originals-{node.name}.json"


class SysctlError(HostStackError):
    """A sysctl could not be read or written (the message says why)."""


def _binary(node: Node) -> str:
    found = node.which("sysctl")
    if found is None:
        raise ToolMissing(f"{node.where}: sysctl: command not found (in the login PATH and "
                          "sudo's secure_path; Debian's package procps has it)")
    return found


def _why(text: str) -> str:
    lowered = text.lower()
    if "cannot stat" in lowered or "no such file" in lowered or "unknown key" in lowered:
        return f"no such key ({text.strip()})"
    if "permission denied" in lowered or "operation not permitted" in lowered or \
            "read-only" in lowered:
        return f"permission denied ({text.strip()})"
    if "not found" in lowered:
        return f"command not found ({text.strip()})"
    return text.strip() or "no output"


def read_sysctls(node: Node, keys: list[str]) -> dict[str, str]:
    """The current value of each of ``keys`` (whitespace as ``sysctl -n`` prints it, folded to
    single spaces); :class:`SysctlError` naming the node, the key and why."""
    binary = shlex.quote(_binary(node))
    values = {}
    for key in keys:
        read = node.run(f"{binary} -n {shlex.quote(key)}", timeout=10, check=False, quiet=True)
        if read.exit_code != 0:
            raise SysctlError(f"{node.where}: sysctl {key}: "
                              f"{_why(read.stderr or read.stdout)}")
        values[key] = " ".join(read.stdout.split())
    return values


def write_sysctls(node: Node, values: dict[str, str]) -> None:
    """Set every key of ``values`` (as root: sudo where the node is reached as another user);
    :class:`SysctlError` naming the node and why."""
    if not values:
        return
    binary = shlex.quote(_binary(node))
    command = "; ".join(f"{binary} -q -w {shlex.quote(f'{key}={value}')} >/dev/null"
                        for key, value in values.items())
    result = node.run(f"set -e; {command}", timeout=20, sudo=True, check=False)
    if result.exit_code != 0:
        raise SysctlError(f"{node.where}: sysctl -w {' '.join(sorted(values))}: "
                          f"{_why(result.stderr or result.stdout)}")


def save_originals(node: Node, values: dict[str, str], owner: dict[str, Any]) -> None:
    """Keep ``values`` (the originals about to be changed) and who changes them in
    :func:`state_file` on the node."""
    node.put(json.dumps({"values": values, "owner": owner}, indent=2) + "\n",
             state_file(node), mode=0o600, sudo=True)


def pending_originals(node: Node) -> dict[str, Any] | None:
    """What a run that did not put its originals back left in :func:`state_file` (``values``
    and ``owner``), or None; a file that does not parse is an error naming it."""
    path = state_file(node)
    read = node.run(f"cat {shlex.quote(path)}", timeout=10, sudo=True, check=False,
                    quiet=True)
    if read.exit_code != 0:
        return None
    try:
        state = json.loads(read.stdout)
        if not isinstance(state.get("values"), dict):
            raise ValueError("no 'values' object")
    except (ValueError, AttributeError) as error:
        raise SysctlError(f"{node.where}: {path}: not the originals a run keeps "
                          f"({error}): {read.stdout[:200]!r}") from None
    return state


def clear_originals(node: Node) -> None:
    """Remove :func:`state_file` (the originals are back)."""
    node.run(f"rm -f {shlex.quote(state_file(node))}", timeout=10, sudo=True)
