"""A run's testbed names (libraries.testbed.run_paths): the prefix, the scratch directory and
each node's work directory, written in one module and read by every other."""

from __future__ import annotations

import ast
from itertools import pairwise
from pathlib import Path

from libraries.testbed.leftovers import run_prefixes
from libraries.testbed.netns import _PREFIX_RE
from libraries.testbed.run_paths import (
    WORKDIR_BASE,
    make_prefix,
    node_workdir,
    workdir_root,
)

LIBRARIES = Path(__file__).resolve().parent.parent / "libraries"


def test_a_nodes_workdir_is_under_the_testbeds_scratch_directory():
    assert workdir_root("hr1a2b3") == "/tmp/hoststack-hr1a2b3"
    assert node_workdir("hr1a2b3", "tg") == "/tmp/hoststack-hr1a2b3/tg"


def test_a_cli_prefix_is_stable_and_a_robot_prefix_is_new_each_time():
    assert make_prefix("3node", "cli") == make_prefix("3node", "cli") != make_prefix("2node", "cli")
    assert make_prefix("3node", "robot") != make_prefix("3node", "robot")
    for prefix in (make_prefix("3node", "cli"), make_prefix("3node", "robot")):
        assert _PREFIX_RE.match(prefix), prefix  # the namespace testbed accepts it


def test_the_leftovers_check_finds_the_prefix_in_a_nodes_workdir():
    prefix = make_prefix("3node", "robot")
    log = f"<msg>started nginx -p {node_workdir(prefix, 'dut')}/nginx-proxy</msg>"
    assert run_prefixes(log) == {prefix}


def _workdir_literals(path: Path) -> list[int]:
    """Lines of ``path`` whose code (docstrings aside) writes the scratch directory's name:
    a string holding ``/tmp/hoststack-``, or an f-string ``hoststack-{...}``."""
    tree = ast.parse(path.read_text(), str(path))
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr)
                  and isinstance(node.body[0].value, ast.Constant)}
    found = [node.lineno for node in ast.walk(tree)
             if isinstance(node, ast.Constant) and isinstance(node.value, str)
             and id(node) not in docstrings and WORKDIR_BASE in node.value]
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            parts = node.values
            found += [node.lineno for part, after in pairwise(parts)
                      if isinstance(part, ast.Constant) and str(part.value).endswith("hoststack-")
                      and isinstance(after, ast.FormattedValue)]
    return sorted(set(found))


def test_the_workdir_name_check_sees_a_path_written_elsewhere(tmp_path: Path):
    module = tmp_path / "other.py"
    module.write_text('"""Writes /tmp/hoststack-<prefix> in a docstring only here."""\n'
                      'ROOT = "/tmp/hoststack-"\n'
                      'def mark(prefix):\n    return f"hoststack-{prefix}*"\n'
                      'NAME = "hoststack-perf"\n')
    assert _workdir_literals(module) == [2, 4]


def test_only_run_paths_writes_the_workdir_name():
    found = {str(p.relative_to(LIBRARIES)): lines for p in sorted(LIBRARIES.rglob("*.py"))
             if p.name != "run_paths.py" and (lines := _workdir_literals(p))}
    assert found == {}
