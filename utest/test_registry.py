"""Each ``-v`` setting is declared once, in its package, and collected by the registry: every
setting read anywhere is in it, each is resolved into its one typed field of the run's
settings, its default stands nowhere but in its declaration (resources, keywords, code, docs),
and no resource or suite passes one on."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import pytest

from libraries.ab.ab_settings import ab_settings_from_variables, declared_ab_settings
from libraries.capacity import search_settings as capacity
from libraries.cases.profile_settings import profile_settings_from_variables
from libraries.cases.registry import SETTINGS, areas, setting
from libraries.cases.run_settings import RunSettings, default_settings, resolve_settings
from libraries.results.plan import AbSettings
from libraries.results.trial_settings import Setting
from libraries.trend.ratio import RATIO_MARGIN

ROOT = Path(__file__).resolve().parent.parent
NAME = r"([A-Z][A-Z0-9_]*)"
PYTHON_READS = (
    re.compile(r"\blookup\(\s*\"" + NAME + "\""),             # lookup(name, default)
    re.compile(r"get_variable_value\(\s*\"\$\{" + NAME + r"\}\""),  # BuiltIn
    re.compile(r"\bvariable\(\s*\"" + NAME + "\""),            # keywords.context.variable
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
    """Every setting name read under ``root`` (libraries/, resources/, tests/) by name ->
    the files reading it."""
    found: dict[str, set[str]] = {}

    def note(name: str, path: Path) -> None:
        found.setdefault(name, set()).add(str(path.relative_to(root)))

    for path in sorted((root / "libraries").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        for pattern in PYTHON_READS:
            for name in pattern.findall(text):
                note(name, path)
    for path in robot_files(root):
        text = path.read_text(encoding="utf-8")
        for pattern in ROBOT_READS:
            for name in pattern.findall(text):
                if name not in ROBOT_BUILT_INS:
                    note(name, path)
    return found


def robot_files(root: Path = ROOT) -> list[Path]:
    return sorted([*(root / "resources").glob("*.resource"), *(root / "tests").rglob("*.robot")])


def test_every_setting_read_anywhere_is_in_the_registry():
    known = {s.name for s in SETTINGS}
    missing = {name: sorted(files) for name, files in read_settings().items()
               if name not in known}
    assert not missing, f"settings read but declared nowhere: {missing}"


def test_the_scan_finds_each_way_a_setting_is_read(tmp_path):
    (tmp_path / "libraries").mkdir()
    (tmp_path / "resources").mkdir()
    (tmp_path / "tests" / "x").mkdir(parents=True)
    (tmp_path / "libraries" / "a.py").write_text(
        'lookup("TWO", 2)\nBuiltIn().get_variable_value("${THREE}", "")\n'
        'command = ["--variable", f"FIVE:{x}"]\ncontext.variable("NINE")\n'
        'context.variable("OUTPUT DIR")\n')
    (tmp_path / "resources" / "r.resource").write_text(
        "*** Variables ***\n${SIX}    1\n${EMPTY_NOT}    ${EMPTY}\n"
        "*** Keywords ***\nK\n    IF    $SEVEN\n        Log    ${stack}\n    END\n")
    (tmp_path / "tests" / "x" / "t.robot").write_text("T\n    Log    ${EIGHT} ${CURDIR}\n")
    found = set(read_settings(tmp_path))
    assert {"TWO", "THREE", "FIVE", "SIX", "SEVEN", "EIGHT", "NINE", "EMPTY_NOT"} <= found
    assert not found & {"EMPTY", "CURDIR", "OUTPUT DIR", "stack"}


def test_the_registry_knows_the_settings_the_issue_names():
    for name in ("TRIALS", "AB_MARGIN", "AB_BUDGET", "CAPACITY_WINDOWS", "PROFILE_SECONDS",
                 "JUDGE", "CRITERIA", "TOPOLOGY", "EXTENDED", "RUN_ID", "TREND_STORE",
                 "AB_DUET", "LAB_POOL", "POOL_LOG", "LATENCY_SLO", "CAPACITY_SHARED_CORES"):
        assert setting(name).name == name
    names = [s.name for s in SETTINGS]
    assert len(names) == len(set(names))
    for entry in SETTINGS:
        assert all((entry.shown_default, entry.accepted, entry.meaning, entry.checked,
                    entry.area, entry.field)), entry.name


def _field(settings: RunSettings, dotted: str) -> object:
    value: object = settings
    for part in dotted.split("."):
        value = getattr(value, part)
    return value


def test_each_setting_names_its_typed_field_and_its_default_parses_to_it():
    defaults = default_settings()
    fields = {f.name for f in dataclasses.fields(RunSettings)}
    for entry in SETTINGS:
        for dotted in entry.field.split(", "):
            assert dotted.split(".")[0] in fields, entry.name
            if dotted.startswith("ab."):  # resolved in an A/B run only
                assert defaults.ab is None
                continue
            _field(defaults, dotted)
        parsed = entry.parse(entry.default)
        if entry.default is not None and "," not in entry.field and \
                not entry.field.startswith(("ab.", "capacity.goals", "profile.")):
            assert parsed == _field(defaults, entry.field), entry.name


def test_a_given_value_lands_in_its_field_and_is_named_as_given():
    given = {"TRIALS": "3", "CAPACITY_WINDOWS": "8", "AB": "x.yaml", "AB_LOOK": "12",
             "PROFILE": "on", "EXTENDED": "yes", "LATENCY_SLO": "p99<=20ms"}
    settings = resolve_settings(given.get, given)
    assert settings.plan.trials == 3 and settings.capacity.windows == 8
    assert settings.ab is not None and settings.ab.look == 12 and settings.ab_file == "x.yaml"
    assert settings.profile.mode == "on" and settings.extended is True
    assert settings.capacity.goals[0].limit_ms == 20.0
    table = settings.table()
    assert re.search(r"^TRIALS +3 +\(given\)$", table, re.MULTILINE)
    assert re.search(r"^DURATION +2 +\(default\)$", table, re.MULTILINE)
    assert len(table.splitlines()) == len(SETTINGS)


@pytest.mark.parametrize(("name", "value", "message"), [
    ("TRIALS", "0", r"-v TRIALS:0: expected an integer >= 1"),
    ("DURATION", "1.5", r"-v DURATION:1.5: expected whole seconds >= 1"),
    ("ALPHA", "2", r"-v ALPHA:2: expected a number between 0 and 1"),
    ("EXTENDED", "maybe", r"-v EXTENDED:maybe: expected yes or no"),
    ("JUDGE", "some", r"-v JUDGE:some: expected one of all, correctness"),
    ("PROFILE", "sometimes", r"-v PROFILE:sometimes: expected auto"),
    ("LATENCY_SLO", "fast", r"-v LATENCY_SLO:fast: expected a positive duration"),
    ("CAPACITY_WINDOWS", "3", r"-v CAPACITY_WINDOWS:3: expected windows per path >= 6"),
    ("CAPACITY_SHARED_CORES", "perhaps", r"-v CAPACITY_SHARED_CORES:perhaps: expected yes"),
])
def test_a_bad_value_is_refused_at_resolution_naming_the_variable(name, value, message):
    with pytest.raises(ValueError, match=message):
        resolve_settings(lambda n, default: value if n == name else default, [name])


def test_the_group_parsers_take_their_defaults_from_the_declarations():
    ab = ab_settings_from_variables(lambda name, default: default)
    assert f"{ab.margin * 100:g}" == setting("AB_MARGIN").default
    assert str(ab.look) == setting("AB_LOOK").default
    assert ab.inconclusive == setting("AB_INCONCLUSIVE").default
    profile = profile_settings_from_variables(lambda name, default: default)
    assert (profile.mode, str(profile.seconds)) == (setting("PROFILE").default,
                                                    setting("PROFILE_SECONDS").default)
    search = capacity.parse_capacity_settings()
    assert [g.name for g in search.goals] == [setting("LATENCY_SLO").default]
    assert (search.low, search.high) == setting("CAPACITY_RANGE").parse(
        setting("CAPACITY_RANGE").default)


def test_an_unknown_setting_names_the_known_ones():
    with pytest.raises(KeyError, match="AB_MARGIN"):
        setting("AB_MARGN")
    assert "capacity" in areas()


# -- a default stands in its declaration only -------------------------------------------------


def _token(default: str) -> str:
    """``default`` as a whole token in text (``5`` not inside ``15`` or ``0.5``)."""
    return r"(?<![\w.])" + re.escape(default) + r"(?![\w.]|\.\d)"


def default_patterns(entry: Setting) -> list[re.Pattern[str]]:
    """How a default is restated: ``NAME ... default 5``, ``NAME (5)``, ``NAME:5`` ... ``(the
    default)``, ``default ... NAME:5``, a Robot variable table's ``${NAME}  5``, a lookup's
    ``("NAME", 5``."""
    name, value = re.escape(entry.name), _token(str(entry.default))
    return [re.compile(p) for p in (
        name + r"\b[^.\n]{0,40}\bdefaults?\b[^.\n]{0,15}" + value,
        name + r"`*\s*\(" + value + r"(?:\s*%|\s*s)?\)",
        name + ":" + value + r"`*\s*\((?:the )?default",
        r"\bdefault\b[^.\n]{0,20}" + name + ":" + value,
        r"^\$\{" + name + r"\}\s+",
        r"[\"']" + name + r"[\"'],\s*[\"']?" + value,
        r"\$\{" + name + r"\}[\"'],\s*[\"']?" + value,
    )]


def restated_defaults(root: Path = ROOT) -> list[str]:
    """``file: NAME`` for every default written outside its declaration: resources and
    suites, the code (the declaring modules excepted), README.md and docs/ (the generated
    settings page excepted)."""
    declaring = {"libraries/results/trial_settings.py", "libraries/ab/ab_settings.py",
                 "libraries/capacity/search_settings.py", "libraries/cases/profile_settings.py",
                 "libraries/cases/testbed_settings.py"}
    files = [*robot_files(root), *sorted((root / "libraries").rglob("*.py")),
             root / "README.md", *sorted((root / "docs").rglob("*.md"))]
    found = []
    for path in files:
        relative = str(path.relative_to(root))
        if not path.exists() or relative in declaring or \
                relative == "docs/reference/settings.md":
            continue
        lines = path.read_text(encoding="utf-8").splitlines()
        for entry in (s for s in SETTINGS if s.default is not None):
            patterns = default_patterns(entry)
            found += [f"{relative}:{n}: {entry.name}" for n, line in enumerate(lines, 1)
                      if any(p.search(line) for p in patterns)]
    return found


def test_no_default_is_written_outside_its_declaration():
    assert restated_defaults() == []


def test_the_default_scan_sees_each_way_a_default_is_restated(tmp_path):
    for folder in ("libraries", "resources", "tests", "docs"):
        (tmp_path / folder).mkdir()
    (tmp_path / "resources" / "r.resource").write_text(
        "*** Variables ***\n${TRIALS}           5\n")
    (tmp_path / "libraries" / "k.py").write_text(
        'x = lookup("DURATION", 2)\n"""warmup: seconds (``${WARMUP}``, default 1)."""\n')
    (tmp_path / "README.md").write_text("`-v AB_INCONCLUSIVE:skip` (the default) skips\n")
    (tmp_path / "docs" / "p.md").write_text(
        "for `PROFILE_SECONDS` (5): A/B tests\nwithin `AB_MARGIN` (1 %)\n"
        "SKIPPED by default (`-v AB_UNUSED:skip`)\n"
        "`CAPACITY_WINDOWS` of 15 and `AB_LOOK` rounds of 100\n")
    found = {line.rsplit(": ", 1)[1] for line in restated_defaults(tmp_path)}
    assert found == {"TRIALS", "DURATION", "WARMUP", "AB_INCONCLUSIVE", "PROFILE_SECONDS",
                     "AB_MARGIN", "AB_UNUSED"}


# -- nothing passes a run setting on ------------------------------------------------------------

PASSED_ON = re.compile(r"\$\{(TRIALS|DURATION|WARMUP|LATENCY_SLO|CAPACITY_\w+|AB|AB_\w+|"
                       r"PROFILE\w*)\}")


def passed_settings(root: Path = ROOT) -> list[str]:
    """``file:line: ${NAME}`` for every run setting a resource or a suite names."""
    return [f"{path.relative_to(root)}:{n}: {m.group(0)}" for path in robot_files(root)
            for n, line in enumerate(path.read_text().splitlines(), 1)
            for m in PASSED_ON.finditer(line)]


def test_no_resource_or_suite_passes_a_run_setting():
    assert passed_settings() == []


def test_the_passed_setting_scan_sees_one(tmp_path):
    (tmp_path / "resources").mkdir()
    (tmp_path / "tests").mkdir()
    (tmp_path / "resources" / "r.resource").write_text(
        "K\n    Measure    trials=${TRIALS}    slo=${LATENCY_SLO}\n    Log    ${stack}\n")
    (tmp_path / "tests" / "t.robot").write_text("T\n    Open    ${AB}    ${CAPACITY_WIDTH}\n")
    assert [line.split(": ")[1] for line in passed_settings(tmp_path)] == [
        "${TRIALS}", "${LATENCY_SLO}", "${AB}", "${CAPACITY_WIDTH}"]


# -- the typed settings write no default ------------------------------------------------------


def _holder(root: object, dotted: str) -> tuple[object, str]:
    """The value holding a setting's typed field ``dotted`` under ``root`` (the run's settings:
    ``ab.margin`` -> ``root.ab``), and the field's name."""
    *path, name = dotted.split(".")
    for part in path:
        root = getattr(root, part)
    return root, name


def written_field_defaults(entries: tuple[Setting, ...], root: object) -> list[str]:
    """``Class.field: NAME`` for every typed field a setting resolves into (under ``root``)
    whose class gives it a default: a second copy of the declaration's default."""
    found = []
    for entry in entries:
        for dotted in entry.field.split(", "):
            holder, name = _holder(root, dotted)
            field = {f.name: f for f in dataclasses.fields(holder)}[name]  # type: ignore[arg-type]
            if field.default is not dataclasses.MISSING or \
                    field.default_factory is not dataclasses.MISSING:
                found.append(f"{type(holder).__name__}.{name}: {entry.name}")
    return found


def _every_field_resolved() -> RunSettings:
    """The run's default settings with the A/B ones too (None outside an A/B run)."""
    return dataclasses.replace(default_settings(), ab=declared_ab_settings())


def test_no_typed_field_of_a_setting_has_a_default_of_its_own():
    """Benchmarks, ``trend.ratio`` and tests build ``AbSettings`` by hand: with field defaults
    of its own (``margin: float = 0.01``) the A/B defaults were written twice."""
    root = _every_field_resolved()
    assert written_field_defaults(SETTINGS, root) == []
    holders = {type(_holder(root, dotted)[0]) for entry in SETTINGS
               for dotted in entry.field.split(", ")}
    assert AbSettings in holders
    assert all(f.default is dataclasses.MISSING for f in dataclasses.fields(AbSettings))


def test_the_field_default_scan_sees_a_default_written_again():
    again = dataclasses.make_dataclass("AbSettings", [("look", int), ("margin", float, 0.01)])
    root = dataclasses.make_dataclass("Run", [("ab", again)])(ab=again(look=10))
    entries = (setting("AB_MARGIN"), setting("AB_LOOK"))
    assert written_field_defaults(entries, root) == ["AbSettings.margin: AB_MARGIN"]


def test_the_declared_ab_settings_are_the_declarations_defaults_parsed():
    def parsed(name: str) -> Any:
        return setting(name).parse(setting(name).default)

    assert setting("AB_ALPHA").default is None  # the A/B level is then ALPHA's
    assert declared_ab_settings() == AbSettings(
        margin=parsed("AB_MARGIN") / 100, alpha=parsed("ALPHA"), look=parsed("AB_LOOK"),
        max_rounds=parsed("AB_MAX_ROUNDS"), budget_s=parsed("AB_BUDGET"),
        inconclusive=parsed("AB_INCONCLUSIVE"), unused=parsed("AB_UNUSED"),
        scatter=parsed("AB_SCATTER") / 100)
    assert declared_ab_settings().margin == RATIO_MARGIN


def test_declared_ab_settings_replace_the_fields_named_and_check_them():
    declared = declared_ab_settings()
    changed = declared_ab_settings(look=12, max_rounds=24)
    assert (changed.look, changed.max_rounds) == (12, 24)
    assert dataclasses.replace(changed, look=declared.look,
                               max_rounds=declared.max_rounds) == declared
    with pytest.raises(ValueError, match="-v AB_LOOK:0: expected whole rounds >= 1"):
        declared_ab_settings(look=0)
    with pytest.raises(TypeError, match="margn"):
        declared_ab_settings(margn=0.02)
