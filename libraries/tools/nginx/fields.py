"""Field checks shared by the nginx parameter objects (``config``, ``stream``).

Each check reads ``owner.field`` of a frozen dataclass in its ``__post_init__`` and raises
:class:`RenderError` naming the class, the field, what was expected and the value.
"""

from __future__ import annotations

from typing import Any

from libraries.testbed.errors import RenderError


def field_error(owner: Any, field: str, expected: str, value: Any) -> RenderError:
    """The RenderError for ``owner.field``: what was expected and what came."""
    return RenderError(f"{type(owner).__name__}.{field}: expected {expected}, got {value!r}")


def set_field(owner: Any, field: str, value: Any) -> None:
    """Set ``field`` on a frozen dataclass during its own validation."""
    object.__setattr__(owner, field, value)


def check_port(owner: Any, field: str, optional: bool = False) -> None:
    """``owner.field`` is a TCP port 1-65535 (or None when ``optional``)."""
    value = getattr(owner, field)
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 65535:
        raise field_error(owner, field, "a TCP port 1-65535", value)


def check_abs_path(owner: Any, field: str, optional: bool = False) -> None:
    """``owner.field`` is an absolute path nginx can take unquoted."""
    value = getattr(owner, field)
    if value is None and optional:
        return
    if not isinstance(value, str) or not value.startswith("/") or any(
        c in value for c in " ;{}\"'\n"
    ):
        raise field_error(owner, field,
                          "an absolute path without spaces, quotes, ';' or braces", value)


def check_int_at_least(owner: Any, field: str, minimum: int, optional: bool = False) -> None:
    """``owner.field`` is an integer >= ``minimum`` (or None when ``optional``)."""
    value = getattr(owner, field)
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise field_error(owner, field, f"an integer >= {minimum}", value)


def check_word(owner: Any, field: str, optional: bool = False) -> None:
    """``owner.field`` is one nginx word: no spaces, quotes, ';' or braces."""
    value = getattr(owner, field)
    if value is None and optional:
        return
    if not isinstance(value, str) or not value or any(c in value for c in " \t\n;{}\"'"):
        raise field_error(owner, field,
                          "a non-empty word without spaces, quotes, ';' or braces", value)


def as_tuple(owner: Any, field: str) -> tuple:
    """``owner.field`` (a list from Robot) stored and returned as a tuple."""
    value = getattr(owner, field)
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
        raise field_error(owner, field, "a list", value)
    value = tuple(value)
    set_field(owner, field, value)
    return value


def check_choices(owner: Any, field: str, allowed: tuple[str, ...] | frozenset[str]) -> None:
    """``owner.field`` is a non-empty list of names from ``allowed``."""
    values = as_tuple(owner, field)
    if not values:
        raise field_error(owner, field, f"a non-empty list of {sorted(allowed)}", values)
    for value in values:
        if value not in allowed:
            raise field_error(owner, field, f"names from {sorted(allowed)}", value)


def check_endpoints(owner: Any, field: str) -> None:
    """``owner.field`` is a non-empty list of 'host:port' upstreams."""
    values = as_tuple(owner, field)
    if not values:
        raise field_error(owner, field, "at least one 'host:port' upstream", values)
    for value in values:
        host, sep, port = str(value).rpartition(":")
        if not sep or not host or not port.isdigit() or not 1 <= int(port) <= 65535:
            raise field_error(owner, field, "'host:port' entries with a port 1-65535", value)
        if any(c in host for c in " ;{}\"'"):
            raise field_error(owner, field, "a host without spaces, quotes, ';' or braces", value)


def listen_directive(address: str | None, port: int) -> str:
    """The argument of nginx's ``listen``: 'address:port' or just 'port'."""
    return f"{address}:{port}" if address else str(port)


def directive_problem(text: object) -> str | None:
    """Why ``text`` is not one line an A/B side may add to an ``http`` or ``server`` block,
    else None: a directive (``ssl_buffer_size 1k;``) or a block whose braces close on the
    same line (``if ($request_id ~ "^0[0-2]") { return 503; }``), so nothing it holds can
    close the block it is rendered into."""
    if not isinstance(text, str) or "\n" in text or not text.strip().endswith((";", "}")):
        return "one line ending in ';' (a directive) or '}' (a one-line block)"
    depth = 0
    for char in text:
        depth += {"{": 1, "}": -1}.get(char, 0)
        if depth < 0:
            return "braces that close only the blocks the line opens"
    if depth:
        return "every '{' closed on the same line"
    if "{" in text and not text.strip().endswith("}"):
        return "a one-line block that ends with its '}'"
    return None

