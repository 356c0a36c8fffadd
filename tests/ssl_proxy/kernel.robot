*** Settings ***
Documentation       SSL reverse proxy on the Linux kernel stack. The 10-connection rows are seed
...                 000's; the 20-connection rows match those of ``vpp.robot`` (wrk over VPP needs
...                 20) and run as extended rows (``-v EXTENDED:yes``: CI's e2e job, the nightly), as
...                 does the capacity search (minutes: its figure is fitted over 12 or more 30 s
...                 windows per path).
Resource            ../../resources/proxy.resource
Suite Setup         Set Up Measuring Suite
Suite Teardown      Tear Down Measuring Suite
Test Setup          Skip Extended Row Unless Asked
Test Teardown       Stop Test Processes And Collect Logs
Test Template       Measure SSL Proxy Throughput
Test Tags           KERNEL


*** Test Cases ***                  STACK     FILE_SIZE    CONNECTIONS
1kb-10c-kernel-ssl-proxy            kernel    1kb          10
    [Tags]    1KB    10C
1kb-100c-kernel-ssl-proxy           kernel    1kb          100
    [Tags]    1KB    100C
64kb-10c-kernel-ssl-proxy           kernel    64kb         10
    [Tags]    64KB    10C
1kb-10c-kernel-ssl-proxy-mtls       kernel    1kb          10    upstream_mtls=${True}
    [Tags]    1KB    10C    MTLS
1kb-20c-kernel-ssl-proxy            kernel    1kb          20
    [Tags]    1KB    20C    EXTENDED
64kb-20c-kernel-ssl-proxy           kernel    64kb         20
    [Tags]    64KB    20C    EXTENDED
1kb-20c-kernel-ssl-proxy-mtls       kernel    1kb          20    upstream_mtls=${True}
    [Tags]    1KB    20C    MTLS    EXTENDED
1kb-10c-kernel-ssl-proxy-capacity   kernel    1kb          10
    [Tags]    1KB    10C    CAPACITY    EXTENDED
    [Template]    Measure SSL Proxy Capacity
