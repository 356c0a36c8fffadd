*** Settings ***
Documentation       nginx stream proxy with the eBPF sockmap module vs native vs direct; each eBPF
...                 trial proves the module spliced the connections.
Resource            ../../resources/stream.resource
Suite Setup         Set Up Measuring Suite
Suite Teardown      Tear Down Measuring Suite
Test Teardown       Stop Test Processes And Collect Logs
Test Template       Measure Stream Proxy Throughput
Test Tags           EBPF


*** Test Cases ***                          REVERSE     PINNED      EBPF
reverse-unpinned-stream-proxy-ebpf          ${True}     ${False}    ${True}
    [Tags]    REVERSE
reverse-pinned-stream-proxy-ebpf            ${True}     ${True}     ${True}
    [Tags]    REVERSE    PINNED
forward-unpinned-stream-proxy-ebpf          ${False}    ${False}    ${True}
    [Tags]    UPLOAD
