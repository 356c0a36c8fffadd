"""What a page looks like once headless Chromium has drawn it: every chart's SVG, its data
marks, its shapes (a criterion's dashed line) and labels, Plotly's toolbar, and what the page
wrote to the console. Shared by the browser tests (test_pages_browser, test_docs_browser);
Chromium is driven as ``utest/test_trend_browser.py`` drives it (``--dump-dom`` after a
virtual time budget, the console on stderr).
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

from utest.test_trend_browser import chromium, console_lines


@dataclass
class Chart:
    """One chart ``<div class="chart..." id=...>`` as drawn."""

    id: str
    svg: bool = False
    marks: int = 0
    """Data marks with a shape (bars and markers: ``path.point``; lines: ``path.js-line``)."""
    dashed: int = 0
    """Drawn shapes with a dashed stroke (a criterion's line, an A/B margin)."""
    labels: list[str] = field(default_factory=list)
    """The texts of the chart's annotations and legend entries."""
    toolbar: bool = False

    def problems(self) -> list[str]:
        """Why this chart is not drawn (empty when it is)."""
        found = []
        if not self.svg:
            found.append(f"{self.id}: no plot drawn (no svg.main-svg)")
        elif self.marks == 0:
            found.append(f"{self.id}: an svg without data (no bar, marker or line)")
        return found


class _Charts(HTMLParser):
    """Collects :class:`Chart` of every chart div, whatever its nesting."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.charts: list[Chart] = []
        self._open: list[tuple[Chart | None, str]] = []  # (chart opened here, tag)
        self._text = False

    def _current(self) -> Chart | None:
        return next((chart for chart, _ in reversed(self._open) if chart is not None), None)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = {k: v or "" for k, v in attrs}
        classes = attributes.get("class", "").split()
        chart = None
        if tag == "div" and "chart" in classes and attributes.get("id"):
            chart = Chart(attributes["id"])
            self.charts.append(chart)
        current = chart or self._current()
        if current is not None:
            if tag == "svg" and "main-svg" in classes:
                current.svg = True
            elif tag == "path" and attributes.get("d") and \
                    ({"point", "js-line"} & set(classes)):
                current.marks += 1
            elif tag == "path" and attributes.get("data-index") is not None and \
                    "stroke-dasharray" in attributes.get("style", "") and \
                    "L" in attributes.get("d", ""):
                current.dashed += 1
            elif tag == "div" and "modebar" in classes:  # the bar, not its container
                current.toolbar = True
            if tag == "text" and {"annotation-text", "legendtext"} & set(classes):
                self._text = True
                current.labels.append("")
        if tag not in ("path", "rect", "line", "circle", "img", "br", "input", "meta", "link",
                       "stop", "use", "image", "hr"):
            self._open.append((chart, tag))

    def handle_endtag(self, tag: str) -> None:
        for index in range(len(self._open) - 1, -1, -1):
            if self._open[index][1] == tag:
                del self._open[index:]
                break
        if tag == "text":
            self._text = False

    def handle_data(self, data: str) -> None:
        current = self._current()
        if self._text and current is not None and current.labels:
            current.labels[-1] += data


def charts_of(dom: str) -> list[Chart]:
    """Every chart of a page's DOM."""
    parser = _Charts()
    parser.feed(dom)
    return parser.charts


@dataclass(frozen=True)
class Drawn:
    """A page after Chromium drew it: its DOM, its console lines, its charts."""

    dom: str
    console: list[str]
    charts: list[Chart]
    returncode: int

    def problems(self) -> list[str]:
        """Everything wrong with the page: a console message (a script error), a chart not
        drawn or drawn without data, Chromium failing."""
        found = [f"chromium exit {self.returncode}"] if self.returncode else []
        found += [f"console: {line}" for line in self.console]
        return found + [p for chart in self.charts for p in chart.problems()]


def draw(page: str, profile: Path | None = None, *args: str) -> Drawn:
    """Open ``page`` (a file URI or URL) in headless Chromium and read what it drew."""
    if profile is None:
        with tempfile.TemporaryDirectory(prefix="chromium-") as folder:
            return draw(page, Path(folder), *args)
    done = chromium(profile, "--window-size=1280,4000", *args, "--dump-dom", page)
    return Drawn(done.stdout, console_lines(done.stderr), charts_of(done.stdout),
                 done.returncode)
