"""The one Kubernetes access loader (`kubeclient.load_endpoint`) reads a kubeconfig the way
kubectl does: plain http, a CA bundle, ``tls-server-name``, ``insecure-skip-tls-verify``,
a client certificate, a token; ``assert_hostname`` set by code turns the host-name check
off; and a configuration it cannot use fails at start naming the file and the field.

No network: the endpoint and its TLS context are checked as values.
"""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as kclient

from splitsched.runtime import kubeclient
from tests.support import certs


def write_kubeconfig(
    directory: Path, cluster: dict[str, Any], user: dict[str, Any] | None = None
) -> str:
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": cluster}],
        "users": [{"name": "u", "user": user or {}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
    path = directory / "kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, certs.Issued]:
    directory = tmp_path_factory.mktemp("pki")
    return certs.write_stack_certs(directory)


def test_plain_http_with_a_token_has_no_tls_and_sends_the_bearer_token(tmp_path: Path) -> None:
    path = write_kubeconfig(tmp_path, {"server": "http://127.0.0.1:8080/"}, {"token": "abc"})
    endpoint = kubeclient.load_endpoint(path)
    assert endpoint.host == "http://127.0.0.1:8080"
    assert endpoint.source == f"kubeconfig {path}"
    assert kubeclient.ssl_context(endpoint) is False
    assert endpoint.headers() == {"Accept": "application/json", "Authorization": "Bearer abc"}
    assert endpoint.url("/api/v1/nodes") == "http://127.0.0.1:8080/api/v1/nodes"


def test_a_ca_and_tls_server_name_verify_the_certificate_against_that_name(
    tmp_path: Path, pki: dict[str, certs.Issued]
) -> None:
    path = write_kubeconfig(
        tmp_path,
        {
            "server": "https://10.0.0.1:6443",
            "certificate-authority": str(pki["ca"].cert_path),
            "tls-server-name": "kubernetes.default.svc",
        },
    )
    endpoint = kubeclient.load_endpoint(path)
    assert endpoint.tls_server_name == "kubernetes.default.svc"
    assert endpoint.auth_header is None and "Authorization" not in endpoint.headers()
    ctx = kubeclient.ssl_context(endpoint)
    assert isinstance(ctx, ssl.SSLContext)
    assert ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname


def test_insecure_skip_tls_verify_turns_verification_off(tmp_path: Path) -> None:
    path = write_kubeconfig(
        tmp_path, {"server": "https://10.0.0.1:6443", "insecure-skip-tls-verify": True}
    )
    ctx = kubeclient.ssl_context(kubeclient.load_endpoint(path))
    assert isinstance(ctx, ssl.SSLContext)
    assert ctx.verify_mode == ssl.CERT_NONE and not ctx.check_hostname


def test_a_client_certificate_is_loaded(tmp_path: Path, pki: dict[str, certs.Issued]) -> None:
    user = {
        "client-certificate": str(pki["binder"].cert_path),
        "client-key": str(pki["binder"].key_path),
    }
    cluster = {"server": "https://10.0.0.1:6443", "certificate-authority": str(pki["ca"].cert_path)}
    endpoint = kubeclient.load_endpoint(write_kubeconfig(tmp_path, cluster, user))
    assert endpoint.cert_file and endpoint.key_file
    assert isinstance(kubeclient.ssl_context(endpoint), ssl.SSLContext)


def configuration(**fields: Any) -> Any:
    conf = kclient.Configuration()
    conf.host = "https://10.0.0.1:6443"
    for name, value in fields.items():
        setattr(conf, name, value)
    return conf


def test_assert_hostname_false_keeps_the_chain_checked_but_not_the_name() -> None:
    endpoint = kubeclient.endpoint_from_configuration(
        configuration(assert_hostname=False), source="test"
    )
    assert not endpoint.check_hostname
    ctx = kubeclient.ssl_context(endpoint)
    assert isinstance(ctx, ssl.SSLContext)
    assert ctx.verify_mode == ssl.CERT_REQUIRED and not ctx.check_hostname


def test_assert_hostname_as_a_name_is_the_name_checked() -> None:
    endpoint = kubeclient.endpoint_from_configuration(
        configuration(assert_hostname="api.example"), source="test"
    )
    assert endpoint.check_hostname and endpoint.tls_server_name == "api.example"


@pytest.mark.parametrize(
    ("cluster", "user", "expected"),
    [
        ({"server": "ftp://10.0.0.1"}, None, r"server 'ftp://10\.0\.0\.1': expected an http"),
        (
            {"server": "https://10.0.0.1", "certificate-authority": "{tmp}/nope.crt"},
            None,
            r"certificate-authority",
        ),
        (
            {"server": "https://10.0.0.1", "certificate-authority": "{tmp}/garbage.pem"},
            None,
            r"certificate-authority .*garbage\.pem",
        ),
        (
            {"server": "https://10.0.0.1"},
            {"client-certificate": "{ca}", "client-key": "{ca}"},
            r"client-certificate .* / client-key .*",
        ),
    ],
)
def test_an_unusable_kubeconfig_names_the_file_and_the_field(
    tmp_path: Path,
    pki: dict[str, certs.Issued],
    cluster: dict[str, str],
    user: dict[str, str] | None,
    expected: str,
) -> None:
    (tmp_path / "garbage.pem").write_text("not a certificate\n")

    def fill(values: dict[str, str]) -> dict[str, str]:
        ca = str(pki["ca"].cert_path)
        return {k: v.format(tmp=tmp_path, ca=ca) for k, v in values.items()}

    path = write_kubeconfig(tmp_path, fill(cluster), fill(user) if user else None)
    with pytest.raises(kubeclient.KubeConfigError, match=f"^kubeconfig {path}: {expected}"):
        kubeclient.load_endpoint(path)


def test_a_missing_kubeconfig_and_a_missing_in_cluster_config_are_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = str(tmp_path / "absent.yaml")
    with pytest.raises(kubeclient.KubeConfigError, match=f"^kubeconfig {missing}: cannot read"):
        kubeclient.load_endpoint(missing)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(kubeclient.KubeConfigError, match=r"^the in-cluster config: "):
        kubeclient.load_endpoint(None)


def test_a_context_other_than_the_current_one_is_read_and_named(tmp_path: Path) -> None:
    """``--context`` (kubectl's flag, `splitsched up --context`): that context's cluster
    and user, and an unknown one fails naming it."""
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "one", "cluster": {"server": "http://127.0.0.1:1"}},
            {"name": "two", "cluster": {"server": "http://127.0.0.2:2"}},
        ],
        "users": [{"name": "a", "user": {"token": "ta"}}, {"name": "b", "user": {"token": "tb"}}],
        "contexts": [
            {"name": "first", "context": {"cluster": "one", "user": "a"}},
            {"name": "second", "context": {"cluster": "two", "user": "b"}},
        ],
        "current-context": "first",
    }
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    assert kubeclient.load_endpoint(str(path)).host == "http://127.0.0.1:1"
    endpoint = kubeclient.load_endpoint(str(path), context="second")
    assert endpoint.host == "http://127.0.0.2:2"
    assert endpoint.headers()["Authorization"] == "Bearer tb"
    assert endpoint.source == f"kubeconfig {path} (context second)"
    with pytest.raises(kubeclient.KubeConfigError, match=r"\(context third\): .*third"):
        kubeclient.load_endpoint(str(path), context="third")
