"""The per-trial telemetry's old address: :class:`libraries.cases.telemetry.TrialTelemetry`
now lives with the cases that read it. Kept for ``benchmarks/telemetry_bench.py``, which
imports it from here; new code imports ``libraries.cases.telemetry``."""

from __future__ import annotations

from libraries.cases.telemetry import TrialTelemetry, ledger_dir

__all__ = ["TrialTelemetry", "ledger_dir"]
