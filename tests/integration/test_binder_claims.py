"""The binder's device step on the real kube-apiserver: the binder process (the stack's
least-privilege rules: get/update on resourceclaims, update/patch on their status) writes
a ResourceClaim's finalizer, allocation and reservation the way kube-scheduler's
DynamicResources PreBind does, and then binds the pod; the API server's validation accepts
every write. The test plays the scheduler: a DeviceClass, a ResourceSlice with two devices
on a kwok node, a claim and a pod using it, and a BindRequest with the claim write.

* the claim ends with the finalizer, the allocation (read back by the watcher's converter
  as the allocation sent) and the pod in reservedFor, and the pod is bound;
* a decision whose second claim cannot be reserved undoes the first claim's reservation
  (its allocation and finalizer stay, as in kube) and binds nothing.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.timestamp_pb2 import Timestamp
from kubernetes import client
from kubernetes.client.rest import ApiException

from services.binder.deviceclaims import FINALIZER
from splitsched.core.convert.devices import claim_from_k8s
from splitsched.core.devices.model import Allocation, DeviceResult
from splitsched.testing import kube
from splitsched.testing.stack import BINDER_RULES
from splitsched.v1 import binder_pb2, scheduler_pb2, types_pb2
from splitsched.wire_devices import allocation_to_proto
from tests.support.binderproc import BinderProcess, run_binder

Outcome = scheduler_pb2.BindingOutcome
GROUP, VERSION = "resource.k8s.io", "v1"
DRIVER = "gpu.splitsched.example.com"


@pytest.fixture
def binder(kube_api: client.ApiClient, namespace: str, tmp_path: Path) -> Iterator[BinderProcess]:
    with run_binder(
        kube_api, namespace=namespace, directory=tmp_path, rules=BINDER_RULES,
        extra_args=["--shutdown-grace", "2"],
    ) as process:  # fmt: skip
        yield process


class Devices:
    """A kwok node with a slice of two GPUs, their class, and the test's claims and pods."""

    def __init__(self, api: client.ApiClient, namespace: str) -> None:
        self.api, self.namespace = api, namespace
        self.custom = client.CustomObjectsApi(api)
        self.core = client.CoreV1Api(api)
        self.prefix = f"dra-{uuid.uuid4().hex[:6]}"
        (self.node,) = kube.create_kwok_nodes(api, 1, name_prefix=self.prefix)
        self.device_class = f"{self.prefix}-gpu"
        self._cluster("deviceclasses", {"metadata": {"name": self.device_class}, "spec": {
            "selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}})  # fmt: skip
        self._cluster("resourceslices", {"metadata": {"name": f"{self.prefix}-slice"}, "spec": {
            "driver": DRIVER, "nodeName": self.node,
            "pool": {"name": self.node, "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": "gpu-0"}, {"name": "gpu-1"}]}})  # fmt: skip

    def _cluster(self, plural: str, body: dict[str, Any]) -> None:
        body = {"apiVersion": f"{GROUP}/{VERSION}", **body}
        self.custom.create_cluster_custom_object(GROUP, VERSION, plural, body)

    def allocation(self, device: str) -> Allocation:
        return Allocation(results=(DeviceResult("gpu", DRIVER, self.node, device),))

    def add_claim(self, name: str) -> str:
        request = {"name": "gpu", "exactly": {"deviceClassName": self.device_class}}
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "ResourceClaim",
            "metadata": {"name": name},
            "spec": {"devices": {"requests": [request]}},
        }
        made = self.custom.create_namespaced_custom_object(
            GROUP, VERSION, self.namespace, "resourceclaims", body
        )
        return str(made["metadata"]["uid"])

    def claim(self, name: str) -> dict[str, Any]:
        found: dict[str, Any] = self.custom.get_namespaced_custom_object(
            GROUP, VERSION, self.namespace, "resourceclaims", name
        )
        return found

    def add_pod(self, name: str, claims: list[str]) -> Any:
        pod = kube.make_pod(name, scheduler_name="splitsched")
        pod["spec"]["resourceClaims"] = [{"name": c, "resourceClaimName": c} for c in claims]
        pod["spec"]["containers"][0]["resources"]["claims"] = [{"name": c} for c in claims]
        return self.core.create_namespaced_pod(self.namespace, pod)

    def delete(self) -> None:
        kube.delete_nodes(self.api, [self.node])
        for plural, name in (("resourceslices", f"{self.prefix}-slice"),
                             ("deviceclasses", self.device_class)):  # fmt: skip
            with contextlib.suppress(ApiException):
                self.custom.delete_cluster_custom_object(GROUP, VERSION, plural, name)


@pytest.fixture
def devices(kube_api: client.ApiClient, namespace: str) -> Iterator[Devices]:
    made = Devices(kube_api, namespace)
    try:
        yield made
    finally:
        made.delete()


def bind_request(
    decision_id: str, pod: Any, *, node: str, writes: list[tuple[str, str, Allocation | None]]
) -> binder_pb2.BindRequest:
    due = Timestamp()
    due.FromNanoseconds(int((time.time() + 30) * 1e9))
    meta = pod.metadata
    request = binder_pb2.BindRequest(
        decision_id=decision_id,
        pod=types_pb2.PodRef(namespace=meta.namespace, name=meta.name, uid=meta.uid),
        node=node, deadline=due, profile="splitsched",
    )  # fmt: skip
    for name, uid, allocation in writes:
        write = request.claim_writes.add(claim_namespace=meta.namespace, claim_name=name,
                                         claim_uid=uid)  # fmt: skip
        if allocation is not None:
            allocation_to_proto(allocation, write.allocation)
    return request


def test_a_claim_is_allocated_and_reserved_then_the_pod_bound(
    binder: BinderProcess, devices: Devices
) -> None:
    uid = devices.add_claim("gpus")
    pod = devices.add_pod("trainer", ["gpus"])
    allocation = devices.allocation("gpu-1")
    request = bind_request("d0", pod, node=devices.node, writes=[("gpus", uid, allocation)])
    assert binder.stub.Bind(request, timeout=10).accepted
    outcome = binder.scheduler.outcome("d0", timeout=30)
    assert outcome.result == Outcome.BOUND, outcome.message
    claim = devices.claim("gpus")
    assert claim["metadata"]["finalizers"] == [FINALIZER]
    assert claim["status"]["reservedFor"] == [
        {"resource": "pods", "name": "trainer", "uid": pod.metadata.uid}
    ]
    assert claim_from_k8s(claim).allocation == allocation
    bound = devices.core.read_namespaced_pod("trainer", devices.namespace)
    assert bound.spec.node_name == devices.node


def test_a_claim_that_cannot_be_reserved_undoes_the_first_and_binds_nothing(
    binder: BinderProcess, devices: Devices
) -> None:
    first, second = devices.add_claim("gpus"), devices.add_claim("spare")
    pod = devices.add_pod("trainer", ["gpus", "spare"])
    writes = [("gpus", first, devices.allocation("gpu-0")), ("spare", second, None)]
    request = bind_request("d1", pod, node=devices.node, writes=writes)
    assert binder.stub.Bind(request, timeout=10).accepted
    outcome = binder.scheduler.outcome("d1", timeout=30)
    assert outcome.result == Outcome.FAILED
    assert outcome.message.startswith("device binding failed (not_allocated): claim "), outcome
    claim = devices.claim("gpus")
    assert not claim["status"].get("reservedFor")
    assert claim_from_k8s(claim).allocation == devices.allocation("gpu-0")  # kube leaves it
    assert claim["metadata"]["finalizers"] == [FINALIZER]
    unbound = devices.core.read_namespaced_pod("trainer", devices.namespace)
    assert unbound.spec.node_name is None
