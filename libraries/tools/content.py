"""Content files served by the HTTPS server: size parsing and the command that makes one.

Sizes are binary throughout, as in the seeds' ``1kb`` file (``dd bs=1024 count=1``):
``1kb`` = ``1k`` = ``1KiB`` = 1024 bytes, ``1m``/``1mb``/``1MiB`` = 1048576.
"""

from __future__ import annotations

import re
import shlex

_UNITS = {"": 1, "b": 1, "k": 1024, "m": 1024**2, "g": 1024**3}
_SIZE = re.compile(r"^\s*(\d+)\s*([kmg]?)(?:i?b)?\s*$", re.IGNORECASE)


def parse_size(value: str | int) -> int:
    """Bytes in ``value``: an int, or text like '1kb', '64KiB', '1m', '512', '10 MB'.

    Raises ValueError naming the value for anything else (negative, zero, garbage).
    """
    if isinstance(value, bool):
        raise ValueError(f"content size: expected bytes or a size like '1kb', got {value!r}")
    if isinstance(value, int):
        size = value
    else:
        match = _SIZE.match(str(value))
        if not match:
            raise ValueError(
                f"content size: expected a size like '1kb', '64KiB', '1m' or bytes, "
                f"got {value!r}"
            )
        size = int(match.group(1)) * _UNITS[match.group(2).lower()]
    if size < 1:
        raise ValueError(f"content size: expected at least 1 byte, got {value!r}")
    return size


def size_name(size: str | int) -> str:
    """A file name for a size, as in the seeds' URL ``/1kb``: 1024 -> '1kb', 1048576 ->
    '1mb', 1000 -> '1000b'."""
    nbytes = parse_size(size)
    for suffix, unit in (("gb", 1024**3), ("mb", 1024**2), ("kb", 1024)):
        if nbytes % unit == 0:
            return f"{nbytes // unit}{suffix}"
    return f"{nbytes}b"


def content_file_command(path: str, size: str | int) -> str:
    """Shell command making ``path`` (absolute) a file of ``size`` random bytes.

    Creates the parent directory; every value is quoted.
    """
    if not path.startswith("/") or path.endswith("/"):
        raise ValueError(f"content file path: expected an absolute file path, got {path!r}")
    nbytes = parse_size(size)
    parent = path.rsplit("/", 1)[0] or "/"
    return (
        f"mkdir -p {shlex.quote(parent)} && "
        f"head -c {nbytes} /dev/urandom > {shlex.quote(path)}"
    )
