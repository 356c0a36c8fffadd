"""The docs' "SQL for people" (docs/how-to/sql.md): every query runs, from Python and from the
duckdb shell, and answers its question on a history of two labs with a regression this week."""

from __future__ import annotations

import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pytest

from libraries.history.ingest import ingest
from libraries.history.store import Store
from libraries.results.records import append_record
from utest.test_trend import make_record

REPO = Path(__file__).resolve().parent.parent
SECTION = REPO.joinpath("docs", "how-to", "sql.md").read_text()
QUERIES = re.findall(r"```sql\n(.*?)```", SECTION, flags=re.S)
PYTHON = re.findall(r"```python\n(.*?)```", SECTION, flags=re.S)
DUCKDB = Path(sys.executable).parent / "duckdb"


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """40 nightly runs ending today on lab-a and lab-b; lab-b's rps fell 20 % 3 nights ago."""
    root = tmp_path_factory.mktemp("sql")
    today = datetime.now(UTC).replace(hour=2, minute=0, second=0, microsecond=0)
    for night in range(40):
        when = today - timedelta(days=39 - night)
        run_id = f"{when:%Y%m%d-%H%M%S}-{night:04x}"
        for lab, scale in (("lab-a", 1.0), ("lab-b", 0.8)):
            for test, metric, unit, level in (
                    ("ssl_proxy/1kb-10c-kernel-ssl-proxy", "rps", "requests/s", 20000.0),
                    ("tcp_term/1s-kernel-tcp-term", "throughput", "Gbit/s", 10.0)):
                value = level * scale * (0.8 if lab == "lab-b" and metric == "rps"
                                         and night >= 37 else 1.0) * (1 + 0.01 * (night % 3))
                record = make_record(run_id, when, test.split("/")[1],
                                     {metric: (unit, "higher_is_better",
                                               [value * 0.99, value, value * 1.01])})
                record.update(topology=lab, test_id=f"{lab}/{test}", case=test.split("/")[0])
                append_record(root / "results" / run_id / "records.jsonl", record)
    assert ingest([root / "results"], Store(root / "results" / "history")).errors == []
    return root / "results" / "history"


def with_path(query: str, history: Path) -> str:
    return query.replace("results/history", str(history))


def test_the_section_has_the_three_queries_and_a_python_example() -> None:
    assert len(QUERIES) == 3 and len(PYTHON) == 1


def test_a_tests_last_30_days(history: Path) -> None:
    rows = duckdb.sql(with_path(QUERIES[0], history)).df()
    assert set(rows["lab"]) == {"lab-a", "lab-b"}
    assert len(rows) in (60, 62)  # 30 days back from now: 30 or 31 nights per lab
    assert rows["start_time"].is_monotonic_increasing


def test_every_regression_this_week(history: Path) -> None:
    rows = duckdb.sql(with_path(QUERIES[1], history)).df()
    assert set(zip(rows["lab"], rows["metric"], strict=True)) == {("lab-b", "rps")}
    assert len(rows) == 3
    assert rows["change_pct"].between(-22, -18).all()


def test_lab_a_against_lab_b(history: Path) -> None:
    rows = duckdb.sql(with_path(QUERIES[2], history)).df().set_index("test_key")
    assert rows.loc["tcp_term/1s-kernel-tcp-term", "a_over_b"] == pytest.approx(1.25, abs=0.01)
    assert rows.loc["ssl_proxy/1kb-10c-kernel-ssl-proxy", "a_over_b"] == pytest.approx(
        1.25, abs=0.02)


@pytest.mark.skipif(not DUCKDB.exists(), reason=f"duckdb shell not installed ({DUCKDB} "
                    "missing; requirements.txt pins duckdb-cli)")
@pytest.mark.parametrize("index", range(3))
def test_the_shell_gives_the_same_rows(history: Path, index: int) -> None:
    query = with_path(QUERIES[index], history)
    done = subprocess.run([str(DUCKDB), "-csv", "-c", query], capture_output=True, text=True,
                          timeout=60, check=True)
    assert len(done.stdout.strip().splitlines()) - 1 == len(duckdb.sql(query).df())


def test_the_python_example(history: Path) -> None:
    scope: dict = {}
    exec(PYTHON[0].replace('"results/history"', repr(str(history))), scope)
    assert set(scope["week"]["lab"]) == {"lab-a", "lab-b"}
    assert set(scope["rows"]["lab"]) == {"lab-a"} and len(scope["rows"]) == 40
    assert isinstance(scope["history"], Store)
