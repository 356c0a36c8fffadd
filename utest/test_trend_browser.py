"""The trend dashboard in a real browser: headless Chromium, no console output, every chart drawn.

Needs Debian's ``chromium`` (setup.sh installs it); skipped with the reason when it is absent.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from libraries.trend.cli import main
from utest.test_trend import SERIES, write_runs

CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium"
                                        if Path("/usr/bin/chromium").exists() else None)
pytestmark = pytest.mark.skipif(CHROMIUM is None,
                                reason="chromium not installed (/usr/bin/chromium missing; "
                                       "setup.sh installs Debian's chromium)")


def chromium(profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run headless Chromium with no network side traffic; console messages go to stderr."""
    command = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
               "--no-first-run", "--disable-background-networking",
               "--disable-component-update", "--disable-sync", f"--user-data-dir={profile}",
               "--enable-logging=stderr", "--v=0", "--virtual-time-budget=8000", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


def console_lines(stderr: str) -> list[str]:
    """Page console messages (``console.*`` calls and uncaught exceptions) in Chromium's log."""
    return [line for line in stderr.splitlines() if ":CONSOLE" in line or "Uncaught" in line]


@pytest.fixture(scope="module")
def dashboard(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("browser")
    write_runs(root / "results", SERIES)
    html = root / "trend.html"
    assert main([str(root / "results"), "--html", str(html)]) == 3
    return html


def test_console_capture_sees_page_errors(tmp_path: Path) -> None:
    """The console check can fail: a page with an error is caught."""
    page = tmp_path / "bad.html"
    page.write_text("<html><body><script>notDefined();</script></body></html>")
    done = chromium(tmp_path / "profile", "--dump-dom", page.as_uri())
    assert any("Uncaught ReferenceError" in line for line in console_lines(done.stderr))


def test_every_chart_renders_without_console_errors(dashboard: Path, tmp_path: Path) -> None:
    done = chromium(tmp_path / "profile", "--dump-dom", dashboard.as_uri())
    assert done.returncode == 0, done.stderr[-2000:]
    assert console_lines(done.stderr) == []
    dom = done.stdout
    charts = re.findall(r'<div class="chart[^"]*" id="plot-(\d+)"', dom)
    assert len(charts) == len(SERIES)
    # plotly replaced every chart div's content with its plot container and SVG layers.
    assert dom.count('class="plot-container plotly"') == len(SERIES)
    assert dom.count('class="main-svg"') >= len(SERIES)
    # Markers of the two regressions and one progression are drawn (open circles).
    assert len(re.findall(r'<text[^>]*>regression</text>', dom)) == 2
    assert len(re.findall(r'<text[^>]*>progression</text>', dom)) == 1


def test_screenshot_shows_the_dashboard(dashboard: Path, tmp_path: Path) -> None:
    shot = tmp_path / "trend.png"
    done = chromium(tmp_path / "profile", "--hide-scrollbars", "--window-size=1280,2400",
                    f"--screenshot={shot}", dashboard.as_uri())
    assert done.returncode == 0, done.stderr[-2000:]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) > 50_000  # a blank page is a few kB; four charts are far more
