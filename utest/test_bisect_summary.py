"""A bisection's summary.md (libraries.bisect.bisect_summary), from simulated searches."""

from __future__ import annotations

from pathlib import Path

from libraries.bisect.bisect_summary import bisect_summary
from libraries.bisect.bisection import EXIT_CODES, bisect
from libraries.bisect.report import as_json, write_report
from utest.test_bisect import simulated

META = {"title": "nginx 1.25.0..1.25.7", "topology": "3node", "test": "ssl_proxy/x",
        "metric": "rps"}


def test_a_culprit_with_its_change_and_the_exit_code(tmp_path: Path):
    compare, _ = simulated([100.0] * 2 + [90.0] * 2, noise=0.0)
    result = bisect(4, compare)
    write_report(tmp_path, result, ["r0", "r1", "r2", "r3"], META)
    text = (tmp_path / "summary.md").read_text()
    lines = text.splitlines()
    assert lines[0] == "# Bisect nginx 1.25.0..1.25.7: culprit found (exit 3)"
    assert "Test `ssl_proxy/x` on `3node`, metric rps: 4 builds (r0 .. r3, " in lines[2]
    assert lines[2].endswith("[bisect.html](bisect.html) · [bisect.json](bisect.json)")
    # both ranges beside the culprit are pairs: checked, and the exit says so (not "end to end")
    assert ("Exit 3: culprit found, and every other build checked: each range beside the "
            "culprits proven clear of a regression beyond the margin pair by pair or shown to "
            "be the same files.") in text
    assert "## Clear ranges (2)\n\n- `r0` .. `r1`: measured the same: +0.0 % [+0.0, +0.0], " \
        "within the A/B margin; every build checked\n" in text
    assert "## Culprits (1)\n\n- **regression**: last good `r1`, first bad `r2`: -10.0 % " \
        "[-10.0 %, -10.0 %] after " in text
    assert "Undecided" not in text and "Skipped builds" not in text


def test_undecided_ranges_and_skipped_builds_with_why():
    compare, _ = simulated([100.0] * 4 + [94.0] * 4, failed={(4, 7)}, broken={3})
    result = bisect(8, compare)
    text = bisect_summary(as_json(result, [f"r{i}" for i in range(8)], META))
    assert "(exit 5)" in text.splitlines()[0]
    assert "## Undecided ranges (1)\n\n- `r4` .. `r7`: not proven clear: failed: nginx did " \
        "not start\n" in text
    assert "## Skipped builds (1)\n\n- `r3`: did not run: failed: nginx did not start\n" in text
    assert "## Culprits (1)" in text


def test_no_regression_between_the_ends_says_the_ends_verdict():
    compare, _ = simulated([100.0, 100.0, 99.9, 100.2, 100.0])
    result = bisect(5, compare)
    text = bisect_summary(as_json(result, [f"r{i}" for i in range(5)], META))
    assert text.splitlines()[0].endswith("no culprit (exit 0)")
    assert f"Exit 0: {EXIT_CODES[0]}." in text
    assert "No regression between the ends: " in text
    assert "Culprits" not in text
