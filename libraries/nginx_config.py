"""Typed, validated parameters for the nginx templates (HTTPS server, SSL proxy, stream proxy).

Every parameter object is a frozen dataclass that checks itself on construction, so a bad
value (port 0, relative path, unknown cipher suite) raises RenderError naming the field and
what was expected before anything is rendered or touches a node. Lists given by Robot are
stored as tuples. ``.render()`` returns the config text.

Layout of an instance on disk: everything nginx writes lives under ``NginxInstance.prefix``
(``nginx.pid``, ``error.log``, ``*_temp`` directories), so several instances share a node.
Run it in the foreground (``daemon off;`` is always rendered) as
``nginx -c CONF -p PREFIX``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from libraries.errors import RenderError
from libraries.render import render

TLS13_CIPHERSUITES = frozenset(
    {
        "TLS_AES_128_GCM_SHA256",
        "TLS_AES_256_GCM_SHA384",
        "TLS_CHACHA20_POLY1305_SHA256",
        "TLS_AES_128_CCM_SHA256",
        "TLS_AES_128_CCM_8_SHA256",
    }
)
TLS_PROTOCOLS = ("TLSv1", "TLSv1.1", "TLSv1.2", "TLSv1.3")
ERROR_LOG_LEVELS = ("debug", "info", "notice", "warn", "error", "crit", "alert", "emerg")
TEMP_PATHS = ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
DEBIAN_STREAM_MODULE = "/usr/lib/nginx/modules/ngx_stream_module.so"


# ---------------------------------------------------------------------------- validation
def _fail(owner: Any, field: str, expected: str, value: Any) -> RenderError:
    return RenderError(f"{type(owner).__name__}.{field}: expected {expected}, got {value!r}")


def _set(owner: Any, field: str, value: Any) -> None:
    object.__setattr__(owner, field, value)


def _port(owner: Any, field: str, optional: bool = False) -> None:
    value = getattr(owner, field)
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 65535:
        raise _fail(owner, field, "a TCP port 1-65535", value)


def _abs_path(owner: Any, field: str, optional: bool = False) -> None:
    value = getattr(owner, field)
    if value is None and optional:
        return
    if not isinstance(value, str) or not value.startswith("/") or any(
        c in value for c in " ;{}\"'\n"
    ):
        raise _fail(owner, field, "an absolute path without spaces, quotes, ';' or braces", value)


def _int_at_least(owner: Any, field: str, minimum: int, optional: bool = False) -> None:
    value = getattr(owner, field)
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise _fail(owner, field, f"an integer >= {minimum}", value)


def _word(owner: Any, field: str, optional: bool = False) -> None:
    value = getattr(owner, field)
    if value is None and optional:
        return
    if not isinstance(value, str) or not value or any(c in value for c in " \t\n;{}\"'"):
        raise _fail(owner, field, "a non-empty word without spaces, quotes, ';' or braces", value)


def _tuple_of(owner: Any, field: str) -> tuple:
    value = getattr(owner, field)
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
        raise _fail(owner, field, "a list", value)
    value = tuple(value)
    _set(owner, field, value)
    return value


def _choices(owner: Any, field: str, allowed: tuple[str, ...] | frozenset[str]) -> None:
    values = _tuple_of(owner, field)
    if not values:
        raise _fail(owner, field, f"a non-empty list of {sorted(allowed)}", values)
    for value in values:
        if value not in allowed:
            raise _fail(owner, field, f"names from {sorted(allowed)}", value)


def _endpoints(owner: Any, field: str) -> None:
    values = _tuple_of(owner, field)
    if not values:
        raise _fail(owner, field, "at least one 'host:port' upstream", values)
    for value in values:
        host, sep, port = str(value).rpartition(":")
        if not sep or not host or not port.isdigit() or not 1 <= int(port) <= 65535:
            raise _fail(owner, field, "'host:port' entries with a port 1-65535", value)
        if any(c in host for c in " ;{}\"'"):
            raise _fail(owner, field, "a host without spaces, quotes, ';' or braces", value)


def _listen(address: str | None, port: int) -> str:
    return f"{address}:{port}" if address else str(port)


# ---------------------------------------------------------------------------- instance
@dataclass(frozen=True, kw_only=True)
class NginxInstance:
    """Process-level settings of one nginx instance (main context and ``events``).

    Fields: prefix (absolute directory holding pid, error log and temp dirs),
    worker_processes, worker_cpus (CPU number per worker or None: no affinity),
    worker_connections, error_log_level ("crit" as in seed 000; "notice" shows eBPF
    engagement; "info" shows client-certificate failures), error_log_path (None:
    ``<prefix>/error.log``), user (e.g. "root"; None: nginx's default), master_process.
    """

    prefix: str
    worker_processes: int = 1
    worker_cpus: tuple[int, ...] | None = None
    worker_connections: int = 1024
    error_log_level: str = "crit"
    error_log_path: str | None = None
    user: str | None = None
    master_process: bool = True

    def __post_init__(self) -> None:
        _abs_path(self, "prefix")
        _int_at_least(self, "worker_processes", 1)
        _int_at_least(self, "worker_connections", 1)
        _abs_path(self, "error_log_path", optional=True)
        _word(self, "user", optional=True)
        if self.error_log_level not in ERROR_LOG_LEVELS:
            raise _fail(self, "error_log_level", f"one of {ERROR_LOG_LEVELS}", self.error_log_level)
        if self.worker_cpus is not None:
            cpus = _tuple_of(self, "worker_cpus")
            if any(isinstance(c, bool) or not isinstance(c, int) or c < 0 for c in cpus):
                raise _fail(self, "worker_cpus", "CPU numbers >= 0", cpus)
            if len(cpus) != self.worker_processes:
                raise _fail(
                    self, "worker_cpus",
                    f"one CPU per worker ({self.worker_processes} worker(s))", cpus,
                )

    @property
    def directory(self) -> str:
        """The prefix without a trailing slash."""
        return self.prefix.rstrip("/") or "/"

    @property
    def pid_path(self) -> str:
        return f"{self.directory}/nginx.pid"

    @property
    def error_log(self) -> str:
        return self.error_log_path or f"{self.directory}/error.log"

    @property
    def cpu_affinity(self) -> str | None:
        """``worker_cpu_affinity`` value: one bitmask per worker (CPU 1 -> "10"), or None."""
        if self.worker_cpus is None:
            return None
        return " ".join(format(1 << cpu, "b") for cpu in self.worker_cpus)

    @property
    def temp_paths(self) -> dict[str, str]:
        """``<name>_temp_path`` directive name -> directory under the prefix."""
        return {f"{name}_temp_path": f"{self.directory}/{name}_temp" for name in TEMP_PATHS}


# ---------------------------------------------------------------------------- HTTPS front
@dataclass(frozen=True, kw_only=True)
class _TlsFrontend:
    """Fields shared by the HTTPS server and the SSL reverse proxy (their TLS listener)."""

    instance: NginxInstance
    cert_path: str
    key_path: str
    listen_port: int
    listen_address: str | None = None
    server_name: str = "$hostname"
    ssl_protocols: tuple[str, ...] = ("TLSv1.3",)
    ciphersuites: tuple[str, ...] = ("TLS_AES_128_GCM_SHA256",)
    keepalive_requests: int = 1000000000
    sendfile: bool = True
    tcp_nopush: bool = True
    access_log_path: str | None = None
    status_port: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.instance, NginxInstance):
            raise _fail(self, "instance", "an NginxInstance", self.instance)
        _abs_path(self, "cert_path")
        _abs_path(self, "key_path")
        _port(self, "listen_port")
        _word(self, "listen_address", optional=True)
        _word(self, "server_name")
        _choices(self, "ssl_protocols", TLS_PROTOCOLS)
        _choices(self, "ciphersuites", TLS13_CIPHERSUITES)
        _int_at_least(self, "keepalive_requests", 0)
        _abs_path(self, "access_log_path", optional=True)
        _port(self, "status_port", optional=True)
        if self.status_port == self.listen_port:
            raise _fail(self, "status_port", "a port other than listen_port", self.status_port)

    @property
    def listen(self) -> str:
        return _listen(self.listen_address, self.listen_port)

    @property
    def status_listen(self) -> str | None:
        """``127.0.0.1:<status_port>`` for the stub_status server, or None."""
        return None if self.status_port is None else f"127.0.0.1:{self.status_port}"


@dataclass(frozen=True, kw_only=True)
class HttpsServerParams(_TlsFrontend):
    """HTTPS file server (seed 000 ``nginx_server.conf``), optionally requiring client certs.

    Fields beyond the listener: root_dir (files served), client_ca_path (set: mutual TLS,
    ``ssl_verify_client on`` with that CA), client_verify_depth. ``status_port`` adds a
    ``stub_status`` server on 127.0.0.1 (requests counter); ``access_log_path`` replaces
    ``access_log off`` with a log file.
    """

    root_dir: str
    client_ca_path: str | None = None
    client_verify_depth: int = 1
    listen_port: int = 8445

    template = "nginx/https_server.conf.j2"

    def __post_init__(self) -> None:
        super().__post_init__()
        _abs_path(self, "root_dir")
        _abs_path(self, "client_ca_path", optional=True)
        _int_at_least(self, "client_verify_depth", 1)

    def render(self) -> str:
        """The nginx.conf text."""
        return render(self.template, self)


@dataclass(frozen=True, kw_only=True)
class UpstreamTls:
    """How the proxy talks TLS to its upstream (seed 002 in today's nginx terms).

    Fields: client_cert_path / client_key_path (both or neither: the certificate the proxy
    presents, ``proxy_ssl_certificate``), trusted_ca_path (``proxy_ssl_trusted_certificate``),
    verify (``proxy_ssl_verify``; needs trusted_ca_path and ssl_name), verify_depth,
    ssl_name (name checked in the upstream certificate and sent as SNI, ``proxy_ssl_name``),
    server_name (``proxy_ssl_server_name``: send SNI).
    """

    client_cert_path: str | None = None
    client_key_path: str | None = None
    trusted_ca_path: str | None = None
    verify: bool = True
    verify_depth: int = 2
    ssl_name: str | None = None
    server_name: bool = True

    def __post_init__(self) -> None:
        _abs_path(self, "client_cert_path", optional=True)
        _abs_path(self, "client_key_path", optional=True)
        _abs_path(self, "trusted_ca_path", optional=True)
        _int_at_least(self, "verify_depth", 1)
        _word(self, "ssl_name", optional=True)
        if (self.client_cert_path is None) != (self.client_key_path is None):
            raise _fail(
                self, "client_key_path", "client_cert_path and client_key_path both set or both "
                "unset", (self.client_cert_path, self.client_key_path),
            )
        if self.verify and self.trusted_ca_path is None:
            raise _fail(self, "trusted_ca_path", "a CA file when verify is on", None)
        if self.verify and self.ssl_name is None:
            raise _fail(
                self, "ssl_name", "the name in the upstream certificate when verify is on "
                "(nginx would check the upstream block's name instead)", None,
            )


@dataclass(frozen=True, kw_only=True)
class SslProxyParams(_TlsFrontend):
    """HTTPS reverse proxy (seed 000 ``nginx_proxy.conf``), optionally with upstream mTLS.

    Fields beyond the listener: upstreams ('host:port' list), upstream_name, upstream_keepalive
    (idle keepalive connections kept per worker), proxy_ssl_protocols, proxy_ssl_session_reuse,
    upstream_tls (None: seed 000's one-way TLS without verification; an UpstreamTls: client
    certificate and/or verification of the upstream).
    """

    upstreams: tuple[str, ...]
    upstream_name: str = "ssl_file_server_com"
    upstream_keepalive: int = 1024
    proxy_ssl_protocols: tuple[str, ...] = ("TLSv1.3",)
    proxy_ssl_session_reuse: bool = True
    upstream_tls: UpstreamTls | None = None
    listen_port: int = 8089

    template = "nginx/ssl_proxy.conf.j2"

    def __post_init__(self) -> None:
        super().__post_init__()
        _endpoints(self, "upstreams")
        _word(self, "upstream_name")
        _int_at_least(self, "upstream_keepalive", 0)
        _choices(self, "proxy_ssl_protocols", TLS_PROTOCOLS)
        if self.upstream_tls is not None and not isinstance(self.upstream_tls, UpstreamTls):
            raise _fail(self, "upstream_tls", "an UpstreamTls or None", self.upstream_tls)

    def render(self) -> str:
        """The nginx.conf text."""
        return render(self.template, self)


# ---------------------------------------------------------------------------- stream proxy
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
        _port(self, "listen_port")
        _endpoints(self, "upstreams")
        _word(self, "listen_address", optional=True)
        if self.ebpf is not None and not isinstance(self.ebpf, bool):
            raise _fail(self, "ebpf", "True, False or None", self.ebpf)

    @property
    def listen(self) -> str:
        return _listen(self.listen_address, self.listen_port)

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
    silently proxy it natively (LAB-NOTES, eBPF).
    """

    instance: NginxInstance
    servers: tuple[StreamServer, ...]
    load_module: str | None = DEBIAN_STREAM_MODULE
    ebpf_enable: bool | None = None
    ebpf_proxy_timeout: int | None = None

    template = "nginx/stream_proxy.conf.j2"

    def __post_init__(self) -> None:
        if not isinstance(self.instance, NginxInstance):
            raise _fail(self, "instance", "an NginxInstance", self.instance)
        servers = _tuple_of(self, "servers")
        if not servers or not all(isinstance(s, StreamServer) for s in servers):
            raise _fail(self, "servers", "a non-empty list of StreamServer", servers)
        _abs_path(self, "load_module", optional=True)
        _int_at_least(self, "ebpf_proxy_timeout", 1, optional=True)
        seen: set[str] = set()
        for server in servers:
            if server.listen in seen:
                raise _fail(self, "servers", "distinct listen addresses", server.listen)
            seen.add(server.listen)
        if self.ebpf_enable is not None and not isinstance(self.ebpf_enable, bool):
            raise _fail(self, "ebpf_enable", "True, False or None", self.ebpf_enable)
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

