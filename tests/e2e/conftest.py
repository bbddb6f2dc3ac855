"""The e2e tier: the three services as real processes against the real control plane.

`running_stack` (module-scoped) creates this module's kwok nodes and least-privilege
ServiceAccounts, starts a watcher, three binders and a scheduler, and stops them (and
deletes the nodes) afterwards. `kube_scheduler` (module-scoped) runs kube-scheduler v1.36
as a peer on the same control plane, for the pods whose schedulerName it yields: the
oracle a scenario is run against too. The services run mutual TLS with trusted clients, the
stack's default and what the chart installs: tests reach them with
`running_stack.channel()` and the CLI with `running_stack.cli_env()` (the `ops` identity).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client

from bench.sidebyside.contenders import KUBE_SCHEDULER_NAME, KubeScheduler
from splitsched.testing import kube, stack
from tests.support.fixtures import ControlPlaneHandle

ZONES = ("zone-a", "zone-b")


@pytest.fixture(scope="module")
def e2e_nodes(kube_api: client.ApiClient) -> Iterator[list[str]]:
    """20 kwok nodes: 8 small and 8 large over two zones, 2 GPU nodes tainted, 2 with
    disktype=ssd among the small ones."""
    prefix = f"e2e-{uuid.uuid4().hex[:5]}"
    names: list[str] = []
    for zone in ZONES:
        names += kube.create_kwok_nodes(
            kube_api, 3, name_prefix=f"{prefix}-small-{zone}", cpu="4", memory="8Gi",
            labels={"topology.kubernetes.io/zone": zone, "size": "small"},
        )  # fmt: skip
        names += kube.create_kwok_nodes(
            kube_api, 1, name_prefix=f"{prefix}-ssd-{zone}", cpu="4", memory="8Gi",
            labels={"topology.kubernetes.io/zone": zone, "size": "small", "disktype": "ssd"},
        )  # fmt: skip
        names += kube.create_kwok_nodes(
            kube_api, 4, name_prefix=f"{prefix}-large-{zone}", cpu="16", memory="64Gi",
            labels={"topology.kubernetes.io/zone": zone, "size": "large"},
        )  # fmt: skip
        names += kube.create_kwok_nodes(
            kube_api, 1, name_prefix=f"{prefix}-gpu-{zone}", cpu="16", memory="64Gi",
            labels={"topology.kubernetes.io/zone": zone, "size": "gpu"},
            taints=[{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}],
            extended={"nvidia.com/gpu": "4"},
        )  # fmt: skip
    yield names
    kube.delete_nodes(kube_api, names)


@pytest.fixture(scope="module")
def running_stack(
    kube_api: client.ApiClient, e2e_nodes: list[str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[stack.Stack]:
    workdir: Path = tmp_path_factory.mktemp("stack")
    sa_namespace = kube.create_namespace(kube_api, prefix="splitsched-system")
    configs = stack.component_kubeconfigs(kube_api, namespace=sa_namespace, directory=workdir)
    running = stack.Stack(
        workdir=workdir,
        watcher_kubeconfig=configs["watcher"],
        binder_kubeconfig=configs["binder"],
        binders=3,
        # A store of recent attempts with tracing off: `splitsched trace` (test_cli.py).
        scheduler_args=["--bind-timeout", "20", "--trace-store-pods", "1000"],
    )
    running.start(timeout=90)
    try:
        yield running
    finally:
        running.stop()
        for svc_log in workdir.glob("*.log"):
            text = svc_log.read_text(errors="replace")
            if "Traceback" in text:
                print(f"--- {svc_log.name} (has a traceback) ---\n{text[-4000:]}")
        kube.delete_namespace(kube_api, sa_namespace)


@pytest.fixture(scope="module")
def kube_scheduler(
    control_plane: ControlPlaneHandle, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """kube-scheduler v1.36 with one default profile for `KUBE_SCHEDULER_NAME` pods."""
    peer = KubeScheduler(
        "kube-scheduler",
        kubeconfig=control_plane.kubeconfig_path,
        workdir=tmp_path_factory.mktemp("kube-scheduler"),
        qps=None,
        burst=None,
    )
    peer.start(timeout=120)
    try:
        yield KUBE_SCHEDULER_NAME
    finally:
        peer.stop()
