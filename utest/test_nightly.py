"""Nightly runner with fake robot / pabot / rebot executables: command lines, outputs, gate codes.

The fakes are real executables (a Python script): they log their argv, write output.xml and,
like the Results library would, append a record for ``RUN_ID`` to ``<outputdir>/records.jsonl``.
"""

from __future__ import annotations

import json
import os
import re
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from libraries.nightly.nightly_run import Options, build_plan, main, new_run_id, resolve_tool
from utest.test_trend import RUNS, make_record, write_runs

FAKE = '''#!{python}
import json, os, sys, time
from datetime import datetime, timezone
from pathlib import Path
argv = sys.argv[1:]
tool = Path(sys.argv[0]).name
with open(os.environ["FAKE_LOG"], "a") as log:
    log.write(json.dumps({{"tool": tool, "argv": argv, "cwd": os.getcwd(),
                          "t": time.time()}}) + "\\n")
out = Path(argv[argv.index("--outputdir") + 1])
out.mkdir(parents=True, exist_ok=True)
(out / "output.xml").write_text("<robot/>")
if tool == "rebot":
    sys.exit(0)
variables = dict(a.split(":", 1) for a, p in zip(argv[1:], argv) if p == "--variable")
time.sleep(float(os.environ.get("FAKE_SLEEP", "0")))
template = os.environ.get("FAKE_RECORD")
if template:
    record = json.loads(Path(template).read_text())
    record["run_id"] = variables["RUN_ID"]
    record["start_time"] = datetime.now(timezone.utc).isoformat()
    with open(out / "records.jsonl", "a") as handle:
        handle.write(json.dumps(record) + "\\n")
sys.exit(int(os.environ.get("FAKE_RC", "0")))
'''


@pytest.fixture
def fakes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """robot, pabot, rebot fakes in ``bin/`` (first on PATH) and the log of their calls."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("robot", "pabot", "rebot"):
        path = bin_dir / tool
        path.write_text(FAKE.format(python=sys.executable))
        path.chmod(0o755)
    log = tmp_path / "calls.jsonl"
    monkeypatch.setenv("FAKE_LOG", str(log))
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return {"bin": bin_dir, "log": log, "results": tmp_path / "results"}


def calls(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def history(results: Path, value_factor: float, tmp_path: Path,
            monkeypatch: pytest.MonkeyPatch) -> None:
    """30 quiet past runs of one test at 10 Gbit/s; the fake's next record is factor x that."""
    write_runs(results, {"iperf": ("bit/s", "higher_is_better", lambda i: 10e9)}, noise=0.01)
    trials = [10e9 * value_factor * f for f in (0.995, 1.0, 1.005)]
    record = make_record("x", datetime.now(UTC), "iperf",
                         {"throughput": ("bit/s", "higher_is_better", trials)})
    template = tmp_path / "record.json"
    template.write_text(json.dumps(record))
    monkeypatch.setenv("FAKE_RECORD", str(template))


def test_run_id_format_is_time_and_4_hex() -> None:
    first, second = new_run_id(), new_run_id()
    assert re.fullmatch(r"\d{8}-\d{6}-[0-9a-f]{4}", first)
    assert first != second or first[:15] == second[:15]


def test_single_topology_runs_robot_writes_run_json_and_dashboard(fakes, with_record) -> None:
    results = fakes["results"]
    assert main(["--results", str(results), "--suites", "tests/tcp_term", "--", "--include",
                 "KERNEL"]) == 0
    (call,) = calls(fakes["log"])
    assert call["tool"] == "robot"
    run_dir = Path(call["argv"][call["argv"].index("--outputdir") + 1])
    run_id = run_dir.name
    assert re.fullmatch(r"\d{8}-\d{6}-[0-9a-f]{4}", run_id)
    assert run_dir == (results / run_id).resolve()
    argv = " ".join(call["argv"])
    assert f"--variable RUN_ID:{run_id} --variable TOPOLOGY:3node" in argv
    assert argv.endswith(f"--include KERNEL {Path('tests/tcp_term').resolve()}")
    meta = json.loads((run_dir / "run.json").read_text())
    assert meta["run_id"] == run_id and meta["topology"] == "3node"
    assert meta["start_time"] <= meta["end_time"]
    assert meta["exit_codes"]["run_codes"] == {"3node": 0}
    report = (run_dir / "run-report.html").read_text()
    assert f"Run {run_id}" in report and 'class="chart"' in report
    assert (results / "trend.html").read_text().count('class="chart"') == 1
    assert len(json.loads((results / "trend.html").read_text().split("const SERIES = ")[1]
                          .split(";\n")[0])[0]["x"]) == RUNS + 1


@pytest.fixture
def with_record(fakes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    history(fakes["results"], 1.0, tmp_path, monkeypatch)


def test_no_records_anywhere_is_exit_2(fakes, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FAKE_RECORD", raising=False)
    assert main(["--results", str(fakes["results"])]) == 2


def test_regression_in_new_run_gates_with_3(fakes, tmp_path, monkeypatch) -> None:
    history(fakes["results"], 0.8, tmp_path, monkeypatch)
    assert main(["--results", str(fakes["results"])]) == 3
    assert len(list(fakes["results"].glob("*/records.jsonl"))) == RUNS + 1
    assert "regression" in (fakes["results"] / "trend.md").read_text()
    newest = max(fakes["results"].glob("*/run.json"), key=lambda p: p.stat().st_mtime).parent
    summary = (newest / "summary.md").read_text()  # the night's: gate, the series, its tests
    assert summary.startswith(f"# Nightly {newest.name}: exit 3\n")
    assert "## Series: 1 regression(s), 0 pending" in summary
    assert f"## Run {newest.name}: 1 record(s), no test lines" in summary  # a fake robot


@pytest.mark.parametrize(("factor", "robot_rc", "expected"), [
    (1.0, 0, 0),     # all good
    (1.0, 2, 1),     # two tests failed, no regression
    (0.8, 2, 3),     # regression wins over failed tests
    (0.8, 252, 4),   # robot could not run (bad options / no tests): run error wins
    (1.0, 253, 4),   # interrupted
])
def test_gate_precedence(fakes, tmp_path, monkeypatch, factor, robot_rc, expected) -> None:
    history(fakes["results"], factor, tmp_path, monkeypatch)
    monkeypatch.setenv("FAKE_RC", str(robot_rc))
    assert main(["--results", str(fakes["results"])]) == expected


def test_bad_record_from_suite_is_exit_2(fakes, tmp_path, monkeypatch, capsys) -> None:
    history(fakes["results"], 1.0, tmp_path, monkeypatch)
    template = Path(os.environ["FAKE_RECORD"])
    record = json.loads(template.read_text())
    del record["verdict"]
    template.write_text(json.dumps(record))
    assert main(["--results", str(fakes["results"])]) == 2
    assert re.search(r"records.jsonl:1: \(record\): 'verdict' is a required property",
                     capsys.readouterr().err)


@pytest.mark.integration
def test_several_topologies_run_pabot_in_parallel_and_merge_with_rebot(
        fakes, tmp_path, monkeypatch) -> None:
    history(fakes["results"], 1.0, tmp_path, monkeypatch)
    monkeypatch.setenv("FAKE_SLEEP", "3")
    assert main(["--results", str(fakes["results"]), "--topology", "3node", "1node",
                 "--suites", "tests/tcp_term", "tests/ssl_proxy", "--processes", "2"]) == 0
    runs = [c for c in calls(fakes["log"]) if c["tool"] == "pabot"]
    (rebot,) = [c for c in calls(fakes["log"]) if c["tool"] == "rebot"]
    assert len(runs) == 2
    assert abs(runs[0]["t"] - runs[1]["t"]) < 2.5  # started together, each sleeps 3 s
    run_dir = Path(rebot["argv"][rebot["argv"].index("--outputdir") + 1])
    by_topology = {next(a.split(":")[1] for a in c["argv"] if a.startswith("TOPOLOGY:")): c
                   for c in runs}  # the two runs log in whichever order they started
    for topology, call in by_topology.items():
        argv = call["argv"]
        assert argv[:2] == ["--processes", "2"]
        assert argv[argv.index("--outputdir") + 1] == str(run_dir / topology)
        assert f"TOPOLOGY:{topology}" in argv and f"RUN_ID:{run_dir.name}" in argv
        assert call["cwd"] == str(run_dir / topology)  # own .pabotsuitenames
        assert argv[-2:] == [str(Path("tests/tcp_term").resolve()),
                             str(Path("tests/ssl_proxy").resolve())]
    assert rebot["argv"][-2:] == [str(run_dir / "3node" / "output.xml"),
                                  str(run_dir / "1node" / "output.xml")]
    assert sorted(by_topology) == ["1node", "3node"]
    # Records of both topologies are found; run.json is found from the subdirectories.
    assert len(list(run_dir.glob("*/records.jsonl"))) == 2


def test_missing_robot_is_a_run_error(fakes, tmp_path, monkeypatch) -> None:
    history(fakes["results"], 1.0, tmp_path, monkeypatch)
    assert main(["--results", str(fakes["results"]), "--robot", str(tmp_path / "absent")]) == 4


def test_plan_uses_plain_robot_for_one_topology_and_pabot_when_asked(tmp_path: Path) -> None:
    options = Options(results=tmp_path, suites=("tests",), robot="robot", pabot_cmd="pabot")
    plan = build_plan(options, "20260101-000000-abcd")
    (run,) = plan.invocations
    assert run.command[0] == "robot" and plan.merge is None and run.console is None
    assert plan.html == tmp_path.resolve() / "trend.html"
    plan = build_plan(Options(results=tmp_path, pabot=True, pabot_cmd="pabot"), "r")
    assert plan.invocations[0].command[:3] == ("pabot", "--processes", "1")


def test_tools_are_found_on_path_first(fakes) -> None:
    assert resolve_tool("robot") == str(fakes["bin"] / "robot")
    assert resolve_tool("no-such-tool-xyz") == "no-such-tool-xyz"


def test_dry_run_prints_quoted_commands(fakes, capsys) -> None:
    assert main(["--results", str(fakes["results"]), "--dry-run", "--run-id", "r1"]) == 0
    out = capsys.readouterr().out
    assert "'--metadata' " not in out and "'Run id:r1'" in out
    assert not calls(fakes["log"])


def test_pool_plan_is_one_pabot_run_sharing_the_labs_as_value_sets(tmp_path: Path) -> None:
    options = Options(results=tmp_path, suites=("tests",), pabot_cmd="pabot",
                      pool=("lab-a", "lab-b"))
    plan = build_plan(options, "r1")
    (run,) = plan.invocations
    argv = list(run.command)
    assert argv[:5] == ["pabot", "--processes", "2", "--pabotlibport", "0"]
    run_dir = tmp_path.resolve() / "r1"
    assert argv[argv.index("--resourcefile") + 1] == str(run_dir / "labs.dat")
    assert "LAB_POOL:hoststack-lab" in argv and f"POOL_LOG:{run_dir / 'pool.jsonl'}" in argv
    assert plan.merge is None and run.cwd == run_dir


def test_a_pool_without_a_working_lab_is_a_run_error_and_starts_nothing(
        fakes, tmp_path, monkeypatch) -> None:
    history(fakes["results"], 1.0, tmp_path, monkeypatch)
    down = tmp_path / "down.yaml"
    down.write_text("name: lab-down\nnodes:\n  dut:\n    roles: [tg, dut, server]\n"
                    "    host: 127.0.0.1\n    port: 9\n    user: root\n"
                    f"    key: {tmp_path / 'no-key'}\n    tools: {{iperf3: iperf3}}\nlinks: []\n")
    assert main(["--results", str(fakes["results"]), "--pool", str(down)]) == 4
    assert not [c for c in calls(fakes["log"]) if c["tool"] == "pabot"]
    (run_json,) = [p for p in fakes["results"].glob("*/run.json")
                   if "pool" in json.loads(p.read_text())]
    excluded = json.loads(run_json.read_text())["pool"]["excluded"]
    assert list(excluded) == ["lab-down"] and "127.0.0.1:9" in excluded["lab-down"]
