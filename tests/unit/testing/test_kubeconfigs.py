"""Kubeconfigs the test tooling writes and reads: one shape for the admin, ServiceAccount
and proxied kubeconfigs, files only their owner reads, and which server (and CA) a
kubeconfig names."""

from __future__ import annotations

import base64
import ssl
import stat
from pathlib import Path

import pytest
import yaml

from splitsched.testing import kubeconfigs, serviceaccounts
from splitsched.testing.faultproxy import proxied_kubeconfig, upstream_of


def _config(cluster: dict[str, object]) -> kubeconfigs.Kubeconfig:
    return kubeconfigs.single_context(
        cluster_name="c", cluster=cluster, user_name="u", user={"token": "t"}, context_name="x"
    )


def test_single_context_joins_one_cluster_and_one_user() -> None:
    config = _config({"server": "https://h:1"})
    assert config["current-context"] == "x"
    assert config["contexts"] == [{"name": "x", "context": {"cluster": "c", "user": "u"}}]
    assert kubeconfigs.current_cluster(config) == {"server": "https://h:1"}


def test_current_cluster_follows_the_current_context() -> None:
    config = {
        "clusters": [
            {"name": "a", "cluster": {"server": "https://a"}},
            {"name": "b", "cluster": {"server": "https://b"}},
        ],
        "contexts": [{"name": "ctx", "context": {"cluster": "b", "user": "u"}}],
        "current-context": "ctx",
    }
    assert kubeconfigs.current_cluster(config)["server"] == "https://b"
    del config["current-context"]
    assert kubeconfigs.current_cluster(config)["server"] == "https://a"
    config["current-context"] = "ctx"
    config["clusters"] = config["clusters"][:1]
    with pytest.raises(ValueError, match="no cluster named 'b'"):
        kubeconfigs.current_cluster(config)


def test_written_files_are_private(tmp_path: Path) -> None:
    path = kubeconfigs.write(tmp_path / "sub" / "k.kubeconfig", _config({"server": "s"}))
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert yaml.safe_load(path.read_text())["clusters"][0]["cluster"] == {"server": "s"}


def test_service_account_kubeconfig_embeds_the_ca_and_the_token(tmp_path: Path) -> None:
    ca = tmp_path / "ca.crt"
    ca.write_bytes(b"PEM")
    config = serviceaccounts.token_kubeconfig(
        server="https://h:6443", ca_file=str(ca), namespace="ns", name="sa", token="tok"
    )
    cluster = kubeconfigs.current_cluster(config)
    assert base64.b64decode(cluster["certificate-authority-data"]) == b"PEM"
    assert config["users"] == [{"name": "system:serviceaccount:ns:sa", "user": {"token": "tok"}}]
    plain = serviceaccounts.token_kubeconfig(
        server="http://h", ca_file=None, namespace="ns", name="sa", token="tok"
    )
    assert kubeconfigs.current_cluster(plain) == {"server": "http://h"}


def test_role_and_binding_are_labelled_for_cleanup_with_their_namespace() -> None:
    rules = [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]
    role = serviceaccounts.cluster_role("r", rules, owner="ns")
    binding = serviceaccounts.cluster_role_binding("b", "r", namespace="ns", account="sa")
    for obj in (role, binding):
        assert obj["metadata"]["labels"] == {"splitsched.io/test-namespace": "ns"}
    assert role["rules"] == rules
    assert binding["roleRef"]["name"] == "r"
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "sa", "namespace": "ns"}]


def test_upstream_of_reads_how_to_verify_the_server(tmp_path: Path) -> None:
    def upstream(cluster: dict[str, object]) -> object:
        path = kubeconfigs.write(tmp_path / "k", _config(cluster))
        server, verify = upstream_of(path)
        assert server == cluster["server"]
        return verify

    assert upstream({"server": "http://h"}) is None
    assert upstream({"server": "https://h"}) is None  # the system's roots
    assert upstream({"server": "https://h", "insecure-skip-tls-verify": True}) is False
    with pytest.raises((ssl.SSLError, FileNotFoundError)):
        upstream({"server": "https://h", "certificate-authority": str(tmp_path / "none")})


def test_proxied_copy_drops_the_ca_and_the_server_name(tmp_path: Path) -> None:
    source = kubeconfigs.write(
        tmp_path / "sa.kubeconfig",
        _config({"server": "https://h", "tls-server-name": "n", "certificate-authority": "x"}),
    )
    out = proxied_kubeconfig(source, proxy_url="http://127.0.0.1:1")
    assert out.name == "sa.kubeconfig" and out != source
    config = yaml.safe_load(out.read_text())
    assert kubeconfigs.current_cluster(config) == {"server": "http://127.0.0.1:1"}
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
