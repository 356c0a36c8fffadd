"""benchmarks/night_bench.py drives the project's own decision functions: a tiny run of its
cells gives shares in range, flags a plain step and states what it ran."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from benchmarks import night_bench
from libraries.results.family import NightFamily


def test_night_settings_are_the_nightlys() -> None:
    settings = night_bench.night_settings()
    assert settings.alpha == pytest.approx(NightFamily().test_alpha)
    assert settings.scatter == 0.01 and settings.look == 20 and settings.max_rounds == 60


def test_a_simulated_series_carries_values_and_failures_per_night() -> None:
    truth = np.array([1.0] * 5 + [0.8] * 3)
    rows, failed = night_bench.simulate_series(truth, 0.024, np.random.default_rng(1),
                                               night_bench.night_settings())
    assert len(rows) == 8 and failed.tolist() == [False] * 5 + [True] * 3  # -20 %: fails
    assert rows["value"].iloc[-1] == pytest.approx(0.8, rel=0.02)


def test_the_gate_flags_are_the_nights_a_regression_was_found() -> None:
    levels = [1.0, 1.002, 0.998, 1.001, 0.999] * 4 + [0.95] * 3
    rows = pd.DataFrame({"value": levels, "stdev": [0.003] * len(levels)})
    flagged, persistent = night_bench.gate_flags(rows, 0.05 / 30)
    assert np.flatnonzero(flagged).tolist() == [21] and not persistent.any()


def test_a_tiny_cell_gives_shares_and_the_table_names_them() -> None:
    cell = night_bench.run_cell(0.024, 0.0, histories=1, steps=6,
                                rng=np.random.default_rng(3))
    assert cell.nights == night_bench.STEP_NIGHT + night_bench.AFTER
    assert 0.0 <= cell.false_night <= 1.0 and cell.false_night >= cell.false_gate
    assert cell.detected[10] >= cell.detected[5] >= cell.detected[1]
    assert cell.detected[5] == 1.0  # a 3 % step at 2.4 % and no scatter: caught every time
    text = night_bench.table([cell])
    assert "| 2.4% | 0.0% |" in text and "flagged by k+1" in text


def test_heavy_tailed_scatter_keeps_its_standard_deviation() -> None:
    rng = np.random.default_rng(4)
    normal = night_bench.draw_scatter(rng, 0.01, 200_000, "normal")
    heavy = night_bench.draw_scatter(rng, 0.01, 200_000, "t3")
    assert np.std(normal) == pytest.approx(0.01, rel=0.02)
    assert np.std(heavy) == pytest.approx(0.01, rel=0.15)  # t3: a slowly settling variance
    # same spread, far longer tails: beyond 4 standard deviations
    assert np.mean(np.abs(heavy) > 0.04) > 20 * np.mean(np.abs(normal) > 0.04)


def test_young_and_second_step_cells_count_flags_after_the_step() -> None:
    rng = np.random.default_rng(5)
    young = night_bench.run_aged(0.024, 0.0, 4, steps=4, rng=rng)
    second = night_bench.run_aged(0.024, 0.0, 5, steps=4, rng=rng, second=True)
    for cell in (young, second):
        shares = [cell.detected[by] for by in night_bench.AGED_BY]
        assert shares == sorted(shares) and all(0.0 <= s <= 1.0 for s in shares)
    assert young.detected[30] == 1.0  # a 3 % step on night 4, no scatter: never absorbed
    text = night_bench.aged_table([young, second])
    assert "night 4 of a level" in text and "5 nights after a flagged -5%" in text
    assert "flagged by k+30" in text


def test_the_walk_is_timed_over_the_nights_asked() -> None:
    times = night_bench.walk_seconds(200, 2, np.random.default_rng(6))
    assert len(times) == 2 and all(t > 0 for t in times)
