"""Which builds of a bisection are the same files (libraries.bisect.identity): keyed by content,
hashed before the search with the A/B session's own fingerprint, or learned from a comparison's
record (libraries.bisect.comparison_run)."""

from __future__ import annotations

import json
import shutil
import sys
from functools import partial
from pathlib import Path
from types import SimpleNamespace

import pytest

from libraries.ab.comparison import Side
from libraries.bisect import bisect_command
from libraries.bisect.builds import load_builds
from libraries.bisect.comparison_run import RobotComparisons, find_test, record_files
from libraries.bisect.identity import Identities, content_key, hash_before
from libraries.testbed.errors import NodeError
from libraries.testbed.topology_file import load_topology
from utest.localnode import LocalNode
from utest.test_bisect import FAKE_ROBOT

A, B = "1" * 64, "2" * 64


def _side(name: str, path: str, **more) -> Side:
    return Side.model_validate({"name": name, "tools": {"dut": {"nginx": path}}, **more})


def test_copies_of_one_install_at_two_paths_are_the_same_build():
    one, two = _side("r1", "/opt/r1/nginx"), _side("r2", "/opt/r2/nginx")
    assert content_key(one, {"dut:/opt/r1/nginx": A}) == content_key(two, {"dut:/opt/r2/nginx": A})
    assert content_key(one, {"dut:/opt/r1/nginx": A}) != content_key(two, {"dut:/opt/r2/nginx": B})


def test_a_build_differs_by_its_settings_and_by_the_libraries_it_loads():
    plain = _side("r1", "/opt/r1/nginx")
    slow = _side("r2", "/opt/r2/nginx", env={"nginx": {"OPENSSL_ia32cap": "~0x200000200000000"}})
    assert content_key(plain, {"dut:/opt/r1/nginx": A}) != \
        content_key(slow, {"dut:/opt/r2/nginx": A})  # AES-NI off: same binary, not the same
    libssl = "dut:/usr/lib/x86_64-linux-gnu/libssl.so.3"  # as a fingerprint may report it
    assert content_key(plain, {"dut:/opt/r1/nginx": A, libssl: A}) != \
        content_key(plain, {"dut:/opt/r1/nginx": A, libssl: B})


def test_a_build_whose_named_file_was_not_hashed_is_unknown_never_the_same():
    assert content_key(_side("r1", "/opt/r1/nginx"), {}) is None
    known = Identities((_side("r1", "/opt/r1/nginx"), _side("r2", "/opt/r2/nginx")))
    known.learn(0, {"dut:/opt/r1/nginx": A}, "hashed")
    known.learn(1, {}, "an old record without files")
    assert not known.same(0, 1) and 1 not in known.keys


def test_a_build_whose_files_changed_during_the_search_is_unknown_from_then_on():
    known = Identities((_side("r1", "/opt/r1/nginx"), _side("r2", "/opt/r2/nginx")))
    known.learn(0, {"dut:/opt/r1/nginx": A}, "hashed before the search")
    known.learn(1, {"dut:/opt/r2/nginx": A}, "hashed before the search")
    assert known.same(0, 1) and known.groups() == [[0, 1]]
    known.learn(1, {"dut:/opt/r2/nginx": B}, "the record of 03-r1-vs-r2")
    assert not known.same(0, 1) and known.keys[1] is None
    known.learn(1, {"dut:/opt/r2/nginx": A}, "the record of 04-r1-vs-r2")
    assert not known.same(0, 1)  # once unknown, unknown
    assert "the record of 03-r1-vs-r2 reported other files" in known.source[1]


@pytest.fixture
def copies(tmp_path: Path) -> Path:
    """r1 and r2 copies of one binary, r3 another binary, r4 not made yet."""
    for name, source in (("r1", "true"), ("r2", "true"), ("r3", "false")):
        (tmp_path / name).mkdir()
        shutil.copy2(shutil.which(source) or f"/bin/{source}", tmp_path / name / "nginx")
    path = tmp_path / "builds.yaml"
    path.write_text("builds:\n" + "".join(
        f"  - {{name: {n}, tools: {{dut: {{nginx: {tmp_path}/{n}/nginx}}}}}}\n"
        for n in ("r1", "r2", "r3", "r4")))
    return path


def test_the_builds_are_hashed_on_a_testbed_brought_up_for_it(tmp_path, copies):
    topology = load_topology("3node")
    builds = load_builds(copies, topology)
    downs = []
    testbed = SimpleNamespace(topology=topology, down=lambda: downs.append(1),
                              nodes={name: LocalNode(str(tmp_path), name)
                                     for name in topology.nodes})
    known = Identities(builds.sides)
    said = hash_before(builds, topology, known, up=lambda _: testbed)
    assert said.startswith("hashed 3 of 4 builds before the search: the same files: r1 = r2; "
                           "not hashed (their comparisons' records will tell): r4: ")
    assert known.same(0, 1) and not known.same(0, 2) and not known.same(2, 3)
    assert downs == [1]  # taken down again


def test_a_testbed_that_cannot_come_up_leaves_it_to_the_records(copies):
    topology = load_topology("3node")
    builds = load_builds(copies, topology)

    def up(_):
        raise NodeError("local testbed: provision: netns needs root (run as root)")

    known = Identities(builds.sides)
    said = hash_before(builds, topology, known, up=up)
    assert said == ("could not bring 3node up to hash the builds (local testbed: provision: "
                    "netns needs root (run as root)): which builds are the same files is "
                    "learned from each comparison's record")
    assert known.keys == {}


def test_a_comparison_teaches_which_files_its_two_builds_ran(tmp_path, copies):
    topology = load_topology("3node")
    builds = load_builds(copies, topology)
    record = json.loads((Path(__file__).parent / "fixtures" / "records" /
                         "ab_record.json").read_text())
    record["ab"]["sides"]["a"]["files"] = {f"dut:{tmp_path}/r1/nginx": A}
    record["ab"]["sides"]["b"]["files"] = {f"dut:{tmp_path}/r2/nginx": A}
    fixture = tmp_path / "record.json"
    fixture.write_text(json.dumps(record))
    script = tmp_path / "robot.py"
    script.write_text(FAKE_ROBOT)
    known = Identities(builds.sides)
    runs = RobotComparisons(topology="3node", test=find_test("1kb-10c-kernel-ssl-proxy"),
                            builds=builds, out=tmp_path / "out", max_rounds=10, budget_s=120,
                            robot=(sys.executable, str(script), str(fixture)),
                            identities=known)
    assert not known.same(0, 1)
    runs(0, 1, 1)
    assert known.same(0, 1)
    assert known.source[0] == "the record of 01-r1-vs-r2"
    assert record_files(runs.made[0], "1kb-10c-kernel-ssl-proxy") == {
        "a": {f"dut:{tmp_path}/r1/nginx": A}, "b": {f"dut:{tmp_path}/r2/nginx": A}}
    assert record_files(tmp_path / "nowhere", "1kb-10c-kernel-ssl-proxy") == {}


SLOW_ROBOT = r'''
import json, sys, pathlib, yaml
args = sys.argv[1:]
out = pathlib.Path(args[args.index("-d") + 1])
given = dict(value.split(":", 1) for flag, value in zip(args, args[1:]) if flag == "-v")
comparison = yaml.safe_load(pathlib.Path(given["AB"]).read_text())
record = json.loads(pathlib.Path(sys.argv[1]).read_text())
record["name"] = args[args.index("-t") + 1]
level = {side: 0.9 if comparison[side]["name"] in ("r3", "r4") else 1.0 for side in "ab"}
ratio = level["b"] / level["a"]
verdict = "regression" if ratio < 0.97 else "no change"
record["ab"]["metrics"] = {"rps": {"change": ratio, "change_pct": (ratio - 1) * 100,
                                   "low": ratio - 0.01, "high": ratio + 0.01,
                                   "verdict": verdict, "direction": "higher_is_better",
                                   "ratios": [ratio] * 20, "level": 0.95, "method": "HL"}}
record["ab"]["rounds"]["run"] = 20
(out / "run").mkdir()
(out / "run" / "records.jsonl").write_text(json.dumps(record) + "\n")
'''


def test_the_command_hashes_the_builds_and_compares_only_what_differs(tmp_path, monkeypatch,
                                                                     capsys):
    """r1 = r2 and r3 = r4 (copies), r3 10 % slower: one comparison, the ends'; exit 3 with
    every build checked."""
    for name, source in (("r1", "true"), ("r2", "true"), ("r3", "false"), ("r4", "false")):
        (tmp_path / name).mkdir()
        shutil.copy2(shutil.which(source) or f"/bin/{source}", tmp_path / name / "nginx")
    builds = tmp_path / "builds.yaml"
    builds.write_text("builds:\n" + "".join(
        f"  - {{name: {n}, tools: {{dut: {{nginx: {tmp_path}/{n}/nginx}}}}}}\n"
        for n in ("r1", "r2", "r3", "r4")))
    script = tmp_path / "robot.py"
    script.write_text(SLOW_ROBOT)
    fixture = Path(__file__).parent / "fixtures" / "records" / "ab_record.json"
    topology = load_topology("3node")
    testbed = SimpleNamespace(topology=topology, down=lambda: None,
                              nodes={n: LocalNode(str(tmp_path), n) for n in topology.nodes})
    monkeypatch.setattr(bisect_command, "hash_before", lambda b, t, known: hash_before(
        b, t, known, up=lambda _: testbed))
    monkeypatch.setattr(bisect_command, "RobotComparisons", partial(
        RobotComparisons, robot=(sys.executable, str(script), str(fixture))))
    # `true` is no nginx
    monkeypatch.setattr(bisect_command, "check_builds", lambda *_: ([], set()))
    code = bisect_command.main(["--topology", "3node", "--test", "1kb-10c-kernel-ssl-proxy",
                                "--builds", str(builds), "--results", str(tmp_path / "out")])
    printed = capsys.readouterr().out
    assert code == 3, printed
    assert "bisect: hashed 4 of 4 builds before the search: the same files: r1 = r2; r3 = r4" \
        in printed
    assert "1 comparisons" in printed
    assert "regression: last good r2, first bad r3: -10.0 % [-11.0, -9.0] after 20 rounds" \
        in printed
    assert "clear: r1 .. r2: the same files (not measured); every build checked" in printed
    assert printed.rstrip().endswith("exit 3: culprit found, and every other build checked: "
                                     "each range beside the culprits proven clear of a "
                                     "regression beyond the margin pair by pair or shown to "
                                     "be the same files")
