*** Settings ***
Documentation       sslsniff overhead (seed 004): wrk on the TG against an nginx HTTPS server on the
...                 DUT, untraced and with an SSL tracer on nginx's libssl, interleaved in one run;
...                 the overhead is 1 - traced / untraced requests/s.
...                 ``kernel.robot``: kernel uprobes (bcc sslsniff where it can run, else the
...                 project's bpftrace script, per-event or counting only);
...                 ``bpftime.robot``: bpftime's userspace uprobes, skipped where absent.
Test Tags           SSLSNIFF    1KB    10C
