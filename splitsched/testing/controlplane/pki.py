"""The control plane's certificates and keys, made with the ``openssl`` CLI: a CA, the
kube-apiserver's serving certificate, the admin client certificate (``system:masters``)
and the service-account signing key pair; and the admin kubeconfig and TLS context built
from them. Made once per state dir (``.complete`` marks a finished set).
"""

from __future__ import annotations

import shutil
import ssl
import subprocess
from pathlib import Path

from splitsched.testing import kubeconfigs
from splitsched.testing.controlplane.state import ControlPlaneError

#: Names the API server's serving certificate is valid for.
APISERVER_SANS = (
    "DNS:localhost",
    "DNS:kubernetes",
    "DNS:kubernetes.default",
    "DNS:kubernetes.default.svc",
    "DNS:kubernetes.default.svc.cluster.local",
    "IP:127.0.0.1",
    "IP:10.96.0.1",
)


def make_pki(pki: Path, *, extra_ips: tuple[str, ...] = ()) -> None:
    """CA, apiserver serving cert (also valid for ``extra_ips``), admin client cert, the
    API server's client cert for kubelets (``kubectl logs``/``exec``), service-account key
    pair."""
    if (pki / ".complete").is_file():
        return
    shutil.rmtree(pki, ignore_errors=True)
    pki.mkdir(parents=True, mode=0o700)
    _openssl(
        "req", "-x509", "-new", "-nodes", "-newkey", "rsa:2048", "-sha256",
        "-keyout", "ca.key", "-out", "ca.crt", "-days", "3650",
        "-subj", "/CN=splitsched-local-ca",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign,digitalSignature",
        cwd=pki,
    )  # fmt: skip
    sans = (*APISERVER_SANS, *(f"IP:{ip}" for ip in extra_ips))
    leaf(pki, "apiserver", "/CN=kube-apiserver", "serverAuth", ",".join(sans))
    leaf(pki, "admin", "/O=system:masters/CN=splitsched-admin", "clientAuth", None)
    leaf(pki, "kubelet-client", "/O=system:masters/CN=kube-apiserver-kubelet-client",
         "clientAuth", None)  # fmt: skip
    _openssl("genrsa", "-out", "sa.key", "2048", cwd=pki)
    _openssl("rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=pki)
    for key in pki.glob("*.key"):
        key.chmod(0o600)
    (pki / ".complete").write_text("")


def leaf(pki: Path, name: str, subject: str, usage: str, sans: str | None) -> None:
    """``<name>.crt``/``.key`` signed by the CA, for ``usage`` (serverAuth, clientAuth)."""
    ext = [
        "basicConstraints=critical,CA:FALSE",
        "keyUsage=critical,digitalSignature,keyEncipherment",
        f"extendedKeyUsage={usage}",
    ]
    if sans:
        ext.append(f"subjectAltName={sans}")
    (pki / f"{name}.ext").write_text("\n".join(ext) + "\n")
    _openssl(
        "req", "-new", "-nodes", "-newkey", "rsa:2048", "-sha256",
        "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", subject,
        cwd=pki,
    )  # fmt: skip
    _openssl(
        "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
        "-CAcreateserial", "-out", f"{name}.crt", "-days", "825", "-sha256",
        "-extfile", f"{name}.ext",
        cwd=pki,
    )  # fmt: skip


def _openssl(*args: str, cwd: Path) -> None:
    result = subprocess.run(
        ["openssl", *args], cwd=cwd, capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        raise ControlPlaneError(f"openssl {' '.join(args)} failed: {result.stderr.strip()}")


def admin_kubeconfig(pki: Path, server_url: str) -> kubeconfigs.Kubeconfig:
    """Admin kubeconfig with the CA and client cert embedded (portable to any client)."""
    return client_kubeconfig(pki, server_url, "admin")


def client_kubeconfig(pki: Path, server_url: str, name: str) -> kubeconfigs.Kubeconfig:
    """A kubeconfig presenting ``<name>.crt``/``.key`` (signed by ``leaf``)."""
    return kubeconfigs.single_context(
        cluster_name="splitsched-local",
        cluster={
            "server": server_url,
            "certificate-authority-data": kubeconfigs.b64_file(pki / "ca.crt"),
        },
        user_name=f"splitsched-{name}",
        user={
            "client-certificate-data": kubeconfigs.b64_file(pki / f"{name}.crt"),
            "client-key-data": kubeconfigs.b64_file(pki / f"{name}.key"),
        },
        context_name="splitsched-local",
    )


def admin_ssl_context(pki: Path) -> ssl.SSLContext:
    """Trusts the local CA and presents the admin client certificate."""
    ctx = ssl.create_default_context(cafile=str(pki / "ca.crt"))
    ctx.load_cert_chain(str(pki / "admin.crt"), str(pki / "admin.key"))
    return ctx
