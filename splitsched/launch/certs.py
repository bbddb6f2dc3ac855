"""Certificates made with `cryptography`: a CA and leaf certificates for 127.0.0.1 and
localhost, written as PEM files.

`write_stack_certs` writes the layout the local services read (`processes.tls_args`):
`ca.crt` and `<component>.crt/.key` whose common name is `splitsched-<component>`, plus
an `ops` client for the CLI. `splitsched up` and the test stack
(`splitsched.testing.stack.Stack`) call it at start; the TLS tests use `make_ca` and
`issue` through tests/support/certs.py.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

STACK_COMPONENTS = ("watcher", "scheduler", "binder", "ops")


@dataclass(frozen=True)
class Issued:
    """A key and its certificate, and where they were written."""

    key: ec.EllipticCurvePrivateKey
    cert: x509.Certificate
    key_path: Path
    cert_path: Path


def _write(
    directory: Path, name: str, key: ec.EllipticCurvePrivateKey, cert: x509.Certificate
) -> Issued:
    directory.mkdir(parents=True, exist_ok=True)
    key_path, cert_path = directory / f"{name}.key", directory / f"{name}.crt"
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    key_path.chmod(0o600)
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return Issued(key, cert, key_path, cert_path)


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def make_ca(
    directory: Path,
    *,
    name: str = "ca",
    common_name: str = "splitsched test CA",
    days: int = 1,
) -> Issued:
    """A self-signed CA valid for `days`, written as `<name>.crt` / `<name>.key`."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(_name(common_name))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(key, hashes.SHA256())
    )
    return _write(directory, name, key, cert)


def issue(
    ca: Issued,
    directory: Path,
    *,
    name: str,
    common_name: str,
    dns_names: tuple[str, ...] = ("localhost",),
    ips: tuple[str, ...] = ("127.0.0.1",),
    uris: tuple[str, ...] = (),
    days: int = 1,
) -> Issued:
    """A leaf certificate signed by `ca`, valid for `days`, good for both server and
    client auth, with the given SANs (by default localhost and 127.0.0.1)."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    sans: list[x509.GeneralName] = [x509.DNSName(d) for d in dns_names]
    sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips]
    sans += [x509.UniformResourceIdentifier(u) for u in uris]
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(ca.cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
            ),
            critical=False,
        )
    )
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return _write(directory, name, key, builder.sign(ca.key, hashes.SHA256()))


def write_stack_certs(
    directory: Path, *, common_name: str = "splitsched test CA", days: int = 1
) -> dict[str, Issued]:
    """`ca.crt` and, for each of STACK_COMPONENTS, `<c>.crt`/`<c>.key` with common name
    `splitsched-<c>` (the layout `processes.tls_args` expects), all valid for `days`;
    returns them by name, the CA under "ca"."""
    ca = make_ca(directory, common_name=common_name, days=days)
    issued = {"ca": ca}
    for component in STACK_COMPONENTS:
        issued[component] = issue(
            ca, directory, name=component, common_name=f"splitsched-{component}", days=days
        )
    return issued
