"""The tools layer: configs rendered from templates, and the runners and parsers of each tool.

One sub-package per tool family, each saying what it owns in its ``__init__``:

- ``nginx``        HTTPS server, SSL reverse proxy, stream proxy configs; running an instance;
- ``wrk``          wrk / wrk2 command line, probe, runner and output parser;
- ``sslsniff``     SSL tracers on libssl: bpftrace script, bcc, the seed's libbpf program in the
                   kernel and under bpftime, attachment and cleanliness proofs;
- ``ebpf_stream``  the nginx stream eBPF module: detection, bpf stats, engagement evidence;
- ``cpu``          per-trial CPU telemetry read from ``/proc``, the CPU ledger and ``times``;
- ``perf``         ``perf record`` of a test's processes on a node, inferno's folding and flame
                   graphs (plain and differential).

Single-module tools stand beside them: ``render`` (strict jinja2 over ``templates/``),
``certs`` (per-run CA and certificates), ``content`` (content files and sizes), ``iperf3``
(command lines, ``--json`` parser, runner), ``vegeta`` and ``oha`` (constant-rate HTTP load:
one process per load core, requests counted over latency limits from their schedule) with
``open_loop`` (what they share: option checks, their run's temporary folder), ``bpftime``
(bpftime's CLI, its install folder, environment and leftovers), ``sysctl`` (kernel
parameters read, set and put back on a node) and ``versions`` (each tool's version command and
the pattern its answer must match).

A runner builds its command as one ``testbed.command.NodeCommand`` value (an argv, or a
script where the tool needs one: vegeta's and oha's processes and reports) and runs it on a
``testbed.node.Node``, which renders it with its timeout in that one place; a parser turns the
tool's output into a typed result or raises ``ParseError`` quoting it. Imports only
``libraries.testbed``. A family uses another family only through that family's package
(``from libraries.tools.cpu import children_cpu_s``), never its modules, and the families
depend on each other without a circle (``utest/test_layers.py``).
"""
