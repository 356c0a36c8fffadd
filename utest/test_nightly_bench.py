"""benchmarks/nightly_bench.py's pure parts: a night's topology and reference, and the gate
replayed over resampled nights (the rule the nightly's gate uses)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import yaml

from benchmarks.nightly_bench import flags, prepare, rates, smallest_change


def synthetic(level: float, count: int, seed: int, sd: float = 0.02) -> list[dict]:
    rng = np.random.default_rng(seed)
    return [{"ratios": np.exp(rng.normal(np.log(level), sd, 30)),
             "direction": "higher_is_better"} for _ in range(count)]


def test_the_night_files_rewrite_only_the_duts_nginx_and_iperf3(tmp_path: Path) -> None:
    reference, normal, slowed = prepare(tmp_path)
    ref = yaml.safe_load(reference.read_text())
    assert ref["tools"]["dut"] == {"nginx": str(tmp_path / "bin/nginx-ref"),
                                   "iperf3": str(tmp_path / "bin/iperf3-ref")}
    assert Path(ref["tools"]["dut"]["nginx"]).resolve() == Path("/usr/sbin/nginx").resolve()
    base = yaml.safe_load((Path(__file__).parent.parent / "topologies/3node.yaml").read_text())
    today = yaml.safe_load(normal.read_text())
    assert today == base  # tonight's build as the topology says
    slow = yaml.safe_load(slowed.read_text())
    assert slow["name"] == "3node"  # the same series night after night
    assert slow["nodes"]["dut"]["tools"]["nginx"] == str(tmp_path / "bin/nginx-burn-0.03")
    assert slow["nodes"]["dut"]["tools"]["iperf3"] == str(tmp_path / "bin/iperf3-burn-0.035")
    assert slow["nodes"]["server"] == base["nodes"]["server"]


def test_a_duet_night_slows_tonights_testbed_alone_not_by_a_burner(tmp_path: Path) -> None:
    """A burner on the shared core would slow the reference's testbed too in a duet: tonight's
    nginx runs at a lower CPU weight, its load generator's iperf3 asks for a smaller window."""
    reference, normal, slowed = prepare(tmp_path, duet=True)
    link = str(tmp_path / "bin/iperf3-ref")
    assert yaml.safe_load(reference.read_text())["tools"] == {
        "dut": {"nginx": str(tmp_path / "bin/nginx-ref"), "iperf3": link},
        "tg": {"iperf3": link}}
    assert yaml.safe_load(normal.read_text())["nodes"]["tg"]["tools"]["iperf3"] == "iperf3"
    nodes = yaml.safe_load(slowed.read_text())["nodes"]
    assert nodes["dut"]["tools"]["nginx"] == str(tmp_path / "bin/nginx-weight-0.97")
    assert nodes["dut"]["tools"]["iperf3"] == "iperf3"
    assert nodes["tg"]["tools"]["iperf3"] == str(tmp_path / "bin/iperf3-window-163840")
    assert nodes["tg"]["tools"]["wrk2"] == "/opt/wrk2/wrk"
    assert "cpu.shares" in Path(nodes["dut"]["tools"]["nginx"]).read_text()
    assert '"$@" -w 163840' in Path(nodes["tg"]["tools"]["iperf3"]).read_text()


def test_a_step_is_flagged_once_on_its_second_night() -> None:
    nights = synthetic(1.0, 4, 1) + synthetic(0.95, 4, 2)
    assert flags(nights, [0.0] * 8) == ["normal"] * 5 + ["regression"] + ["normal"] * 2


def test_one_wild_aa_night_is_no_step() -> None:
    nights = synthetic(1.0, 4, 1) + synthetic(1.35, 1, 3) + synthetic(1.0, 3, 4)
    assert set(flags(nights, [0.0] * 8)) == {"normal"}


def test_resampled_rates_tell_a_clear_step_from_aa_nights() -> None:
    rng = np.random.default_rng(3)
    aa, slowed = synthetic(1.0, 12, 4), synthetic(0.95, 6, 5)
    found = rates(aa, slowed, 60, rng)
    assert found["detected"] >= 0.9 and found["false_alarms"] <= 0.05
    smallest, curve = smallest_change(aa, 40, rng)
    assert smallest is not None and 0.02 <= smallest <= 0.05
    assert curve[0.2] == 1.0 and curve[0.02] < curve[0.2]
