"""Typed, validated parameters of the nginx TCP stream proxy (seed 003), with the stream eBPF
module's directives where wanted. Same conventions as ``config``: frozen dataclasses that
check themselves; ``.render()`` returns the config text.
"""

from __future__ import annotations

from dataclasses import dataclass

from libraries.testbed.errors import RenderError
from libraries.tools.nginx.config import NginxInstance
from libraries.tools.nginx.fields import (
    as_tuple,
    check_abs_path,
    check_endpoints,
    check_int_at_least,
    check_port,
    check_word,
    field_error,
    listen_directive,
)
from libraries.tools.render import render

DEBIAN_STREAM_MODULE = "/usr/lib/nginx/modules/ngx_stream_module.so"


@dataclass(frozen=True, kw_only=True)
class StreamServer:
    """One ``server`` of the stream proxy.

    Fields: listen_port, upstreams ('host:port' list), listen_address (None: all),
    ebpf (None: no eBPF directive; True/False: ``ebpf_enable on|off``, needs the eBPF module).
    """

    listen_port: int
    upstreams: tuple[str, ...]
    listen_address: str | None = None
    ebpf: bool | None = None

    def __post_init__(self) -> None:
        check_port(self, "listen_port")
        check_endpoints(self, "upstreams")
        check_word(self, "listen_address", optional=True)
        if self.ebpf is not None and not isinstance(self.ebpf, bool):
            raise field_error(self, "ebpf", "True, False or None", self.ebpf)

    @property
    def listen(self) -> str:
        return listen_directive(self.listen_address, self.listen_port)

    @property
    def upstream_name(self) -> str:
        return f"stream_upstream_{self.listen_port}"


@dataclass(frozen=True, kw_only=True)
class StreamProxyParams:
    """nginx TCP stream proxy (seed 003), optionally with the stream eBPF module's directives.

    Fields: instance, servers (StreamServer list), load_module (the dynamic stream module;
    None when stream is built in, e.g. the eBPF-module build), ebpf_enable (stream-level
    ``ebpf_enable on|off`` inherited by servers whose ``ebpf`` is None; None: not rendered),
    ebpf_proxy_timeout (seconds, in the ``stream`` block as in seed 003; None: not rendered).
    A server that proxies with eBPF after one that does not is refused: the module would
    silently proxy it natively (seen with the eBPF module built from source).
    """

    instance: NginxInstance
    servers: tuple[StreamServer, ...]
    load_module: str | None = DEBIAN_STREAM_MODULE
    ebpf_enable: bool | None = None
    ebpf_proxy_timeout: int | None = None

    template = "nginx/stream_proxy.conf.j2"

    def __post_init__(self) -> None:
        if not isinstance(self.instance, NginxInstance):
            raise field_error(self, "instance", "an NginxInstance", self.instance)
        servers = as_tuple(self, "servers")
        if not servers or not all(isinstance(s, StreamServer) for s in servers):
            raise field_error(self, "servers", "a non-empty list of StreamServer", servers)
        check_abs_path(self, "load_module", optional=True)
        check_int_at_least(self, "ebpf_proxy_timeout", 1, optional=True)
        seen: set[str] = set()
        for server in servers:
            if server.listen in seen:
                raise field_error(self, "servers", "distinct listen addresses", server.listen)
            seen.add(server.listen)
        if self.ebpf_enable is not None and not isinstance(self.ebpf_enable, bool):
            raise field_error(self, "ebpf_enable", "True, False or None", self.ebpf_enable)
        for index, server in enumerate(servers):
            earlier = [s for s in servers[:index] if not self.proxies_with_ebpf(s)]
            if self.proxies_with_ebpf(server) and earlier:
                raise RenderError(
                    f"StreamProxyParams.servers: server listening on {server.listen} uses eBPF "
                    f"but comes after server {earlier[0].listen} (ebpf={earlier[0].ebpf}, "
                    f"stream-level ebpf_enable={self.ebpf_enable}), which does not; the eBPF "
                    "module silently falls back to native proxying there: put every eBPF "
                    "server first"
                )

    def proxies_with_ebpf(self, server: StreamServer) -> bool:
        """Whether ``server`` is eBPF-proxied: its own ``ebpf``, else the stream-level one."""
        return bool(self.ebpf_enable if server.ebpf is None else server.ebpf)

    @property
    def uses_ebpf(self) -> bool:
        """True when any eBPF directive is rendered (needs an nginx built with the module)."""
        return (
            self.ebpf_proxy_timeout is not None
            or self.ebpf_enable is not None
            or any(s.ebpf is not None for s in self.servers)
        )

    def render(self) -> str:
        """The nginx.conf text."""
        return render(self.template, self)

