*** Settings ***
Documentation       SSL reverse proxy on VPP's host stack (wrk, proxy and server under LD_PRELOAD +
...                 VCL); skipped with the reason where the DUT has no VPP. wrk needs 20 or more
...                 connections there (its event loop is sized below VPP's first socket number).
Resource            ../../resources/proxy.resource
Suite Setup         Set Up Suite Testbed
Suite Teardown      Tear Down Suite Testbed
Test Teardown       Stop Test Processes And Collect Logs
Test Template       Measure SSL Proxy Throughput
Test Tags           VPP


*** Test Cases ***                  STACK     FILE_SIZE    CONNECTIONS
1kb-20c-vpp-ssl-proxy               vpp       1kb          20
    [Tags]    1KB    20C
