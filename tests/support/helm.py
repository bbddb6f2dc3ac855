"""The Helm chart (helm/splitsched) as the integration tests read it: render it with the
cached helm binary for the control plane's Kubernetes version, pick objects out of the
manifests, and run helm against a control plane.

Shared by tests/integration/test_helm.py and tests/integration/test_helm_secure.py.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import yaml

from splitsched.testing import controlplane

CHART = controlplane.REPO_ROOT / "helm" / "splitsched"
COMPONENTS = ("watcher", "scheduler", "binder")
Manifest = dict[str, Any]


def kube_version() -> str:
    return controlplane.binary_versions()["kube-apiserver"]


def run_helm(helm: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(helm), *args], capture_output=True, text=True, timeout=120, check=False
    )


def helm_args(
    *, values: Sequence[Path] = (), sets: Sequence[str] = (), namespace: str = "splitsched"
) -> list[str]:
    args = ["--namespace", namespace]
    for path in values:
        args += ["--values", str(path)]
    for item in sets:
        args += ["--set", item]
    return args


def render(
    helm: Path,
    *,
    release: str = "splitsched",
    namespace: str = "splitsched",
    values: Sequence[Path] = (),
    sets: Sequence[str] = (),
) -> list[Manifest]:
    result = run_helm(
        helm,
        "template",
        release,
        str(CHART),
        "--kube-version",
        kube_version(),
        *helm_args(values=values, sets=sets, namespace=namespace),
    )
    assert result.returncode == 0, result.stderr
    return [d for d in yaml.safe_load_all(result.stdout) if d]


def find(docs: Sequence[Manifest], kind: str, component: str | None = None) -> list[Manifest]:
    return [
        d
        for d in docs
        if d["kind"] == kind
        and (
            component is None
            or d["metadata"]["labels"].get("app.kubernetes.io/component") == component
        )
    ]


def one(docs: Sequence[Manifest], kind: str, component: str) -> Manifest:
    [doc] = find(docs, kind, component)
    return doc


def container(docs: Sequence[Manifest], component: str) -> Manifest:
    spec = one(docs, "Deployment", component)["spec"]["template"]["spec"]
    [main] = spec["containers"]
    assert isinstance(main, dict)
    return main


def cluster_helm(helm: Path, kubeconfig: Path, home: Path) -> Callable[..., str]:
    """`helm ARGS` against the cluster of `kubeconfig`, with its cache and config under
    `home`; returns stdout and fails the test on a non-zero exit."""
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(home),
        "KUBECONFIG": str(kubeconfig),
        **{f"HELM_{d}_HOME": str(home / d.lower()) for d in ("CACHE", "CONFIG", "DATA")},
    }

    def run(*args: str) -> str:
        result = subprocess.run(
            [str(helm), *args], capture_output=True, text=True, env=env, timeout=120, check=False
        )
        assert result.returncode == 0, result.stderr
        return result.stdout

    return run
