"""Tests of the package layout: imports point only downward, modules stay small.

Layers, lowest first: testbed < tools, results < vpp < trend < keywords (see
``libraries/__init__.py``). ``tools`` and ``results`` are side by side: neither imports the other.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

LIBRARIES = Path(__file__).resolve().parent.parent / "libraries"

# package -> the packages it may import (besides itself)
ALLOWED: dict[str, set[str]] = {
    "testbed": set(),
    "tools": {"testbed"},
    "results": {"testbed"},
    "vpp": {"testbed", "tools"},
    "trend": {"testbed", "results"},
    "keywords": {"testbed", "tools", "results", "vpp", "trend"},
}
MAX_LINES = 400


def _modules() -> list[Path]:
    return sorted(p for p in LIBRARIES.rglob("*.py") if "__pycache__" not in p.parts)


def _package_of(path: Path) -> str | None:
    relative = path.relative_to(LIBRARIES)
    return relative.parts[0] if len(relative.parts) > 1 else None


def _imported_packages(path: Path) -> set[str]:
    """Every ``libraries.<package>`` a module imports, at any depth (TYPE_CHECKING included)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        for name in names:
            parts = name.split(".")
            if parts[0] == "libraries" and len(parts) > 1 and parts[1] in ALLOWED:
                found.add(parts[1])
    return found


def test_every_module_is_in_a_package_of_a_known_layer():
    loose = [p.name for p in _modules() if _package_of(p) is None and p.name != "__init__.py"]
    assert loose == []
    packages = {_package_of(p) for p in _modules()} - {None}
    assert packages == set(ALLOWED)


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(LIBRARIES)))
def test_imports_point_only_to_lower_layers(path: Path):
    package = _package_of(path)
    if package is None:
        assert _imported_packages(path) == set()
        return
    upward = _imported_packages(path) - ALLOWED[package] - {package}
    assert upward == set(), f"{path.name} ({package}) imports {sorted(upward)}"


def test_the_layer_checker_sees_a_violation(tmp_path: Path):
    module = tmp_path / "bad.py"
    module.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                      "    from libraries.keywords.vpp import VppKeywords\n"
                      "def f():\n    import libraries.trend.load\n")
    assert _imported_packages(module) == {"keywords", "trend"}


def test_allowed_imports_have_no_cycle():
    order = ["testbed", "tools", "results", "vpp", "trend", "keywords"]
    for package, allowed in ALLOWED.items():
        assert all(order.index(lower) < order.index(package) for lower in allowed)


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(LIBRARIES)))
def test_modules_stay_under_the_size_limit(path: Path):
    lines = len(path.read_text().splitlines())
    assert lines <= MAX_LINES, f"{path.relative_to(LIBRARIES)} has {lines} lines"


def test_every_package_says_what_it_owns():
    for package in ALLOWED:
        doc = ast.get_docstring(ast.parse((LIBRARIES / package / "__init__.py").read_text()))
        assert doc and len(doc) > 200, package
