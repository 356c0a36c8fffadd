"""The messages the README and the docs quote are the ones the code writes (issue 63: the README
quoted a VPP skip reason no code wrote, and asked for Go while setup also stopped without
cargo).

Each quote is taken from the pages (a line break inside it read as a space) and looked for among
what the code forms: the VPP skip reasons from :func:`libraries.cases.testbed_setup.vpp_skip_reason`
over every node of the repository's topologies, setup's messages from ``setup.sh`` itself (its
``echo "setup.sh: ..."`` lines, their ``$VARIABLES`` given the values the script sets), and the
toolchains setup stops without must be the ones the README and the local-testbed page ask for.
The suites' documentation, shown in Robot's log, renders without stray backticks.
"""

from __future__ import annotations

import re
from pathlib import Path

from robot.running import builder as robot_builder
from robot.utils import html_format

from libraries.cases.testbed_setup import vpp_skip_reason
from libraries.testbed.topology_file import load_topology

REPO = Path(__file__).resolve().parent.parent
SETUP = REPO / "setup.sh"
LOCAL_TESTBED = REPO / "docs" / "getting-started" / "local-testbed.md"


def pages() -> dict[str, str]:
    """The README and every docs page, each line break read as a space (a quote may wrap)."""
    found = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
    return {str(page.relative_to(REPO)): re.sub(r"\s*\n\s*", " ", page.read_text())
            for page in found}


def quotes(text: str, start: str) -> list[str]:
    """The double-quoted passages of ``text`` that start with ``start``."""
    return re.findall(rf'"({re.escape(start)}[^"]*)"', text)


def vpp_reasons() -> set[str]:
    """Every VPP skip reason the code gives on the repository's topologies: for each node, the
    one it skips with where VPP's binary is absent."""
    reasons = set()
    for file in sorted((REPO / "topologies").glob("*.yaml")):
        if file.name == "criteria.yaml":
            continue
        topology = load_topology(str(file))
        for node in topology.nodes:
            reasons.add(vpp_skip_reason(topology, node, installed=False))
    return reasons


def setup_messages() -> list[str]:
    """``setup.sh``'s own messages (what it echoes), its variables replaced by their values."""
    script = SETUP.read_text()
    values = dict(re.findall(r"^([A-Z_]+)=([^\s$(]+)$", script, re.MULTILINE))
    messages = re.findall(r'echo "(setup\.sh: [^"]*)"', script)
    return [re.sub(r"\$([A-Z_]+)", lambda m: values.get(m[1], m[0]), message)
            for message in messages]


def toolchains() -> list[tuple[str, str, str]]:
    """What setup stops without: (command, toolchain, version) from its "X not found ...
    (install T V or newer)" messages."""
    return re.findall(r"setup\.sh: (\w+) not found: [^(]*\(install (\w+) ([\d.]+) or newer\)",
                      "\n".join(setup_messages()))


def test_the_quotes_are_found_in_wrapped_text() -> None:
    text = 'skips ("VPP not installed on dut: /opt/vpp/bin/vpp\n  missing") and "VPP x"'
    assert quotes(re.sub(r"\s*\n\s*", " ", text), "VPP not ") == [
        "VPP not installed on dut: /opt/vpp/bin/vpp missing"]


def test_the_quoted_vpp_skip_reasons_are_the_ones_the_code_gives() -> None:
    reasons = vpp_reasons()
    assert "VPP not installed on dut: /opt/vpp/bin/vpp missing" in reasons
    assert vpp_skip_reason(load_topology("3node"), "dut", installed=True) is None
    quoted = {page: quotes(text, "VPP not ") for page, text in pages().items()}
    assert quoted["README.md"], "the README quotes the VPP skip reason"
    wrong = {page: [quote for quote in found if quote not in reasons]
             for page, found in quoted.items()}
    assert {page: found for page, found in wrong.items() if found} == {}


def test_the_quoted_setup_messages_are_the_ones_setup_writes() -> None:
    messages = setup_messages()
    assert any("cargo not found" in message for message in messages)
    quoted = [quote for text in pages().values() for quote in quotes(text, "setup.sh: ")]
    assert quoted, "the local-testbed page quotes setup's stop"
    assert [quote for quote in quoted if quote not in messages] == []


def test_the_readme_and_local_testbed_page_ask_for_every_toolchain_setup_needs() -> None:
    needed = toolchains()
    assert {command for command, _, _ in needed} >= {"go", "cargo"}
    text = pages()
    for page in ("README.md", str(LOCAL_TESTBED.relative_to(REPO))):
        for command, toolchain, version in needed:
            assert f"{toolchain} {version} or newer" in text[page].replace("**", ""), \
                (page, toolchain)
            assert f"`{command}`" in text[page], (page, command)


def _docs(suite) -> list[tuple[str, str]]:
    """Every suite's and test's documentation under ``suite``: (long name, text)."""
    found = [(suite.full_name, suite.doc)] + [(test.full_name, test.doc) for test in suite.tests]
    return found + [doc for child in suite.suites for doc in _docs(child)]


def test_the_suites_documentation_renders_without_stray_backticks() -> None:
    """Robot's log renders ````code```` only where the closing backticks end a word: a
    ````name````'s left both pairs on the page (tests/ssl_proxy/kernel.robot)."""
    assert "``" in html_format("``a``'s and ``b``")  # what the check catches
    suite = robot_builder.TestSuiteBuilder().build(str(REPO / "tests"))
    stray = [name for name, doc in _docs(suite) if "`" in html_format(doc)]
    assert stray == []
