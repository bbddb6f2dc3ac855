"""Deallocating the claims the scheduler's DynamicResources PostFilter gave back, carried
by an unschedulable report (``UnschedulableReport.deallocate_claims``), in process against
a fake API with ResourceClaims: the claim's allocation and reservedFor are cleared with one
status update before the report is written; a claim reserved for another pod, of another
uid, or not allocated is left alone; a 409 is read again; a pod that is not ours, or a
claim of another namespace, deallocates nothing; a bad request is refused."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from services.binder.deallocation import Skip, plan
from services.binder.deviceclaims import FINALIZER, claim_of
from services.binder.jobs import ClaimWrite, PodKey
from splitsched.v1 import binder_pb2, types_pb2
from tests.support.binder import Harness, add_pod, eventually, harness, run
from tests.support.fakes.devices import CLAIM_PATH, DeviceKube, resource_claim
from tests.support.fakes.kube import Scripted

ALLOCATED = {
    "allocation": {"devices": {"results": [
        {"request": "gpu", "driver": "gpu.example.com", "pool": "node-a", "device": "gpu-0"}]}},
}  # fmt: skip
OURS = {"resource": "pods", "name": "web-0", "uid": "uid-web-0"}
OTHER = {"resource": "pods", "name": "web-1", "uid": "uid-web-1"}
POD = PodKey("ns", "web-0", "uid-web-0")


def allocated(name: str, *reserved: dict[str, str], uid: str = "") -> dict[str, Any]:
    claim = resource_claim(name, uid=uid, status={**ALLOCATED, "reservedFor": list(reserved)})
    claim["metadata"]["finalizers"] = [FINALIZER]
    return claim


def report(*claims: tuple[str, str], namespace: str = "") -> binder_pb2.UnschedulableReport:
    request = binder_pb2.UnschedulableReport(
        pod=types_pb2.PodRef(namespace="ns", name="web-0", uid="uid-web-0"),
        message="0/1 nodes are available: 1 resourceclaim not available on the node."
        " deallocation of ResourceClaim completed",
        reason="Unschedulable", profile="splitsched",
    )  # fmt: skip
    for name, uid in claims:
        request.deallocate_claims.add(namespace=namespace, name=name, uid=uid)
    return request


def deallocations(h: Harness, result: str) -> float:
    value = h.metrics.registry.get_sample_value(
        "splitsched_binder_claim_deallocations_total", {"result": result}
    )
    return value or 0.0


async def send(h: Harness, request: binder_pb2.UnschedulableReport) -> None:
    ack = await h.stub.ReportUnschedulable(request)
    assert ack.accepted, ack.reason
    await eventually(lambda: h.kube.events)  # the report is written after the claims


@pytest.mark.parametrize("reserved", [(), (OURS,)])
def test_the_claim_is_deallocated_before_the_report_is_written(
    reserved: tuple[dict[str, str], ...],
) -> None:
    async def body() -> None:
        async with harness(kube=DeviceKube()) as h:
            kube = h.kube
            assert isinstance(kube, DeviceKube)
            add_pod(h, "web-0")
            kube.put_resource_claim(allocated("gpus", *reserved))
            await send(h, report(("gpus", "uid-gpus")))
            claim = kube.resource_claim("ns", "gpus")
            assert claim["status"] == {}  # allocation and reservedFor cleared
            assert claim["metadata"]["finalizers"] == [FINALIZER]  # kcm removes it
            assert kube.claim_writes == ["status ns/gpus"]
            assert deallocations(h, "deallocated") == 1

    run(body())


@pytest.mark.parametrize(
    ("claim", "uid", "result"),
    [
        (allocated("gpus", OTHER), "uid-gpus", Skip.IN_USE),
        (allocated("gpus", OURS, OTHER), "uid-gpus", Skip.IN_USE),
        (allocated("gpus", uid="uid-again"), "uid-gpus", Skip.GONE),
        (resource_claim("gpus"), "uid-gpus", Skip.NOT_ALLOCATED),
        (resource_claim("elsewhere"), "uid-gpus", Skip.GONE),
    ],
)
def test_a_claim_that_must_not_be_deallocated_is_left_alone(
    claim: dict[str, Any], uid: str, result: Skip
) -> None:
    async def body() -> None:
        async with harness(kube=DeviceKube()) as h:
            kube = h.kube
            assert isinstance(kube, DeviceKube)
            add_pod(h, "web-0")
            kube.put_resource_claim(claim)
            await send(h, report(("gpus", uid)))
            assert kube.claim_writes == []
            assert deallocations(h, str(result)) == 1

    run(body())


def test_a_claim_changed_under_the_write_is_read_again() -> None:
    async def body() -> None:
        async with harness(kube=DeviceKube()) as h:
            kube = h.kube
            assert isinstance(kube, DeviceKube)
            add_pod(h, "web-0")
            kube.put_resource_claim(allocated("gpus"))
            path = CLAIM_PATH.format(ns="ns", name="gpus") + "/status"
            kube.claim_script[path] = [Scripted(409, "the object has been modified")]
            await send(h, report(("gpus", "uid-gpus")))
            assert kube.claim_writes == ["status ns/gpus", "status ns/gpus"]
            assert kube.resource_claim("ns", "gpus")["status"] == {}

    run(body())


def test_a_pod_that_is_not_there_deallocates_nothing() -> None:
    """The report is about a pod the binder cannot find: nothing is written at all."""

    async def body() -> None:
        async with harness(kube=DeviceKube()) as h:
            kube = h.kube
            assert isinstance(kube, DeviceKube)
            kube.put_resource_claim(allocated("gpus"))
            ack = await h.stub.ReportUnschedulable(report(("gpus", "uid-gpus")))
            assert ack.accepted, ack.reason
            await eventually(lambda: deallocations(h, "not_ours"))
            await asyncio.sleep(0.1)
            assert kube.claim_writes == [] and kube.events == []

    run(body())


@pytest.mark.parametrize(
    ("claims", "namespace", "why"),
    [
        (
            (("gpus", "uid-gpus"),),
            "other",
            "deallocate_claims[0].namespace 'other' is not the pod's",
        ),
        ((("Not_A_Name", "uid-x"),), "", "deallocate_claims[0].name 'Not_A_Name' is not a valid"),
        ((("gpus", ""),), "", "deallocate_claims[0].uid is empty"),
    ],
)
def test_a_bad_deallocation_is_refused_with_a_clear_reason(
    claims: tuple[tuple[str, str], ...], namespace: str, why: str
) -> None:
    async def body() -> None:
        async with harness(kube=DeviceKube()) as h:
            ack = await h.stub.ReportUnschedulable(report(*claims, namespace=namespace))
            assert not ack.accepted and why in ack.reason, ack.reason

    run(body())


def test_the_plan_clears_the_status_and_keeps_the_rest() -> None:
    claim = allocated("gpus", OURS)
    claim["status"]["devices"] = [{"driver": "gpu.example.com", "pool": "a", "device": "gpu-0"}]
    body = plan(claim_of(claim), ClaimWrite("ns", "gpus", "uid-gpus"), POD)
    assert isinstance(body, dict)
    assert body["status"] == {} and body["metadata"] == claim["metadata"]
