"""The A/B benchmark's sides (benchmarks.ab_bench): the comparison files it writes and the
wrappers that slow side b, which must pass a version probe through untouched."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

from benchmarks import ab_bench, slowdowns
from libraries.ab.ab_settings import declared_ab_settings


def _probe(wrapper: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(wrapper), "--version"], capture_output=True, text=True,
                          timeout=10, check=False)


def test_a_weighted_side_names_its_wrapper_and_the_weight_it_sets(tmp_path: Path):
    path = ab_bench.comparison("ssl_proxy", "weight:0.97", tmp_path)
    text = path.read_text()
    assert "b:\n  name: nginx-weight-0.97\n" in text
    wrapper = tmp_path / "nginx-weight-0.97"
    assert f"tools: {{dut: {{nginx: {wrapper}}}}}" in text
    body = wrapper.read_text()
    assert 'echo 993 > "$top/abbench-$$/cpu.shares"' in body  # 0.97 of 1024
    assert 'echo 97 > "$top/abbench-$$/cpu.weight"' in body
    assert body.rstrip().endswith('exec /usr/sbin/nginx "$@"')


def test_a_weighted_side_may_name_the_node_whose_tool_it_slows(tmp_path: Path):
    text = ab_bench.comparison("tcp_term", "weight:0.9:tg", tmp_path).read_text()
    assert f"tools: {{tg: {{iperf3: {tmp_path / 'iperf3-weight-0.9'}}}}}" in text
    assert "name: tg's iperf3 at 0.9 of the CPU weight" in text


def test_a_window_side_asks_for_the_window_on_the_client_only(tmp_path: Path):
    text = ab_bench.comparison("tcp_term", "window:196608", tmp_path).read_text()
    wrapper = tmp_path / "iperf3-window-196608"
    assert f"tools: {{tg: {{iperf3: {wrapper}}}}}" in text
    body = wrapper.read_text()
    assert 'case " $* " in *" -c "*) exec /usr/bin/iperf3 "$@" -w 196608;; esac' in body
    assert body.rstrip().endswith('exec /usr/bin/iperf3 "$@"')  # the server: as it is
    with pytest.raises(SystemExit, match="iperf3 client's"):
        ab_bench.comparison("ssl_proxy", "window:196608", tmp_path)


def test_a_paused_side_takes_its_share_of_the_period_it_names(tmp_path: Path):
    text = ab_bench.comparison("tcp_term", "pause:0.02:100", tmp_path).read_text()
    assert "stopped 2.0% of every 100 ms" in text
    body = (tmp_path / "iperf3-pause-0.02-100ms").read_text()
    assert "$$ 0.002 0.098 </dev/null" in body


def test_the_wrappers_pass_a_version_probe_to_the_real_binary(tmp_path: Path):
    real = subprocess.run(["/bin/sleep", "--version"], capture_output=True, text=True,
                          timeout=10, check=False)
    for wrapper in (slowdowns.weighted(tmp_path, "sleep", "/bin/sleep", 0.5),
                    slowdowns.pauser(tmp_path, "sleep", "/bin/sleep", 0.1),
                    slowdowns.windowed(tmp_path, "sleep", "/bin/sleep", 4096)):
        probed = _probe(wrapper)
        assert probed.returncode == 0 and probed.stdout == real.stdout


def test_an_rmem_side_caps_the_dut_s_receive_buffer_on_side_b_only(tmp_path: Path):
    text = ab_bench.comparison("tcp_term", "rmem:262144", tmp_path).read_text()
    assert text.endswith('sysctl: {dut: {net.ipv4.tcp_rmem: "4096 131072 262144"}}\n')
    assert "a: {name: kernel-default}" in text


def test_a_nightly_record_without_bench_keys_is_summarised_by_its_own_time(tmp_path: Path):
    record = {"case": "tcp_term", "duration_s": 150.0,
              "ab": {"verdict": "no change", "rounds": {"run": 50},
                     "metrics": {"throughput": {"change_pct": -0.2,
                                                "ratios": [0.99, 1.01, 1.0, 0.98]}}}}
    path = tmp_path / "tcp_term-aa.jsonl"
    path.write_text(json.dumps(record) + "\n")
    row = ab_bench.summary(path)
    assert row.startswith("| tcp_term | tcp_term-aa | 1 | 1 no change | -0.20 % ")
    assert row.endswith("| 2.5 (2.5) |")


def test_a_sign_flip_draw_keeps_one_tests_rounds_in_order_and_flips_their_signs():
    runs = [np.log([1.02, 0.97, 1.05, 0.99]), np.log([1.10, 0.90])]
    centre = float(np.median(np.concatenate(runs)))
    sample = ab_bench.sign_flips(runs)
    rng = np.random.default_rng(1)
    drawn = [sample(rng, 3) for _ in range(200)]
    centred = [np.abs(r - centre) for r in runs]
    assert all(np.allclose(np.abs(d), centred[0][:3]) if len(d) == 3 else
               np.allclose(np.abs(d), centred[1]) for d in drawn)  # in order, at most n
    signs = np.concatenate([np.sign(d) for d in drawn])
    assert 0.4 < np.mean(signs > 0) < 0.6


def test_the_mde_shrinks_with_rounds_and_reads_the_a_a_rounds_by_sign(tmp_path: Path):
    rng = np.random.default_rng(4)
    path = tmp_path / "aa.jsonl"
    path.write_text("".join(json.dumps({
        "bench": {"wall_s": 120.0}, "ab": {"rounds": {"run": 60}, "metrics": {"rps": {
            "ratios": np.exp(rng.normal(0, 0.02, 60)).tolist()}}}}) + "\n" for _ in range(4)))
    table = ab_bench.mde([path], declared_ab_settings(look=20, max_rounds=60), draws=60)
    rows = [line.split(" | ") for line in table.splitlines()[2:]]
    assert [row[0] for row in rows] == ["| 20", "| 40", "| 60"]
    found = [float(row[2].rstrip(" |%")) for row in rows]
    assert found[0] > found[2] > 0  # 2 % noise: more rounds detect less
    assert rows[2][1] == "2.0"  # 60 rounds of 2 s


def test_a_runs_record_is_kept_with_its_bench_fields_and_the_run_removed(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    empty = tmp_path / "run000"
    empty.mkdir()
    assert ab_bench.keep_record(empty, False, out, {"side": "aa"}) is None and empty.is_dir()
    duet = tmp_path / "run001"
    (duet / "a").mkdir(parents=True)
    (duet / "a" / "records.jsonl").write_text('{"n": 1}\n{"n": 2}\n')
    kept = ab_bench.keep_record(duet, True, out, {"side": "regex:1"})
    assert kept == {"n": 2, "bench": {"side": "regex:1"}} and not duet.exists()
    assert out.read_text().splitlines() == ['{"n": 2, "bench": {"side": "regex:1"}}']
