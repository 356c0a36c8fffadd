"""The settings registry holds every ``-v`` setting the project reads, and nothing else."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from libraries.ab.settings import ab_settings_from_variables
from libraries.capacity import settings as parsing
from libraries.cases.profile_settings import profile_settings_from_variables
from libraries.results.registry import SETTINGS, areas, markdown_table, setting

ROOT = Path(__file__).resolve().parent.parent
NAME = r"([A-Z][A-Z0-9_]*)"
PYTHON_READS = (
    re.compile(r"_variable\(\s*\"" + NAME + "\""),            # ResultsKeywords._variable
    re.compile(r"\blookup\(\s*\"" + NAME + "\""),             # settings' lookup(name, default)
    re.compile(r"get_variable_value\(\s*\"\$\{" + NAME + r"\}\""),  # BuiltIn
    re.compile(r"\(\s*\"" + NAME + r"\",\s*[\d.]+,\s*(?:int|float)\)"),  # settings' tables
    re.compile(r"(?:\"-v\"|\"--variable\"),\s*f?\"" + NAME + ":"),  # runners passing one on
)
ROBOT_READS = (re.compile(r"\$\{" + NAME + r"\}"), re.compile(r"(?<![\w{$])\$" + NAME + r"\b"))
ROBOT_BUILT_INS = frozenset({
    "EMPTY", "SPACE", "TRUE", "FALSE", "NONE", "NULL", "CURDIR", "TEMPDIR", "EXECDIR",
    "OUTPUT_DIR", "OUTPUT_FILE", "LOG_FILE", "REPORT_FILE", "DEBUG_FILE", "LOG_LEVEL",
    "SUITE_NAME", "SUITE_SOURCE", "SUITE_DOCUMENTATION", "SUITE_STATUS", "SUITE_MESSAGE",
    "TEST_NAME", "TEST_DOCUMENTATION", "TEST_STATUS", "TEST_MESSAGE", "PREV_TEST_NAME",
    "PREV_TEST_STATUS", "PREV_TEST_MESSAGE", "KEYWORD_STATUS", "KEYWORD_MESSAGE", "OPTIONS",
})


def read_settings(root: Path = ROOT) -> dict[str, set[str]]:
    """Every setting name read under ``root`` (libraries/, resources/, tests/) -> the files
    reading it."""
    found: dict[str, set[str]] = {}

    def note(name: str, path: Path) -> None:
        found.setdefault(name, set()).add(str(path.relative_to(root)))

    for path in sorted((root / "libraries").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        for pattern in PYTHON_READS:
            for name in pattern.findall(text):
                note(name, path)
    for path in sorted([*(root / "resources").glob("*.resource"),
                        *(root / "tests").rglob("*.robot")]):
        text = path.read_text(encoding="utf-8")
        for pattern in ROBOT_READS:
            for name in pattern.findall(text):
                if name not in ROBOT_BUILT_INS:
                    note(name, path)
    settings_file = root / "libraries" / "capacity" / "settings.py"
    for name in parsing.VARIABLES.values():  # the capacity table, read by key
        note(name, settings_file)
    return found


def test_every_setting_read_anywhere_is_in_the_registry():
    known = {s.name for s in SETTINGS}
    missing = {name: sorted(files) for name, files in read_settings().items()
               if name not in known}
    assert not missing, f"settings read but missing from libraries/results/registry.py: {missing}"


def test_every_setting_in_the_registry_is_read_somewhere():
    unread = sorted({s.name for s in SETTINGS} - set(read_settings()))
    assert not unread, f"registry entries nobody reads: {unread}"


def test_the_scan_finds_each_way_a_setting_is_read(tmp_path):
    (tmp_path / "libraries").mkdir()
    (tmp_path / "resources").mkdir()
    (tmp_path / "tests" / "x").mkdir(parents=True)
    (tmp_path / "libraries" / "a.py").write_text(
        'self._variable("ONE", 1)\nlookup("TWO", 2)\n'
        'BuiltIn().get_variable_value("${THREE}", "")\n("FOUR", 10, int)\n'
        'command = ["--variable", f"FIVE:{x}"]\nself._variable("OUTPUT DIR")\n')
    (tmp_path / "resources" / "r.resource").write_text(
        "*** Variables ***\n${SIX}    1\n${EMPTY_NOT}    ${EMPTY}\n"
        "*** Keywords ***\nK\n    IF    $SEVEN\n        Log    ${stack}\n    END\n")
    (tmp_path / "tests" / "x" / "t.robot").write_text("T\n    Log    ${EIGHT} ${CURDIR}\n")
    (tmp_path / "libraries" / "results").mkdir()
    (tmp_path / "libraries" / "results" / "settings.py").write_text("")
    found = set(read_settings(tmp_path))
    assert {"ONE", "TWO", "THREE", "FOUR", "FIVE", "SIX", "SEVEN", "EIGHT",
            "EMPTY_NOT"} <= found
    assert not found & {"EMPTY", "CURDIR", "OUTPUT DIR", "stack"}


def test_the_registry_knows_the_settings_the_issue_names():
    for name in ("TRIALS", "AB_MARGIN", "AB_BUDGET", "CAPACITY_WINDOWS", "PROFILE_SECONDS",
                 "JUDGE", "CRITERIA", "TOPOLOGY", "EXTENDED", "RUN_ID", "TREND_STORE",
                 "AB_DUET", "LAB_POOL", "POOL_LOG"):
        assert setting(name).name == name
    names = [s.name for s in SETTINGS]
    assert len(names) == len(set(names))
    for entry in SETTINGS:
        assert all((entry.default, entry.accepted, entry.meaning, entry.checked, entry.area))


def test_defaults_agree_with_the_parsers():
    ab = ab_settings_from_variables(lambda name, default: default)
    assert setting("AB_MARGIN").default == f"{ab.margin * 100:g}"
    assert setting("AB_LOOK").default == str(ab.look)
    assert setting("AB_MAX_ROUNDS").default == str(ab.max_rounds)
    assert setting("AB_BUDGET").default == f"{ab.budget_s:g}"
    assert setting("AB_INCONCLUSIVE").default == ab.inconclusive
    assert setting("AB_UNUSED").default == ab.unused
    profile = profile_settings_from_variables(lambda name, default: default)
    assert setting("PROFILE").default == profile.mode
    assert setting("PROFILE_SECONDS").default == str(profile.seconds)
    for key, variable in parsing.VARIABLES.items():
        if key != "goals":  # the resource's p99<=10ms is the keyword's bare 10ms
            assert setting(variable).default == str(parsing.DEFAULTS[key]), variable
    resource = (ROOT / "resources" / "measure.resource").read_text()
    for name in ("TRIALS", "DURATION", "WARMUP", "EXTENDED"):
        assert re.search(r"\$\{" + name + r"\}\s+" + re.escape(setting(name).default) + "\n",
                         resource), name


def test_an_unknown_setting_names_the_known_ones():
    with pytest.raises(KeyError, match="AB_MARGIN"):
        setting("AB_MARGN")


def test_markdown_table_has_a_row_per_setting_of_its_area():
    whole = markdown_table()
    lines = whole.splitlines()
    assert lines[0] == "| setting | default | accepted | meaning | checked |"
    assert len(lines) == 2 + len(SETTINGS)
    ab = markdown_table("A/B").splitlines()[2:]
    assert [line.split("`")[1] for line in ab] == [s.name for s in SETTINGS if s.area == "A/B"]
    assert "| `AB_MARGIN` | 1 | a percentage in [0, 100) (1 or 1%) |" in markdown_table("A/B")
    # <name> stays text in a rendered page; p99<=10ms too
    assert "topologies/&lt;name&gt;.yaml" in whole and "p99&lt;=10ms" in whole
    assert "<" not in whole.replace("&lt;", "")
    # a | in a cell is escaped: every row keeps its five columns
    assert all(line.replace("\\|", "").count("|") == 6 for line in lines)
    assert "capacity" in areas()
    with pytest.raises(KeyError, match="capacity"):
        markdown_table("nope")
