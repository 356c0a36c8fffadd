*** Settings ***
Documentation       sslsniff overhead (seed 004): wrk on the TG against an nginx HTTPS server on the
...                 DUT, untraced and with an SSL tracer on nginx's libssl, interleaved in one run;
...                 the overhead is 1 - traced / untraced requests/s. Kernel tracer: bcc sslsniff
...                 where it can run, else the project's bpftrace script (per-event output like
...                 sslsniff, or counting only). Userspace tracer: bpftime, skipped where absent.
Resource            ../../resources/sslsniff.resource
Suite Setup         Set Up Suite Testbed
Suite Teardown      Tear Down Suite Testbed
Test Teardown       Stop Test Processes And Collect Logs
Test Tags           SSLSNIFF    KERNEL    1KB    10C


*** Test Cases ***
1kb-10c-kernel-sslsniff
    [Documentation]    Kernel tracer printing one line per SSL_read/SSL_write, as sslsniff does.
    [Tags]    PER_EVENT
    Measure Overhead Of Kernel Tracer    per_event=${True}

1kb-10c-kernel-sslsniff-count
    [Documentation]    Kernel tracer only counting events (the cost of the probes alone).
    [Tags]    COUNT
    Measure Overhead Of Kernel Tracer    per_event=${False}

1kb-10c-bpftime-sslsniff
    [Documentation]    bpftime's userspace uprobes running the sslsniff program.
    [Tags]    BPFTIME
    Start Traced HTTPS Server
    ${result}=    Measure HTTPS Load With Userspace Tracer    tg    path=/1kb    connections=10
    ...    trials=${TRIALS}    duration=${DURATION}    warmup=${WARMUP}
    Record Result    ${result}
    Check Criteria    ${result}


*** Keywords ***
Start Traced HTTPS Server
    [Documentation]    Seed 004's set-up: a 1 KiB file behind nginx HTTPS on the DUT.
    Tag Test With Topology
    Create Content File On Node    dut    1kb
    Start HTTPS Server On Node    dut

Measure Overhead Of Kernel Tracer
    [Documentation]    Server, tracer choice, interleaved untraced / traced load, verdict.
    [Arguments]    ${per_event}
    Require Kernel SSL Tracer On Node    dut
    Start Traced HTTPS Server
    ${result}=    Measure HTTPS Load With Kernel Tracer    tg    path=/1kb    connections=10
    ...    per_event=${per_event}    trials=${TRIALS}    duration=${DURATION}    warmup=${WARMUP}
    Record Result    ${result}
    Check Criteria    ${result}
