"""The documentation's own pages read as a reference (issue 63): no code block runs off the
page (long command lines are wrapped with a trailing backslash), and every concept page starts
with what to do and what its verdict means, has subheadings (a table of contents), and keeps
its derivations and this VM's figures in its methodology section.

Pages are rendered with the site's own Markdown extensions (mkdocs.yml), so an admonition's
text or a list is not taken for code."""

from __future__ import annotations

import html
import re
from pathlib import Path

import markdown
import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs"
WIDTH = 88
"""Characters of a code line the site's content column shows without scrolling (Material's
default width, its code font)."""
WIDE_PAGES = ("concepts", "getting-started", "how-to")
"""Where no code line may be wider (the settings reference is generated elsewhere)."""


def _extensions() -> list[str]:
    found = yaml.safe_load((REPO / "mkdocs.yml").read_text())["markdown_extensions"]
    return [next(iter(e)) if isinstance(e, dict) else e for e in found]


def code_lines(text: str) -> list[str]:
    """Every line of every code block of a page, as the site renders the page."""
    rendered = markdown.markdown(text, extensions=_extensions())
    blocks = re.findall(r"<pre><code[^>]*>(.*?)</code></pre>", rendered, re.S)
    return [line for block in blocks for line in html.unescape(block).splitlines()]


def test_code_lines_are_found_as_the_site_renders_them() -> None:
    text = ("!!! abstract \"In short\"\n    " + "prose " * 30 + "\n\nA command:\n\n"
            "    .venv/bin/robot -d results tests\n\n- a list\n  " + "item " * 30 + "\n")
    assert code_lines(text) == [".venv/bin/robot -d results tests"]


@pytest.mark.parametrize("page", sorted(p.relative_to(DOCS).as_posix() for folder in WIDE_PAGES
                                        for p in (DOCS / folder).glob("*.md")))
def test_no_code_line_runs_off_the_page(page: str) -> None:
    wide = [line for line in code_lines((DOCS / page).read_text()) if len(line) > WIDTH]
    assert wide == [], f"{page}: wrap these (a command: a trailing backslash)"


CONCEPTS = tuple(sorted(p.name for p in (DOCS / "concepts").glob("*.md")))
"""Every concept page."""
VM_WORDS = re.compile(r"this VM|[Ss]imulated|Measured on")
"""Words that mark this VM's figures or a derivation's simulation: methodology, not guide."""


def sections(text: str) -> list[tuple[str, str]]:
    """A page's ``## `` sections: (heading, body), in order."""
    parts = re.split(r"^## (.+)$", text, flags=re.M)
    return list(zip(parts[1::2], parts[2::2], strict=True))


@pytest.mark.parametrize("page", CONCEPTS)
def test_a_concept_page_starts_with_what_to_do_and_what_its_verdict_means(page: str) -> None:
    found = sections((DOCS / "concepts" / page).read_text())
    headings = [heading for heading, _ in found]
    assert headings[0] == "What to do", headings
    assert re.fullmatch(r"What (the|a) [a-z ]+ means?", headings[1]), headings
    assert len(headings) >= 3  # a table of contents worth its place
    figures = [heading for heading, body in found if VM_WORDS.search(body)]
    guide = [heading for heading in figures if not heading.startswith("Methodology")]
    assert guide == [], f"{page}: figures or derivations outside the methodology section"
    assert not figures or headings[-1].startswith("Methodology"), headings
    assert code_lines(found[0][1]), f"{page}: what to do shows the command"
