"""The test certificates: they live in splitsched.launch.certs (`splitsched up`, the
stack and the demo make theirs at start); the tests import them from here, with
`rotate_stack`, which re-issues a stack layout's certificates from a new CA the way an
operator rotates them under running services."""

from __future__ import annotations

import os
import socket
import ssl
from collections.abc import Iterator, Sequence
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from splitsched.launch.certs import STACK_COMPONENTS, Issued, issue, make_ca, write_stack_certs

__all__ = [
    "STACK_COMPONENTS",
    "Issued",
    "issue",
    "load",
    "make_ca",
    "presented_serial",
    "rotate_stack",
    "write_bundle",
    "write_stack_certs",
]

#: The steps of `rotate_stack`, in order.
ROTATION_STEPS = ("trust-both", "new-leaves", "drop-old-ca")


def write_bundle(path: Path, cas: Sequence[Issued]) -> None:
    """A CA bundle of `cas` at `path`, replaced atomically (readers see old or new)."""
    pem = b"".join(ca.cert.public_bytes(serialization.Encoding.PEM) for ca in cas)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(pem)
    os.replace(tmp, path)


def rotate_stack(
    directory: Path, old_ca: Issued, *, components: Sequence[str] = STACK_COMPONENTS
) -> Iterator[tuple[str, dict[str, Issued]]]:
    """Re-issue every certificate of the `write_stack_certs` layout in `directory` from a
    new CA, as an operator rotates them: `ca.crt` trusts the old and the new CA, then each
    component gets a new key and certificate (written in place, key first: a reader may
    see a mismatched pair for a moment, as with a copy file by file), then `ca.crt`
    trusts only the new CA. Yields after each of ROTATION_STEPS (a test checks the
    services there) with the new certificates so far by name, the new CA under "ca"."""
    new_ca = make_ca(directory / "next-ca", common_name="splitsched rotated CA")
    issued = {"ca": new_ca}
    write_bundle(directory / "ca.crt", [old_ca, new_ca])
    yield ROTATION_STEPS[0], issued
    for c in components:
        issued[c] = issue(new_ca, directory, name=c, common_name=f"splitsched-{c}")
    yield ROTATION_STEPS[1], issued
    write_bundle(directory / "ca.crt", [new_ca])
    yield ROTATION_STEPS[2], issued


def load(directory: Path, name: str) -> Issued:
    """The key and certificate `<name>.key`/`.crt` in `directory` (say the stack's CA)."""
    key_path, cert_path = directory / f"{name}.key", directory / f"{name}.crt"
    key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
    assert isinstance(key, ec.EllipticCurvePrivateKey)
    cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
    return Issued(key, cert, key_path, cert_path)


def presented_serial(port: int, directory: Path, *, who: str = "ops") -> int:
    """The serial of the certificate the TLS server on loopback `port` presents, read with
    `ssl` as `who` (a certificate in the stack layout in `directory`), trusting its CA."""
    ctx = ssl.create_default_context(cafile=str(directory / "ca.crt"))
    ctx.load_cert_chain(str(directory / f"{who}.crt"), str(directory / f"{who}.key"))
    ctx.set_alpn_protocols(["h2"])
    with (
        socket.create_connection(("127.0.0.1", port), timeout=10) as sock,
        ctx.wrap_socket(sock, server_hostname="localhost") as tls,
    ):
        der = tls.getpeercert(binary_form=True)
    assert der is not None, "the server presented no certificate"
    return x509.load_der_x509_certificate(der).serial_number
