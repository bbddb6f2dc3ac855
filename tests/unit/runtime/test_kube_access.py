"""Kubernetes access read from the in-cluster config exactly as a pod sees it.

The kubernetes client stores the service account token as ``"bearer <token>"``
(lowercase); the API server refused the watcher's ``Bearer bearer <token>`` with 401, so
the chart could not work in any real cluster. The one loader (`kubeclient.load_endpoint`,
used by the watcher, the binder and the Lease) is fed the files and variables the kubelet
gives a pod, and must send ``Bearer <token>``, in the headers the watcher's list/watch
sends and through the header hook the runtime client calls.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from kubernetes.config import incluster_config

from splitsched.runtime import kubeclient
from tests.support import certs

TOKEN = "eyJhbGciOiJSUzI1NiJ9.payload.signature"


@pytest.fixture
def in_cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The service account files and the Service variables, where the client reads them."""
    ca = certs.make_ca(tmp_path)
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    monkeypatch.setattr(incluster_config, "SERVICE_TOKEN_FILENAME", str(token_file))
    monkeypatch.setattr(incluster_config, "SERVICE_CERT_FILENAME", str(ca.cert_path))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    return token_file


def test_watcher_sends_one_bearer_scheme_in_cluster(in_cluster: Path) -> None:
    endpoint = kubeclient.load_endpoint(None)
    assert endpoint.host == "https://10.96.0.1:443"
    assert endpoint.headers()["Authorization"] == f"Bearer {TOKEN}"


def test_runtime_client_sends_one_bearer_scheme_in_cluster(in_cluster: Path) -> None:
    endpoint = kubeclient.load_endpoint(None)
    assert endpoint.auth_header is not None
    assert endpoint.auth_header() == f"Bearer {TOKEN}"


@pytest.mark.parametrize(
    ("stored", "header"),
    [
        ("bearer abc", "Bearer abc"),
        ("Bearer abc", "Bearer abc"),
        ("BEARER  abc ", "Bearer abc"),
        ("abc", "Bearer abc"),
        ("Basic dXNlcjpwdw==", "Basic dXNlcjpwdw=="),
    ],
)
def test_bearer_authorization_normalises_the_scheme(stored: str, header: str) -> None:
    assert kubeclient.bearer_authorization(stored) == header
