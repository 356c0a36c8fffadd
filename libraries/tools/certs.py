"""Per-run certificates for TLS and mutual TLS, made non-interactively with ``cryptography``.

Keys are EC P-256 (fast to make; nginx 1.22 with OpenSSL 3 accepts them for TLSv1.3).
Certificates carry subjectAltName entries (DNS names and IP addresses) and the extended key
usage their role needs (serverAuth, or clientAuth for ``client=True``).
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

DEFAULT_DAYS = 30


class _Putter(Protocol):
    def put(self, text: str, path: str, mode: int = 0o644) -> None: ...


@dataclass(frozen=True)
class CertKey:
    """A certificate and its private key: common_name, cert_pem, key_pem (PEM text)."""

    common_name: str
    cert_pem: str
    key_pem: str

    @property
    def certificate(self) -> x509.Certificate:
        return x509.load_pem_x509_certificate(self.cert_pem.encode())


@dataclass(frozen=True)
class CertFiles:
    """Where a CertKey was written: cert_path, key_path."""

    cert_path: str
    key_path: str


@dataclass(frozen=True)
class RunCertificates:
    """Everything one run needs: ca, server (HTTPS server), proxy (reverse proxy's listener),
    client (the proxy's client certificate towards the server, for upstream mutual TLS)."""

    ca: CertKey
    server: CertKey
    proxy: CertKey
    client: CertKey


def _name(common_name: str) -> x509.Name:
    if not common_name:
        raise ValueError("certificate common_name: expected a non-empty name, got ''")
    return x509.Name([
        x509.NameAttribute(NameOID.ORGANIZATION_NAME, "hoststack-perf"),
        x509.NameAttribute(NameOID.COMMON_NAME, common_name),
    ])


def _san(names: list[str]) -> list[x509.GeneralName]:
    result: list[x509.GeneralName] = []
    for name in names:
        try:
            result.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            if not name or any(c.isspace() for c in name):
                raise ValueError(
                    f"certificate SAN: expected a DNS name or an IP address, got {name!r}"
                ) from None
            result.append(x509.DNSName(name))
    return result


def _pem_key(key: ec.EllipticCurvePrivateKey) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()


def _validity(days: int) -> tuple[datetime.datetime, datetime.datetime]:
    now = datetime.datetime.now(datetime.UTC)
    return now - datetime.timedelta(minutes=5), now + datetime.timedelta(days=days)


def make_ca(common_name: str, days: int = DEFAULT_DAYS) -> CertKey:
    """A self-signed CA certificate and key."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = _name(common_name)
    not_before, not_after = _validity(days)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, content_commitment=False, key_encipherment=False,
                data_encipherment=False, key_agreement=False, key_cert_sign=True,
                crl_sign=True, encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), False)
        .sign(key, hashes.SHA256())
    )
    return CertKey(common_name, cert.public_bytes(serialization.Encoding.PEM).decode(),
                   _pem_key(key))


def make_cert(
    ca: CertKey, common_name: str, sans: list[str], client: bool = False,
    days: int = DEFAULT_DAYS,
) -> CertKey:
    """A leaf certificate signed by ``ca`` for ``sans`` (DNS names and IP addresses).

    ``client=True`` makes a client certificate (extended key usage clientAuth), otherwise a
    server certificate (serverAuth).
    """
    ca_cert = ca.certificate
    ca_key = serialization.load_pem_private_key(ca.key_pem.encode(), password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise ValueError(f"CA {ca.common_name!r}: expected an EC private key")
    key = ec.generate_private_key(ec.SECP256R1())
    not_before, not_after = _validity(days)
    usage = ExtendedKeyUsageOID.CLIENT_AUTH if client else ExtendedKeyUsageOID.SERVER_AUTH
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_cert.public_key()), False
        )
    )
    names = _san(list(sans))
    if names:
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    return CertKey(common_name, cert.public_bytes(serialization.Encoding.PEM).decode(),
                   _pem_key(key))


def make_run_certificates(
    server_names: list[str], proxy_names: list[str], client_name: str = "proxy-client",
    ca_name: str = "hoststack-perf run CA",
) -> RunCertificates:
    """A fresh CA plus server, proxy and client certificates, all signed by it.

    ``server_names``/``proxy_names`` are the SANs (first one is also the common name).
    """
    if not server_names or not proxy_names:
        raise ValueError("make_run_certificates: expected at least one server and proxy name")
    ca = make_ca(ca_name)
    return RunCertificates(
        ca=ca,
        server=make_cert(ca, server_names[0], server_names),
        proxy=make_cert(ca, proxy_names[0], proxy_names),
        client=make_cert(ca, client_name, [client_name], client=True),
    )


def write_cert_key(cert_key: CertKey, directory: str | Path, name: str) -> CertFiles:
    """Write ``<directory>/<name>.crt`` (0644) and ``<name>.key`` (0600) locally."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    cert_path, key_path = directory / f"{name}.crt", directory / f"{name}.key"
    cert_path.write_text(cert_key.cert_pem)
    cert_path.chmod(0o644)
    fd = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(cert_key.key_pem)
    key_path.chmod(0o600)
    return CertFiles(str(cert_path), str(key_path))


def put_cert_key(node: _Putter, cert_key: CertKey, directory: str, name: str) -> CertFiles:
    """Upload ``<directory>/<name>.crt`` (0644) and ``<name>.key`` (0600) with ``node.put``.

    ``directory`` must exist on the node.
    """
    directory = directory.rstrip("/")
    files = CertFiles(f"{directory}/{name}.crt", f"{directory}/{name}.key")
    node.put(cert_key.cert_pem, files.cert_path, mode=0o644)
    node.put(cert_key.key_pem, files.key_path, mode=0o600)
    return files
