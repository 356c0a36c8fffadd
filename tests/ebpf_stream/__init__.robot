*** Settings ***
Documentation       nginx stream proxy with and without eBPF sockmap acceleration (seed 003):
...                 iperf3 from the TG to the server directly (routed by the DUT), through a native
...                 nginx stream proxy on the DUT, and through nginx's stream eBPF module, measured
...                 interleaved in one run; the receiver's Gbit/s and the ratios are reported.
...                 ``native.robot``: native proxy vs direct (packaged nginx, runs everywhere);
...                 ``ebpf.robot``: eBPF vs native vs direct, skipped with the reason where the DUT
...                 has no eBPF-capable nginx (topology ``tools.nginx_ebpf``).
Test Tags           EBPF_STREAM    KERNEL
