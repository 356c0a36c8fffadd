*** Settings ***
Documentation       sslsniff overhead with bpftime's userspace uprobes running seed 004's
...                 sslsniff program (the binary the ``kernel-libbpf`` variant attaches); skipped
...                 with the reason where the DUT has no bpftime (topology ``tools.bpftime``,
...                 ``tools.bpftime_sslsniff``).
Resource            ../../resources/sslsniff.resource
Suite Setup         Set Up Measuring Suite
Suite Teardown      Tear Down Measuring Suite
Test Teardown       Stop Test Processes And Collect Logs
Test Tags           KERNEL


*** Test Cases ***
1kb-10c-bpftime-sslsniff
    [Documentation]    ``bpftime load <sslsniff>`` + ``bpftime start /usr/sbin/nginx -c CONF -p
    ...    PREFIX``, per traced trial; bpftime must leave nothing behind.
    [Tags]    BPFTIME
    Start Traced HTTPS Server
    ${result}=    Measure HTTPS Load With Userspace Tracer    tg    path=/1kb    connections=10
    Record Result    ${result}
    Check Criteria    ${result}
