"""hoststack-perf: Robot Framework keyword libraries for host-stack and proxy performance.

Packages, lowest layer first (a package imports only from the layers below it; the
``utest/test_layers.py`` test enforces it):

- ``testbed``  topology model, node access over SSH, namespace provisioning, shared errors;
- ``tools``    config rendering and the runners/parsers of nginx, wrk/wrk2, iperf3, eBPF tools;
- ``results``  trials and statistics, criteria, JSON records, tool versions;
- ``vpp``      VPP startup, PAPI, host-stack layout, vppctl;
- ``trend``    trend dashboard, run comparison and the nightly runner (reads records only);
- ``keywords`` the Robot Framework surface composing all of the above.
"""
