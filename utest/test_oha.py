"""oha as a constant-rate generator: its command line (one process per load core, its share of
the rate and connections), and the counting of its per-request CSV on the node (answers,
failed ones, the ones later than each limit, percentiles), run against a stand-in that writes
a CSV oha 1.16.0 really wrote (utest/fixtures/oha/answers.csv: 2 s at 500 requests/s against
nginx HTTPS on loopback, ``--latency-correction``, 2 connections; one 404 line added)."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from libraries.testbed.command import Ledger, NodeCommand
from libraries.testbed.errors import ParseError, ToolMissing
from libraries.tools.oha import (
    COUNT_MARKER,
    OhaOptions,
    oha_command,
    oha_version,
    parse_oha_output,
    run_oha,
)
from utest.localnode import LocalNode

FIXTURE = Path(__file__).parent / "fixtures" / "oha" / "answers.csv"


def _fake_oha(tmp_path: Path) -> str:
    """A stand-in for oha: answers --version like oha 1.16.0, else copies the fixture to the
    file after -o."""
    script = tmp_path / "oha"
    script.write_text(f"""#!/bin/sh
[ "$1" = --version ] && {{ echo "oha 1.16.0"; exit 0; }}
while [ $# -gt 0 ]; do [ "$1" = -o ] && {{ cp {FIXTURE} "$2"; exit 0; }}; shift; done
exit 1
""")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script)


def _rows() -> list[list[str]]:
    return [line.split(",") for line in FIXTURE.read_text().splitlines()[1:]]


def test_the_counts_are_oha_s_own_rows_against_each_limit(tmp_path: Path):
    node = LocalNode(workdir=str(tmp_path))
    options = OhaOptions(url="https://127.0.0.1:8443/1kb", rate=500, duration=2,
                         slo_ms=(10.0, 0.5), cpus=[0])
    result = run_oha(node, _fake_oha(tmp_path), options)
    rows = _rows()
    good = [float(r[4]) for r in rows if 200 <= int(r[6]) < 400]
    assert result.answered == len(rows) and result.failed == len(rows) - len(good) == 1
    assert result.over_limit(10.0) == sum(d > 0.010 for d in good)
    assert result.over_limit(0.5) == sum(d > 0.0005 for d in good)
    ordered = sorted(good)
    assert result.percentiles[0.5] == pytest.approx(ordered[int(0.5 * len(good) + 0.999999) - 1])
    assert result.cpu_s is not None and result.processes == 1
    assert oha_version(node, _fake_oha(tmp_path)) == "1.16.0"


def test_one_process_per_load_core_with_its_share(tmp_path: Path):
    options = OhaOptions(url="https://198.18.1.1:8089/1kb", rate=9001, duration=0.5,
                         connections=10, cpus=[1, 2], slo_ms=(10.0,))
    command = oha_command("oha", options, "/tmp/run").script
    assert command.count("-q 4500.5 --latency-correction -c 5 -w") == 2
    assert 'taskset -c 2 oha -z 0.5s' in command and '-o "$d/1.csv"' in command
    assert "lim=0.01" in command and command.endswith("exit $rc")
    assert "trap '[ -n \"$d\" ] && rm -rf \"$d\"' EXIT" in command


def test_the_command_is_a_script_value_with_its_ledger_and_timeout():
    options = OhaOptions(url="https://198.18.1.1:8089/1kb", rate=900, duration=8, cpus=[1])
    value = oha_command("oha", options, "/tmp/run", cpu_ledger="/w/cpu-ledger")
    assert value == NodeCommand.shell(value.script, 8 + 30.0 + 2.0,
                                      ledger=Ledger("/w/cpu-ledger", "oha"))
    assert oha_command("oha", options, "/tmp/run").ledger is None


@pytest.mark.parametrize("text", ["", f"{COUNT_MARKER} answered=3 failed=0 over= p50=1",
                                  f"{COUNT_MARKER} answered=x failed=0 over=1 p50=nan "
                                  "p90=nan p99=nan p999=nan"])
def test_garbage_is_a_parse_error(text):
    with pytest.raises(ParseError, match="output was"):
        parse_oha_output(text, slo_ms=(10.0,))


def test_a_binary_that_is_not_oha_is_missing(tmp_path: Path):
    with pytest.raises(ToolMissing, match="oha not installed on local: /bin/true does not "
                                          "answer --version"):
        oha_version(LocalNode(workdir=str(tmp_path)), "/bin/true")
