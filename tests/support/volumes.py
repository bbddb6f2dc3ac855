"""Storage on the real control plane for the binder's volume-step tests (integration and
faults): zonal kwok nodes, a ``kubernetes.io/no-provisioner`` WaitForFirstConsumer
StorageClass, local PVs pinned to one node each, claims and the pods that mount them, and
BindRequests carrying ``volume_bindings`` (the tests play the scheduler). kube-controller-
manager's PV controller binds a claim once its PV's claimRef names it.

``StorageSet`` makes them and deletes the cluster-scoped ones (nodes, PVs, the class)
afterwards; the namespaced ones go with the test's namespace.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from google.protobuf.timestamp_pb2 import Timestamp
from kubernetes import client
from kubernetes.client.rest import ApiException

from splitsched.testing import kube
from splitsched.v1 import binder_pb2, types_pb2

NO_PROVISIONER = "kubernetes.io/no-provisioner"
ZONE = "topology.kubernetes.io/zone"
ZONES = ("zone-a", "zone-b", "zone-c")


def storage_class(name: str, *, provisioner: str = NO_PROVISIONER) -> dict[str, Any]:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": provisioner,
        "volumeBindingMode": "WaitForFirstConsumer",
    }


def local_pv(name: str, *, node: str, storage_class_name: str) -> dict[str, Any]:
    """A 1Gi local PV on ``node`` (its node affinity names the node's hostname)."""
    term = {"matchExpressions": [
        {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]},
    ]}  # fmt: skip
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": storage_class_name,
            "local": {"path": f"/mnt/disks/{name}"},
            "nodeAffinity": {"required": {"nodeSelectorTerms": [term]}},
        },
    }


def claim(name: str, *, storage_class_name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": storage_class_name,
            "resources": {"requests": {"storage": "1Gi"}},
        },
    }


def pod_mounting(name: str, claim_name: str) -> dict[str, Any]:
    """A pod for splitsched (nobody else schedules it) mounting ``claim_name``."""
    pod = kube.make_pod(name, scheduler_name="splitsched")
    pod["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim_name}}]
    return pod


@dataclass
class StorageSet:
    """Nodes, PVs (``pvs[node]``: the PVs on it), a class, and the test's namespace."""

    api: client.ApiClient
    namespace: str
    prefix: str
    nodes: list[str] = field(default_factory=list)
    pvs: dict[str, list[str]] = field(default_factory=dict)
    classes: list[str] = field(default_factory=list)

    @property
    def core(self) -> client.CoreV1Api:
        return client.CoreV1Api(self.api)

    def add_nodes(self, per_zone: int, zones: Sequence[str] = ZONES) -> list[str]:
        for zone in zones:
            self.nodes += kube.create_kwok_nodes(
                self.api, per_zone, name_prefix=f"{self.prefix}-{zone}", labels={ZONE: zone},
                cpu="8", memory="16Gi",
            )  # fmt: skip
        return self.nodes

    def add_class(self, *, provisioner: str = NO_PROVISIONER) -> str:
        name = f"{self.prefix}-{len(self.classes)}"
        client.StorageV1Api(self.api).create_storage_class(
            storage_class(name, provisioner=provisioner)
        )
        self.classes.append(name)
        return name

    def add_pvs(self, per_node: int, *, storage_class_name: str) -> dict[str, list[str]]:
        for node in self.nodes:
            for i in range(per_node):
                name = f"{node}-pv-{i}"
                self.core.create_persistent_volume(
                    local_pv(name, node=node, storage_class_name=storage_class_name)
                )
                self.pvs.setdefault(node, []).append(name)
        return self.pvs

    def add_claimed_pod(self, name: str, *, storage_class_name: str) -> tuple[Any, Any]:
        """Claim ``data-<name>`` and pod ``name`` mounting it: (pod, claim) as created."""
        created = self.core.create_namespaced_persistent_volume_claim(
            self.namespace, claim(f"data-{name}", storage_class_name=storage_class_name)
        )
        pod = self.core.create_namespaced_pod(self.namespace, pod_mounting(name, f"data-{name}"))
        return pod, created

    def pv(self, name: str) -> Any:
        return self.core.read_persistent_volume(name)

    def claim(self, name: str) -> Any:
        return self.core.read_namespaced_persistent_volume_claim(name, self.namespace)

    def delete(self) -> None:
        kube.delete_nodes(self.api, self.nodes)
        for names in self.pvs.values():
            for name in names:
                with contextlib.suppress(ApiException):
                    self.core.delete_persistent_volume(name, grace_period_seconds=0)
        for name in self.classes:
            with contextlib.suppress(ApiException):
                client.StorageV1Api(self.api).delete_storage_class(name)


@contextlib.contextmanager
def storage_set(api: client.ApiClient, namespace: str) -> Iterator[StorageSet]:
    made = StorageSet(api, namespace, prefix=f"vol-{uuid.uuid4().hex[:5]}")
    try:
        yield made
    finally:
        made.delete()


def bind_request(
    decision_id: str, pod: Any, *, node: str, claim: str, pv: str, deadline: float = 30.0
) -> binder_pb2.BindRequest:
    """What the scheduler sends for ``pod`` (as created) on ``node`` with one claim to bind
    to ``pv`` (empty: to provision), due in ``deadline`` seconds."""
    due = Timestamp()
    due.FromNanoseconds(int((time.time() + deadline) * 1e9))
    meta = pod.metadata
    request = binder_pb2.BindRequest(
        decision_id=decision_id,
        pod=types_pb2.PodRef(namespace=meta.namespace, name=meta.name, uid=meta.uid),
        node=node, deadline=due, profile="splitsched",
    )  # fmt: skip
    request.volume_bindings.add(claim_namespace=meta.namespace, claim_name=claim, pv_name=pv)
    return request


def claimed_twice(pvs: Sequence[Any]) -> list[str]:
    """Claims (namespace/name) that more than one of ``pvs`` names in its claimRef."""
    seen: dict[str, int] = {}
    for pv in pvs:
        ref = pv.spec.claim_ref
        if ref is not None:
            key = f"{ref.namespace}/{ref.name}"
            seen[key] = seen.get(key, 0) + 1
    return sorted(k for k, n in seen.items() if n > 1)
