"""VolumeBinding's assumptions through the scheduler service (issue 18 item 2).

The scheduler runs whole, in process: a watcher stream (an in-process hub filled through
the watcher's own conversion) brings two nodes, a WaitForFirstConsumer class, one local
volume, two claims and a pod per claim; a binder records what it is sent. The first pod's
BindRequest carries the volume VolumeBinding chose in `volume_bindings`, and while that
binding is in flight the volume is assumed, so the second pod waits. The binder reports the
binding FAILED (ReportBindingOutcome over gRPC): the scheduler forgets the first pod
(Unreserve gives the volume back) and the volume goes to one of the two pods, whichever
the queue tries first, in a second BindRequest; the other waits again. Each BindRequest
carries the deadline of a decision with volumes (`--volume-bind-timeout`, less the margin
that lets the binder report first), not the plain `--bind-timeout`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager

from services.watcher import entries, ring
from splitsched.testing import kube
from splitsched.testing import storage as st
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
NS = "team"
VOLUME_BIND_TIMEOUT = 300
#: The binder's deadline comes this much before the scheduler's (a share of --bind-timeout 60).
MARGIN = 60 * 0.2


def cluster(*, ring_size: int = 100) -> ring.ClusterHub:
    """The hub as the watcher would fill it from the API server."""
    conv = entries.Converter()
    hub = ring.ClusterHub(ring_size=ring_size, first_sequence=1)
    pv = named(st.make_pv("pv-a", storage_class="local", node_affinity={st.HOSTNAME: ["node-a"]}))
    pv["status"] = {"phase": "Available"}  # as the PV controller leaves a new volume
    items = [
        conv.node(named(kube.make_node("node-a")), NOW),
        conv.node(named(kube.make_node("node-b")), NOW),
        conv.storage_class(named(st.make_storage_class("local")), NOW),
        conv.pv(pv, NOW),
    ]
    for i in (1, 2):
        claim = named(st.make_pvc(f"data-{i}", storage_class="local"))
        claim["metadata"]["namespace"] = NS
        pod = named(st.with_claims(kube.make_pod(f"web-{i}"), [f"data-{i}"]))
        pod["metadata"]["namespace"] = NS
        items += [conv.pvc(claim, NOW), conv.pod(pod, NOW)]
    for entry in items:
        assert entry is not None
        hub.upsert(entry)
    hub.mark_synced()
    return hub


def failed(request: binder_pb2.BindRequest) -> scheduler_pb2.BindingOutcome:
    return scheduler_pb2.BindingOutcome(
        decision_id=request.decision_id, pod=request.pod, node=request.node,
        result=scheduler_pb2.BindingOutcome.FAILED, message="binding volumes: timed out",
    )  # fmt: skip


@asynccontextmanager
async def running(watcher: int, binder: int, *, settle: float = 0) -> AsyncIterator[str]:
    """The scheduler service against them (its first decision `settle` seconds after it is
    synced and serving); yields its API's address."""
    async with running_scheduler(
        watcher, binder, "--settle-seconds", str(settle), "--bind-timeout", "60",
        "--volume-bind-timeout", str(VOLUME_BIND_TIMEOUT),
    ) as api:  # fmt: skip
        yield api


def test_a_failed_binding_gives_its_volume_to_the_pod_waiting_for_it() -> None:
    async def body() -> None:
        async with (
            recording_binder() as (binder, binder_port),
            fake_watcher.serving(cluster()) as watcher_port,
            running(watcher_port, binder_port) as api,
        ):
            first = await binder.next_request(1)
            assert first.node == "node-a"
            claim = f"data-{first.pod.name[-1]}"
            assert [(b.claim_namespace, b.claim_name, b.pv_name)
                    for b in first.volume_bindings] == [(NS, claim, "pv-a")]  # fmt: skip
            left = first.deadline.ToNanoseconds() / 1e9 - time.time()
            assert 60 < left <= VOLUME_BIND_TIMEOUT - MARGIN, left
            await asyncio.sleep(1.0)  # the other pod was tried meanwhile: it waits
            assert len(binder.requests) == 1
            assert await report(api, failed(first)) == 1
            second = await binder.next_request(2)
            assert second.node == "node-a"
            assert [b.pv_name for b in second.volume_bindings] == ["pv-a"]
            await asyncio.sleep(1.0)
            assert len(binder.requests) == 2  # one volume, one binding in flight

    asyncio.run(asyncio.wait_for(body(), 60))


def test_a_fresh_snapshot_keeps_the_volume_of_the_decision_in_flight() -> None:
    """The watcher restarts while the first pod's binding is in flight, and the scheduler's
    cursor is no longer in its ring: a fresh snapshot, in which the volume still looks
    available (the binder has written nothing yet). The rebuilt view keeps it assumed:
    the other pod waits (it is tried before the low-priority pod that comes with the
    snapshot, whose decision shows the scheduler is at work again) until the first
    binding fails."""

    async def body() -> None:
        hub = cluster(ring_size=1)
        async with recording_binder() as (binder, binder_port), AsyncExitStack() as watcher:
            port = await watcher.enter_async_context(fake_watcher.serving(hub))
            async with running(port, binder_port) as api:
                first = await binder.next_request(1)
                assert [b.pv_name for b in first.volume_bindings] == ["pv-a"]
                await watcher.aclose()  # the stream breaks ...
                hub.upsert(low_priority_pod("plain", NS, NOW))  # ... and its cursor leaves the ring
                hub.upsert(low_priority_pod("plain-2", NS, NOW))
                async with fake_watcher.serving(hub, port=port):
                    assert (await binder.next_request(2)).pod.name == "plain"
                    sent = [r.pod.name for r in binder.requests]
                    assert [n for n in sent if n.startswith("web")] == [first.pod.name], sent
                    assert await report(api, failed(first)) == 1
                    again = await binder.next_request(len(sent) + 1)
                    assert [b.pv_name for b in again.volume_bindings] == ["pv-a"]

    asyncio.run(asyncio.wait_for(body(), 60))


def test_a_new_leader_holds_the_volumes_of_a_decision_it_adopts() -> None:
    """A scheduler that takes over (here: a fresh one) while a binder is in the volume step
    of its predecessor's decision: the binder's IN_PROGRESS re-reports name the volume,
    and the settle period lets them arrive before the first decision. The new leader holds
    the volume as its own: the other pod waits (tried before the low-priority pod, whose
    decision shows scheduling has begun) until the adopted decision fails."""
    in_flight = scheduler_pb2.BindingOutcome(
        decision_id="old-1", pod=types_pb2.PodRef(namespace=NS, name="web-1", uid="uid-web-1"),
        node="node-a", result=scheduler_pb2.BindingOutcome.IN_PROGRESS, binder_id="b",
        volume_bindings=[types_pb2.VolumeBinding(claim_namespace=NS, claim_name="data-1",
                                                 pv_name="pv-a")],
    )  # fmt: skip

    async def body() -> None:
        hub = cluster()
        hub.upsert(low_priority_pod("plain", NS, NOW))
        async with (
            recording_binder() as (binder, binder_port),
            fake_watcher.serving(hub) as watcher_port,
            running(watcher_port, binder_port, settle=2) as api,
        ):
            await report_until_taken(api, in_flight)
            assert (await binder.next_request(1)).pod.name == "plain"
            assert [r.pod.name for r in binder.requests] == ["plain"]
            adopted_request = binder_pb2.BindRequest(
                decision_id="old-1", pod=in_flight.pod, node="node-a"
            )
            assert await report(api, failed(adopted_request)) == 1
            again = await binder.next_request(2)
            assert [b.pv_name for b in again.volume_bindings] == ["pv-a"]

    asyncio.run(asyncio.wait_for(body(), 60))
