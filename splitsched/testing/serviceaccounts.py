"""Least-privilege identities for the processes tests start: a ServiceAccount bound
cluster-wide to exactly the RBAC rules given, and a kubeconfig carrying its TokenRequest
token. The stack gives each component one (``stack.component_kubeconfigs``), as the Helm
chart does in a real cluster.

There is no kube-controller-manager on the local control plane, so no token Secrets:
the token comes from the TokenRequest API and expires (``expiration_seconds``).
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kubernetes import client

from splitsched.testing import kubeconfigs
from splitsched.testing.manifests import TEST_NAMESPACE_LABEL, Manifest

RBAC_API = "rbac.authorization.k8s.io"


def service_account_kubeconfig(
    admin_api: client.ApiClient,
    *,
    namespace: str,
    name: str,
    cluster_role_rules: Sequence[Mapping[str, Any]] | None = None,
    cluster_role_name: str | None = None,
    directory: Path | None = None,
    expiration_seconds: int = 3600,
) -> Path:
    """Create ServiceAccount ``namespace/name`` bound cluster-wide to a role; write a kubeconfig.

    Give either ``cluster_role_rules`` (a ClusterRole ``splitsched-test:<ns>:<name>`` with
    exactly those rules is created) or ``cluster_role_name`` (an existing ClusterRole). The
    token comes from the TokenRequest API. Returns the kubeconfig path (in ``directory``, a
    new temp dir by default).
    """
    if (cluster_role_rules is None) == (cluster_role_name is None):
        raise ValueError("give exactly one of cluster_role_rules or cluster_role_name")
    core = client.CoreV1Api(admin_api)
    rbac = client.RbacAuthorizationV1Api(admin_api)
    core.create_namespaced_service_account(
        namespace, {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}}
    )
    object_name = f"splitsched-test:{namespace}:{name}"
    role_name = cluster_role_name or object_name
    if cluster_role_rules is not None:
        rbac.create_cluster_role(cluster_role(role_name, cluster_role_rules, owner=namespace))
    rbac.create_cluster_role_binding(
        cluster_role_binding(object_name, role_name, namespace=namespace, account=name)
    )
    token_request = core.create_namespaced_service_account_token(
        name,
        namespace,
        {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": expiration_seconds},
        },
    )
    config = token_kubeconfig(
        server=str(admin_api.configuration.host),
        ca_file=admin_api.configuration.ssl_ca_cert,
        namespace=namespace,
        name=name,
        token=str(token_request.status.token),
    )
    out_dir = directory or Path(tempfile.mkdtemp(prefix="splitsched-sa-"))
    return kubeconfigs.write(out_dir / f"{namespace}-{name}.kubeconfig", config)


def cluster_role(name: str, rules: Sequence[Mapping[str, Any]], *, owner: str) -> Manifest:
    """A ClusterRole with exactly ``rules``, labelled for cleanup with the test namespace
    ``owner`` (``kube.delete_namespace`` removes it)."""
    return {
        "apiVersion": f"{RBAC_API}/v1",
        "kind": "ClusterRole",
        "metadata": {"name": name, "labels": {TEST_NAMESPACE_LABEL: owner}},
        "rules": [dict(r) for r in rules],
    }


def cluster_role_binding(name: str, role: str, *, namespace: str, account: str) -> Manifest:
    """Grants ClusterRole ``role`` to ServiceAccount ``namespace/account`` cluster-wide."""
    return {
        "apiVersion": f"{RBAC_API}/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": name, "labels": {TEST_NAMESPACE_LABEL: namespace}},
        "roleRef": {"apiGroup": RBAC_API, "kind": "ClusterRole", "name": role},
        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}],
    }


def token_kubeconfig(
    *, server: str, ca_file: str | None, namespace: str, name: str, token: str
) -> kubeconfigs.Kubeconfig:
    """A kubeconfig that authenticates as ServiceAccount ``namespace/name`` with ``token``.
    The CA is embedded: the admin client's CA file may be a temp file it deletes at exit."""
    cluster: dict[str, Any] = {"server": server}
    if ca_file:
        cluster["certificate-authority-data"] = kubeconfigs.b64_file(Path(ca_file))
    return kubeconfigs.single_context(
        cluster_name="cluster",
        cluster=cluster,
        user_name=f"system:serviceaccount:{namespace}:{name}",
        user={"token": token},
        context_name="sa",
    )
