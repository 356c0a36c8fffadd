*** Settings ***
Documentation       TCP termination on VPP's host stack (iperf3 under LD_PRELOAD + VCL); skipped
...                 with the reason where the DUT has no VPP.
Resource            ../../resources/tcp.resource
Suite Setup         Set Up Suite Testbed
Suite Teardown      Tear Down Suite Testbed
Test Teardown       Stop Processes And Restore Links
Test Template       Measure TCP Termination Throughput
Test Tags           VPP


*** Test Cases ***                  STACK     REVERSE     STREAMS
1s-vpp-tcp-term                     vpp       ${False}    1
    [Tags]    1STREAM
