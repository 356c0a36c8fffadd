"""The cases layer: what each test case does, as plain Python (no Robot Framework).

One module per case, its set-up included: ``ssl_proxy`` (the HTTPS server and reverse proxy,
the latency pass and capacity search), ``tcp_term``, ``ebpf_stream``, ``sslsniff`` (its
tracers' trials with their retry and leftover checks: ``tracers``), ``capacity`` (where a
capacity may be measured) and ``vpp`` (VPP started on a node, its host stack laid out under
the applications, all of it undone). Each describes a test as a ``runner.Case`` (its trials,
how they become a measurement, what an A/B run compares) and measures it through the one case runner
(``runner.run_case``: plain or A/B, progress, telemetry, the profiling trial after the measured
ones: ``profiling``, its ``-v PROFILE`` settings: ``profile_settings``). Around them: the
context every case takes (``context.CaseContext``: testbed, run settings, judge, A/B session,
VPP placement, profiling settings, log), which host stack an application runs on and its
address (``stack``), the per-trial telemetry (``trial_observer``) and the HTTPS cases' path checks
(``https_paths``). The suite itself: every ``-v`` setting collected (``registry``, the
testbed's own in ``testbed_settings``) and resolved once (``run_settings``), the suite's state
in one object (``suite_state``), its testbed set up, guarded and torn down (``testbed_setup``), its
A/B comparison opened and its verdict a status (``ab_setup``), a result's status by its
criteria (``judging``), and a run's inputs checked before Robot starts (``input_checks``).
Below ``keywords`` (which keeps the suite's state and adapts each case to Robot), above
``testbed``, ``tools``, ``results``, ``ab``, ``capacity`` and ``vpp``; unit-tested with a
context built by hand.
"""
