"""The bisection benchmark's own parts: planting steps, laying out installs, scoring."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import yaml

from benchmarks.bisect_bench import analyze, lay_out, plant, record


def _install(root: Path, name: str) -> Path:
    prefix = root / name
    (prefix / "sbin").mkdir(parents=True)
    (prefix / "sbin" / "nginx").write_text(f"#!/bin/sh\necho {name}\n")
    return prefix


@pytest.mark.parametrize(("scenario", "steps"), [("none", 0), ("step", 1), ("two", 2)])
def test_steps_are_planted_inside_the_range_never_at_its_first_build(scenario, steps):
    rng = random.Random(7)
    for _ in range(200):
        planted = plant(scenario, 8, rng)
        assert len(planted) == steps == len(set(planted))
        assert all(1 <= s <= 7 for s in planted) and planted == sorted(planted)


def test_each_build_copies_the_level_its_position_is_at(tmp_path: Path):
    levels = [_install(tmp_path, "fast"), _install(tmp_path, "slow"), _install(tmp_path, "slower")]
    scratch = tmp_path / "range"
    scratch.mkdir()
    builds = yaml.safe_load(lay_out(levels, [2, 5], 7, scratch).read_text())["builds"]
    copied = [Path(b["tools"]["dut"]["nginx"]).read_text().split()[-1] for b in builds]
    assert copied == ["fast", "fast", "slow", "slow", "slow", "slower", "slower"]
    assert [b["name"] for b in builds] == [f"r0{i}" for i in range(1, 8)]
    assert all(b["tools"]["server"] == b["tools"]["dut"] for b in builds)


def _doc(culprits: list[tuple[str, str]], comparisons: int) -> dict:
    names = [f"r{i:02d}" for i in range(1, 9)]
    return {"builds": names, "status": "culprit found", "minutes": 9.5, "undecided": [],
            "test": "ssl_proxy/1kb-10c-kernel-ssl-proxy", "topology": "3node",
            "culprits": [{"last_good": g, "first_bad": b, "direction": d}
                         for g, b, d in [(g, b, "regression") for g, b in culprits]],
            "comparisons": [{"a": "r01", "b": f"r0{i + 2}"} for i in range(comparisons)]}


def test_a_bisection_is_exact_only_when_it_names_the_planted_steps_and_nothing_else():
    hit = record("step", 8, [3], 3, _doc([("r03", "r04")], 5), seed=1)
    assert hit["found"] == [3] and hit["exact"] and hit["within_bound"] and hit["bound"] == 5
    off_by_one = record("step", 8, [3], 3, _doc([("r04", "r05")], 4), seed=1)
    assert off_by_one["found"] == [4] and not off_by_one["exact"]
    extra = record("step", 8, [3], 3, _doc([("r03", "r04"), ("r06", "r07")], 6), seed=1)
    assert not extra["exact"] and not extra["within_bound"]
    silent = record("none", 8, [], 0, _doc([], 1), seed=1)
    assert silent["exact"] and silent["found"] == []


def test_the_table_counts_exact_bisections_and_the_most_comparisons(tmp_path: Path):
    lines = [record("step", 8, [3], 3, _doc([("r03", "r04")], 5), seed=1),
             record("step", 8, [5], 4, _doc([], 3), seed=1)]
    path = tmp_path / "bisect.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    table = analyze([path])
    assert "| step | 8 | 2 | 1/2 | 3, 4 | 5 / 5.0 | 2/2 | 9.5, 9.5 |" in table
