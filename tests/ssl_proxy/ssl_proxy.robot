*** Settings ***
Documentation       SSL reverse proxy (seed 000): wrk on the TG fetches a file from the nginx HTTPS
...                 server through an nginx HTTPS reverse proxy on the DUT; the direct path (TG to
...                 server) is measured in the same run, interleaved, so the proxy's cost is a ratio.
...                 On ``1node`` all three run on one node over loopback (seed 000's loopback case).
Resource            ../../resources/proxy.resource
Suite Setup         Set Up Suite Testbed
Suite Teardown      Tear Down Suite Testbed
Test Teardown       Stop Test Processes And Collect Logs
Test Template       Measure SSL Proxy Throughput
Test Tags           SSL_PROXY


*** Test Cases ***                  STACK     FILE_SIZE    CONNECTIONS
1kb-10c-kernel-ssl-proxy            kernel    1kb          10
    [Tags]    KERNEL    1KB    10C
1kb-100c-kernel-ssl-proxy           kernel    1kb          100
    [Tags]    KERNEL    1KB    100C
64kb-10c-kernel-ssl-proxy           kernel    64kb         10
    [Tags]    KERNEL    64KB    10C
1kb-10c-kernel-ssl-proxy-mtls       kernel    1kb          10    upstream_mtls=${True}
    [Tags]    KERNEL    1KB    10C    MTLS
1kb-20c-vpp-ssl-proxy               vpp       1kb          20
    [Tags]    VPP    1KB    20C


*** Keywords ***
Measure SSL Proxy Throughput
    [Documentation]    Seed 000's procedure: content, server, proxy, load, verdict.
    [Arguments]    ${stack}    ${file_size}    ${connections}    ${upstream_mtls}=${False}
    Tag Test With Topology
    Prepare Stack On Node    dut    ${stack}    server    proxy    client
    ${path}=    Create Content File On Node    server    ${file_size}
    Start HTTPS Server On Node    server    require_client_cert=${upstream_mtls}    stack=${stack}
    Start HTTPS Reverse Proxy On Node    dut    upstream=server    stack=${stack}    mtls=${upstream_mtls}
    ${result}=    Measure HTTPS Load Through Proxy    tg    path=${path}    connections=${connections}
    ...    trials=${TRIALS}    duration=${DURATION}    warmup=${WARMUP}    stack=${stack}
    Record Result    ${result}
    Check Criteria    ${result}
