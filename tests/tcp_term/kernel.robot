*** Settings ***
Documentation       TCP termination on the Linux kernel stack.
Resource            ../../resources/tcp.resource
Suite Setup         Set Up Measuring Suite
Suite Teardown      Tear Down Measuring Suite
Test Setup          Skip Extended Row Unless Asked
Test Teardown       Stop Processes And Restore Links
Test Template       Measure TCP Termination Throughput
Test Tags           KERNEL


*** Test Cases ***                  STACK     REVERSE     STREAMS
1s-kernel-tcp-term                  kernel    ${False}    1
    [Tags]    1STREAM
1s-kernel-tcp-term-reverse          kernel    ${True}     1
    [Tags]    1STREAM    REVERSE
4s-kernel-tcp-term                  kernel    ${False}    4
    [Tags]    4STREAM    EXTENDED
1s-kernel-tcp-term-jumbo            kernel    ${False}    1    mtu=9000
    [Tags]    1STREAM    JUMBO
