*** Settings ***
Documentation       sslsniff overhead with kernel uprobes: the packaged path (bcc where it can
...                 compile, else the project's bpftrace script) and seed 004's own program,
...                 bpftime's sslsniff example, skipped where it is not installed
...                 (topology ``tools.bpftime_sslsniff``).
Resource            ../../resources/sslsniff.resource
Suite Setup         Set Up Measuring Suite
Suite Teardown      Tear Down Measuring Suite
Test Setup          Skip Extended Row Unless Asked
Test Teardown       Stop Test Processes And Collect Logs
Test Tags           KERNEL


*** Test Cases ***
1kb-10c-kernel-sslsniff
    [Documentation]    Kernel tracer printing one line per SSL_read/SSL_write, as sslsniff does.
    [Tags]    PER_EVENT
    Measure Overhead Of Kernel Tracer    per_event=${True}

1kb-10c-kernel-sslsniff-count
    [Documentation]    Kernel tracer only counting events (the cost of the probes alone).
    [Tags]    COUNT    EXTENDED
    Measure Overhead Of Kernel Tracer    per_event=${False}

1kb-10c-kernel-sslsniff-libbpf
    [Documentation]    Seed 004's sslsniff binary (bpftime's libbpf example) run as root, as
    ...    ``sudo ./sslsniff``: kernel uprobes on nginx's worker, every event sent to userspace.
    [Tags]    PER_EVENT    LIBBPF
    Measure Overhead Of Seed Sslsniff In Kernel
