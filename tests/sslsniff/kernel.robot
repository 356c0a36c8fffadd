*** Settings ***
Documentation       sslsniff overhead with kernel uprobes.
Resource            ../../resources/sslsniff.resource
Suite Setup         Set Up Suite Testbed
Suite Teardown      Tear Down Suite Testbed
Test Teardown       Stop Test Processes And Collect Logs
Test Tags           KERNEL


*** Test Cases ***
1kb-10c-kernel-sslsniff
    [Documentation]    Kernel tracer printing one line per SSL_read/SSL_write, as sslsniff does.
    [Tags]    PER_EVENT
    Measure Overhead Of Kernel Tracer    per_event=${True}

1kb-10c-kernel-sslsniff-count
    [Documentation]    Kernel tracer only counting events (the cost of the probes alone).
    [Tags]    COUNT
    Measure Overhead Of Kernel Tracer    per_event=${False}
