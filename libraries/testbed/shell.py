"""Shell command lines for tools: quoting, CPU pinning, environment for the tool alone."""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def env_exports(env: Mapping[str, str] | None) -> list[str]:
    """``export NAME='value'`` statements; a name that is not a shell identifier is refused
    (a topology value must never become a command)."""
    exports = []
    for key, value in (env or {}).items():
        if not isinstance(key, str) or not _ENV_NAME.match(key):
            raise ValueError(f"environment variable name {key!r} is not a valid name")
        exports.append(f"export {key}={shlex.quote(str(value))}")
    return exports


def tool_command(argv: Sequence[str], cpus: Sequence[int] | None = None,
                 env: Mapping[str, str] | None = None) -> str:
    """Quote ``argv``; pin it with ``taskset -c``; export ``env`` to the tool only.

    The environment goes through ``sh -c 'export ...; exec tool'`` after taskset, so a
    preloaded library (LD_PRELOAD for VPP's VCL) is loaded by the tool and never by taskset.
    """
    command = " ".join(shlex.quote(arg) for arg in argv)
    exports = env_exports(env)
    if exports:
        command = "sh -c " + shlex.quote("; ".join(exports) + "; exec " + command)
    if cpus:
        command = f"taskset -c {','.join(str(int(cpu)) for cpu in cpus)} {command}"
    return command
