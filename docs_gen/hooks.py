"""MkDocs hook: the reference pages generated from the code.

At build time it writes into the site (never into docs/): the record schema
(``libraries/results/schemas/record-v4.schema.json``), the libdoc HTML page of every keyword
library in ``libraries/keywords/`` and the methodology page (``benchmarks/README.md``).

Two generated pages are committed in docs/ instead (:data:`COMMITTED`), so that a link from
README.md to one setting (``docs/reference/settings.md#AB_MARGIN``) or one exit code
(``docs/reference/exit-codes.md#nightly-3``) opens in one click on a forge, in an editor and
in the site alike: the settings page (``libraries.cases.registry``) and the exit codes of
every command (``libraries.cli.exit_codes``). ``python docs_gen/hooks.py`` writes them again;
``utest/test_docs.py`` fails while a committed page differs from what the code gives.
A module that does not exist yet gives a page that says where it will come from.
"""

from __future__ import annotations

import ast
import importlib
import json
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files
from robot.libdoc import libdoc

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = ROOT / "libraries" / "results" / "schemas" / "record-v4.schema.json"
KEYWORDS = ROOT / "libraries" / "keywords"
BENCHMARKS = ROOT / "benchmarks" / "README.md"


def keyword_libraries(folder: Path = KEYWORDS) -> list[str]:
    """``module.Class`` of every class decorated with Robot's ``@library`` in ``folder``
    (read from the source with ast: nothing imported)."""
    found = []
    for path in sorted(folder.glob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and any(_is_library(d) for d in node.decorator_list):
                module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
                found.append(f"{module}.{node.name}")
    return found


def library_summaries(folder: Path = KEYWORDS) -> dict[str, str]:
    """``module.Class`` of every keyword library in ``folder`` -> the first sentence of its
    class docstring (what it is for), read from the source like :func:`keyword_libraries`."""
    found = {}
    for path in sorted(folder.glob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and any(_is_library(d) for d in node.decorator_list):
                module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
                doc = " ".join((ast.get_docstring(node) or "").split("\n\n")[0].split())
                found[f"{module}.{node.name}"] = re.split(r"(?<=\.)\s", doc, maxsplit=1)[0]
    return found


def _is_library(decorator: ast.expr) -> bool:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    return (isinstance(target, ast.Name) and target.id == "library") or (
        isinstance(target, ast.Attribute) and target.attr == "library")


def _optional(module: str) -> Any | None:
    """The module from this checkout, or None when it does not exist (yet)."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as error:
        if error.name and module.startswith(error.name):
            return None
        raise


def settings_page() -> str:
    head = ("# Settings (`-v NAME:value`)\n\n"
            "Every setting a run reads with `-v NAME:value`: its default, the values it "
            "accepts and what it does, one block each, grouped by area. ")
    registry = _optional("libraries.cases.registry")
    if registry is None:
        return head + ("This page is generated at build time from "
                       "`libraries/cases/registry.py`, which this checkout does not have yet.\n")
    areas = list(dict.fromkeys(setting.area for setting in registry.SETTINGS))  # as listed
    parts = [head + "Each setting is declared once, in the package that owns it; this page "
             "is generated from the declarations (`libraries/cases/registry.py` collects them) "
             "by `python docs_gen/hooks.py`, and a test fails when it differs from them. A "
             "run's log states every setting in force once, and which were given.\n"]
    for area in areas:
        blocks = "\n".join(setting_block(s) for s in registry.SETTINGS if s.area == area)
        parts.append(f"## {area}\n\n{blocks}")
    return "\n".join(parts)


def setting_block(setting: Any) -> str:
    """One setting's block: its anchor (``#AB_MARGIN``) and name as a heading, its default and
    accepted values, what it means, and where it is checked in small print."""
    return (f'<span id="{setting.name}"></span>\n\n### `{setting.name}`\n\n'
            f"**Default:** {_text(setting.shown_default)}  \n"
            f"**Accepts:** {_text(setting.accepted)}\n\n{_text(setting.meaning)}\n\n"
            f"<small>Checked: {_text(setting.checked)}. Its value: `{setting.field}` of "
            "the run's settings.</small>\n")


def _text(text: str) -> str:
    """Safe as Markdown text: ``<name>`` stays text (not an HTML tag a renderer would
    swallow), ``*`` and ``_`` no emphasis."""
    return (text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace("*", "\\*").replace("_", "\\_").replace("\n", " "))


def exit_codes_page() -> str:
    head = "# Exit codes\n\n"
    cli = _optional("libraries.cli")
    if cli is None:
        return head + ("The exit codes of every command are generated at build time from "
                       "`libraries/cli.py` (`EXIT_CODES`), which this checkout does not have "
                       "yet. Until then each command's `--help` lists them; the nightly's and "
                       "bisect's are also in [Nightly runs](../concepts/nightly.md) and "
                       "[Bisect](../concepts/bisect.md).\n")
    parts = [head + "Generated from `libraries/cli.py` (`exit_codes`) by `python "
             "docs_gen/hooks.py` (a test fails when this page differs from it). Every "
             "command is `hoststack-perf <command>`; `--help` on each says the same. Each "
             "row has its anchor, e.g. `#nightly-3`.\n"]
    for command in (c.name for c in cli.COMMANDS):  # a row's anchor: #nightly-3
        codes = cli.exit_codes(command)
        rows = "\n".join(f'| <span id="{command}-{code}"></span>{code} | {_cell(meaning)} |'
                         for code, meaning in sorted(codes.items()))
        parts.append(f"## {command}\n\n| exit | meaning |\n|---|---|\n{rows}\n")
    return "\n".join(parts)


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _type(spec: dict[str, Any]) -> str:
    if "$ref" in spec:
        name = spec["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#def-{name})"
    if "const" in spec:
        return f"`{json.dumps(spec['const'])}`"
    if "enum" in spec:
        return "one of " + ", ".join(f"`{json.dumps(v)}`" for v in spec["enum"])
    alternatives = spec.get("oneOf") or spec.get("anyOf")
    if alternatives:
        return " or ".join(_type(s) for s in alternatives)
    return _plain_type(spec)


def _plain_type(spec: dict[str, Any]) -> str:
    kind = spec.get("type", "any")
    kind = " or ".join(kind) if isinstance(kind, list) else kind
    if kind == "array" and "items" in spec:
        return f"array of {_type(spec['items'])}"
    if kind == "object" and isinstance(spec.get("additionalProperties"), dict):
        return f"object of {_type(spec['additionalProperties'])}"
    return kind


def _rows(spec: dict[str, Any], prefix: str = "", depth: int = 0) -> list[str]:
    required = set(spec.get("required", []))
    rows = []
    for name, sub in spec.get("properties", {}).items():
        field = f"{prefix}{name}"
        note = _cell(sub.get("description", ""))
        need = "yes" if name in required else ""
        rows.append(f"| `{field}` | {_cell(_type(sub))} | {need} | {note} |")
        if depth < 2 and "properties" in sub:
            rows += _rows(sub, f"{field}.", depth + 1)
    return rows


def schema_page(path: Path = SCHEMA) -> str:
    schema = json.loads(path.read_text())
    header = "| field | type | required | meaning |\n|---|---|---|---|"
    parts = [f"# Record schema (version {schema['properties']['schema_version'].get('const')})\n",
             f"Generated at build time from `{path.relative_to(ROOT)}`: one JSON line per "
             "measuring test in `results/<run-id>/records.jsonl`, validated on write. "
             "What the fields are for: [Records](../concepts/records.md).\n",
             f"{_cell(schema.get('description', ''))}\n",
             "## The record\n", header, *_rows(schema), ""]
    for name, spec in schema.get("$defs", {}).items():
        parts += [f"## {name} {{#def-{name}}}\n", _cell(spec.get("description", "")) + "\n"]
        rows = _rows(spec)
        parts += [header, *rows, ""] if rows else [f"Type: {_cell(_type(spec))}\n"]
    parts += ["## The schema file\n", "```json", json.dumps(schema, indent=2), "```\n"]
    return "\n".join(parts)


def libdoc_pages(libraries: list[str]) -> dict[str, bytes]:
    """libdoc HTML per library, keyed by the class name."""
    pages = {}
    with tempfile.TemporaryDirectory() as tmp:
        for library in libraries:
            out = Path(tmp, library.rsplit(".", 1)[-1] + ".html")
            status = libdoc(library, str(out), format="HTML", quiet=True)
            if status != 0 or not out.exists():
                raise RuntimeError(f"libdoc {library} failed (exit {status}): expected {out}")
            pages[out.stem] = with_way_back(out.read_bytes())
    return pages


WAY_BACK = (b'<nav id="docs-way-back" style="position:fixed;right:0;bottom:0;z-index:1000;'
            b'font:14px sans-serif;padding:6px 12px;background:#fff;border:1px solid #e0e0e2">'
            b'<a href="index.html">&larr; Keyword libraries</a> &middot; '
            b'<a href="../../index.html">hoststack-perf documentation</a></nav>\n')
"""The link back to the index (and the site's home) on every libdoc page: fixed in its
corner, as libdoc's own layout covers the top of the page."""


def with_way_back(html: bytes) -> bytes:
    """A libdoc page with :data:`WAY_BACK` before the element libdoc renders into."""
    root = b"<div id=root></div>"
    if root not in html:
        raise RuntimeError("libdoc's page has no <div id=root>: cannot place the link back")
    return html.replace(root, WAY_BACK + root, 1)


def keywords_page(summaries: dict[str, str]) -> str:
    """The index of the keyword libraries: a line per library, what it is for, its import."""
    lines = "\n".join(
        f"- [{name.rsplit('.', 1)[-1]}]({name.rsplit('.', 1)[-1]}.html): {summary} "
        f"(`Library    {name}`)" for name, summary in summaries.items())
    return ("# Keyword libraries\n\nThe libdoc page of every keyword library in "
            "`libraries/keywords/`, generated at build time (`libdoc <library> <page>.html`); "
            "each page links back here. Suites import them by module name.\n\n"
            f"{lines}\n")


def methodology_page(path: Path = BENCHMARKS) -> str:
    text = path.read_text()
    lines = text.splitlines()
    if lines and lines[0].startswith("# "):
        lines = lines[1:]
    return ("# Methodology: the instrument's own figures\n\n"
            "How far the instrument can be trusted, measured: false alarms, detection, "
            "minimum detectable effects, costs. Included at build time from "
            "`benchmarks/README.md` (run the benchmarks with `python -m benchmarks.<name>`).\n"
            + "\n".join(lines) + "\n")


def on_files(files: Files, config: Any) -> Files:
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    generated = {
        "reference/record-schema.md": schema_page(),
        "methodology.md": methodology_page(),
    }
    libraries = keyword_libraries()
    generated["reference/keywords/index.md"] = keywords_page(library_summaries())
    for uri, text in generated.items():
        files.append(File.generated(config, uri, content=text))
    for name, html in libdoc_pages(libraries).items():
        files.append(File.generated(config, f"reference/keywords/{name}.html", content=html))
    return files


COMMITTED = {"reference/settings.md": settings_page, "reference/exit-codes.md": exit_codes_page}
"""The generated pages kept in docs/ (see the module docstring): uri -> its generator."""


def write_committed(docs: Path = ROOT / "docs") -> list[str]:
    """Write every :data:`COMMITTED` page into ``docs``; return the uris that changed."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    changed = []
    for uri, page in COMMITTED.items():
        path, text = docs / uri, page()
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
            changed.append(uri)
    return changed


if __name__ == "__main__":
    for uri in write_committed():
        print(f"wrote docs/{uri}")
