*** Settings ***
Documentation       Native nginx stream proxy vs the direct (routed) path.
Resource            ../../resources/stream.resource
Suite Setup         Set Up Measuring Suite
Suite Teardown      Tear Down Measuring Suite
Test Teardown       Stop Test Processes And Collect Logs
Test Template       Measure Stream Proxy Throughput
Test Tags           NATIVE


*** Test Cases ***                          REVERSE     PINNED      EBPF
reverse-unpinned-stream-proxy               ${True}     ${False}    ${False}
    [Tags]    REVERSE
