*** Settings ***
Documentation       TCP termination on VPP's host stack (iperf3 under LD_PRELOAD + VCL); skipped
...                 with the reason where the DUT has no VPP. The jumbo row adds seed 001's
...                 ``tcp { mtu 9000 }`` and ``buffers { default data-size 10000 }`` and gives
...                 VPP's interfaces MTU 9000; like the kernel's, it skips on 1node (no link).
Resource            ../../resources/tcp.resource
Suite Setup         Set Up Measuring Suite
Suite Teardown      Tear Down Measuring Suite
Test Teardown       Stop Processes And Restore Links
Test Template       Measure TCP Termination Throughput
Test Tags           VPP


*** Test Cases ***                  STACK     REVERSE     STREAMS
1s-vpp-tcp-term                     vpp       ${False}    1
    [Tags]    1STREAM
1s-vpp-tcp-term-reverse             vpp       ${True}     1
    [Tags]    1STREAM    REVERSE
4s-vpp-tcp-term                     vpp       ${False}    4
    [Tags]    4STREAM
1s-vpp-tcp-term-jumbo               vpp       ${False}    1    mtu=9000
    [Tags]    1STREAM    JUMBO
