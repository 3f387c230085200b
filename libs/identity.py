"""Service identity: mutual TLS on each server's internal listener.

Every server has a public listener (tenants, API keys) and an internal one
that accepts only clients presenting a certificate signed by the eventflow
CA. The certificate's common name is the calling service ("executor"), and
``peer_service`` reads it from the verified TLS session, so a method like
the vault's ``Resolve`` can answer one service and nobody else.

``create_dev_pki`` makes a CA and one certificate per service (the dev stack
and tests use it; production mounts certificates from its own CA).
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

import grpc
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

SERVICES = ("registry", "governance", "vault", "executor", "orchestrator")
# The identity of the one-process dev stack's internal listener.
STACK = "stack"
VALIDITY = dt.timedelta(days=825)


@dataclass(frozen=True)
class ServiceCertificates:
    service: str
    ca_pem: bytes
    cert_pem: bytes
    key_pem: bytes

    @classmethod
    def load(cls, directory: Path, service: str) -> ServiceCertificates:
        return cls(
            service,
            (directory / "ca.pem").read_bytes(),
            (directory / f"{service}.pem").read_bytes(),
            (directory / f"{service}.key").read_bytes(),
        )

    def server_credentials(self) -> grpc.ServerCredentials:
        return grpc.ssl_server_credentials(
            [(self.key_pem, self.cert_pem)],
            root_certificates=self.ca_pem,
            require_client_auth=True,
        )

    def channel_credentials(self) -> grpc.ChannelCredentials:
        return grpc.ssl_channel_credentials(
            root_certificates=self.ca_pem,
            private_key=self.key_pem,
            certificate_chain=self.cert_pem,
        )


def peer_service(context: grpc.aio.ServicerContext) -> str | None:
    """The calling service, if the call arrived over verified mutual TLS."""
    auth = context.auth_context() or {}
    if auth.get("transport_security_type") != [b"ssl"]:
        return None
    names = auth.get("x509_common_name") or []
    return names[0].decode() if names else None


def create_dev_pki(directory: Path, services: tuple[str, ...] = SERVICES) -> Path:
    """A CA and a certificate per service under ``directory`` (kept if present)."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_cert_path, ca_key_path = directory / "ca.pem", directory / "ca.key"
    if not ca_cert_path.exists():
        key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "eventflow dev CA")])
        cert = (
            _builder(name, name, key.public_key())
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(_ca_usage(), critical=True)
            .sign(key, hashes.SHA256())
        )
        _write_key(ca_key_path, key)
        ca_cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    ca_key = serialization.load_pem_private_key(ca_key_path.read_bytes(), password=None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    ca_cert = x509.load_pem_x509_certificate(ca_cert_path.read_bytes())
    for service in services:
        if not (directory / f"{service}.pem").exists():
            _issue(directory, service, ca_cert, ca_key, (service,))
    # The one-process stack serves every service on one internal listener,
    # so its server certificate must name them all.
    if not (directory / f"{STACK}.pem").exists():
        _issue(directory, STACK, ca_cert, ca_key, services)
    return directory


def _issue(
    directory: Path,
    service: str,
    ca_cert: x509.Certificate,
    ca_key: ec.EllipticCurvePrivateKey,
    dns_names: tuple[str, ...],
) -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, service)])
    alt_names = x509.SubjectAlternativeName(
        [
            *(x509.DNSName(name) for name in dns_names),
            x509.DNSName("localhost"),
            x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
        ]
    )
    cert = (
        _builder(subject, ca_cert.subject, key.public_key())
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(alt_names, critical=False)
        .add_extension(
            x509.ExtendedKeyUsage(
                [x509.oid.ExtendedKeyUsageOID.SERVER_AUTH, x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH]
            ),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    _write_key(directory / f"{service}.key", key)
    (directory / f"{service}.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def _builder(
    subject: x509.Name, issuer: x509.Name, public_key: ec.EllipticCurvePublicKey
) -> x509.CertificateBuilder:
    now = dt.datetime.now(dt.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + VALIDITY)
    )


def _ca_usage() -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=True,
        crl_sign=True,
        encipher_only=False,
        decipher_only=False,
    )


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    path.touch(mode=0o600, exist_ok=True)
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
