"""Certificates: chains verify (cryptography and openssl), SANs and key usages, key modes."""

from __future__ import annotations

import ipaddress
import stat
import subprocess

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from cryptography.x509.verification import PolicyBuilder, Store, VerificationError

from libraries.tools.certs import (
    CertKey,
    make_ca,
    make_cert,
    make_run_certificates,
    put_cert_key,
    write_cert_key,
)


@pytest.fixture(scope="module")
def run_certs():
    return make_run_certificates(["server.test", "198.18.2.2"], ["proxy.test", "198.18.1.1"])


def verify_server(ca: CertKey, leaf: CertKey, name: str) -> None:
    store = Store([ca.certificate])
    verifier = PolicyBuilder().store(store).build_server_verifier(
        x509.IPAddress(ipaddress.ip_address(name)) if name[0].isdigit() else x509.DNSName(name)
    )
    verifier.verify(leaf.certificate, [])


def test_server_and_proxy_certificates_verify_against_the_run_ca(run_certs):
    verify_server(run_certs.ca, run_certs.server, "server.test")
    verify_server(run_certs.ca, run_certs.server, "198.18.2.2")
    verify_server(run_certs.ca, run_certs.proxy, "proxy.test")
    with pytest.raises(VerificationError):
        verify_server(run_certs.ca, run_certs.server, "proxy.test")


def test_client_certificate_verifies_as_client_and_not_as_server(run_certs):
    verifier = PolicyBuilder().store(Store([run_certs.ca.certificate])).build_client_verifier()
    verified = verifier.verify(run_certs.client.certificate, [])
    assert verified.subjects is not None
    with pytest.raises(VerificationError):
        verify_server(run_certs.ca, run_certs.client, "proxy-client")


def test_certificate_from_another_ca_does_not_verify(run_certs):
    other = make_ca("other CA")
    stranger = make_cert(other, "server.test", ["server.test"])
    with pytest.raises(VerificationError):
        verify_server(run_certs.ca, stranger, "server.test")


def test_subject_sans_and_key_usage(run_certs):
    cert = run_certs.server.certificate
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "server.test"
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == ["server.test"]
    assert san.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("198.18.2.2")]
    eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(eku) == [ExtendedKeyUsageOID.SERVER_AUTH]
    client_eku = run_certs.client.certificate.extensions.get_extension_for_class(
        x509.ExtendedKeyUsage
    ).value
    assert list(client_eku) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    assert run_certs.ca.certificate.extensions.get_extension_for_class(
        x509.BasicConstraints
    ).value.ca
    assert "BEGIN PRIVATE KEY" in run_certs.server.key_pem


def test_bad_names_are_refused():
    ca = make_ca("ca")
    with pytest.raises(ValueError, match=r"SAN: expected a DNS name or an IP address, got 'a b'"):
        make_cert(ca, "x", ["a b"])
    with pytest.raises(ValueError, match="common_name"):
        make_ca("")


def test_written_files_have_key_mode_0600_and_openssl_verifies_them(tmp_path, run_certs):
    ca = write_cert_key(run_certs.ca, tmp_path / "certs", "ca")
    server = write_cert_key(run_certs.server, tmp_path / "certs", "server")
    assert stat.S_IMODE((tmp_path / "certs" / "server.key").stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "certs" / "server.crt").stat().st_mode) == 0o644
    assert (tmp_path / "certs" / "server.crt").read_text() == run_certs.server.cert_pem
    result = subprocess.run(
        ["openssl", "verify", "-purpose", "sslserver", "-CAfile", ca.cert_path,
         server.cert_path], capture_output=True, text=True, check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().endswith(": OK")
    check = subprocess.run(
        ["openssl", "pkey", "-in", server.key_path, "-noout", "-text"],
        capture_output=True, text=True, check=False,
    )
    assert check.returncode == 0 and "prime256v1" in check.stdout


def test_rewriting_a_key_keeps_mode_0600(tmp_path, run_certs):
    path = tmp_path / "proxy.key"
    path.write_text("old")
    path.chmod(0o644)
    write_cert_key(run_certs.proxy, tmp_path, "proxy")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.read_text() == run_certs.proxy.key_pem


class FakeNode:
    def __init__(self) -> None:
        self.files: dict[str, tuple[str, int]] = {}

    def put(self, text: str, path: str, mode: int = 0o644) -> None:
        self.files[path] = (text, mode)


def test_put_cert_key_uploads_key_with_mode_0600(run_certs):
    node = FakeNode()
    files = put_cert_key(node, run_certs.client, "/tmp/run-1/certs/", "client")
    assert files.cert_path == "/tmp/run-1/certs/client.crt"
    assert node.files == {
        "/tmp/run-1/certs/client.crt": (run_certs.client.cert_pem, 0o644),
        "/tmp/run-1/certs/client.key": (run_certs.client.key_pem, 0o600),
    }
