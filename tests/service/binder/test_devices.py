"""The device step before a Binding (kube-scheduler's DynamicResources PreBind), in process
against a fake API with ResourceClaims (``tests/support/fakes/devices.py``): a new claim
gets the finalizer, then its allocation and the pod in reservedFor, then the pod is bound;
a shared claim is only reserved; a claim reserved already is not written; failures are
reported with their reason, write no Binding and undo the step's reservations; a 409 is
read again; a restarted binder finds the writes done."""

from __future__ import annotations

import asyncio
from typing import Any

from services.binder.deviceclaims import FINALIZER, allocation_json
from splitsched.core.convert.devices import claim_from_k8s
from splitsched.core.devices.model import Allocation, DeviceResult
from splitsched.v1 import binder_pb2, scheduler_pb2
from splitsched.wire_devices import allocation_to_proto
from tests.support.binder import Harness, add_pod, bind_request, eventually, harness, run
from tests.support.fakes.devices import CLAIM_PATH, DeviceKube, resource_claim
from tests.support.fakes.kube import Scripted

Outcome = scheduler_pb2.BindingOutcome
GPU_0 = Allocation(results=(DeviceResult("gpu", "gpu.example.com", "node-a", "gpu-0"),))
GPU_1 = Allocation(results=(DeviceResult("gpu", "gpu.example.com", "node-a", "gpu-1"),))
OURS = {"resource": "pods", "name": "web-0", "uid": "uid-web-0"}
OTHER = {"resource": "pods", "name": "web-1", "uid": "uid-web-1"}


def fake(h: Harness) -> DeviceKube:
    assert isinstance(h.kube, DeviceKube)
    return h.kube


def with_claims(
    request: binder_pb2.BindRequest, *writes: tuple[str, Allocation | None]
) -> binder_pb2.BindRequest:
    for name, allocation in writes:
        write = request.claim_writes.add(
            claim_namespace="ns", claim_name=name, claim_uid=f"uid-{name}"
        )
        if allocation is not None:
            allocation_to_proto(allocation, write.allocation)
    return request


async def decide(h: Harness, request: binder_pb2.BindRequest) -> Outcome:
    response = await h.stub.Bind(request)
    assert response.accepted, response.reason
    return await h.outcome(request.decision_id)


def steps(h: Harness, result: str) -> float:
    value = h.metrics.registry.get_sample_value(
        "splitsched_binder_device_steps_total", {"result": result}
    )
    return value or 0.0


def status(kube: DeviceKube, name: str) -> dict[str, Any]:
    found: dict[str, Any] = kube.resource_claim("ns", name)["status"]
    return found


def test_a_new_claim_gets_the_finalizer_then_its_allocation_and_the_pod_then_the_binding() -> None:
    async def body() -> None:
        async with harness(kube=DeviceKube()) as h:
            kube = fake(h)
            add_pod(h, "web-0")
            kube.put_resource_claim(resource_claim("gpus"))
            outcome = await decide(h, with_claims(bind_request("d1", "web-0"), ("gpus", GPU_0)))
            assert outcome.result == Outcome.BOUND, outcome.message
            assert kube.timeline == ["update ns/gpus", "status ns/gpus", "binding ns/web-0"]
            claim = kube.resource_claim("ns", "gpus")
            assert claim["metadata"]["finalizers"] == [FINALIZER]
            assert claim["status"]["reservedFor"] == [OURS]
            assert "allocationTimestamp" in claim["status"]["allocation"]
            assert claim_from_k8s(claim).allocation == GPU_0  # what the watcher reads back
            assert steps(h, "reserved") == 1
            # The report names the writes: a scheduler that took over holds them.
            (reported,) = outcome.claim_writes
            assert (reported.claim_name, reported.claim_uid) == ("gpus", "uid-gpus")
            assert [r.device for r in reported.allocation.results] == ["gpu-0"]

    run(body())


def test_a_shared_allocated_claim_is_only_reserved() -> None:
    async def body() -> None:
        async with harness(kube=DeviceKube()) as h:
            kube = fake(h)
            add_pod(h, "web-0")
            shared = {"allocation": allocation_json(GPU_0), "reservedFor": [OTHER]}
            kube.put_resource_claim(resource_claim("shared", status=shared))
            outcome = await decide(h, with_claims(bind_request("d1", "web-0"), ("shared", None)))
            assert outcome.result == Outcome.BOUND, outcome.message
            assert kube.claim_writes == ["status ns/shared"]
            assert status(kube, "shared") == {**shared, "reservedFor": [OTHER, OURS]}

    run(body())


def test_a_claim_reserved_for_the_pod_already_is_not_written() -> None:
    async def body() -> None:
        async with harness(kube=DeviceKube()) as h:
            kube = fake(h)
            add_pod(h, "web-0")
            done = {"allocation": allocation_json(GPU_0), "reservedFor": [OURS]}
            kube.put_resource_claim(resource_claim("gpus", status=done))
            outcome = await decide(h, with_claims(bind_request("d1", "web-0"), ("gpus", GPU_0)))
            assert outcome.result == Outcome.BOUND, outcome.message
            assert kube.claim_writes == []
            assert kube.timeline == ["binding ns/web-0"]

    run(body())


def test_a_claim_allocated_elsewhere_fails_the_decision_without_a_binding() -> None:
    async def body() -> None:
        async with harness(kube=DeviceKube()) as h:
            kube = fake(h)
            add_pod(h, "web-0")
            taken = {"allocation": allocation_json(GPU_1), "reservedFor": [OTHER]}
            kube.put_resource_claim(resource_claim("gpus", status=taken))
            outcome = await decide(h, with_claims(bind_request("d1", "web-0"), ("gpus", GPU_0)))
            assert outcome.result == Outcome.FAILED
            assert outcome.message == (
                "device binding failed (allocated_elsewhere): claim ns/gpus got allocated "
                "elsewhere in the meantime"
            )
            assert kube.timeline == []
            assert kube.binding_count("web-0") == 0
            assert steps(h, "allocated_elsewhere") == 1

    run(body())


def test_a_claim_deleted_during_the_step_fails_it() -> None:
    async def body() -> None:
        kube = DeviceKube()

        def delete(what: str) -> None:
            if what == "update ns/gpus":  # deleted between the finalizer and the status
                del kube.resource_claims[("ns", "gpus")]

        kube.after_write = delete
        async with harness(kube=kube) as h:
            add_pod(h, "web-0")
            kube.put_resource_claim(resource_claim("gpus"))
            outcome = await decide(h, with_claims(bind_request("d1", "web-0"), ("gpus", GPU_0)))
            assert outcome.result == Outcome.FAILED
            assert outcome.message.startswith(
                "device binding failed (claim_missing): claim ns/gpus"
            )
            assert kube.timeline == ["update ns/gpus", "status ns/gpus"]
            assert kube.binding_count("web-0") == 0

    run(body())


def test_a_conflict_reads_the_claim_again_and_writes_again() -> None:
    async def body() -> None:
        kube = DeviceKube()
        status_path = CLAIM_PATH.format(ns="ns", name="gpus") + "/status"
        kube.claim_script[status_path] = [Scripted(409)]
        async with harness(kube=kube) as h:
            add_pod(h, "web-0")
            kube.put_resource_claim(resource_claim("gpus"))
            outcome = await decide(h, with_claims(bind_request("d1", "web-0"), ("gpus", GPU_0)))
            assert outcome.result == Outcome.BOUND, outcome.message
            assert kube.claim_writes == ["update ns/gpus", "status ns/gpus", "status ns/gpus"]
            claim_reads = [p for p in kube.reads if "resourceclaims" in p]
            assert len(claim_reads) == 2  # the first read, and the one after the 409
            assert status(kube, "gpus")["reservedFor"] == [OURS]

    run(body())


def test_a_failure_on_the_second_claim_undoes_the_reservation_of_the_first() -> None:
    async def body() -> None:
        async with harness(kube=DeviceKube()) as h:
            kube = fake(h)
            add_pod(h, "web-0")
            kube.put_resource_claim(resource_claim("gpus"))
            kube.put_resource_claim(resource_claim("nics"))  # not allocated: cannot be reserved
            request = with_claims(bind_request("d1", "web-0"), ("gpus", GPU_0), ("nics", None))
            outcome = await decide(h, request)
            assert outcome.result == Outcome.FAILED
            assert outcome.message.startswith("device binding failed (not_allocated): ")
            assert kube.timeline == ["update ns/gpus", "status ns/gpus", "unreserve ns/gpus"]
            gpus = status(kube, "gpus")
            assert gpus["reservedFor"] == []
            assert claim_from_k8s(kube.resource_claim("ns", "gpus")).allocation == GPU_0  # as kube
            assert kube.binding_count("web-0") == 0

    run(body())


def test_a_binding_that_fails_for_certain_undoes_the_reservations() -> None:
    async def body() -> None:
        kube = DeviceKube()
        kube.script[("ns", "web-0")] = [Scripted(404, message='pods "web-0" not found')]
        async with harness(kube=kube) as h:
            add_pod(h, "web-0")
            kube.put_resource_claim(resource_claim("gpus"))
            outcome = await decide(h, with_claims(bind_request("d1", "web-0"), ("gpus", GPU_0)))
            assert outcome.result == Outcome.POD_GONE
            assert kube.timeline == [
                "update ns/gpus", "status ns/gpus", "binding ns/web-0", "unreserve ns/gpus",
            ]  # fmt: skip
            assert status(kube, "gpus")["reservedFor"] == []

    run(body())


def test_a_restarted_binder_finds_the_claims_reserved_and_only_binds() -> None:
    async def body() -> None:
        kube = DeviceKube()
        held = asyncio.Event()
        # The Binding is held, then fails until the binder is gone: it "crashes" mid-way.
        unanswered = [Scripted(status=0, reset=True, hold=held), *[Scripted(503)] * 500]
        kube.script[("ns", "web-0")] = unanswered
        async with harness(kube=kube) as h:
            add_pod(h, "web-0")
            kube.put_resource_claim(resource_claim("gpus"))
            request = with_claims(bind_request("d1", "web-0"), ("gpus", GPU_0))
            assert (await h.stub.Bind(request)).accepted
            await eventually(lambda: kube.holds)  # the Binding is in flight
        assert kube.claim_writes == ["update ns/gpus", "status ns/gpus"]  # nothing undone
        assert kube.pods[("ns", "web-0")].node == ""
        kube.claim_writes.clear()
        kube.script.clear()
        async with harness(kube=kube) as h:
            outcome = await decide(h, request)
            assert outcome.result == Outcome.BOUND, outcome.message
            assert kube.claim_writes == []
            assert kube.pods[("ns", "web-0")].node == "node-a"
            assert status(kube, "gpus")["reservedFor"] == [OURS]

    run(body())


def test_a_request_with_a_bad_claim_write_is_refused() -> None:
    async def body() -> None:
        async with harness(kube=DeviceKube()) as h:
            add_pod(h, "web-0")
            request = with_claims(bind_request("d1", "web-0"), ("gpus", GPU_0))
            request.claim_writes[0].claim_uid = ""
            response = await h.stub.Bind(request)
            assert not response.accepted
            assert response.reason == "invalid request: claim_writes[0].claim_uid is empty"
            other = with_claims(bind_request("d2", "web-0"), ("a/b", None))
            assert "not a valid claim name" in (await h.stub.Bind(other)).reason

    run(body())
