"""DRA on the real control plane for the binder's device-step tests (integration and
faults): a kwok node with a ResourceSlice of two GPUs (``gpu-0``, ``gpu-1``; or one), their
DeviceClass, the test's ResourceClaims and the pods using them, and BindRequests carrying
``claim_writes`` (the tests play the scheduler).

``Devices`` makes them and deletes them afterwards: the claims released and deleted
(`release_claims`), then the node, the slice and the class; the pods go with the test's
namespace.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

from google.protobuf.timestamp_pb2 import Timestamp
from kubernetes import client
from kubernetes.client.rest import ApiException

from splitsched.core.devices.model import Allocation, DeviceResult
from splitsched.testing import kube
from splitsched.v1 import binder_pb2, types_pb2
from splitsched.wire_devices import allocation_to_proto

GROUP, VERSION = "resource.k8s.io", "v1"
DRIVER = "gpu.splitsched.example.com"

#: A claim to write: (name, uid, the allocation to write, or None to only reserve it).
Write = tuple[str, str, Allocation | None]


class Devices:
    """A kwok node with a slice of ``gpus`` GPUs, their class, and the test's claims and
    pods."""

    def __init__(self, api: client.ApiClient, namespace: str, *, gpus: int = 2) -> None:
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
            "devices": [{"name": f"gpu-{i}"} for i in range(gpus)]}})  # fmt: skip

    def _cluster(self, plural: str, body: dict[str, Any]) -> None:
        body = {"apiVersion": f"{GROUP}/{VERSION}", **body}
        self.custom.create_cluster_custom_object(GROUP, VERSION, plural, body)

    def allocation(self, device: str) -> Allocation:
        """The allocation of ``device`` of the node's slice to a claim's request ``gpu``."""
        return Allocation(results=(DeviceResult("gpu", DRIVER, self.node, device),))

    def add_claim(self, name: str) -> str:
        """A claim for one GPU of the class; its uid."""
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

    def claims(self) -> list[dict[str, Any]]:
        """Every ResourceClaim of the namespace, as the API server has them now."""
        found = self.custom.list_namespaced_custom_object(
            GROUP, VERSION, self.namespace, "resourceclaims"
        )
        return list(found["items"])

    def add_pod(self, name: str, claims: list[str]) -> Any:
        """A pod of the splitsched profile using each of ``claims`` (by name)."""
        pod = kube.make_pod(name, scheduler_name="splitsched")
        pod["spec"]["resourceClaims"] = [{"name": c, "resourceClaimName": c} for c in claims]
        pod["spec"]["containers"][0]["resources"]["claims"] = [{"name": c} for c in claims]
        return self.core.create_namespaced_pod(self.namespace, pod)

    def delete(self) -> None:
        self.release_claims()
        kube.delete_nodes(self.api, [self.node])
        for plural, name in (("resourceslices", f"{self.prefix}-slice"),
                             ("deviceclasses", self.device_class)):  # fmt: skip
            with contextlib.suppress(ApiException):
                self.custom.delete_cluster_custom_object(GROUP, VERSION, plural, name)

    def release_claims(self) -> None:
        """Deallocate every claim of the namespace, drop its finalizer and delete it: no
        resourceclaim controller runs beside these tests to do it, and a claim allocated
        with the finalizer would keep the namespace Terminating until the control plane
        stops (a later test once read such a leftover claim)."""
        for claim in self.claims():
            name = claim["metadata"]["name"]
            with contextlib.suppress(ApiException):
                self.custom.patch_namespaced_custom_object_status(
                    GROUP, VERSION, self.namespace, "resourceclaims", name,
                    {"status": {"allocation": None, "reservedFor": None}},
                )  # fmt: skip
            with contextlib.suppress(ApiException):
                self.custom.patch_namespaced_custom_object(
                    GROUP, VERSION, self.namespace, "resourceclaims", name,
                    {"metadata": {"finalizers": None}},
                )  # fmt: skip
            with contextlib.suppress(ApiException):
                self.custom.delete_namespaced_custom_object(
                    GROUP, VERSION, self.namespace, "resourceclaims", name
                )
        kube.wait_for(lambda: not self.claims(), timeout=30, message="the test's claims gone")


@contextlib.contextmanager
def devices_cluster(api: client.ApiClient, namespace: str, *, gpus: int = 2) -> Iterator[Devices]:
    made = Devices(api, namespace, gpus=gpus)
    try:
        yield made
    finally:
        made.delete()


def bind_request(
    decision_id: str, pod: Any, *, node: str, writes: Sequence[Write], deadline: float = 30.0
) -> binder_pb2.BindRequest:
    """What the scheduler sends for ``pod`` (as created) on ``node`` with ``writes``, due
    in ``deadline`` seconds."""
    due = Timestamp()
    due.FromNanoseconds(int((time.time() + deadline) * 1e9))
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


def allocated_devices(claim: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(driver, pool, device) of each result of the claim's ``status.allocation``."""
    allocation = (claim.get("status") or {}).get("allocation") or {}
    results = (allocation.get("devices") or {}).get("results") or []
    return [(r["driver"], r["pool"], r["device"]) for r in results]


def allocated_twice(claims: Sequence[dict[str, Any]]) -> list[tuple[str, str, str]]:
    """Devices that more than one of ``claims`` holds in its allocation."""
    seen: dict[tuple[str, str, str], int] = {}
    for claim in claims:
        for device in allocated_devices(claim):
            seen[device] = seen.get(device, 0) + 1
    return sorted(d for d, n in seen.items() if n > 1)
