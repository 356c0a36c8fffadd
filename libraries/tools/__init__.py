"""The tools layer: configs rendered from templates, and the runners and parsers of each tool.

Owns jinja2 rendering (``render``), nginx configs and instances (``nginx_config``,
``nginx_stream``, ``nginx_service``), certificates and content files, wrk/wrk2 (``wrk``,
``wrk_output``), iperf3, the nginx stream eBPF module's evidence (``ebpf_stream``,
``ebpf_evidence``), sslsniff tracers (``sslsniff``, ``sslsniff_run``; the seed's sslsniff
program, ``sslsniff_libbpf``), bpftime (``bpftime``, ``bpftime_run``), and per-trial CPU
telemetry read from ``/proc`` (``cpu_stat`` parsers, ``cpu_telemetry`` snapshots and usage). A
runner builds a command line and runs it on a ``testbed.node.Node``; a parser turns the tool's
output into a typed result or raises ``ParseError`` quoting it. Imports only
``libraries.testbed``.
"""
