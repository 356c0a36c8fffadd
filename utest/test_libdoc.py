"""Every keyword library renders with libdoc, without warnings, and documents each keyword as
Robot Framework's own libraries do: an ``Args:`` entry for each argument, a ``Returns:``
section where the keyword returns a value, and an example table that uses the keyword; the
library's introduction has an example too."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from robot.libdoc import LibraryDocumentation

from libraries.tools.nginx.config import PROXY_PORT, SERVER_PORT, STATUS_PORT, SslProxyParams

REPO = Path(__file__).resolve().parent.parent


def _keyword_libraries() -> list[str]:
    """Every ``@library`` class in ``libraries/keywords/``: the finder the site's libdoc pages
    use (``docs_gen/hooks.py``), so a new library is checked without being listed here."""
    spec = importlib.util.spec_from_file_location("docs_gen_hooks",
                                                  REPO / "docs_gen" / "hooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.keyword_libraries()


LIBRARIES = _keyword_libraries()
TABLE_ROW = re.compile(r"^\| (.* |)\|$")


def _normalized(name: str) -> str:
    return re.sub(r"[\s_]", "", name).lower()


def _example_rows(doc: str) -> list[list[str]]:
    """The rows of the Robot-format tables in ``doc``, as lists of cells."""
    return [[cell.strip() for cell in re.split(r" \|(?= )", line.strip()[1:-1])]
            for line in doc.splitlines() if TABLE_ROW.match(line.strip())]


def test_every_library_in_the_keywords_folder_is_checked() -> None:
    assert "libraries.keywords.ab.AbKeywords" in LIBRARIES
    assert "libraries.keywords.testbed.TestbedKeywords" in LIBRARIES
    assert len(LIBRARIES) >= 8


@pytest.mark.parametrize("library", LIBRARIES)
def test_libdoc_renders_without_warnings(library, tmp_path):
    out = tmp_path / "doc.json"
    result = subprocess.run([sys.executable, "-m", "robot.libdoc", "--format", "JSON",
                             library, str(out)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "[ WARN ]" not in result.stdout + result.stderr
    doc = json.loads(out.read_text())
    assert doc["keywords"], f"{library} has no keywords"
    undocumented = [kw["name"] for kw in doc["keywords"] if not kw["doc"].strip()]
    assert undocumented == []


@pytest.mark.parametrize("library", LIBRARIES)
def test_every_keyword_documents_its_arguments_and_has_an_example(library):
    """libdoc's model: each argument's doc comes from the docstring's ``Args:`` section (a
    name there that is not an argument fails the keyword's creation), the return value's from
    ``Returns:``, and an example is a table row with the keyword's name in a cell."""
    libdoc = LibraryDocumentation(library)
    problems = []
    for kw in libdoc.keywords:
        if kw.doc.startswith("*Creating keyword failed:*"):  # e.g. 'Args:' names no argument
            problems.append(f"{kw.name}: {kw.doc}")
        problems += [f"{kw.name}: argument {arg.name!r} has no description under 'Args:'"
                     for arg in kw.args if not arg.doc.strip()]
        returns = kw.args.return_type
        if returns is not None and returns.type is not type(None) \
                and not kw.args.return_doc.strip():
            problems.append(f"{kw.name}: returns {returns.name} but has no 'Returns:' section")
        rows = _example_rows(kw.doc)
        if not any(_normalized(kw.name) in map(_normalized, row) for row in rows):
            problems.append(f"{kw.name}: no example (a '| {kw.name} | ... |' table row)")
    if not _example_rows(libdoc.doc):
        problems.append(f"{library}: the introduction has no example table")
    assert not problems, "\n".join(problems)


def test_the_proxy_keywords_state_the_ports_and_keepalive_the_configs_use() -> None:
    """The SSL proxy keywords tell their users the ports and the upstream keepalive; those are
    defined in the nginx config module, and the documentation follows them."""
    keywords = {kw.name: " ".join(kw.doc.split()) for kw in LibraryDocumentation(
        "libraries.keywords.ssl_proxy.SslProxyKeywords").keywords}
    keepalive = SslProxyParams.__dataclass_fields__["upstream_keepalive"].default
    server, proxy = keywords["Start HTTPS Server On Node"], \
        keywords["Start HTTPS Reverse Proxy On Node"]
    assert f"on port {SERVER_PORT}," in server
    assert f"stub_status counter on 127.0.0.1:{STATUS_PORT} " in server
    assert f"listens on port {PROXY_PORT} " in proxy
    assert f"(port {SERVER_PORT}) with upstream keepalive {keepalive}," in proxy
