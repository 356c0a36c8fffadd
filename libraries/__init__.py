"""hoststack-perf: Robot Framework keyword libraries for host-stack and proxy performance.

Packages, lowest layer first (a package imports only from the layers below it; the
``utest/test_layers.py`` test enforces it):

- ``testbed``  topology model, node access over SSH, namespace provisioning, shared errors;
- ``tools``    config rendering and the runners/parsers of nginx, wrk/wrk2, iperf3, eBPF tools,
               /proc CPU telemetry;
- ``results``  trials and statistics, criteria, JSON records, telemetry block, efficiency, versions;
- ``vpp``      VPP startup, PAPI, host-stack layout, vppctl, runtime counters;
- ``history``  records files -> the columnar (Parquet) history of every run;
- ``trend``    judging series: jumpavg change detection (cached), the interval check, the gate,
               one run against another;
- ``report``   the pages people read (trend dashboard, run report) and the trend command;
- ``nightly``  the nightly runner and the lab pool;
- ``keywords`` the Robot Framework surface composing all of the above.
"""
