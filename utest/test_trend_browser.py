"""The trend dashboard in a real browser: headless Chromium, no console output, every chart drawn.

Needs Debian's ``chromium`` (setup.sh installs it); skipped with the reason when it is absent.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from libraries.history.ingest import ingest
from libraries.history.store import Store
from libraries.report.dashboard import build_dashboard
from libraries.report.trend_command import main
from libraries.trend.gate import analyse_store
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


@pytest.fixture(scope="module")
def two_case_dashboard(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """30 runs of four tests; ``flat-noisy`` is an ssl_proxy test on VPP; every run has a
    log.html and a tests.jsonl naming each test's anchor, as the results listener writes."""
    root = tmp_path_factory.mktemp("filters")
    results = root / "results"
    write_runs(results, SERIES)
    for records in sorted(results.glob("*/records.jsonl")):
        lines = []
        entries = []
        for number, line in enumerate(records.read_text().splitlines(), start=1):
            record = json.loads(line)
            if record["name"] == "flat-noisy":
                record.update(case="ssl_proxy", stack="vpp")
            lines.append(json.dumps(record))
            entries.append(json.dumps({"test_id": record["test_id"], "name": record["name"],
                                       "robot_id": f"s1-t{number}", "status": "PASS",
                                       "log": "log.html"}))
        records.write_text("\n".join(lines) + "\n")
        (records.parent / "tests.jsonl").write_text("\n".join(entries) + "\n")
        (records.parent / "log.html").write_text("<html><body>log</body></html>")
    page = root / "site" / "trend.html"
    assert main([str(results), "--html", str(page)]) == 3
    return page


def _visible_sections(dom: str) -> list[str]:
    return re.findall(r'<section class="test [a-z]+" data-test="([^"]+)"', dom)


def test_filters_in_the_url_fragment_select_sections(two_case_dashboard: Path,
                                                     tmp_path: Path) -> None:
    everything = chromium(tmp_path / "p1", "--dump-dom", two_case_dashboard.as_uri())
    assert console_lines(everything.stderr) == []
    assert len(_visible_sections(everything.stdout)) == 4
    by_case = chromium(tmp_path / "p2", "--dump-dom",
                       two_case_dashboard.as_uri() + "#case=ssl_proxy")
    assert console_lines(by_case.stderr) == []
    assert _visible_sections(by_case.stdout) == ["Tests.Tcp Term.flat-noisy"]
    changes = chromium(tmp_path / "p3", "--dump-dom",
                       two_case_dashboard.as_uri() + "#changes=1&stack=kernel")
    visible = _visible_sections(changes.stdout)
    assert "Tests.Tcp Term.flat-noisy" not in visible
    assert sorted(visible) == ["Tests.Tcp Term.latency-step-up", "Tests.Tcp Term.step-down",
                               "Tests.Tcp Term.step-up"]


def test_regressions_come_first_and_every_sample_links_to_an_existing_log(
        two_case_dashboard: Path) -> None:
    page = two_case_dashboard.read_text()
    order = re.findall(r'<section class="test ([a-z]+)"', page)
    assert order == sorted(order, key=["regression", "progression", "normal"].index)
    series = json.loads(re.search(r"const SERIES = (\[.*?\]);\n", page).group(1))
    links = [link for s in series for link in s["log"]]
    assert len(links) == 4 * 30 and all(links)
    for link in set(links):
        path, _, anchor = link.partition("#")
        assert (two_case_dashboard.parent / path).is_file(), link
        assert re.fullmatch(r"s1-t\d", anchor)


def test_a_large_history_loads_each_chart_from_side_files(tmp_path: Path) -> None:
    """Series data over the inline budget goes to ``<page>-data/chunk-N.js``; the charts in
    view load theirs and draw, with no console error (file:// pages may load scripts)."""
    write_runs(tmp_path / "results", SERIES)
    store = Store(tmp_path / "results" / "history")
    ingest([tmp_path / "results"], store)
    trends = analyse_store(store).trends
    site = tmp_path / "site"
    dashboard = build_dashboard(trends, base=site, data_dir="trend-data", inline_bytes=0)
    assert dashboard.files and "const SERIES = null;" in dashboard.page
    (site / "trend-data").mkdir(parents=True)
    for name, text in dashboard.files.items():
        (site / "trend-data" / name).write_text(text)
    page = site / "trend.html"
    page.write_text(dashboard.page)
    done = chromium(tmp_path / "profile", "--window-size=1280,3000", "--dump-dom",
                    page.as_uri())
    assert done.returncode == 0, done.stderr[-2000:]
    assert console_lines(done.stderr) == []
    assert done.stdout.count('class="plot-container plotly"') == len(SERIES)
    assert len(re.findall(r'<text[^>]*>regression</text>', done.stdout)) == 2
