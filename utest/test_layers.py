"""Tests of the package layout: imports point only downward, modules stay small, no circles.

Layers, lowest first: testbed < tools, results < ab, capacity < vpp < cases < history <
trend < report < nightly < bisect < keywords (see ``libraries/__init__.py``). ``tools`` and
``results`` are side by side (neither imports the other), so are ``ab`` and ``capacity``.
``cases`` (each test case as plain Python) sits right under ``keywords``, its only user: the
keyword libraries adapt the cases to Robot and only ``keywords/context.py`` looks a library
up. ``results``, ``ab``, ``capacity`` and ``cases`` hold no Robot Framework code, and
``results`` runs nothing on a node.
Inside ``tools``, each tool family (a sub-package) or single-module tool is a unit: a unit uses
another only through that unit's package (its ``__init__``), never its modules, and the units
depend on each other as :data:`TOOL_UNITS` allows, without a circle. No module imports itself
back through others (TYPE_CHECKING and function-level imports count: they are how a circle
hides).
"""

from __future__ import annotations

import ast
import warnings
from pathlib import Path

import pytest

LIBRARIES = Path(__file__).resolve().parent.parent / "libraries"

# package -> the packages it may import (besides itself)
ALLOWED: dict[str, set[str]] = {
    "testbed": set(),
    "tools": {"testbed"},
    "results": {"testbed"},
    "ab": {"testbed", "tools", "results"},
    "capacity": {"testbed", "tools", "results"},
    "vpp": {"testbed", "tools"},
    "cases": {"testbed", "tools", "results", "ab", "capacity", "vpp"},
    "history": {"testbed", "results"},
    "trend": {"testbed", "results", "history"},
    "report": {"testbed", "results", "history", "trend"},
    "nightly": {"testbed", "results", "ab", "cases", "history", "trend", "report"},
    "bisect": {"testbed", "tools", "results", "ab", "cases"},
    "keywords": {"testbed", "tools", "results", "ab", "capacity", "vpp", "cases", "history",
                 "trend", "report", "nightly"},
}
NO_ROBOT = ("results", "ab", "capacity", "cases")
"""Packages with no Robot Framework import: the keyword layer adapts them."""
NODE_MODULES = ("libraries.testbed.node", "libraries.testbed.provision", "libraries.testbed.ssh",
                "libraries.testbed.netns", "libraries.testbed.command")
"""What runs commands on a node: ``results`` imports none of it."""
# A command whose home moved keeps its old spelling as an alias module: run with ``python -m``,
# it runs the new home by module name (runpy), importing nothing of the project.
SIZE_WARNING = 400
"""Past this a module is a question to answer (one concern, or two?), not a count to meet by
splitting: the test warns and the module stays whole while it holds one concern."""
MAX_LINES = 600
"""Past this a module holds more than one concern, whatever it says."""
TOOLS = LIBRARIES / "tools"

# tool unit -> the tool units it may use (through their packages); every unit of tools/ is here
TOOL_UNITS: dict[str, set[str]] = {
    "render": set(),
    "certs": set(),
    "content": set(),
    "cpu": set(),
    "bpftime": set(),
    "versions": set(),
    "sysctl": set(),
    "perf": set(),
    "nginx": {"render"},
    "wrk": {"cpu"},
    "iperf3": set(),
    "open_loop": set(),
    "vegeta": {"open_loop"},
    "oha": {"cpu", "open_loop"},
    "ebpf_stream": {"nginx"},
    "sslsniff": {"render", "bpftime"},
}


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


ENTRY_POINTS = ("cli.py",)
"""Modules above every layer: the console script ``hoststack-perf`` (``libraries/cli.py``),
which imports a command's module by name when the command runs, and nothing of the project
otherwise (checked with the other loose modules below)."""


def test_every_module_is_in_a_package_of_a_known_layer():
    loose = [p.name for p in _modules() if _package_of(p) is None and p.name != "__init__.py"]
    assert sorted(loose) == sorted(ENTRY_POINTS)
    packages = {_package_of(p) for p in _modules()} - {None}
    assert packages == set(ALLOWED)



PACKAGE_FILES = ("__init__.py", "__main__.py")
"""File names every package may have: what they hold is said by the package's name."""


def _shared_file_names(modules: list[Path]) -> dict[str, list[str]]:
    """Each module file name that two or more modules share, with their paths under
    ``libraries/``, except a pair ``keywords/X.py`` and ``cases/X.py`` (the keyword library
    that adapts the case module of its name, the one repeat by design) and
    :data:`PACKAGE_FILES`."""
    places: dict[str, list[str]] = {}
    for path in modules:
        if path.name not in PACKAGE_FILES:
            places.setdefault(path.name, []).append(path.relative_to(LIBRARIES).as_posix())
    mirror = {name: sorted([f"cases/{name}", f"keywords/{name}"]) for name in places}
    return {name: sorted(found) for name, found in places.items()
            if len(found) > 1 and sorted(found) != mirror[name]}


def test_no_two_modules_share_a_file_name_outside_the_keyword_case_mirror():
    """A file name says what its module holds, so two modules never share one (``cli.py``
    four times made a reader open each to know which command it was); the keyword library
    of a case is named after the case module it adapts (``keywords/ssl_proxy.py`` ->
    ``cases/ssl_proxy.py``)."""
    assert _shared_file_names(_modules()) == {}


def test_the_file_name_check_sees_a_shared_name():
    modules = [LIBRARIES / rel for rel in (
        "nightly/cli.py", "bisect/cli.py", "keywords/tcp_term.py", "cases/tcp_term.py",
        "keywords/vpp.py", "cases/vpp.py", "vpp/vpp.py", "ab/__init__.py", "trend/__init__.py",
        "bisect/__main__.py", "report/__main__.py", "keywords/pool.py", "nightly/pool.py")]
    assert _shared_file_names(modules) == {
        "cli.py": ["bisect/cli.py", "nightly/cli.py"],
        "vpp.py": ["cases/vpp.py", "keywords/vpp.py", "vpp/vpp.py"],
        "pool.py": ["keywords/pool.py", "nightly/pool.py"]}

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
                      "def f():\n    import libraries.trend.detect\n")
    assert _imported_packages(module) == {"keywords", "trend"}


def test_no_module_only_forwards_to_another_command():
    """A command has one spelling, at its home (the old ``python -m libraries.trend...``
    aliases are gone): no module runs another module's ``__main__`` by name."""
    forwarding = [path for path in sorted(LIBRARIES.rglob("*.py"))
                  if "runpy" in {a.name for n in ast.walk(ast.parse(path.read_text()))
                                 if isinstance(n, ast.Import) for a in n.names}]
    assert forwarding == []


@pytest.mark.parametrize("package", NO_ROBOT)
def test_the_pure_packages_import_no_robot_framework(package: str):
    for path in sorted((LIBRARIES / package).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else \
                [a.name for a in node.names] if isinstance(node, ast.Import) else []
            assert not any(n == "robot" or n.startswith("robot.") for n in names), path


CONTEXT_MODULE = LIBRARIES / "keywords" / "context.py"
"""The one module that finds a suite's other keyword libraries (Robot's library lookup)."""


def _library_lookups(path: Path) -> list[int]:
    """Lines of ``path`` doing Robot's library lookup: any ``get_library_instance`` (on
    ``BuiltIn()`` or a name bound to it)."""
    return [node.lineno for node in ast.walk(ast.parse(path.read_text(), str(path)))
            if (isinstance(node, ast.Attribute) and node.attr == "get_library_instance")
            or (isinstance(node, ast.Name) and node.id == "get_library_instance")]


def test_only_the_context_module_looks_up_a_library():
    found = {str(p.relative_to(LIBRARIES)): lines for p in _modules()
             if p != CONTEXT_MODULE and (lines := _library_lookups(p))}
    assert found == {}, f"library lookups outside keywords/context.py: {found}"
    assert _library_lookups(CONTEXT_MODULE)


def test_the_lookup_check_sees_a_lookup(tmp_path: Path):
    module = tmp_path / "sideways.py"
    module.write_text("from robot.libraries.BuiltIn import BuiltIn\n"
                      "def f():\n    b = BuiltIn()\n    return b.get_library_instance('X')\n")
    assert _library_lookups(module) == [4]


KEYWORD_MODULES = sorted(p for p in (LIBRARIES / "keywords").glob("*.py")
                         if p.name != "__init__.py")
"""Every keyword module: each keyword converts its arguments, takes the suite's context and
makes one call below (``libraries.cases``, ``testbed``, ``results``...)."""
KEYWORD_MODULE_LINES = 350
"""A keyword module past this holds policy that belongs below the keyword layer."""


def _keyword_bodies(path: Path) -> dict[str, list[ast.stmt]]:
    """Each ``@keyword`` method of ``path`` -> its statements after the docstring."""
    bodies = {}
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.FunctionDef) and any(
                isinstance(d, ast.Call) and getattr(d.func, "id", "") == "keyword"
                for d in node.decorator_list):
            body = node.body[1:] if ast.get_docstring(node) is not None else node.body
            bodies[node.name] = body
    return bodies


def _thick_keywords(path: Path) -> dict[str, int]:
    """Each ``@keyword`` of ``path`` with more than three statements or a branch -> its
    statement count."""
    branching = (ast.If, ast.For, ast.While, ast.Try, ast.With, ast.IfExp, ast.Match)
    return {keyword: len(body) for keyword, body in _keyword_bodies(path).items()
            if len(body) > 3 or any(isinstance(n, branching) for s in body for n in ast.walk(s))}


@pytest.mark.parametrize("path", KEYWORD_MODULES, ids=lambda p: p.name)
def test_a_keyword_only_adapts(path: Path):
    thick = _thick_keywords(path)
    assert thick == {}, f"keywords/{path.name}: logic in keywords {thick} (move it below)"


@pytest.mark.parametrize("path", KEYWORD_MODULES, ids=lambda p: p.name)
def test_a_keyword_module_stays_small(path: Path):
    lines = len(path.read_text().splitlines())
    assert lines < KEYWORD_MODULE_LINES, f"keywords/{path.name} has {lines} lines"


def test_every_keyword_library_is_under_the_one_call_rule():
    libraries = {p.name for p in KEYWORD_MODULES if _keyword_bodies(p)}
    assert libraries >= {"ab.py", "results.py", "suite.py", "testbed.py", "vpp.py",
                         "ssl_proxy.py", "tcp_term.py", "ebpf_stream.py", "sslsniff.py"}


def _builtin_uses(path: Path) -> list[int]:
    """Lines of ``path`` using Robot's ``BuiltIn`` (its import or any name ``BuiltIn``)."""
    return [node.lineno for node in ast.walk(ast.parse(path.read_text(), str(path)))
            if (isinstance(node, ast.Name) and node.id == "BuiltIn")
            or (isinstance(node, ast.ImportFrom) and node.module == "robot.libraries.BuiltIn")
            or (isinstance(node, ast.Attribute) and node.attr == "BuiltIn")]


def test_only_the_context_module_uses_builtin():
    """Only ``keywords/context.py`` reads Robot's variables and writes tags and metadata."""
    found = {str(p.relative_to(LIBRARIES)): lines for p in _modules()
             if p != CONTEXT_MODULE and (lines := _builtin_uses(p))}
    assert found == {}, f"BuiltIn() outside keywords/context.py: {found}"
    assert _builtin_uses(CONTEXT_MODULE)


def test_the_builtin_check_sees_a_use(tmp_path: Path):
    module = tmp_path / "reads.py"
    module.write_text("from robot.libraries.BuiltIn import BuiltIn\n"
                      "def f():\n    return BuiltIn().get_variable_value('${TRIALS}')\n")
    assert _builtin_uses(module) == [1, 3]


def test_the_adapter_check_sees_logic_in_a_keyword(tmp_path: Path):
    module = tmp_path / "thick.py"
    module.write_text('class K:\n    @keyword("Do It")\n    def do(self, x):\n'
                      '        """Doc."""\n        if x:\n            return 1\n'
                      '        return 2\n\n    @keyword("Pick")\n    def pick(self, x):\n'
                      '        return 1 if x else 2\n')
    body = _keyword_bodies(module)["do"]
    assert len(body) == 2 and isinstance(body[0], ast.If)
    assert _thick_keywords(module) == {"do": 2, "pick": 1}


CASE_TESTS = ("test_cases.py", "test_capacity_placement.py", "test_suite_state.py")
"""The cases' unit tests: a context built by hand, no Robot Framework to patch."""


@pytest.mark.parametrize("name", CASE_TESTS)
def test_the_cases_are_tested_without_robot_framework(name: str):
    path = Path(__file__).resolve().parent / name
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names = [node.module or ""] if isinstance(node, ast.ImportFrom) else \
            [a.name for a in node.names] if isinstance(node, ast.Import) else []
        assert not any(n == "robot" or n.startswith(("robot.", "libraries.keywords"))
                       for n in names), f"{name} imports {names}"


def test_no_results_module_runs_a_node_command():
    graph = _module_graph(_modules())
    for module, targets in graph.items():
        if module.startswith("libraries.results"):
            assert not targets & set(NODE_MODULES), module


def test_allowed_imports_have_no_cycle():
    order = ["testbed", "tools", "results", "ab", "capacity", "vpp", "cases", "history",
             "trend", "report", "nightly", "bisect", "keywords"]
    for package, allowed in ALLOWED.items():
        assert all(order.index(lower) < order.index(package) for lower in allowed)


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(LIBRARIES)))
def test_modules_stay_under_the_size_limit(path: Path):
    lines = len(path.read_text().splitlines())
    assert lines <= MAX_LINES, f"{path.relative_to(LIBRARIES)} has {lines} lines"
    if lines > SIZE_WARNING:
        warnings.warn(f"{path.relative_to(LIBRARIES)} has {lines} lines (over "
                      f"{SIZE_WARNING}): does it still hold one concern?", stacklevel=1)


def test_every_package_says_what_it_owns():
    for package in ALLOWED:
        doc = ast.get_docstring(ast.parse((LIBRARIES / package / "__init__.py").read_text()))
        assert doc and len(doc) > 200, package


# -- module graph: circles --------------------------------------------------------------------


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _module_graph(paths: list[Path], root: Path = LIBRARIES.parent) -> dict[str, set[str]]:
    """module -> the project modules it imports (``from pkg import name`` counts as the module
    ``pkg.name`` when that is a module, else as ``pkg``)."""
    names = {_module_name(p, root): p for p in paths}

    def resolve(dotted: str) -> str | None:
        parts = dotted.split(".")
        while parts and ".".join(parts) not in names:
            parts.pop()
        return ".".join(parts) or None

    graph: dict[str, set[str]] = {}
    for name, path in names.items():
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom) and node.module:
                targets = [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            found |= {r for t in targets if (r := resolve(t)) is not None and r != name}
        graph[name] = found
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_module_imports_itself_back():
    assert _circles(_module_graph(_modules())) == []


def test_the_circle_finder_sees_a_circle_hidden_behind_type_checking(tmp_path: Path):
    package = tmp_path / "libraries" / "testbed"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "node.py").write_text("from libraries.testbed.ssh import open_client\n")
    (package / "ssh.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                    "    from libraries.testbed.node import SshTarget\n")
    (package / "other.py").write_text("from libraries.testbed import node\n")
    graph = _module_graph(sorted(package.glob("*.py")), root=tmp_path)
    assert graph["libraries.testbed.other"] == {"libraries.testbed.node"}
    assert _circles(graph) == [["libraries.testbed.node", "libraries.testbed.ssh"]]


# -- tool families ----------------------------------------------------------------------------


def _tool_unit(path: Path) -> str | None:
    relative = path.relative_to(TOOLS)
    if relative.parts == ("__init__.py",):
        return None
    return relative.parts[0].removesuffix(".py")


def _tool_imports(path: Path, own: str | None = None) -> list[tuple[str, str]]:
    """(unit, how) of every other tool unit a tools module imports; ``how`` is the dotted name
    it reached the unit by (``libraries.tools.cpu`` or ``libraries.tools.cpu.telemetry``)."""
    own = own or _tool_unit(path)
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        modules: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module:
            modules = [node.module]
        elif isinstance(node, ast.Import):
            modules = [a.name for a in node.names]
        for module in modules:
            parts = module.split(".")
            if parts[:2] == ["libraries", "tools"] and len(parts) > 2 and parts[2] != own:
                found.append((parts[2], module))
    return found


def _tool_modules() -> list[Path]:
    return [p for p in _modules() if TOOLS in p.parents and _tool_unit(p) is not None]


def test_every_tool_unit_is_declared():
    units = {_tool_unit(p) for p in _tool_modules()}
    assert units == set(TOOL_UNITS)
    families = {p.name for p in TOOLS.iterdir() if (p / "__init__.py").is_file()}
    assert families <= set(TOOL_UNITS)


@pytest.mark.parametrize("path", _tool_modules(), ids=lambda p: str(p.relative_to(TOOLS)))
def test_a_tool_family_uses_others_only_through_their_package(path: Path):
    unit = _tool_unit(path)
    for other, how in _tool_imports(path):
        assert other in TOOL_UNITS[unit], f"{path.name} ({unit}) uses {other} ({how})"
        family = (TOOLS / other).is_dir()
        assert not family or how == f"libraries.tools.{other}", \
            f"{path.relative_to(TOOLS)} reaches into {how}: use libraries.tools.{other}"


def test_a_family_package_exports_what_it_names():
    for package in sorted(p for p in TOOLS.iterdir() if (p / "__init__.py").is_file()):
        tree = ast.parse((package / "__init__.py").read_text())
        doc = ast.get_docstring(tree)
        assert doc and len(doc) > 200, f"{package.name}: say what the family owns"
        exported = next((ast.literal_eval(n.value) for n in tree.body
                         if isinstance(n, ast.Assign) and
                         any(getattr(t, "id", "") == "__all__" for t in n.targets)), [])
        imported = {a.asname or a.name for n in tree.body if isinstance(n, ast.ImportFrom)
                    for a in n.names}
        assert set(exported) == imported, package.name


def test_tool_units_depend_without_a_circle():
    assert _circles({unit: set(uses) for unit, uses in TOOL_UNITS.items()}) == []


def test_the_family_check_sees_a_reach_into_another_family(tmp_path: Path):
    assert _tool_imports(TOOLS / "wrk" / "run.py") == [("cpu", "libraries.tools.cpu")]
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from libraries.tools.cpu.telemetry import take_snapshot\n")
    assert _tool_imports(bad, own="wrk") == [("cpu", "libraries.tools.cpu.telemetry")]
