"""The nginx stream eBPF (sockmap) module of seed 003: is it there, and did it splice.

Owns detecting the module in an nginx binary and refusing configs where it would silently fall
back to native proxying, and the per-trial engagement proof (``module``); keeping the
kernel's BPF run statistics on for a measurement without leaving them on (``bpf_stats``); and
the parsers of that proof's raw material, nginx's error log lines and ``bpftool prog show``
JSON (``evidence``).

Other tool families use only the names below (``from libraries.tools.ebpf_stream import ...``).
"""

from libraries.tools.ebpf_stream.module import EngagementEvidence, has_ebpf_module

__all__ = ["EngagementEvidence", "has_ebpf_module"]
