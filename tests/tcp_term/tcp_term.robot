*** Settings ***
Documentation       TCP termination (seed 001): an iperf3 server terminates TCP on the DUT and an
...                 iperf3 client on the TG sends to it (``-R``: receives from it); the receiver's
...                 figure is reported. On ``1node`` client and server share the node (loopback).
Resource            ../../resources/tcp.resource
Suite Setup         Set Up Suite Testbed
Suite Teardown      Tear Down Suite Testbed
Test Teardown       Stop Processes And Restore Links
Test Template       Measure TCP Termination Throughput
Test Tags           TCP_TERM


*** Test Cases ***                  STACK     REVERSE     STREAMS
1s-kernel-tcp-term                  kernel    ${False}    1
    [Tags]    KERNEL    1STREAM
1s-kernel-tcp-term-reverse          kernel    ${True}     1
    [Tags]    KERNEL    1STREAM    REVERSE
4s-kernel-tcp-term                  kernel    ${False}    4
    [Tags]    KERNEL    4STREAM
1s-kernel-tcp-term-jumbo            kernel    ${False}    1    mtu=9000
    [Tags]    KERNEL    1STREAM    JUMBO
1s-vpp-tcp-term                     vpp       ${False}    1
    [Tags]    VPP    1STREAM


*** Keywords ***
Measure TCP Termination Throughput
    [Documentation]    Seed 001's procedure: server on the DUT, client on the TG, verdict.
    [Arguments]    ${stack}    ${reverse}    ${streams}    ${mtu}=${None}
    Tag Test With Topology
    Prepare Stack On Node    dut    ${stack}    server    client
    IF    $mtu is not None    Set Link MTU Between Nodes    tg    dut    ${mtu}
    Start Iperf3 Server On Node    dut    stack=${stack}
    ${result}=    Measure TCP Throughput From Node    tg    reverse=${reverse}    streams=${streams}
    ...    trials=${TRIALS}    duration=${DURATION}    warmup=${WARMUP}    stack=${stack}    mtu=${mtu}
    Record Result    ${result}
    Check Criteria    ${result}

Stop Processes And Restore Links
    [Documentation]    Stop iperf3 and put back any MTU the test changed.
    Stop Test Processes And Collect Logs
    Restore Link MTUs
