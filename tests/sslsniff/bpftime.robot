*** Settings ***
Documentation       sslsniff overhead with bpftime's userspace uprobes; skipped with the reason
...                 where the DUT has no bpftime (topology ``tools.bpftime``).
Resource            ../../resources/sslsniff.resource
Suite Setup         Set Up Suite Testbed
Suite Teardown      Tear Down Suite Testbed
Test Teardown       Stop Test Processes And Collect Logs
Test Tags           KERNEL


*** Test Cases ***
1kb-10c-bpftime-sslsniff
    [Documentation]    bpftime's userspace uprobes running the sslsniff program.
    [Tags]    BPFTIME
    Start Traced HTTPS Server
    ${result}=    Measure HTTPS Load With Userspace Tracer    tg    path=/1kb    connections=10
    ...    trials=${TRIALS}    duration=${DURATION}    warmup=${WARMUP}
    Record Result    ${result}
    Check Criteria    ${result}
