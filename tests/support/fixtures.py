"""pytest fixtures for the tiers that need a real control plane (integration and e2e).

Registered once for the whole test session by ``tests/conftest.py``
(``pytest_plugins = ["tests.support.fixtures"]``), so tests/integration and tests/e2e share
one control plane per session:

* ``control_plane`` (session): a ``ControlPlaneHandle`` -- kubeconfig path, server URL and,
  for the local backend, the ``ControlPlane`` object. Backend by ``SPLITSCHED_BACKEND``:
  ``local`` (default: etcd + kube-apiserver + kwok processes in
  ``.local-cluster/pytest-<pid>``, built by ``scripts/get-binaries.sh`` if missing, stopped
  at session end) or ``k3s`` (a k3s container through testcontainers; fails clearly where
  no Docker engine is reachable).
* ``kube_api`` (session): an admin ``kubernetes.client.ApiClient``.
* ``core_api`` (session): ``kubernetes.client.CoreV1Api`` on ``kube_api``.
* ``namespace`` (function): a fresh namespace name, deleted (and finalized) after the test.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from splitsched.testing.controlplane import REPO_ROOT, ControlPlane, pid_alive
from splitsched.testing.kube import (
    api_client_from_kubeconfig,
    create_namespace,
    delete_namespace,
)

BACKENDS = ("local", "k3s")
K3S_IMAGE = os.environ.get("SPLITSCHED_K3S_IMAGE", "rancher/k3s:v1.36.3-k3s1")


@dataclass(frozen=True)
class ControlPlaneHandle:
    """What the ``control_plane`` fixture yields."""

    backend: str
    kubeconfig_path: Path
    server_url: str
    #: The local control plane (``None`` for k3s).
    local: ControlPlane | None = None


def _backend() -> str:
    backend = os.environ.get("SPLITSCHED_BACKEND", "local").strip() or "local"
    if backend not in BACKENDS:
        raise pytest.UsageError(
            f"SPLITSCHED_BACKEND={backend!r}; expected one of {', '.join(BACKENDS)}"
        )
    return backend


def _sweep_dead_sessions(root: Path) -> None:
    """Remove ``pytest-<pid>`` state dirs of sessions that were killed (their pid is gone)."""
    for old in root.glob("pytest-*"):
        pid = old.name.removeprefix("pytest-")
        if pid.isdigit() and not pid_alive(int(pid)):
            ControlPlane(old).down()  # their children died with them; this only tidies
            shutil.rmtree(old, ignore_errors=True)


def _local_control_plane() -> Iterator[ControlPlaneHandle]:
    root = REPO_ROOT / ".local-cluster"
    _sweep_dead_sessions(root)
    state_dir = root / f"pytest-{os.getpid()}"
    cp = ControlPlane(state_dir, die_with_parent=True)
    try:
        cp.up()
        yield ControlPlaneHandle(
            backend="local",
            kubeconfig_path=cp.kubeconfig_path,
            server_url=cp.server_url,
            local=cp,
        )
    finally:
        cp.down()
        if not os.environ.get("SPLITSCHED_KEEP_CLUSTER_DIR"):
            shutil.rmtree(state_dir, ignore_errors=True)


def _k3s_control_plane(tmp_dir: Path) -> Iterator[ControlPlaneHandle]:
    try:
        import docker  # type: ignore[import-untyped]

        docker.from_env().ping()
    except Exception as exc:
        pytest.fail(
            "SPLITSCHED_BACKEND=k3s needs a reachable Docker engine for testcontainers "
            f"(DOCKER_HOST={os.environ.get('DOCKER_HOST', 'unset')}): {exc}. "
            "Use SPLITSCHED_BACKEND=local (the default) on machines without Docker.",
            pytrace=False,
        )
    from testcontainers.k3s import K3SContainer

    container: Any = K3SContainer(image=K3S_IMAGE)
    with container as k3s:
        path = tmp_dir / "k3s.kubeconfig"
        path.write_text(k3s.config_yaml())
        api = api_client_from_kubeconfig(path)
        yield ControlPlaneHandle(
            backend="k3s", kubeconfig_path=path, server_url=str(api.configuration.host)
        )


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlaneHandle]:
    """A running control plane for the whole session (see module docstring)."""
    if _backend() == "k3s":
        yield from _k3s_control_plane(tmp_path_factory.mktemp("k3s"))
    else:
        yield from _local_control_plane()


@pytest.fixture(scope="session")
def kube_api(control_plane: ControlPlaneHandle) -> Iterator[client.ApiClient]:
    """An admin ApiClient on the session's control plane."""
    api = api_client_from_kubeconfig(control_plane.kubeconfig_path)
    try:
        yield api
    finally:
        api.close()


@pytest.fixture(scope="session")
def core_api(kube_api: client.ApiClient) -> client.CoreV1Api:
    """CoreV1Api on the admin client."""
    return client.CoreV1Api(kube_api)


@pytest.fixture
def namespace(kube_api: client.ApiClient, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace for one test; deleted (with its pods) afterwards."""
    prefix = request.node.name.lower().replace("_", "-")
    prefix = "".join(ch for ch in prefix if ch.isalnum() or ch == "-")[:40].strip("-")
    name = create_namespace(kube_api, prefix=prefix or "test")
    try:
        yield name
    finally:
        delete_namespace(kube_api, name)
