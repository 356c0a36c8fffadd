"""hoststack-perf: Robot Framework keyword libraries for host-stack and proxy performance.

Packages, lowest layer first (a package imports only from the layers below it; the
``utest/test_layers.py`` test enforces it):

- ``testbed``  topology model, node access over SSH, namespace provisioning, shared errors;
- ``tools``    config rendering and the runners/parsers of nginx, wrk/wrk2, iperf3, eBPF tools,
               /proc CPU telemetry, tool versions;
- ``results``  generic and pure: trials and statistics, criteria, the four-outcome verdict, the
               one parser of ``-v`` settings, JSON records, telemetry block, efficiency;
- ``ab``       A/B runs: comparison files, sessions, rounds in random order, interval and verdict;
- ``capacity`` capacity under latency goals: trials, generator adapters, MLRsearch, limits;
- ``vpp``      VPP startup, PAPI, host-stack layout, vppctl, runtime counters, app placement;
- ``cases``    each test case as plain Python (ssl_proxy, tcp_term, ebpf_stream, sslsniff,
               capacity) taking one explicit context, and the one case runner (plain or A/B);
- ``history``  records files -> the columnar (Parquet) history of every run;
- ``trend``    judging series: jumpavg change detection (cached), the interval check, the gate,
               one run against another;
- ``report``   the pages people read (trend dashboard, run report) and the trend command;
- ``nightly``  the nightly runner, the lab pool and the pinned reference;
- ``bisect``   from two builds that differ to the build that did it, by A/B runs of one test;
- ``keywords`` the Robot Framework surface: adapters of the cases and the lower packages; one
               module (``context``) finds a suite's libraries and builds the cases' context.

Above every layer, ``cli`` is the console script ``hoststack-perf``: each of its commands runs
a ``python -m libraries...`` entry point, imported by name when the command runs.
"""
