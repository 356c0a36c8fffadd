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

from libraries.tools.nginx.fields import (
    as_tuple,
    check_abs_path,
    check_choices,
    check_endpoints,
    check_int_at_least,
    check_port,
    check_word,
    directive_problem,
    field_error,
    listen_directive,
)
from libraries.tools.render import render

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
SERVER_PORT = 8445
"""The HTTPS file server's port (seed 000's ``nginx_server.conf``)."""
PROXY_PORT = 8089
"""The HTTPS reverse proxy's port (seed 000's ``nginx_proxy.conf``)."""
STATUS_PORT = 8446
"""The HTTPS file server's stub_status counter, on 127.0.0.1 (the proxy's forwarding proof)."""
WORKER_CONNECTIONS = 1024
"""``worker_connections`` unless an instance gives another (seed 000's)."""


# ---------------------------------------------------------------------------- instance
@dataclass(frozen=True, kw_only=True)
class NginxInstance:
    """Process-level settings of one nginx instance (main context and ``events``).

    Fields: prefix (absolute directory holding pid, error log and temp dirs),
    worker_processes, worker_cpus (CPU number per worker or None: no affinity),
    worker_connections, error_log_level ("crit" as in seed 000; "notice" shows eBPF
    engagement; "info" shows client-certificate failures), error_log_path (None:
    ``<prefix>/error.log``), user (e.g. "root"; None: nginx's default), master_process,
    extra_http and extra_server (directives, each ending in ``;``, added to the ``http``
    block, ``stream`` for a stream proxy, and to each measured ``server``: an A/B side's
    knobs).
    """

    prefix: str
    worker_processes: int = 1
    worker_cpus: tuple[int, ...] | None = None
    worker_connections: int = WORKER_CONNECTIONS
    error_log_level: str = "crit"
    error_log_path: str | None = None
    user: str | None = None
    master_process: bool = True
    extra_http: tuple[str, ...] = ()
    extra_server: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        check_abs_path(self, "prefix")
        check_int_at_least(self, "worker_processes", 1)
        check_int_at_least(self, "worker_connections", 1)
        check_abs_path(self, "error_log_path", optional=True)
        check_word(self, "user", optional=True)
        for name in ("extra_http", "extra_server"):
            for directive in as_tuple(self, name):
                if (problem := directive_problem(directive)) is not None:
                    raise field_error(self, name, f"directives like 'name value;' or "
                                      f"one-line blocks: {problem}", directive)
        if self.error_log_level not in ERROR_LOG_LEVELS:
            raise field_error(self, "error_log_level", f"one of {ERROR_LOG_LEVELS}",
                              self.error_log_level)
        if self.worker_cpus is not None:
            cpus = as_tuple(self, "worker_cpus")
            if any(isinstance(c, bool) or not isinstance(c, int) or c < 0 for c in cpus):
                raise field_error(self, "worker_cpus", "CPU numbers >= 0", cpus)
            if len(cpus) != self.worker_processes:
                raise field_error(
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
            raise field_error(self, "instance", "an NginxInstance", self.instance)
        check_abs_path(self, "cert_path")
        check_abs_path(self, "key_path")
        check_port(self, "listen_port")
        check_word(self, "listen_address", optional=True)
        check_word(self, "server_name")
        check_choices(self, "ssl_protocols", TLS_PROTOCOLS)
        check_choices(self, "ciphersuites", TLS13_CIPHERSUITES)
        check_int_at_least(self, "keepalive_requests", 0)
        check_abs_path(self, "access_log_path", optional=True)
        check_port(self, "status_port", optional=True)
        if self.status_port == self.listen_port:
            raise field_error(self, "status_port", "a port other than listen_port",
                              self.status_port)

    @property
    def listen(self) -> str:
        return listen_directive(self.listen_address, self.listen_port)

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
    listen_port: int = SERVER_PORT

    template = "nginx/https_server.conf.j2"

    def __post_init__(self) -> None:
        super().__post_init__()
        check_abs_path(self, "root_dir")
        check_abs_path(self, "client_ca_path", optional=True)
        check_int_at_least(self, "client_verify_depth", 1)

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
        check_abs_path(self, "client_cert_path", optional=True)
        check_abs_path(self, "client_key_path", optional=True)
        check_abs_path(self, "trusted_ca_path", optional=True)
        check_int_at_least(self, "verify_depth", 1)
        check_word(self, "ssl_name", optional=True)
        if (self.client_cert_path is None) != (self.client_key_path is None):
            raise field_error(
                self, "client_key_path", "client_cert_path and client_key_path both set or both "
                "unset", (self.client_cert_path, self.client_key_path),
            )
        if self.verify and self.trusted_ca_path is None:
            raise field_error(self, "trusted_ca_path", "a CA file when verify is on", None)
        if self.verify and self.ssl_name is None:
            raise field_error(
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
    listen_port: int = PROXY_PORT

    template = "nginx/ssl_proxy.conf.j2"

    def __post_init__(self) -> None:
        super().__post_init__()
        check_endpoints(self, "upstreams")
        check_word(self, "upstream_name")
        check_int_at_least(self, "upstream_keepalive", 0)
        check_choices(self, "proxy_ssl_protocols", TLS_PROTOCOLS)
        if self.upstream_tls is not None and not isinstance(self.upstream_tls, UpstreamTls):
            raise field_error(self, "upstream_tls", "an UpstreamTls or None", self.upstream_tls)

    def render(self) -> str:
        """The nginx.conf text."""
        return render(self.template, self)
