"""What every open-loop generator shares (vegeta, oha): its options (a URL, a whole rate,
positive numbers, latency limits and the load CPUs, checked alike with errors that name the
tool and the option) and the temporary folder of its run's files, removed on every path."""

from __future__ import annotations

import shlex
from typing import Any
from urllib.parse import urlsplit


def check_open_loop_options(tool: str, options: Any, numbers: tuple[str, ...]) -> None:
    """Check the frozen dataclass ``options`` of ``tool`` (its ``url``, ``rate``, ``slo_ms``,
    ``cpus`` and the positive ``numbers``) and normalise ``cpus`` and ``slo_ms`` to tuples;
    ``ValueError`` naming ``tool`` and the option."""
    url = options.url
    parts = urlsplit(url) if isinstance(url, str) else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{tool} option url: expected an http:// or https:// URL with a host, "
                         f"got {url!r}")
    for name in numbers:
        value = getattr(options, name)
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
            raise ValueError(f"{tool} option {name}: expected a positive number, got {value!r}")
    if round(options.rate) < 1:
        raise ValueError(f"{tool} option rate: expected at least 1 request/s, got "
                         f"{options.rate!r}")
    if any(not isinstance(v, int | float) or v <= 0 for v in options.slo_ms):
        raise ValueError(f"{tool} option slo_ms: expected positive milliseconds, got "
                         f"{options.slo_ms!r}")
    if options.cpus is not None:
        object.__setattr__(options, "cpus", tuple(int(c) for c in options.cpus))
    object.__setattr__(options, "slo_ms", tuple(float(v) for v in options.slo_ms))


def temporary_folder(workdir: str, tool: str) -> list[str]:
    """The shell lines that make ``$d``, a folder under ``workdir`` for one run's files, and
    remove it on every path: the shell's exit, and a hard timeout's TERM (``timeout -k``,
    as :meth:`libraries.testbed.node.Node.run` wraps every command), which ends the shell
    through its exit trap once the generator processes (its process group) are gone. The
    traps come first, and the folder is made only once its name is in ``$d``: ``mktemp -d``
    killed by the timeout between making the folder and printing its name (seen on a loaded
    machine) left it behind."""
    return ["d=", "trap '[ -n \"$d\" ] && rm -rf \"$d\"' EXIT", "trap 'exit 143' TERM INT HUP",
            f"n=$(mktemp -u {shlex.quote(workdir)}/{tool}.XXXXXX) || exit 1",
            'd=$n', 'mkdir -m 700 "$d" || exit 1']
