"""The device step's pure decisions (services/binder/deviceclaims.py): the allocation's JSON
reads back through the watcher's converter as the same allocation; what a claim as read
asks for (kube's bindClaim checks, in kube's order); what an update's answer means."""

from __future__ import annotations

import json
from typing import Any

import pytest

from services.binder import deviceclaims
from services.binder.deviceclaims import FINALIZER, Failure
from services.binder.jobs import DEADLINE_EXCEEDED, FAILED, ClaimWrite, PodKey, Retry
from splitsched.core import models
from splitsched.core.convert.devices import claim_from_k8s
from splitsched.core.devices.model import AllocatedConfig, Allocation, DeviceResult
from splitsched.runtime.kubeclient import Response

POD = PodKey("ns", "web-0", "pod-uid")
OPAQUE = {"opaque": {"driver": "gpu.example.com", "parameters": {"mode": "fast", "n": [1, 2]}}}

ALLOCATION = Allocation(
    results=(
        DeviceResult("gpu", "gpu.example.com", "node-a", "gpu-0"),
        DeviceResult("gpu", "gpu.example.com", "node-a", "gpu-1", admin_access=True),
    ),
    node_selector=(
        models.NodeSelectorTerm(
            match_fields=(models.NodeSelectorRequirement("metadata.name", "In", ("node-a",)),)
        ),
        models.NodeSelectorTerm(
            match_expressions=(
                models.NodeSelectorRequirement("zone", "In", ("a", "b")),
                models.NodeSelectorRequirement("gpu", "Exists"),
            )
        ),
    ),
    config=(
        AllocatedConfig("FromClass", (), json.dumps(OPAQUE, sort_keys=True)),
        AllocatedConfig("FromClaim", ("gpu",), json.dumps(OPAQUE, sort_keys=True)),
    ),
)
WRITE = ClaimWrite("ns", "gpus", "claim-uid", ALLOCATION)


def claim_json(
    *, uid: str = "claim-uid", allocation: dict[str, Any] | None = None, **extra: Any
) -> dict[str, Any]:
    meta = {"name": "gpus", "namespace": "ns", "uid": uid, "resourceVersion": "7"}
    meta.update(extra.pop("meta", {}))
    status: dict[str, Any] = dict(extra.pop("status", {}))
    if allocation is not None:
        status["allocation"] = allocation
    request = {"name": "gpu", "exactly": {"deviceClassName": "gpu", "count": 2}}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": meta,
        "spec": {"devices": {"requests": [request]}},
        "status": status,
    }


def test_the_allocation_written_reads_back_as_the_same_allocation() -> None:
    written = deviceclaims.allocation_json(ALLOCATION, now=1_700_000_000.7)
    assert written["allocationTimestamp"] == "2023-11-14T22:13:20Z"
    assert written["devices"]["results"][0] == {
        "request": "gpu", "driver": "gpu.example.com", "pool": "node-a", "device": "gpu-0",
    }  # fmt: skip
    assert written["devices"]["results"][1]["adminAccess"] is True
    assert written["devices"]["config"][1] == {"source": "FromClaim", "requests": ["gpu"], **OPAQUE}
    terms = written["nodeSelector"]["nodeSelectorTerms"]
    assert terms[1]["matchExpressions"][1] == {"key": "gpu", "operator": "Exists"}
    read = claim_from_k8s(claim_json(allocation=written))
    assert read.invalid_reason == ""
    assert read.allocation == ALLOCATION
    assert deviceclaims.claim_of(claim_json(allocation=written)).allocation == ALLOCATION


def test_an_allocation_for_every_node_writes_no_node_selector() -> None:
    everywhere = Allocation(results=ALLOCATION.results[:1])
    written = deviceclaims.allocation_json(everywhere)
    assert set(written) == {"devices"} and "config" not in written["devices"]
    assert claim_from_k8s(claim_json(allocation=written)).allocation == everywhere


def written_json() -> dict[str, Any]:
    return deviceclaims.allocation_json(ALLOCATION, now=1.0)


def test_a_claim_without_finalizer_gets_it_first_in_an_update() -> None:
    plan = deviceclaims.plan(WRITE, deviceclaims.claim_of(claim_json()), POD, now=5.0)
    assert isinstance(plan, deviceclaims.AddFinalizer)
    assert plan.body["metadata"]["finalizers"] == [FINALIZER]
    assert plan.body["metadata"]["resourceVersion"] == "7"  # the update is conditional
    assert "allocation" not in plan.body["status"]


def test_with_the_finalizer_one_status_update_allocates_and_reserves() -> None:
    claim = deviceclaims.claim_of(claim_json(meta={"finalizers": ["other", FINALIZER]}))
    plan = deviceclaims.plan(WRITE, claim, POD, now=5.0)
    assert isinstance(plan, deviceclaims.WriteStatus) and plan.allocates
    status = plan.body["status"]
    assert status["allocation"] == deviceclaims.allocation_json(ALLOCATION, now=5.0)
    assert status["reservedFor"] == [{"resource": "pods", "name": "web-0", "uid": "pod-uid"}]
    assert plan.body["metadata"]["resourceVersion"] == "7"


def test_a_shared_allocated_claim_is_only_reserved_after_its_other_consumers() -> None:
    other = {"resource": "pods", "name": "web-1", "uid": "other"}
    claim = deviceclaims.claim_of(
        claim_json(allocation=written_json(), status={"reservedFor": [other]})
    )
    plan = deviceclaims.plan(ClaimWrite("ns", "gpus", "claim-uid"), claim, POD, now=5.0)
    assert isinstance(plan, deviceclaims.WriteStatus) and not plan.allocates
    assert plan.body["status"]["allocation"] == written_json()  # untouched
    assert [r["uid"] for r in plan.body["status"]["reservedFor"]] == ["other", "pod-uid"]


@pytest.mark.parametrize(
    ("claim", "write", "reason"),
    [
        (claim_json(uid="new-uid"), WRITE, Failure.CLAIM_MISSING),
        (claim_json(meta={"deletionTimestamp": "2026-01-01T00:00:00Z"}), WRITE,
         Failure.CLAIM_DELETING),
        (claim_json(allocation=deviceclaims.allocation_json(Allocation(ALLOCATION.results[:1]))),
         WRITE, Failure.ALLOCATED_ELSEWHERE),
        (claim_json(), ClaimWrite("ns", "gpus", "claim-uid"), Failure.NOT_ALLOCATED),
    ],
)  # fmt: skip
def test_what_fails_a_claim(claim: dict[str, Any], write: ClaimWrite, reason: Failure) -> None:
    plan = deviceclaims.plan(write, deviceclaims.claim_of(claim), POD, now=5.0)
    assert isinstance(plan, deviceclaims.DeviceFailure)
    assert plan.reason is reason
    result = plan.result()
    assert result.result == FAILED
    assert result.message.startswith(f"device binding failed ({reason}): claim ns/gpus ")


def test_a_claim_reserved_for_the_pod_needs_nothing_even_when_allocated() -> None:
    ours = {"resource": "pods", "name": "web-0", "uid": "pod-uid"}
    claim = claim_json(allocation=written_json(), status={"reservedFor": [ours]})
    plan = deviceclaims.plan(WRITE, deviceclaims.claim_of(claim), POD, now=5.0)
    assert plan is deviceclaims.DONE


def test_a_claim_reserved_for_the_pod_with_other_devices_fails_a_stale_allocation() -> None:
    """A binder killed before the Binding left the claim allocated and reserved for the
    pod; a decision from a stale view chose other devices: binding it would put the pod
    where the decision's devices are not."""
    ours = {"resource": "pods", "name": "web-0", "uid": "pod-uid"}
    other = deviceclaims.allocation_json(Allocation(ALLOCATION.results[:1]))
    claim = deviceclaims.claim_of(claim_json(allocation=other, status={"reservedFor": [ours]}))
    plan = deviceclaims.plan(WRITE, claim, POD, now=5.0)
    assert isinstance(plan, deviceclaims.DeviceFailure)
    assert plan.reason is Failure.ALLOCATED_ELSEWHERE
    only_reserve = ClaimWrite("ns", "gpus", "claim-uid")  # the scheduler saw it allocated
    assert deviceclaims.plan(only_reserve, claim, POD, now=5.0) is deviceclaims.DONE


def test_a_claim_holding_exactly_this_allocation_is_reserved_again() -> None:
    claim = deviceclaims.claim_of(claim_json(allocation=written_json()))
    plan = deviceclaims.plan(WRITE, claim, POD, now=5.0)
    assert isinstance(plan, deviceclaims.WriteStatus) and not plan.allocates


def test_a_timeout_is_deadline_exceeded() -> None:
    failure = deviceclaims.DeviceFailure(Failure.TIMEOUT, "reading claim ns/gpus: deadline")
    assert failure.result().result == DEADLINE_EXCEEDED


def answer(status: int, body: Any = None) -> Response:
    return Response(status, body if body is not None else {"message": f"m{status}"}, None)


def test_what_an_update_answer_means() -> None:
    judge = deviceclaims.write_answer
    written = judge(answer(200, claim_json()), write=WRITE, what="x")
    assert isinstance(written, deviceclaims.Written) and written.claim.uid == "claim-uid"
    assert judge(answer(409), write=WRITE, what="x") is deviceclaims.CONFLICT
    assert isinstance(judge(answer(503), write=WRITE, what="x"), Retry)
    missing = judge(answer(404), write=WRITE, what="x")
    assert isinstance(missing, deviceclaims.DeviceFailure)
    assert missing.reason is Failure.CLAIM_MISSING
    invalid = judge(answer(422, {"message": "status.allocation: Invalid"}), write=WRITE, what="x")
    assert isinstance(invalid, deviceclaims.DeviceFailure)
    assert invalid.reason is Failure.API_ERROR and "Invalid" in invalid.message


def test_the_unreserve_patch_deletes_the_pods_entry_for_this_claim_only() -> None:
    assert deviceclaims.unreserve_patch("claim-uid", POD) == {
        "metadata": {"uid": "claim-uid"},
        "status": {"reservedFor": [{"$patch": "delete", "uid": "pod-uid"}]},
    }
