"""Kubeconfig files for the test tooling: one shape for the admin kubeconfig the control
plane writes, the ServiceAccount kubeconfigs of the stack's components and the fault
proxy's copies, and the one reading of "which cluster does this kubeconfig talk to".

Files are written with mode 0600: they hold keys and tokens.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

Kubeconfig = dict[str, Any]


def single_context(
    *,
    cluster_name: str,
    cluster: Mapping[str, Any],
    user_name: str,
    user: Mapping[str, Any],
    context_name: str,
) -> Kubeconfig:
    """A kubeconfig with one cluster, one user and the one context joining them."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": cluster_name, "cluster": dict(cluster)}],
        "users": [{"name": user_name, "user": dict(user)}],
        "contexts": [
            {"name": context_name, "context": {"cluster": cluster_name, "user": user_name}}
        ],
        "current-context": context_name,
    }


def write(path: Path, config: Kubeconfig) -> Path:
    """Write ``config`` as YAML, readable by its owner only; returns ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    path.chmod(0o600)
    return path


def current_cluster(config: Kubeconfig) -> dict[str, Any]:
    """The ``cluster`` entry the current context names (the first cluster without one).
    Returned by reference: changing it changes ``config``."""
    contexts = {c["name"]: c["context"] for c in config.get("contexts") or []}
    current = config.get("current-context")
    cluster_name = (
        contexts[current]["cluster"] if current in contexts else config["clusters"][0]["name"]
    )
    for c in config.get("clusters") or []:
        if c["name"] == cluster_name:
            cluster: dict[str, Any] = c["cluster"]
            return cluster
    raise ValueError(f"kubeconfig has no cluster named {cluster_name!r}")


def b64_file(path: Path) -> str:
    """A file's bytes as kubeconfig ``*-data`` fields embed them."""
    return base64.b64encode(path.read_bytes()).decode()
