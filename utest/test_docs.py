"""The README stays short and its commands and links point at what exists; the documentation
site (mkdocs.yml, docs/, docs_gen/hooks.py) has every page in its navigation, and the pages
generated from the code say what they are generated from; `mkdocs build --strict` passes."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
import types
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
DOCS = REPO / "docs"
HOOKS_FILE = REPO / "docs_gen" / "hooks.py"
GENERATED = {"reference/record-schema.md", "reference/keywords/index.md", "methodology.md"}
"""Pages the hook writes into the site at build time (never into docs/)."""
COMMITTED = {"reference/settings.md", "reference/exit-codes.md"}
"""Generated pages kept in docs/, so README links open them anywhere (docs_gen/hooks.py)."""


@pytest.fixture(scope="module")
def hooks() -> types.ModuleType:
    spec = importlib.util.spec_from_file_location("docs_gen_hooks", HOOKS_FILE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def nav_pages(nav: list) -> list[str]:
    pages = []
    for item in nav:
        value = next(iter(item.values())) if isinstance(item, dict) else item
        pages += nav_pages(value) if isinstance(value, list) else [value]
    return pages


def mkdocs_config() -> dict:
    return yaml.safe_load((REPO / "mkdocs.yml").read_text())


def test_readme_is_at_most_200_lines() -> None:
    assert len(README.read_text().splitlines()) <= 200


def test_every_docs_page_is_in_the_navigation_and_every_entry_exists() -> None:
    nav = nav_pages(mkdocs_config()["nav"])
    on_disk = {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")}
    assert sorted(on_disk - set(nav)) == []
    assert sorted(set(nav) - on_disk - GENERATED) == []
    assert len(nav) == len(set(nav)), "a page is twice in the navigation"


def test_the_generated_pages_are_in_the_navigation_and_not_in_docs() -> None:
    nav = set(nav_pages(mkdocs_config()["nav"]))
    assert nav >= GENERATED
    assert not [uri for uri in GENERATED if (DOCS / uri).exists()]


def test_the_site_is_strict_and_fails_on_pages_missing_from_the_navigation() -> None:
    config = mkdocs_config()
    assert config["strict"] is True
    assert config["validation"]["nav"]["omitted_files"] == "warn"
    assert config["validation"]["links"]["not_found"] == "warn"
    assert config["hooks"] == ["docs_gen/hooks.py"]


def test_readme_links_point_at_files_that_exist() -> None:
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README.read_text())
    assert links
    missing = [link for link in links if not link.startswith("http")
               and not (REPO / link).exists()]
    assert missing == []


def readme_commands() -> list[str]:
    return [line.strip() for line in README.read_text().splitlines()
            if line.startswith("    ") and ".venv/bin/" in line]


def test_readme_commands_name_modules_and_files_that_exist() -> None:
    commands = readme_commands()
    assert any("./setup.sh && .venv/bin/robot -v TOPOLOGY:3node -d results tests" in c
               for c in commands)
    assert any(c.startswith(".venv/bin/tox p") for c in commands)
    for command in commands:
        for module in re.findall(r"python -m ([\w.]+)", command):
            assert importlib.util.find_spec(module) is not None, f"{command}: no module {module}"
        for path in re.findall(r"(?:^|[\s:])((?:tests|topologies)/[\w./-]+)", command):
            user_file = path == "topologies/lab.yaml"  # the reader's own copy of the example
            assert user_file or (REPO / path).exists(), f"{command}: {path} does not exist"


def test_the_keyword_libraries_are_found_from_the_source(hooks: types.ModuleType) -> None:
    found = hooks.keyword_libraries()
    assert "libraries.keywords.ab.AbKeywords" in found
    assert "libraries.keywords.ssl_proxy.SslProxyKeywords" in found
    assert "libraries.keywords.context.RobotLog" not in found  # a helper, not a library
    sources = {p.stem for p in (REPO / "libraries" / "keywords").glob("*.py")
               if "@library(" in p.read_text()}
    assert {name.split(".")[2] for name in found} == sources


def test_without_the_registry_the_settings_page_says_where_it_comes_from(
        hooks: types.ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hooks, "_optional", lambda name: None)
    assert "generated at build time from `libraries/cases/registry.py`" in hooks.settings_page()
    assert "`libraries/cli.py`" in hooks.exit_codes_page()


@dataclass(frozen=True)
class FakeSetting:
    name: str
    area: str
    shown_default: str = "5"
    accepted: str = "an integer >= 1"
    meaning: str = "Rounds <per> variant."
    checked: str = "suite set-up: libraries.results.trial_settings.parse_plan"
    field: str = "plan.trials"


def test_the_settings_page_has_a_block_per_setting_under_its_area(
        hooks: types.ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    registry = types.SimpleNamespace(
        SETTINGS=[FakeSetting("AB_MARGIN", "A/B"), FakeSetting("TRIALS", "trials")])
    monkeypatch.setattr(hooks, "_optional", lambda name: registry)
    page = hooks.settings_page()
    assert page.index("## A/B") < page.index("### `AB_MARGIN`") < page.index("## trials") \
        < page.index("### `TRIALS`")
    assert ('<span id="TRIALS"></span>\n\n### `TRIALS`\n\n**Default:** 5  \n'
            "**Accepts:** an integer &gt;= 1\n\nRounds &lt;per&gt; variant.\n\n"
            "<small>Checked: suite set-up: libraries.results.trial\\_settings.parse\\_plan. Its "
            "value: `plan.trials` of the run's settings.</small>\n") in page
    assert "|---|" not in page  # blocks, not a table


def test_the_exit_codes_page_has_every_command_and_code(
        hooks: types.ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    codes = {"nightly": {3: "a regression | gate", 0: "all good"}, "bisect": {2: "bad input"}}
    cli = types.SimpleNamespace(COMMANDS=[types.SimpleNamespace(name=n) for n in codes],
                                exit_codes=codes.__getitem__)
    monkeypatch.setattr(hooks, "_optional", lambda name: cli)
    page = hooks.exit_codes_page()
    assert ("## nightly\n\n| exit | meaning |\n|---|---|\n"
            '| <span id="nightly-0"></span>0 | all good |\n'
            '| <span id="nightly-3"></span>3 | a regression \\| gate |') in page
    assert "## bisect" in page and '| <span id="bisect-2"></span>2 | bad input |' in page


def test_every_setting_has_its_anchor_on_the_settings_page(hooks: types.ModuleType) -> None:
    page = hooks.settings_page()
    registry = importlib.import_module("libraries.cases.registry")
    for setting in registry.SETTINGS:
        assert f'<span id="{setting.name}"></span>\n\n### `{setting.name}`' in page, \
            setting.name


def readme_page_links() -> list[tuple[str, str]]:
    """(docs page, anchor) of every README link into docs/."""
    return re.findall(r"\]\((docs/[^)#]*\.md)#?([^)]*)\)", README.read_text())


def test_the_readme_answers_ab_margin_and_the_nightlys_exit_3_in_one_link_each() -> None:
    links = readme_page_links()
    assert ("docs/reference/settings.md", "AB_MARGIN") in links
    assert ("docs/reference/exit-codes.md", "nightly-3") in links


def test_readme_links_into_the_docs_name_pages_and_anchors_they_have() -> None:
    links = readme_page_links()
    assert links
    for path, anchor in links:
        assert (REPO / path).exists(), f"README links {path}: no such page"
        assert not anchor or f'id="{anchor}"' in (REPO / path).read_text(), \
            f"README links {path}#{anchor}: no such anchor"


def test_the_committed_reference_pages_are_what_the_code_gives(hooks: types.ModuleType) -> None:
    assert set(hooks.COMMITTED) == COMMITTED
    for uri, page in hooks.COMMITTED.items():
        assert (DOCS / uri).read_text() == page(), \
            f"docs/{uri} differs from the code: write it again with python docs_gen/hooks.py"


def test_writing_the_committed_pages_writes_only_what_changed(hooks: types.ModuleType,
                                                             tmp_path: Path) -> None:
    (tmp_path / "reference").mkdir()
    assert sorted(hooks.write_committed(tmp_path)) == sorted(COMMITTED)
    assert hooks.write_committed(tmp_path) == []
    (tmp_path / "reference" / "settings.md").write_text("stale\n")
    assert hooks.write_committed(tmp_path) == ["reference/settings.md"]


def test_the_schema_page_names_every_field_and_definition(hooks: types.ModuleType) -> None:
    schema = json.loads(hooks.SCHEMA.read_text())
    page = hooks.schema_page()
    assert page.startswith("# Record schema (version 4)")
    for field in schema["properties"]:
        assert f"| `{field}` |" in page
    for name in schema["$defs"]:
        assert f"## {name} {{#def-{name}}}" in page
    assert "| `unit` | string | yes |" in page  # a definition's required field


@pytest.mark.integration
def test_the_site_builds_strictly_with_every_generated_page(hooks: types.ModuleType,
                                                            tmp_path: Path) -> None:
    mkdocs = Path(sys.executable).parent / "mkdocs"
    result = subprocess.run([str(mkdocs), "build", "--strict", "-f", str(REPO / "mkdocs.yml"),
                             "-d", str(tmp_path / "site")], capture_output=True, text=True,
                            timeout=600, cwd=REPO)
    assert result.returncode == 0, result.stdout + result.stderr
    site = tmp_path / "site"
    for page in ("reference/settings", "reference/exit-codes", "reference/record-schema",
                 "methodology", "glossary", "how-to/sql"):
        assert (site / page / "index.html").exists(), page
    libdoc = sorted(p.stem for p in (site / "reference" / "keywords").glob("*Keywords.html"))
    assert "AbKeywords" in libdoc
    assert libdoc == sorted(name.rsplit(".", 1)[-1] for name in hooks.keyword_libraries())
    for path, anchor in readme_page_links():  # the README's links, as pages of the site
        page = path.removeprefix("docs/").removesuffix(".md").removesuffix("index")
        html = (site / page / "index.html").read_text()
        assert not anchor or f'id="{anchor}"' in html, f"{path}#{anchor}"


def documented_commands() -> list[tuple[str, str, str]]:
    """(file, command, rest of the line) of every ``hoststack-perf COMMAND ...`` in README.md
    and docs/: in code blocks (a trailing ``\\`` continues the line, a ``# comment`` ends it)
    and in inline code."""
    found = []
    for path in [README, *sorted(DOCS.rglob("*.md"))]:
        text = re.sub(r"\\\n\s*", " ", path.read_text())
        for match in re.finditer(r"hoststack-perf ([a-z]+)((?:[^`\n#]|#(?! ))*)", text):
            found.append((path.relative_to(REPO).as_posix(), match[1], match[2]))
    return found


def test_documented_commands_are_real_and_take_the_options_they_are_given(
        capsys: pytest.CaptureFixture[str]) -> None:
    """Each ``hoststack-perf COMMAND ... --option`` of README.md and docs/ names a command of
    the console script, and that command's ``--help`` names each option (robot's, after
    ``--`` or after ``ab``'s comparison file, excepted)."""
    cli = importlib.import_module("libraries.cli")
    names = {command.name for command in cli.COMMANDS}
    found = documented_commands()
    assert {"ab", "nightly", "bisect", "trend", "report", "duet"} <= {c for _, c, _ in found}
    helps: dict[str, str] = {}
    for file, command, rest in found:
        assert command in names, f"{file}: hoststack-perf {command}: no such command"
        if command not in helps:
            assert cli.run([command, "--help"]) == 0
            helps[command] = capsys.readouterr().out.split("\nexit codes (hoststack-perf")[0]
        words = rest.split(" -- ")[0].split()
        if command == "ab":  # robot's options follow the comparison file
            words = words[:next((i for i, w in enumerate(words) if not w.startswith("-")),
                                len(words))]
        for option in re.findall(r"(?<![\w-])(--[a-z][\w-]*)", " ".join(words)):
            assert option in helps[command], \
                f"{file}: hoststack-perf {command}{rest}: {command} --help has no {option}"


def test_the_keyword_index_has_a_line_per_library_and_each_page_a_way_back(
        hooks: types.ModuleType) -> None:
    summaries = hooks.library_summaries()
    assert list(summaries) == hooks.keyword_libraries()
    page = hooks.keywords_page(summaries)
    lines = [line for line in page.splitlines() if line.startswith("- [")]
    assert len(lines) == len(summaries)
    assert "- [TestbedKeywords](TestbedKeywords.html): Keywords to set up the testbed a " \
           "topology describes, reach its nodes and tear it down. (`Library    " \
           "libraries.keywords.testbed.TestbedKeywords`)" in lines
    (html,) = hooks.libdoc_pages(["libraries.keywords.testbed.TestbedKeywords"]).values()
    back = html.index(b'<a href="index.html">&larr; Keyword libraries</a>')
    assert back < html.index(b"<div id=root></div>")
    with pytest.raises(RuntimeError, match="no <div id=root>"):
        hooks.with_way_back(b"<html><body>other</body></html>")


GLOSSARY = DOCS / "glossary.md"
NOT_A_VARIANT = re.compile(
    r"(?<![a-z])(seed|jumbo|jumbo-frame|mtls|vpp|kernel|bpftime|loopback|row)[ _]variants?(?![a-z])"
    r"|variants? \(`?(MTLS|REVERSE|JUMBO)|file per variant", re.IGNORECASE)
"""Where "variant" was used for a suite (the VPP variant), a row (the jumbo variant) or a
row's options: the glossary gives the word one meaning, a path a test measures."""


def _glossary_terms() -> list[str]:
    return re.findall(r"^\*\*(.+?)\*\*$", GLOSSARY.read_text(), re.MULTILINE)


def test_the_glossary_defines_each_word_once_and_variant_as_a_measured_path() -> None:
    terms = _glossary_terms()
    assert len(terms) == len(set(terms)), sorted(t for t in terms if terms.count(t) > 1)
    assert {"variant", "side", "suite", "row", "stack"} <= set(terms)
    entry = GLOSSARY.read_text().split("**variant**\n", 1)[1].split("\n\n", 1)[0]
    assert "path a test measures" in entry and "*sides*" in entry and "*suite*" in entry


def _variant_misuses(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if NOT_A_VARIANT.search(line)]


def test_variant_means_a_measured_path_in_the_docs_suites_and_code() -> None:
    files = [README, REPO / "ARCHITECTURE.md", *sorted(DOCS.rglob("*.md")),
             *sorted((REPO / "tests").rglob("*.robot")),
             *sorted((REPO / "resources").glob("*.resource")),
             *sorted((REPO / "libraries").rglob("*.py")),
             *sorted(p for p in (REPO / "utest").glob("*.py") if p.name != "test_docs.py")]
    misuses = {str(f.relative_to(REPO)): found for f in files
               if (found := _variant_misuses(f.read_text()))}
    assert misuses == {}


def test_the_variant_check_sees_a_row_or_suite_called_a_variant() -> None:
    assert _variant_misuses("The jumbo variant adds MTU 9000.\nthe VPP variant goes\n"
                            "streams, variants (`MTLS`, `REVERSE`)\nthe proxy variant\n"
                            "def test_the_mtls_variant_has_no_direct_path():\n") == [
        "The jumbo variant adds MTU 9000.", "the VPP variant goes",
        "streams, variants (`MTLS`, `REVERSE`)",
        "def test_the_mtls_variant_has_no_direct_path():"]
