"""The browser checks can fail, and the documentation site opens without errors.

* The check of a page (:mod:`utest.pages`: every chart drawn with data, no console message)
  fails on a run report that does not render: plotly.js missing (a script error, nothing
  drawn), a chart whose data cannot be drawn (drawn empty), a script error while drawing.
* The site (``mkdocs build`` into a temporary folder, served over HTTP on loopback as a
  reader's browser gets it: over ``file://`` the theme's search cannot load its index) has
  every page opened in headless Chromium: each page loads with its title and content, and no
  page logs a script error; a page with one is caught.

Needs Debian's ``chromium`` (setup.sh installs it); skipped with the reason when it is absent.
"""

from __future__ import annotations

import functools
import html
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from libraries.report.run_report import write_run_report
from utest.pages import draw
from utest.test_trend_browser import CHROMIUM

REPO = Path(__file__).resolve().parent.parent
RUN = Path(__file__).parent / "fixtures" / "runs" / "kernel-3node"
pytestmark = pytest.mark.skipif(CHROMIUM is None,
                                reason="chromium not installed (/usr/bin/chromium missing; "
                                       "setup.sh installs Debian's chromium)")


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("run") / "20261122-223030-9080"
    shutil.copytree(RUN, run)
    return write_run_report(run)


def _broken(report: Path, name: str, old: str, new: str) -> str:
    text = report.read_text()
    assert old in text, old
    page = report.with_name(name)
    page.write_text(text.replace(old, new, 1))
    return page.as_uri()


def test_the_page_check_passes_a_drawn_report_and_fails_one_that_does_not_render(
        report: Path) -> None:
    drawn = draw(report.as_uri())
    assert drawn.problems() == [] and len(drawn.charts) == 4
    assert all(chart.svg and chart.marks and not chart.toolbar for chart in drawn.charts)
    # plotly.js missing: a script error, and no chart drawn
    missing = draw(_broken(report, "no-plotly.html", '<script type="text/javascript">',
                           '<script type="text/x-not-javascript">'))
    assert any("Plotly is not defined" in p for p in missing.problems()), missing.problems()
    assert sum("no plot drawn" in p for p in missing.problems()) == 4
    # a chart whose data cannot be drawn: plotly draws axes and nothing on them
    bad = draw(_broken(report, "bad-data.html", "const CHARTS = [{",
                       'const CHARTS = [{"data": 7, "layout": null}, {'))
    assert bad.problems() == ["chart-ebpf_stream-0: an svg without data (no bar, marker or "
                              "line)"], bad.problems()
    # a script error while drawing: in the console, and the charts not drawn
    thrown = draw(_broken(report, "thrown.html", "Plotly.newPlot(div, ",
                          "Plotly.newPlot(div.nothing.here, "))
    assert any(p.startswith("console: ") and "TypeError" in p for p in thrown.problems())
    assert sum("no plot drawn" in p for p in thrown.problems()) == 4


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    """The documentation site built into a temporary folder and served on loopback."""
    folder = tmp_path_factory.mktemp("site") / "site"
    mkdocs = Path(sys.executable).parent / "mkdocs"
    built = subprocess.run([str(mkdocs), "build", "-q", "-f", str(REPO / "mkdocs.yml"), "-d",
                            str(folder)], capture_output=True, text=True, timeout=300,
                           env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
                           check=False)
    assert built.returncode == 0, built.stderr[-3000:]
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(_Quiet, directory=str(folder)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield folder, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _pages(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*.html")
                  if "assets" not in p.parts and p.name != "_pages.html")


_OPENER = """<!DOCTYPE html><html><body><pre id="out">{}</pre><script>
const PAGES = %s;
const seen = {};
let next = 0;
function open() {  // a few pages at a time: a busy machine loads forty at once too slowly
  if (next >= PAGES.length) return;
  const page = PAGES[next++];
  const frame = document.createElement('iframe');
  frame.width = 1200; frame.height = 800;
  frame.onload = () => {
    const doc = frame.contentDocument;
    seen[page] = {title: doc.title, text: (doc.body ? doc.body.innerText : '').length};
    document.getElementById('out').textContent = JSON.stringify(seen);
    open();
  };
  frame.src = '/' + page;
  document.body.appendChild(frame);
}
for (let i = 0; i < 6; i++) open();
</script></body></html>"""


def _open_all(folder: Path, base: str, pages: list[str]) -> tuple[dict, list[str]]:
    """Open ``pages`` in one Chromium, each in a frame of one opener page (six at a time):
    what each page showed (title, text length) and the console's lines. Chromium's virtual
    time waits while pages load, so the budget is no wall-clock limit."""
    (folder / "_pages.html").write_text(_OPENER % json.dumps(pages))
    drawn = draw(f"{base}/_pages.html", None, "--virtual-time-budget=60000")
    shown = re.search(r'<pre id="out">(.*?)</pre>', drawn.dom, re.S)
    return json.loads(html.unescape(shown.group(1))), drawn.console


def test_every_page_of_the_documentation_site_opens_without_errors(site: tuple[Path, str]):
    folder, base = site
    pages = _pages(folder)
    assert len(pages) >= 30 and "index.html" in pages
    shown, console = _open_all(folder, base, pages)
    assert console == []
    assert sorted(shown) == pages
    for page, seen in shown.items():
        assert seen["title"] and seen["text"] > 200, (page, seen)


def test_a_documentation_page_with_a_script_error_is_caught(site: tuple[Path, str]):
    folder, base = site
    (folder / "broken").mkdir(exist_ok=True)
    (folder / "broken" / "index.html").write_text(
        "<html><head><title>broken</title></head><body>" + "text " * 60
        + "<script>notDefinedAnywhere();</script></body></html>")
    shown, console = _open_all(folder, base, ["index.html", "broken/index.html"])
    assert set(shown) == {"index.html", "broken/index.html"}
    assert any("notDefinedAnywhere" in line and "/broken/" in line for line in console), \
        console
