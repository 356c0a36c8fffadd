"""sslsniff: SSL tracers on nginx's libssl (seed 004), in the kernel and under bpftime.

Owns the tracer's parameters, the project's bpftrace script, the output parser shared by
every tracer and the attachment proof (``tracer``); choosing, starting, proving attached and
stopping a kernel tracer, bcc's sslsniff or the bpftrace script, and the uprobes it must not
leave behind (``kernel``); the seed's own program, bpftime's libbpf sslsniff example, attached
by the kernel (``seed``); and the same program under bpftime's userspace uprobes, one traced
trial at a time (``userspace``, built on :mod:`libraries.tools.bpftime`).

Other tool families use only the names below (``from libraries.tools.sslsniff import ...``).
"""

from libraries.tools.sslsniff.tracer import SslsniffParams, SslsniffResult, parse_sslsniff_output

__all__ = ["SslsniffParams", "SslsniffResult", "parse_sslsniff_output"]
