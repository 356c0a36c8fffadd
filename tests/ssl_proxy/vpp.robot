*** Settings ***
Documentation       SSL reverse proxy on VPP's host stack (wrk, proxy and server under LD_PRELOAD +
...                 VCL); skipped with the reason where the DUT has no VPP. wrk needs 20 or more
...                 connections there (its event loop is sized below VPP's first socket number),
...                 so the VPP rows start at 20 connections; ``kernel.robot`` has the same rows.
Resource            ../../resources/proxy.resource
Suite Setup         Set Up Measuring Suite
Suite Teardown      Tear Down Measuring Suite
Test Teardown       Stop Test Processes And Collect Logs
Test Template       Measure SSL Proxy Throughput
Test Tags           VPP


*** Test Cases ***                  STACK     FILE_SIZE    CONNECTIONS
1kb-20c-vpp-ssl-proxy               vpp       1kb          20
    [Tags]    1KB    20C
1kb-100c-vpp-ssl-proxy              vpp       1kb          100
    [Tags]    1KB    100C
64kb-20c-vpp-ssl-proxy              vpp       64kb         20
    [Tags]    64KB    20C
1kb-20c-vpp-ssl-proxy-mtls          vpp       1kb          20    upstream_mtls=${True}
    [Tags]    1KB    20C    MTLS
1kb-20c-vpp-ssl-proxy-capacity      vpp       1kb          20
    [Tags]    1KB    20C    CAPACITY
    [Template]    Measure SSL Proxy Capacity
