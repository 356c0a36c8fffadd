*** Settings ***
Documentation       SSL reverse proxy (seed 000): wrk on the TG fetches a file from the nginx HTTPS
...                 server through an nginx HTTPS reverse proxy on the DUT; the direct path (TG to
...                 server) is measured in the same run, interleaved, so the proxy's cost is a ratio.
...                 On ``1node`` all three run on one node over loopback (seed 000's loopback case).
...                 One file per stack: ``kernel.robot`` and ``vpp.robot``, same test body
...                 (``resources/proxy.resource``).
Test Tags           SSL_PROXY
