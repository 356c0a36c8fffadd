"""nginx templates: rendered configs carry the seeds' directives; bad parameters are refused."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from libraries.testbed.errors import RenderError
from libraries.tools.nginx.config import (
    PROXY_PORT,
    SERVER_PORT,
    HttpsServerParams,
    NginxInstance,
    SslProxyParams,
    UpstreamTls,
)
from libraries.tools.nginx.stream import StreamProxyParams, StreamServer
from libraries.tools.render import render

GOLDEN = Path(__file__).parent / "golden"


def directives(text: str) -> list[tuple[tuple[str, ...], str]]:
    """Flatten an nginx config into (enclosing blocks, directive) pairs, whitespace-normalised.

    ``location / { limit_except GET { deny all; } }`` in ``server`` gives
    ``(("http", "server", "location /", "limit_except GET"), "deny all")``.
    A block itself appears as a directive of its parent (``"upstream x {}"``).
    """
    text = re.sub(r"#[^\n]*", "", text)
    blocks: list[tuple[tuple[str, ...], str]] = []
    stack = []
    pending = ""
    for token in re.findall(r"[^{};]+|[{};]", text):
        if token == "{":
            blocks.append((tuple(stack), pending + " {}"))
            stack.append(pending)
            pending = ""
        elif token == "}":
            stack.pop()
        elif token == ";":
            blocks.append((tuple(stack), pending))
            pending = ""
        else:
            word = " ".join(token.split())
            if word:
                pending = word
    assert not stack, f"unbalanced braces in config:\n{text}"
    return blocks


def instance(tmp: str = "/tmp/nginx-test", **changes) -> NginxInstance:
    return NginxInstance(prefix=tmp, **changes)


def seed_server() -> HttpsServerParams:
    return HttpsServerParams(
        instance=instance(), cert_path="/etc/nginx/certs/server.crt",
        key_path="/etc/nginx/certs/server.key", root_dir="/var/www/html",
    )


def seed_proxy(**changes) -> SslProxyParams:
    fields = {"upstreams": ["172.16.1.1:8445"], **changes}
    return SslProxyParams(
        instance=instance(), cert_path="/etc/nginx/certs/proxy.crt",
        key_path="/etc/nginx/certs/proxy.key", **fields,
    )


# Per-instance by design: the seed's pid in /run and error_log to /dev/null are replaced by
# files under the instance prefix; its empty ``events {}`` gets worker_connections.
PER_INSTANCE = {"pid", "error_log", "events {}"}


def seed_directives(name: str) -> set[tuple[tuple[str, ...], str]]:
    entries = directives((GOLDEN / name).read_text())
    return {(ctx, d) for ctx, d in entries if d.split()[0] not in PER_INSTANCE
            and d != "events {}"}


@pytest.mark.parametrize(
    ("params", "golden"),
    [(seed_server, "seed000_nginx_server.conf"), (seed_proxy, "seed000_nginx_proxy.conf")],
)
def test_defaults_render_every_directive_of_seed_000(params, golden):
    rendered = set(directives(params().render()))
    missing = seed_directives(golden) - rendered
    assert not missing, f"seed directives missing from the rendering: {sorted(missing)}"


def test_instance_files_live_under_the_prefix_and_nginx_runs_in_foreground():
    entries = directives(seed_server().render())
    main = {d for ctx, d in entries if ctx == ()}
    assert "pid /tmp/nginx-test/nginx.pid" in main
    assert "error_log /tmp/nginx-test/error.log crit" in main
    assert "daemon off" in main
    assert "master_process on" in main
    assert ((), "worker_processes 1") in entries
    assert (("events",), "worker_connections 1024") in entries
    http = {d for ctx, d in entries if ctx == ("http",)}
    for name in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"):
        assert f"{name}_temp_path /tmp/nginx-test/{name}_temp" in http


def test_prefix_trailing_slash_is_not_doubled():
    text = HttpsServerParams(
        instance=instance("/tmp/x/"), cert_path="/c", key_path="/k", root_dir="/r"
    ).render()
    assert "pid /tmp/x/nginx.pid;" in text
    assert "//" not in text.replace("https://", "")


@pytest.mark.parametrize(
    ("cpus", "mask"), [([1], "10"), ([0], "1"), ([0, 3], "1 1000"), ([5, 2], "100000 100")]
)
def test_worker_cpu_affinity_has_one_mask_per_worker(cpus, mask):
    params = instance(worker_processes=len(cpus), worker_cpus=cpus)
    assert params.cpu_affinity == mask
    text = HttpsServerParams(
        instance=params, cert_path="/c", key_path="/k", root_dir="/r"
    ).render()
    assert ((), f"worker_cpu_affinity {mask}") in directives(text)
    assert ((), f"worker_processes {len(cpus)}") in directives(text)


def test_no_affinity_user_by_default_and_root_when_asked():
    plain = {d.split()[0] for ctx, d in directives(seed_server().render()) if ctx == ()}
    assert "worker_cpu_affinity" not in plain
    assert "user" not in plain
    text = HttpsServerParams(
        instance=instance(user="root", error_log_level="notice", master_process=False),
        cert_path="/c", key_path="/k", root_dir="/r",
    ).render()
    main = {d for ctx, d in directives(text) if ctx == ()}
    assert {"user root", "master_process off", "error_log /tmp/nginx-test/error.log notice"} <= main


def test_server_mutual_tls_status_port_and_access_log():
    params = HttpsServerParams(
        instance=instance(), cert_path="/c/s.crt", key_path="/c/s.key", root_dir="/www",
        listen_address="127.0.0.1", listen_port=18443, client_ca_path="/c/ca.crt",
        client_verify_depth=2, status_port=18450, access_log_path="/tmp/nginx-test/access.log",
        ciphersuites=["TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256"],
    )
    entries = directives(params.render())
    server = {d for ctx, d in entries if ctx == ("http", "server")}
    assert {
        "listen 127.0.0.1:18443 ssl", "listen 127.0.0.1:18450", "ssl_verify_client on",
        "ssl_client_certificate /c/ca.crt", "ssl_verify_depth 2",
        "ssl_conf_command Ciphersuites TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256",
    } <= server
    assert (("http", "server", "location = /status"), "stub_status") in entries
    http = {d for ctx, d in entries if ctx == ("http",)}
    assert "access_log /tmp/nginx-test/access.log" in http
    assert "access_log off" not in http


def test_server_without_client_ca_does_not_verify_clients():
    text = seed_server().render()
    assert "ssl_verify_client" not in text
    assert "stub_status" not in text


def test_proxy_upstream_keepalive_and_list():
    params = seed_proxy(upstreams=["10.0.0.1:443", "[::1]:8445"], upstream_keepalive=32,
                        upstream_name="backends", proxy_ssl_session_reuse=False)
    entries = directives(params.render())
    upstream = {d for ctx, d in entries if ctx == ("http", "upstream backends")}
    assert upstream == {"server 10.0.0.1:443", "server [::1]:8445", "keepalive 32"}
    location = {d for ctx, d in entries if ctx == ("http", "server", "location /")}
    assert "proxy_pass https://backends" in location
    assert "proxy_ssl_session_reuse off" in location
    assert not any(d.startswith("proxy_ssl_verify") for d in location)


def test_proxy_upstream_mutual_tls_directives():
    tls = UpstreamTls(
        client_cert_path="/c/client.crt", client_key_path="/c/client.key",
        trusted_ca_path="/c/ca.crt", verify_depth=3, ssl_name="server.test",
    )
    location = {
        d for ctx, d in directives(seed_proxy(upstream_tls=tls).render())
        if ctx == ("http", "server", "location /")
    }
    assert {
        "proxy_ssl_certificate /c/client.crt", "proxy_ssl_certificate_key /c/client.key",
        "proxy_ssl_verify on", "proxy_ssl_trusted_certificate /c/ca.crt",
        "proxy_ssl_verify_depth 3", "proxy_ssl_name server.test", "proxy_ssl_server_name on",
        "proxy_ssl_protocols TLSv1.3", "proxy_http_version 1.1",
        'proxy_set_header Connection ""',
    } <= location


def test_proxy_client_certificate_without_upstream_verification():
    tls = UpstreamTls(client_cert_path="/c/a.crt", client_key_path="/c/a.key", verify=False)
    text = seed_proxy(upstream_tls=tls).render()
    assert "proxy_ssl_verify off;" in text
    assert "proxy_ssl_trusted_certificate" not in text
    assert "proxy_ssl_certificate /c/a.crt;" in text


def stream(servers, **changes) -> StreamProxyParams:
    return StreamProxyParams(instance=instance(), servers=servers, **changes)


def test_stream_proxy_plain_has_no_ebpf_directive():
    params = stream([StreamServer(listen_port=10001, upstreams=["127.0.0.1:20001"])])
    entries = directives(params.render())
    assert entries[0] == ((), "load_module /usr/lib/nginx/modules/ngx_stream_module.so")
    server = {d for ctx, d in entries if ctx == ("stream", "server")}
    assert server == {"listen 10001", "proxy_pass stream_upstream_10001"}
    assert (("stream", "upstream stream_upstream_10001"), "server 127.0.0.1:20001") in entries
    assert "ebpf" not in params.render()
    assert not params.uses_ebpf


def test_stream_proxy_renders_seed_003_ebpf_directives():
    params = stream(
        [
            StreamServer(listen_port=10000, upstreams=["127.0.0.1:20001"], ebpf=True),
            StreamServer(listen_port=10001, upstreams=["127.0.0.1:20001"], ebpf=False),
        ],
        load_module=None, ebpf_enable=True, ebpf_proxy_timeout=600,
    )
    entries = directives(params.render())
    seed = directives((GOLDEN / "seed003_nginx_ebpf.conf").read_text())
    for entry in [(("stream",), "ebpf_proxy_timeout 600"), (("stream",), "ebpf_enable on")]:
        assert entry in seed
        assert entry in entries
    servers = [d for ctx, d in entries if ctx == ("stream", "server")]
    assert servers == ["listen 10000", "ebpf_enable on", "proxy_pass stream_upstream_10000",
                       "listen 10001", "ebpf_enable off", "proxy_pass stream_upstream_10001"]
    assert not any(d.startswith("load_module") for _, d in entries)
    assert params.uses_ebpf


def test_stream_ebpf_server_after_a_native_one_is_refused():
    native = StreamServer(listen_port=10001, upstreams=["127.0.0.1:20001"], ebpf=False)
    ebpf = StreamServer(listen_port=10000, upstreams=["127.0.0.1:20001"], ebpf=True)
    with pytest.raises(RenderError, match=r"10000 uses eBPF but comes after server 10001"):
        stream([native, ebpf])
    unset = StreamServer(listen_port=10002, upstreams=["127.0.0.1:20001"])
    with pytest.raises(RenderError, match="put every eBPF server first"):
        stream([unset, ebpf])
    # an unset server inherits the stream-level default: on here, so the order is fine
    assert stream([unset, ebpf], ebpf_enable=True).proxies_with_ebpf(unset)
    with pytest.raises(RenderError, match="10002 uses eBPF"):
        stream([native, unset], ebpf_enable=True)


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: HttpsServerParams(instance=instance(), cert_path="/c", key_path="/k",
                                   root_dir="/r", listen_port=0),
         r"HttpsServerParams.listen_port: expected a TCP port 1-65535, got 0"),
        (lambda: HttpsServerParams(instance=instance(), cert_path="/c", key_path="/k",
                                   root_dir="/r", listen_port=65536), "got 65536"),
        (lambda: HttpsServerParams(instance=instance(), cert_path="", key_path="/k",
                                   root_dir="/r"), r"cert_path: expected an absolute path"),
        (lambda: HttpsServerParams(instance=instance(), cert_path="certs/s.crt",
                                   key_path="/k", root_dir="/r"), "got 'certs/s.crt'"),
        (lambda: HttpsServerParams(instance=instance(), cert_path="/c", key_path="/k",
                                   root_dir="/r", ciphersuites=["AES128-SHA"]),
         r"ciphersuites: expected names from .*TLS_AES_128_GCM_SHA256.*got 'AES128-SHA'"),
        (lambda: HttpsServerParams(instance=instance(), cert_path="/c", key_path="/k",
                                   root_dir="/r", ssl_protocols=["SSLv3"]),
         "ssl_protocols.*got 'SSLv3'"),
        (lambda: HttpsServerParams(instance=instance(), cert_path="/c", key_path="/k",
                                   root_dir="/r", keepalive_requests=-1),
         r"keepalive_requests: expected an integer >= 0, got -1"),
        (lambda: HttpsServerParams(instance=instance(), cert_path="/c", key_path="/k",
                                   root_dir="/r", status_port=8445), "status_port"),
        (lambda: HttpsServerParams(instance=instance(), cert_path="/c", key_path="/k",
                                   root_dir="/r", client_ca_path="ca.crt"), "client_ca_path"),
        (lambda: NginxInstance(prefix="/p", worker_processes=0),
         r"NginxInstance.worker_processes: expected an integer >= 1, got 0"),
        (lambda: NginxInstance(prefix="relative"), "NginxInstance.prefix"),
        (lambda: NginxInstance(prefix="/p", worker_processes=2, worker_cpus=[1]),
         r"worker_cpus: expected one CPU per worker \(2 worker\(s\)\)"),
        (lambda: NginxInstance(prefix="/p", worker_cpus=[-1]), "CPU numbers >= 0"),
        (lambda: NginxInstance(prefix="/p", error_log_level="loud"), "error_log_level"),
        (lambda: seed_proxy(upstreams=["172.16.1.1"]), r"upstreams: expected 'host:port'"),
        (lambda: seed_proxy(upstreams=[]), "at least one"),
        (lambda: seed_proxy(upstreams="172.16.1.1:8445"), r"upstreams: expected a list"),
        (lambda: seed_proxy(upstream_keepalive=-1), "upstream_keepalive"),
        (lambda: UpstreamTls(client_cert_path="/a", verify=False),
         "client_cert_path and client_key_path both set"),
        (lambda: UpstreamTls(trusted_ca_path="/ca"), r"UpstreamTls.ssl_name: expected the name"),
        (lambda: UpstreamTls(ssl_name="s"), "trusted_ca_path: expected a CA file"),
        (lambda: StreamServer(listen_port=0, upstreams=["127.0.0.1:1"]), "listen_port"),
        (lambda: stream([]), "servers: expected a non-empty list"),
        (lambda: stream([StreamServer(listen_port=1, upstreams=["h:2"])] * 2),
         "distinct listen addresses"),
        (lambda: stream([StreamServer(listen_port=1, upstreams=["h:2"])],
                        ebpf_proxy_timeout=0), "ebpf_proxy_timeout"),
    ],
)
def test_bad_parameters_are_refused_before_rendering(build, message):
    with pytest.raises(RenderError, match=message):
        build()


def test_render_errors_name_the_template():
    with pytest.raises(RenderError, match=r"template 'nginx/nope.conf.j2': not found"):
        render("nginx/nope.conf.j2", seed_server())
    with pytest.raises(RenderError, match=r"template 'nginx/https_server.conf.j2'.*undefined"):
        render("nginx/https_server.conf.j2", {"instance": instance()})
    with pytest.raises(RenderError, match="expected a dataclass instance or a dict"):
        render("nginx/https_server.conf.j2", "text")


def test_the_server_and_proxy_ports_are_written_once_in_the_config_module():
    """A reader of the proxy's nginx.conf finds its ports where the config is rendered; the
    case and the benchmarks take them from there (``PROXY_PORT``, ``SERVER_PORT``)."""
    root = Path(__file__).resolve().parent.parent
    written = sorted(
        str(path.relative_to(root))
        for folder in ("libraries", "benchmarks") for path in (root / folder).rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Constant) and type(node.value) is int
        and node.value in (PROXY_PORT, SERVER_PORT))
    assert written == ["libraries/tools/nginx/config.py"] * 2
