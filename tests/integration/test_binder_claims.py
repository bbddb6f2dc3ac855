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

from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client

from services.binder.deviceclaims import FINALIZER
from splitsched.core.convert.devices import claim_from_k8s
from splitsched.testing.stack import BINDER_RULES
from splitsched.v1 import scheduler_pb2
from tests.support.binderproc import BinderProcess, run_binder
from tests.support.devices_cluster import Devices, bind_request, devices_cluster

Outcome = scheduler_pb2.BindingOutcome


@pytest.fixture
def binder(kube_api: client.ApiClient, namespace: str, tmp_path: Path) -> Iterator[BinderProcess]:
    with run_binder(
        kube_api, namespace=namespace, directory=tmp_path, rules=BINDER_RULES,
        extra_args=["--shutdown-grace", "2"],
    ) as process:  # fmt: skip
        yield process


@pytest.fixture
def devices(kube_api: client.ApiClient, namespace: str) -> Iterator[Devices]:
    with devices_cluster(kube_api, namespace) as made:
        yield made


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
