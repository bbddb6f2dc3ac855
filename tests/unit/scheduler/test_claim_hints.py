"""ResourceClaim events into the scheduler's state requeue only the pods kube-scheduler's
queueing hint would (`devices.hints`): a GPU pod waiting for a device is not retried each
time another pod's claim is written, but is when a claim gives devices back.

A state on a fake clock, driven the way the ingest drives it, one node with one GPU.
"""

from __future__ import annotations

import dataclasses

from services.scheduler.state import SchedulerState
from splitsched.core import models
from splitsched.core.clock import FakeClock
from splitsched.core.devices import model
from tests.support import builders
from tests.support.devices import device, name_is, node_slice
from tests.support.scheduler import decide, parked

GPU = model.DeviceClass("gpu", ('device.driver == "driver-a"',))
HELD = model.Allocation((model.DeviceResult("gpu", "driver-a", "pool-1", "gpu-0"),), name_is("n1"))


def claim(name: str, **fields: object) -> model.ResourceClaim:
    request = model.DeviceRequest("gpu", model.RequestSpec("gpu", "gpu"))
    return model.ResourceClaim("ml", name, f"uid-{name}", requests=(request,), **fields)  # type: ignore[arg-type]


def gpu_pod(name: str, claim_name: str) -> models.Pod:
    pod = builders.pod(name, namespace="ml", scheduler_name="splitsched")
    entry = models.PodResourceClaim("gpu", claim_name)
    return dataclasses.replace(pod, resource_claims=(entry,))


def setup(state: SchedulerState, clock: FakeClock) -> None:
    """The GPU is held by `holder`'s claim; `waiting` (claim c1) is parked for it."""
    state.apply_node("ADDED", builders.node("n1", cpu=4000, pods=10, hostname=True))
    for obj in (GPU, node_slice("s1", "n1", device("gpu-0")), claim("c1")):
        state.apply_devices("ADDED", obj)
    state.apply_devices("ADDED", claim("held", allocation=HELD))
    state.apply_pod("ADDED", gpu_pod("waiting", "c1"))
    assert "cannot allocate all claims" in parked(state).message
    retry_after_backoff(state, clock)
    assert state.schedule_one() is None  # parked until a claim event may help


def retry_after_backoff(state: SchedulerState, clock: FakeClock) -> None:
    clock.advance(11)
    state.queue.flush()


def test_another_claims_write_does_not_requeue_a_pod_waiting_for_devices(
    state: SchedulerState, clock: FakeClock
) -> None:
    setup(state, clock)
    state.apply_devices("ADDED", claim("c2"))
    state.apply_devices("MODIFIED", claim("c2", resource_version="2"))
    state.apply_devices("MODIFIED", claim("held", allocation=HELD, resource_version="2"))
    retry_after_backoff(state, clock)
    assert state.schedule_one() is None


def test_a_claim_giving_its_device_back_requeues_the_pod_and_it_binds(
    state: SchedulerState, clock: FakeClock
) -> None:
    setup(state, clock)
    state.apply_devices("MODIFIED", claim("held"))  # deallocated
    retry_after_backoff(state, clock)
    assert decide(state).node == "n1"


def test_a_deleted_claim_that_held_the_device_requeues_the_pod(
    state: SchedulerState, clock: FakeClock
) -> None:
    setup(state, clock)
    state.apply_devices("DELETED", claim("held", allocation=HELD))
    retry_after_backoff(state, clock)
    assert decide(state).node == "n1"


def test_the_pods_own_claim_changing_status_requeues_it(
    state: SchedulerState, clock: FakeClock
) -> None:
    """Its claim allocated (by another scheduler, say): the pod only has to go there."""
    setup(state, clock)
    state.apply_devices("ADDED", claim("idle"))
    state.apply_devices("DELETED", claim("idle"))  # held nothing: requeues no one
    retry_after_backoff(state, clock)
    assert state.schedule_one() is None
    state.apply_devices("MODIFIED", claim("c1", allocation=HELD))
    retry_after_backoff(state, clock)
    assert decide(state).node == "n1"
