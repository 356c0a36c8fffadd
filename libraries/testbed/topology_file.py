"""Reading a topology file: name or path, YAML, and the model's validation errors reported as
``<file>: <key path>: <what was expected>, got <value>``, one line each, in one
:class:`~libraries.testbed.errors.TopologyError`. The model is :mod:`libraries.testbed.topology`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from libraries.testbed.errors import TopologyError
from libraries.testbed.topology import TOPOLOGY_DIR, PathError, Topology


def format_errors(source: str, error: ValidationError) -> str:
    """``<source>: <key path>: <what was expected>, got <value>``, one line per error."""
    lines = []
    for item in error.errors():
        parts = [str(part) for part in item["loc"]]
        is_key = parts[-1:] == ["[key]"]
        path = ".".join(parts[:-1] if is_key else parts) or "(top level)"
        ctx_error = item.get("ctx", {}).get("error")
        if isinstance(ctx_error, PathError):
            lines.append(f"{source}: {ctx_error.path}: {ctx_error.message}")
            continue
        message = item["msg"].removeprefix("Value error, ")
        if item["type"] == "extra_forbidden":
            message = "unknown key (typo?)"
        elif item["type"] == "missing":
            message = "required key is missing"
        if is_key:
            message = f"invalid name: {message}"
        got = item.get("input")
        quiet = item["type"] in ("missing", "extra_forbidden") or isinstance(got, dict)
        suffix = "" if quiet or is_key else f", got {got!r}"
        lines.append(f"{source}: {path}: {message}{suffix}")
    return "\n".join(lines)


def parse_topology(data: Any, source: str) -> Topology:
    """Validate already-parsed YAML ``data``; ``source`` names the file in errors."""
    if not isinstance(data, dict):
        raise TopologyError(f"{source}: expected a mapping at the top level, got {data!r}")
    try:
        return Topology.model_validate(data)
    except ValidationError as error:
        raise TopologyError(format_errors(source, error)) from None


def topology_path(name_or_path: str) -> Path:
    """``3node`` -> ``topologies/3node.yaml``; a path to a file is taken as it is."""
    candidate = Path(name_or_path)
    if candidate.suffix in (".yaml", ".yml") or candidate.exists():
        return candidate
    return TOPOLOGY_DIR / f"{name_or_path}.yaml"


def load_topology(name_or_path: str) -> Topology:
    """Load and validate a topology by name (``3node``) or by path."""
    path = topology_path(name_or_path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        known = sorted(p.stem for p in TOPOLOGY_DIR.glob("*.yaml") if p.stem != "criteria")
        raise TopologyError(
            f"{path}: cannot read topology ({error.strerror}); known topologies: {known}"
        ) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise TopologyError(f"{path}: not valid YAML: {error}") from None
    return parse_topology(data, str(path))
