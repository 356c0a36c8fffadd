*** Settings ***
Documentation       nginx stream proxy with and without eBPF sockmap acceleration (seed 003):
...                 iperf3 from the TG to the server directly (routed by the DUT), through a native
...                 nginx stream proxy on the DUT, and through nginx's stream eBPF module, measured
...                 interleaved in one run; the receiver's Gbit/s and the ratios are reported.
...                 The eBPF variants skip with the reason where the DUT has no eBPF-capable nginx
...                 (topology ``tools.nginx_ebpf``).
Resource            ../../resources/stream.resource
Suite Setup         Set Up Suite Testbed
Suite Teardown      Tear Down Suite Testbed
Test Teardown       Stop Test Processes And Collect Logs
Test Template       Measure Stream Proxy Throughput
Test Tags           EBPF_STREAM    KERNEL


*** Test Cases ***                          REVERSE     PINNED      EBPF
reverse-unpinned-stream-proxy               ${True}     ${False}    ${False}
    [Tags]    REVERSE    NATIVE
reverse-unpinned-stream-proxy-ebpf          ${True}     ${False}    ${True}
    [Tags]    REVERSE    EBPF
reverse-pinned-stream-proxy-ebpf            ${True}     ${True}     ${True}
    [Tags]    REVERSE    EBPF    PINNED
forward-unpinned-stream-proxy-ebpf          ${False}    ${False}    ${True}
    [Tags]    UPLOAD    EBPF


*** Keywords ***
Measure Stream Proxy Throughput
    [Documentation]    Seed 003's procedure: iperf3 server, proxies, interleaved iperf3 runs.
    [Arguments]    ${reverse}    ${pinned}    ${ebpf}
    Tag Test With Topology
    IF    ${ebpf}    Require EBPF Nginx On Node    dut
    Start Stream Test Server On Node    server    pinned=${pinned}
    Start Stream Proxy On Node    dut    upstream=server    pinned=${pinned}
    IF    ${ebpf}
        Start Stream Proxy On Node    dut    upstream=server    ebpf=${True}    pinned=${pinned}
    END
    ${result}=    Measure Stream Throughput From Node    tg    reverse=${reverse}
    ...    trials=${TRIALS}    duration=${DURATION}    warmup=${WARMUP}
    Record Result    ${result}
    Check Criteria    ${result}
