"""DynamicResources' assumptions through the scheduler service (issue 23).

The scheduler runs whole, in process: a watcher stream brings one node with one GPU (a
DeviceClass and a ResourceSlice), two ResourceClaims of one GPU each and a pod per claim;
a binder records what it is sent. The first pod's BindRequest carries its claim's
allocation in `claim_writes`; while it is in flight the GPU is assumed, so the second pod
waits. The binder reports the binding FAILED: Unreserve gives the GPU back, and it goes to
one of the two pods in a second BindRequest, never to both.
"""

from __future__ import annotations

import asyncio
from typing import Any

from services.watcher import entries, ring
from splitsched.testing import kube
from splitsched.v1 import binder_pb2, scheduler_pb2, types_pb2
from tests.support import watcher as fake_watcher
from tests.support.scheduler import (
    low_priority_pod,
    named,
    recording_binder,
    report,
    report_until_taken,
    running_scheduler,
)

NOW = 1_700_000_000.0
NS = "ml"
DRIVER = "gpu.example.com"


def with_claim(pod: dict[str, Any], claim: str) -> dict[str, Any]:
    pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": claim}]
    pod["metadata"]["namespace"] = NS
    return pod


def cluster() -> ring.ClusterHub:
    conv = entries.Converter()
    hub = ring.ClusterHub(ring_size=100, first_sequence=1)
    selector = {"cel": {"expression": f'device.driver == "{DRIVER}"'}}
    gpu_class = {"metadata": {"name": "gpu"}, "spec": {"selectors": [selector]}}
    pool = {"name": "node-a", "generation": 1, "resourceSliceCount": 1}
    gpus = {"driver": DRIVER, "nodeName": "node-a", "pool": pool, "devices": [{"name": "gpu-0"}]}
    items = [
        conv.node(named(kube.make_node("node-a")), NOW),
        conv.device_class(named(gpu_class), NOW),
        conv.resource_slice(named({"metadata": {"name": "node-a-gpus"}, "spec": gpus}), NOW),
    ]
    for i in (1, 2):
        request = {"name": "gpu", "exactly": {"deviceClassName": "gpu"}}
        claim = {"metadata": {"name": f"c{i}", "namespace": NS},
                 "spec": {"devices": {"requests": [request]}}}  # fmt: skip
        items += [
            conv.resource_claim(named(claim), NOW),
            conv.pod(named(with_claim(kube.make_pod(f"trainer-{i}"), f"c{i}")), NOW),
        ]
    for entry in items:
        assert entry is not None
        hub.upsert(entry)
    hub.mark_synced()
    return hub


def failed(request: binder_pb2.BindRequest) -> scheduler_pb2.BindingOutcome:
    return scheduler_pb2.BindingOutcome(
        decision_id=request.decision_id, pod=request.pod, node=request.node,
        result=scheduler_pb2.BindingOutcome.FAILED, message="device binding failed (conflict)",
    )  # fmt: skip


def written(request: binder_pb2.BindRequest) -> list[tuple[str, str, list[str]]]:
    return [
        (w.claim_name, w.claim_uid, [r.device for r in w.allocation.results])
        for w in request.claim_writes
    ]


def test_a_gpu_in_flight_is_given_to_no_other_pod_until_its_binding_fails() -> None:
    async def body() -> None:
        async with (
            recording_binder() as (binder, binder_port),
            fake_watcher.serving(cluster()) as watcher_port,
            running_scheduler(watcher_port, binder_port, "--settle-seconds", "0") as api,
        ):
            first = await binder.next_request(1)
            claim = f"c{first.pod.name[-1]}"
            assert first.node == "node-a"
            assert written(first) == [(claim, f"uid-{claim}", ["gpu-0"])]
            (write,) = first.claim_writes
            assert write.allocation.results[0].driver == DRIVER
            await asyncio.sleep(1.0)  # the other pod was tried meanwhile: it waits
            assert len(binder.requests) == 1
            assert await report(api, failed(first)) == 1
            second = await binder.next_request(2)
            assert [w[2] for w in written(second)] == [["gpu-0"]]
            await asyncio.sleep(1.0)
            assert len(binder.requests) == 2  # one GPU, one binding in flight

    asyncio.run(asyncio.wait_for(body(), 60))


def test_a_new_leader_holds_the_gpu_of_a_decision_it_adopts() -> None:
    """A scheduler that takes over while a binder writes its predecessor's claim: the
    binder's IN_PROGRESS re-reports carry the claim write, and the new leader holds the
    GPU as its own, so the other pod waits (tried before the low-priority pod, whose
    decision shows scheduling has begun) until the adopted decision fails."""
    allocation = types_pb2.DeviceAllocation(
        results=[
            types_pb2.DeviceResult(request="gpu", driver=DRIVER, pool="node-a", device="gpu-0")
        ]
    )
    trainer = types_pb2.PodRef(namespace=NS, name="trainer-1", uid="uid-trainer-1")
    in_flight = scheduler_pb2.BindingOutcome(
        decision_id="old-1", pod=trainer,
        node="node-a", result=scheduler_pb2.BindingOutcome.IN_PROGRESS, binder_id="b",
        claim_writes=[types_pb2.ClaimWrite(claim_namespace=NS, claim_name="c1", claim_uid="uid-c1",
                                           allocation=allocation)],
    )  # fmt: skip

    async def body() -> None:
        hub = cluster()
        hub.upsert(low_priority_pod("plain", NS, NOW))
        async with (
            recording_binder() as (binder, binder_port),
            fake_watcher.serving(hub) as watcher_port,
            running_scheduler(watcher_port, binder_port, "--settle-seconds", "2") as api,
        ):
            await report_until_taken(api, in_flight)
            assert (await binder.next_request(1)).pod.name == "plain"
            assert [r.pod.name for r in binder.requests] == ["plain"]
            adopted = binder_pb2.BindRequest(decision_id="old-1", pod=in_flight.pod, node="node-a")
            assert await report(api, failed(adopted)) == 1
            again = await binder.next_request(2)
            assert [w[2] for w in written(again)] == [["gpu-0"]]

    asyncio.run(asyncio.wait_for(body(), 60))
