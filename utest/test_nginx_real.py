"""Rendered nginx configs against the real nginx: ``nginx -t`` and mutual-TLS behaviour.

Runs nginx (Debian 1.22 + libnginx-mod-stream) in the foreground on 127.0.0.1 high ports,
everything under pytest's tmp dirs; every started process is stopped by a finalizer.
Also covers content files (``libraries.tools.content``), which these servers serve.
"""

from __future__ import annotations

import http.client
import random
import shutil
import socket
import ssl
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from libraries.tools.certs import (
    CertFiles,
    make_ca,
    make_cert,
    make_run_certificates,
    write_cert_key,
)
from libraries.tools.content import content_file_command, parse_size, size_name
from libraries.tools.nginx.config import (
    HttpsServerParams,
    NginxInstance,
    SslProxyParams,
    UpstreamTls,
)
from libraries.tools.nginx.stream import DEBIAN_STREAM_MODULE, StreamProxyParams, StreamServer

NGINX = shutil.which("nginx")
needs_nginx = pytest.mark.skipif(NGINX is None, reason="nginx not installed: no nginx in PATH")
needs_stream = pytest.mark.skipif(
    not Path(DEBIAN_STREAM_MODULE).exists(),
    reason=f"nginx stream module missing: {DEBIAN_STREAM_MODULE} (libnginx-mod-stream)",
)


# ---------------------------------------------------------------------------- helpers
def free_ports(count: int) -> list[int]:
    """``count`` distinct ports in 18000-19999 that are free on 127.0.0.1 right now."""
    ports: list[int] = []
    candidates = random.sample(range(18000, 20000), 200)
    for port in candidates:
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        ports.append(port)
        if len(ports) == count:
            return ports
    raise RuntimeError("no free ports in 18000-19999 on 127.0.0.1")


@dataclass(frozen=True)
class Pki:
    ca: CertFiles
    server: CertFiles
    proxy: CertFiles
    client: CertFiles
    stranger_client: CertFiles  # client certificate from a different CA
    stranger_ca: CertFiles


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Pki:
    directory = tmp_path_factory.mktemp("certs")
    run = make_run_certificates(["server.test", "127.0.0.1"], ["proxy.test", "127.0.0.1"])
    other_ca = make_ca("some other CA")
    stranger = make_cert(other_ca, "proxy-client", ["proxy-client"], client=True)
    return Pki(
        ca=write_cert_key(run.ca, directory, "ca"),
        server=write_cert_key(run.server, directory, "server"),
        proxy=write_cert_key(run.proxy, directory, "proxy"),
        client=write_cert_key(run.client, directory, "client"),
        stranger_client=write_cert_key(stranger, directory, "stranger"),
        stranger_ca=write_cert_key(other_ca, directory, "stranger-ca"),
    )


def instance(base: Path, name: str, level: str = "crit") -> NginxInstance:
    prefix = base / name
    prefix.mkdir()
    # user root: pytest's tmp dirs are 0700, nginx's default worker user could not read them
    return NginxInstance(prefix=str(prefix), user="root", error_log_level=level)


def write_config(params, base: Path, name: str) -> Path:
    path = base / f"{name}.conf"
    path.write_text(params.render())
    return path


def nginx_test(config: Path, prefix: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [NGINX, "-t", "-c", str(config), "-p", prefix],
        capture_output=True, text=True, timeout=30, check=False,
    )


@pytest.fixture
def run_nginx():
    """Start nginx in the foreground; wait until its port listens; stop it at teardown."""
    started: list[subprocess.Popen] = []

    def start(config: Path, params, port: int) -> subprocess.Popen:
        prefix = params.instance.prefix
        proc = subprocess.Popen(
            [NGINX, "-c", str(config), "-p", prefix],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )
        started.append(proc)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                log = Path(params.instance.error_log).read_text(errors="replace")
                pytest.fail(f"nginx {config} exited {proc.returncode}: {proc.stderr.read()}{log}")
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", port)) == 0:
                    return proc
            time.sleep(0.05)
        pytest.fail(f"nginx {config} does not listen on 127.0.0.1:{port} after 5 s")

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        if proc.stderr:
            proc.stderr.close()


def https_get(port: int, path: str = "/1kb") -> tuple[int, bytes]:
    """GET over TLS 1.3 without verifying (``curl -k``); (status, body)."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    conn = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=5)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def handled_requests(status_port: int) -> int:
    """Requests counted by nginx's stub_status ('server accepts handled requests' line)."""
    conn = http.client.HTTPConnection("127.0.0.1", status_port, timeout=5)
    try:
        conn.request("GET", "/status")
        text = conn.getresponse().read().decode()
    finally:
        conn.close()
    lines = text.splitlines()
    return int(lines[lines.index("server accepts handled requests") + 1].split()[2])


def server_params(base: Path, pki: Pki, port: int, **changes) -> HttpsServerParams:
    www = base / "www"
    if not www.exists():
        subprocess.run(content_file_command(str(www / "1kb"), "1kb"), shell=True, check=True)
    fields = {"instance": instance(base, "server", "info"), "cert_path": pki.server.cert_path,
              "key_path": pki.server.key_path, "root_dir": str(www),
              "listen_address": "127.0.0.1", "listen_port": port, **changes}
    return HttpsServerParams(**fields)


def proxy_params(base: Path, pki: Pki, name: str, port: int, upstream_port: int,
                 upstream_tls: UpstreamTls | None) -> SslProxyParams:
    return SslProxyParams(
        instance=instance(base, name, "info"), cert_path=pki.proxy.cert_path,
        key_path=pki.proxy.key_path, listen_address="127.0.0.1", listen_port=port,
        upstreams=[f"127.0.0.1:{upstream_port}"], upstream_keepalive=16,
        upstream_tls=upstream_tls,
    )


def mtls(client: CertFiles | None, trusted_ca: CertFiles) -> UpstreamTls:
    return UpstreamTls(
        client_cert_path=client.cert_path if client else None,
        client_key_path=client.key_path if client else None,
        trusted_ca_path=trusted_ca.cert_path, ssl_name="server.test",
    )


# ---------------------------------------------------------------------------- nginx -t
@needs_nginx
@needs_stream
@pytest.mark.parametrize("kind", ["server", "server-mtls", "proxy", "proxy-mtls", "stream"])
def test_rendered_config_passes_nginx_t(tmp_path, pki, kind):
    if kind == "server":
        params = server_params(tmp_path, pki, 18443)
    elif kind == "server-mtls":
        params = server_params(tmp_path, pki, 18443, client_ca_path=pki.ca.cert_path,
                               status_port=18450, access_log_path=str(tmp_path / "access.log"))
    elif kind == "proxy":
        params = proxy_params(tmp_path, pki, "proxy", 18444, 18443, None)
    elif kind == "proxy-mtls":
        params = proxy_params(tmp_path, pki, "proxy", 18444, 18443, mtls(pki.client, pki.ca))
    else:
        params = StreamProxyParams(
            instance=instance(tmp_path, "stream"),
            servers=[StreamServer(listen_port=18460, upstreams=["127.0.0.1:18443"]),
                     StreamServer(listen_port=18461, upstreams=["127.0.0.1:18444"],
                                  listen_address="127.0.0.1")],
        )
    config = write_config(params, tmp_path, kind)
    result = nginx_test(config, params.instance.prefix)
    assert result.returncode == 0, f"{result.stderr}\n{config.read_text()}"
    assert "test is successful" in result.stderr


@needs_nginx
def test_missing_certificate_file_fails_nginx_t(tmp_path, pki):
    params = server_params(tmp_path, pki, 18443, cert_path=str(tmp_path / "absent.crt"))
    result = nginx_test(write_config(params, tmp_path, "server"), params.instance.prefix)
    assert result.returncode != 0
    assert "absent.crt" in result.stderr and "[emerg]" in result.stderr


@needs_nginx
def test_stream_without_load_module_fails_nginx_t(tmp_path):
    params = StreamProxyParams(
        instance=instance(tmp_path, "stream"), load_module=None,
        servers=[StreamServer(listen_port=18460, upstreams=["127.0.0.1:18443"])],
    )
    result = nginx_test(write_config(params, tmp_path, "stream"), params.instance.prefix)
    assert result.returncode != 0
    assert 'unknown directive "stream"' in result.stderr


@needs_nginx
def test_ebpf_directives_need_the_ebpf_build(tmp_path):
    """Debian's nginx has no eBPF module: the directive is unknown (so tests using it skip)."""
    params = StreamProxyParams(
        instance=instance(tmp_path, "stream"),
        servers=[StreamServer(listen_port=18460, upstreams=["127.0.0.1:18443"], ebpf=True)],
    )
    result = nginx_test(write_config(params, tmp_path, "stream"), params.instance.prefix)
    assert result.returncode != 0
    assert 'unknown directive "ebpf_enable"' in result.stderr


# ---------------------------------------------------------------------------- behaviour
@needs_nginx
def test_upstream_mutual_tls(tmp_path, pki, run_nginx):
    server_port, status_port, good, stranger, none, untrusting = free_ports(6)
    server = server_params(tmp_path, pki, server_port, client_ca_path=pki.ca.cert_path,
                           status_port=status_port)
    run_nginx(write_config(server, tmp_path, "server"), server, server_port)
    content = (Path(server.root_dir) / "1kb").read_bytes()
    proxies = {
        good: proxy_params(tmp_path, pki, "good", good, server_port, mtls(pki.client, pki.ca)),
        stranger: proxy_params(tmp_path, pki, "stranger", stranger, server_port,
                               mtls(pki.stranger_client, pki.ca)),
        none: proxy_params(tmp_path, pki, "none", none, server_port, mtls(None, pki.ca)),
        untrusting: proxy_params(tmp_path, pki, "untrusting", untrusting, server_port,
                                 mtls(pki.client, pki.stranger_ca)),
    }
    for port, params in proxies.items():
        run_nginx(write_config(params, tmp_path, f"proxy-{port}"), params, port)

    before = handled_requests(status_port)
    assert https_get(good) == (200, content)
    assert handled_requests(status_port) == before + 2  # the proxied GET + this status GET

    # The server completes the handshake and answers 400 (nginx's behaviour with
    # ssl_verify_client on); the proxy relays it, never the content.
    status, body = https_get(stranger)
    assert (status, b"The SSL certificate error" in body) == (400, True)
    status, body = https_get(none)
    assert (status, b"No required SSL certificate was sent" in body) == (400, True)
    server_log = Path(server.instance.error_log).read_text()
    assert "client SSL certificate verify error" in server_log
    assert "client sent no required SSL certificate" in server_log

    # A proxy that cannot verify the upstream certificate fails the TLS handshake: 502.
    status, body = https_get(untrusting)
    assert status == 502 and content not in body
    proxy_log = Path(proxies[untrusting].instance.error_log).read_text()
    assert "upstream SSL certificate verify error" in proxy_log

    # Direct access without a client certificate is refused by the server itself.
    assert https_get(server_port)[0] == 400


@needs_nginx
@needs_stream
def test_stream_proxy_forwards_tls_to_the_https_server(tmp_path, pki, run_nginx):
    server_port, stream_port = free_ports(2)
    server = server_params(tmp_path, pki, server_port)
    run_nginx(write_config(server, tmp_path, "server"), server, server_port)
    stream = StreamProxyParams(
        instance=instance(tmp_path, "stream"),
        servers=[StreamServer(listen_port=stream_port, listen_address="127.0.0.1",
                              upstreams=[f"127.0.0.1:{server_port}"])],
    )
    run_nginx(write_config(stream, tmp_path, "stream"), stream, stream_port)
    content = (Path(server.root_dir) / "1kb").read_bytes()
    assert https_get(stream_port) == (200, content)
    assert https_get(stream_port, "/missing")[0] == 404


# ---------------------------------------------------------------------------- content
@pytest.mark.parametrize(
    ("text", "size"),
    [("1kb", 1024), ("1KB", 1024), ("64KiB", 65536), ("1m", 1048576), ("10 MB", 10485760),
     ("512", 512), ("512b", 512), (4096, 4096), ("2g", 2 * 1024**3)],
)
def test_parse_size(text, size):
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["", "kb", "1.5kb", "-1kb", "1tb", "1 k b", "0", 0, True, "12x"])
def test_parse_size_refuses_garbage_naming_it(text):
    with pytest.raises(ValueError, match=f"content size: expected .*got {text!r}"):
        parse_size(text)


def test_size_names_match_the_seed_urls():
    assert [size_name(s) for s in ("1kb", 65536, "1m", 1000)] == ["1kb", "64kb", "1mb", "1000b"]


def test_content_file_command_makes_a_random_file_of_the_size(tmp_path):
    path = tmp_path / "dir with space" / "64kb"
    command = content_file_command(str(path), "64KiB")
    subprocess.run(["bash", "-c", command], check=True, timeout=10)
    data = path.read_bytes()
    assert len(data) == 65536
    assert len(set(data)) > 200  # random bytes, not zeros
    with pytest.raises(ValueError, match="absolute file path"):
        content_file_command("relative/1kb", 1024)
