"""The cases layer: what each test case does, as plain Python (no Robot Framework).

One module per case, its set-up included: ``ssl_proxy`` (the HTTPS server and reverse proxy,
the latency pass and capacity search), ``tcp_term``, ``ebpf_stream``, ``sslsniff`` (its
tracers' trials with their retry and leftover checks: ``tracers``), ``capacity`` (where a
capacity may be measured) and ``vpp`` (VPP started on a node, its host stack laid out under
the applications, all of it undone). Each describes a test as a ``runner.Case`` (its trials,
how they become a measurement, what an A/B run compares) and measures it through the one case runner
(``runner.run_case``: plain or A/B, progress, telemetry, the profiling trial after the measured
ones: ``profiling``, its ``-v PROFILE`` settings: ``profile_settings``). Around them: the
context every case takes (``context.CaseContext``: testbed, judge, A/B session, VPP placement,
profiling settings, log), which host stack an application runs on and its address (``stack``),
the per-trial telemetry (``telemetry``) and the HTTPS cases' path checks (``https_paths``).
Below ``keywords`` (which builds the context from the suite's libraries and adapts each case to
Robot), above ``testbed``, ``tools``, ``results``, ``ab``, ``capacity`` and ``vpp``;
unit-tested with a context built by hand.
"""
