"""The cost benchmark (benchmarks.cost_bench): the comparison files it writes load against
the 3node topology and render an nginx config nginx accepts, and its table and rates read
A/B records as the session writes them."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from benchmarks import cost_bench
from libraries.ab.ab_settings import declared_ab_settings
from libraries.ab.comparison import load_comparison
from libraries.testbed.topology_file import load_topology
from libraries.tools.nginx.config import NginxInstance, SslProxyParams

THREE = load_topology("3node")


@pytest.mark.parametrize(("side", "first", "count"), [
    ("regex:3", "set $cost_seen ", 1), ("split", "set $cost_seen ", 1),
    ("uri-regex:7", "set $cost_seen ", 1), ("headers:4", "add_header X-C0 ", 4)])
def test_a_planted_cost_is_nginx_directives_of_side_b_s_proxy_only(tmp_path: Path, side: str,
                                                                   first: str, count: int):
    loaded = load_comparison(cost_bench.comparison(side, tmp_path), THREE)
    assert loaded.comparison.a.nginx == {}
    (directives,) = loaded.comparison.b.nginx.values()
    assert list(loaded.comparison.b.nginx) == ["proxy"]
    assert len(directives.server) == count and directives.server[0].startswith(first)
    if side.startswith("uri-regex"):  # n expressions that never match a URI like /1kb
        (mapped,) = directives.http
        patterns = re.findall(r'"~(.*?)"', mapped)
        assert len(patterns) == 7 and not any(re.search(p, "/1kb") for p in patterns)
    if shutil.which("nginx") is None:
        return
    config = SslProxyParams(
        instance=NginxInstance(prefix=str(tmp_path / "p"), user="root",
                               extra_http=directives.http, extra_server=directives.server),
        cert_path="/x/proxy.crt", key_path="/x/proxy.key", listen_port=18089,
        upstreams=("127.0.0.1:18445",)).render()
    (tmp_path / "p" / "logs").mkdir(parents=True)
    path = tmp_path / "nginx.conf"
    path.write_text(config.replace("ssl_certificate", "# ssl_certificate"))
    checked = subprocess.run(["nginx", "-t", "-q", "-c", str(path), "-p", str(tmp_path / "p")],
                             capture_output=True, text=True, timeout=20, check=False)
    assert "unknown directive" not in checked.stderr and "unexpected" not in checked.stderr, \
        checked.stderr


def test_an_aa_side_is_the_same_nginx_by_another_path(tmp_path: Path):
    text = cost_bench.comparison("aa", tmp_path).read_text()
    assert "aa: true" in text and f"nginx: {tmp_path / 'nginx-same'}" in text
    assert (tmp_path / "nginx-same").resolve() == Path(cost_bench.NGINX).resolve()
    with pytest.raises(SystemExit, match="expected aa, regex"):
        cost_bench.comparison("burn:0.1", tmp_path)
    for side in ("uri-regex:0", "headers:61"):
        with pytest.raises(SystemExit, match=side):
            cost_bench.comparison(side, tmp_path)


def test_a_tcp_term_aa_side_is_tg_s_iperf3_by_another_path_and_takes_no_knob(tmp_path: Path):
    """tcp_term's A/B uses tg's iperf3 (``Case.uses``): the A/A side changes that, nothing
    else; the knobs are nginx's, refused there by name."""
    text = cost_bench.comparison("aa", tmp_path, "tcp-term").read_text()
    assert "aa: true" in text and f"tg: {{iperf3: {tmp_path / 'iperf3-same'}}}" in text
    assert (tmp_path / "iperf3-same").resolve() == Path(cost_bench.IPERF3).resolve()
    with pytest.raises(SystemExit, match="uri-regex:4 --test tcp-term: only aa"):
        cost_bench.comparison("uri-regex:4", tmp_path, "tcp-term")
    command = cost_bench.robot_command(tmp_path / "c.yaml", tmp_path, 0, False, [], "tcp-term")
    assert command[-3:] == ["-t", "1s-kernel-tcp-term", "tests/tcp_term/kernel.robot"]


def _record(rps: list[float], cost: list[float], verdicts: tuple[str, str], rate: str = "rps",
            **bench) -> dict:
    def entry(ratios: list[float], verdict: str, direction: str) -> dict:
        change = float(np.exp(np.median(np.log(ratios))))
        return {"ratios": ratios, "change_pct": (change - 1) * 100, "low": change * 0.98,
                "high": change * 1.02, "verdict": verdict, "direction": direction}
    a = [40.0 + i % 3 for i in range(len(cost))]
    return {"ab": {"verdict": "regression" if "regression" in verdicts else verdicts[0],
                   "rounds": {"run": len(rps)},
                   "metrics": {rate: entry(rps, verdicts[0], "higher_is_better"),
                               "cost": {**entry(cost, verdicts[1], "lower_is_better"),
                                        "cost": True}},
                   "sides": {"a": {"foreign_load": {"share_pct": 40.0}},
                             "b": {"foreign_load": {"share_pct": 57.0}}}},
            "evidence": {"sides": {"a": {"metrics": {"kernel_cost": {"trials": a}}},
                                   "b": {"metrics": {"kernel_cost": {
                                       "trials": [x * 1.02 for x in a]}}}}},
            "bench": {"side": "regex:12", "duet": False, "burners": 2, "truth": False,
                      "wall_s": 300.0, **bench}}


def test_the_table_puts_cost_and_throughput_side_by_side(tmp_path: Path):
    path = tmp_path / "r.jsonl"
    rng = np.random.default_rng(1)
    lines = [_record(list(np.exp(rng.normal(0, 0.06, 30))),
                     list(np.exp(rng.normal(np.log(1.05), 0.02, 30))), verdicts)
             for verdicts in (("inconclusive", "regression"), ("inconclusive", "regression"),
                              ("regression", "regression"))]
    path.write_text("".join(json.dumps(r) + "\n" for r in lines))
    row = cost_bench.summary(path)
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[:3] == ["regex:12", "sequential, 2 burners", "3"]
    assert cells[3] == "1 regression, 2 inconclusive" and cells[6] == "3 regression"
    assert 4.0 < float(cells[5].rstrip(" %")) < 8.0  # rps spread ~6 %
    assert 1.0 < float(cells[8].rstrip(" %")) < 3.0  # cost spread ~2 %
    assert cells[9] == "+2.00 %" and cells[10] == "0.00 %" and cells[11] == "57 %"
    assert cells[12:] == ["3", "30", "5.0"]
    assert cost_bench.HEADER.count("|---") == len(cells)


def test_a_test_whose_rate_is_throughput_is_tabled_and_replayed_on_it(tmp_path: Path):
    path = tmp_path / "aa-tcp.jsonl"
    rng = np.random.default_rng(4)
    lines = [_record(list(np.exp(rng.normal(0, 0.03, 60))),
                     list(np.exp(rng.normal(0, 0.03, 60))), ("no change", "no change"),
                     rate="throughput", side="aa", test="tcp-term")
             for _ in range(2)]
    path.write_text("".join(json.dumps(r) + "\n" for r in lines))
    cells = [c.strip() for c in cost_bench.summary(path).strip("|").split("|")]
    assert cells[0] == "aa (tcp-term: throughput)" and cells[3] == "2 no change"
    assert 2.0 < float(cells[5].rstrip(" %")) < 4.5  # throughput's spread, not "not judged"
    table = cost_bench.rates([path], declared_ab_settings(), draws=20)
    assert [line.split("|")[2].strip() for line in table.splitlines()[2:]] == [
        "throughput", "cost"]
    assert cost_bench.line(lines[0]).split(": ", 1)[1].startswith("throughput ")


def test_rates_replay_aa_rounds_for_cost_and_throughput(tmp_path: Path):
    path = tmp_path / "aa.jsonl"
    rng = np.random.default_rng(2)
    lines = [_record(list(np.exp(rng.normal(0, 0.06, 60))),
                     list(np.exp(rng.normal(0, 0.015, 60))), ("inconclusive", "no change"))
             for _ in range(6)]
    path.write_text("".join(json.dumps(r) + "\n" for r in lines))
    table = cost_bench.rates([path], declared_ab_settings(), draws=60)
    rows = {line.split("|")[2].strip(): [float(c.strip().rstrip("%")) for c in
                                         line.split("|")[3:-1]]
            for line in table.splitlines()[2:]}
    assert rows["cost"][0] <= 5.0 and rows["cost"][-1] >= 90.0  # 5 % called at 1.5 % spread
    assert rows["rps"][2] + 30 < rows["cost"][2]  # at 2 %: the rate at 6 % spread calls less


def test_the_grid_plans_its_cells_and_names_the_smallest_cost_called(tmp_path: Path,
                                                                     monkeypatch):
    """The grid's cells (collect replaced: what it would run), then the smallest planted
    cost called in 90 % of tests on each metric, sized by its truth runs."""
    ran: list[tuple[str, int, bool, int, bool]] = []
    rng = np.random.default_rng(3)

    def collect(side, count, path, *, duet=False, burn=0, truth=False, extra=None):
        ran.append((side, count, duet, burn, truth))
        size = {"aa": 0.0, "regex:3": 0.01, "regex:6": 0.02}[side]
        called = ("inconclusive", "regression" if size >= 0.02 or truth else "inconclusive")
        lines = [_record(list(np.exp(rng.normal(0, 0.06, 60))),
                         list(np.exp(rng.normal(np.log(1 + size), 0.01, 60))), called,
                         side=side, duet=duet, burners=burn, truth=truth)
                 for _ in range(count)]
        path.write_text("".join(json.dumps(r) + "\n" for r in lines))
        return lines

    monkeypatch.setattr(cost_bench, "collect", collect)
    files = cost_bench.grid(tmp_path, 4, 2, 3, ["duet-burners"], ("regex:3", "regex:6"))
    assert ran == [("aa", 3, True, 2, True), ("regex:3", 2, True, 2, True),
                   ("regex:3", 4, True, 2, False), ("regex:6", 2, True, 2, True),
                   ("regex:6", 4, True, 2, False)]
    assert [p.name for p in files][:2] == ["aa-duet-burners-truth.jsonl",
                                           "regex3-duet-burners-truth.jsonl"]
    table = cost_bench.smallest_called(files)
    assert re.search(r"\| duet, burners \| regex:6 \(\+2\.\d %\) \| none \|", table), table

