"""The scheduler's state with storage: watch events fill the view and requeue the pods
the volume plugins parked; a decision carries the volumes VolumeBinding chose; every path
that forgets the pod (a failed binding, the pod deleted) gives its volume back, and a bound
pod's volume stays taken until the watch shows it bound."""

from __future__ import annotations

import dataclasses

from services.scheduler.state import Decision, Outcome, Phase, SchedulerState
from splitsched.core import models, storage
from splitsched.core.clock import FakeClock
from tests.support.builders import scheduler_state
from tests.support.scheduler import decide, parked
from tests.support.storage import claim, claim_pod, host, storage_class, volume

NODES = [host("node-a"), host("node-b")]
#: What the PostFilter plugins add when no eviction could help on either node.
NOT_HELPFUL = (
    " no new claims to deallocate, preemption: "
    "0/2 nodes are available: 2 Preemption is not helpful for scheduling."
)


def local_state(clock: FakeClock) -> SchedulerState:
    state = scheduler_state(clock, nodes=NODES, bind_timeout=30)
    for obj in (storage_class("local"), claim("c1", cls="local"), claim("c2", cls="local"),
                volume("pv-a", cls="local", node="node-a")):  # fmt: skip
        state.apply_storage("ADDED", obj)
    return state


def after_backoff(state: SchedulerState, clock: FakeClock) -> None:
    clock.advance(30)
    state.queue.flush()


def test_the_decision_carries_the_chosen_volume(clock: FakeClock) -> None:
    state = local_state(clock)
    state.apply_pod("ADDED", claim_pod("p1", "c1", scheduler_name="splitsched"))
    d = decide(state)
    assert d.node == "node-a"
    assert d.volume_bindings == (storage.VolumeBinding("default", "c1", "pv-a"),)
    # The second claim finds the volume taken.
    state.apply_pod("ADDED", claim_pod("p2", "c2", scheduler_name="splitsched"))
    u = parked(state)
    assert u.message == (
        "0/2 nodes are available: 2 node(s) didn't find available persistent volumes to bind."
        + NOT_HELPFUL
    )


def test_a_failed_binding_gives_the_volume_back(clock: FakeClock) -> None:
    state = local_state(clock)
    state.apply_pod("ADDED", claim_pod("p1", "c1", scheduler_name="splitsched"))
    d = decide(state)
    state.apply_pod("ADDED", claim_pod("p2", "c2", scheduler_name="splitsched"))
    parked(state)
    state.on_outcome(decision_id=d.decision_id, result=Outcome.FAILED, message="volume step")
    assert not state.cache.table.storage.is_assumed("pv-a")
    # The release requeued p1 (backoff) and, freeing room, p2: whichever comes first takes
    # the volume, the other waits.
    after_backoff(state, clock)
    d2 = decide(state)
    assert d2.volume_bindings[0].pv_name == "pv-a"
    assert "persistent volumes" in parked(state).message


def test_a_deleted_pod_gives_the_volume_back(clock: FakeClock) -> None:
    state = local_state(clock)
    p1 = claim_pod("p1", "c1", scheduler_name="splitsched")
    state.apply_pod("ADDED", p1)
    decide(state)
    assert state.cache.table.storage.is_assumed("pv-a")
    state.apply_pod("DELETED", p1)
    assert not state.cache.table.storage.is_assumed("pv-a")


def test_a_bound_pods_volume_stays_taken_until_the_watch_shows_it(clock: FakeClock) -> None:
    state = local_state(clock)
    p1 = claim_pod("p1", "c1", scheduler_name="splitsched")
    state.apply_pod("ADDED", p1)
    d = decide(state)
    state.on_outcome(decision_id=d.decision_id, result=Outcome.BOUND)
    state.apply_pod("MODIFIED", dataclasses.replace(p1, node_name="node-a"))
    assert state.records[p1.uid].phase is Phase.BOUND
    view = state.cache.table.storage
    assert view.is_assumed("pv-a")
    c1 = view.claims[("default", "c1")]
    bound = volume("pv-a", cls="local", node="node-a", rv="2",
                   claim_ref=storage.ClaimRef("default", "c1", c1.uid))  # fmt: skip
    state.apply_storage("MODIFIED", bound)
    assert not view.is_assumed("pv-a") and view.volume("pv-a") == bound


def test_storage_events_requeue_what_the_volume_plugins_parked(clock: FakeClock) -> None:
    state = local_state(clock)
    state.apply_storage("DELETED", volume("pv-a", cls="local"))
    state.apply_pod("ADDED", claim_pod("p", "late", scheduler_name="splitsched"))
    u = parked(state)
    assert u.message == '0/2 nodes are available: persistentvolumeclaim "late" not found.' + (
        NOT_HELPFUL
    )
    assert state.queue.lengths()["unschedulable"] == 1
    state.apply_storage("ADDED", claim("late", cls="local"))  # the claim appears
    assert state.queue.lengths()["unschedulable"] == 0
    after_backoff(state, clock)
    u = parked(state)  # ... and waits for a volume now
    assert "didn't find available persistent volumes to bind" in u.message
    state.apply_storage("ADDED", volume("pv-b", cls="local", node="node-b"))
    after_backoff(state, clock)
    d = decide(state)
    assert (d.node, d.volume_bindings) == (
        "node-b",
        (storage.VolumeBinding("default", "late", "pv-b"),),
    )


def test_a_storage_deletion_leaves_the_view(clock: FakeClock) -> None:
    state = local_state(clock)
    state.apply_storage("DELETED", volume("pv-a", cls="local"))
    state.apply_storage("DELETED", claim("c2", cls="local"))
    view = state.cache.table.storage
    assert "pv-a" not in view.volumes and ("default", "c2") not in view.claims
    state.reset()  # a fresh snapshot: a fresh view
    assert not state.cache.table.storage.claims


def test_a_decision_with_volumes_has_the_volume_deadline_and_its_expiry_frees_them(
    clock: FakeClock,
) -> None:
    """The binder of a decision with volume bindings waits for the PV controller first:
    the decision lives `volume_bind_timeout`, not `bind_timeout`, and when it expires
    unbound its volume is free again."""
    state = scheduler_state(clock, nodes=NODES, bind_timeout=30, volume_bind_timeout=120)
    for obj in (storage_class("local"), claim("c1", cls="local"), claim("c2", cls="local"),
                volume("pv-a", cls="local", node="node-a")):  # fmt: skip
        state.apply_storage("ADDED", obj)
    state.apply_pod("ADDED", claim_pod("p1", "c1", scheduler_name="splitsched"))
    state.apply_pod("ADDED", claim_pod("plain", scheduler_name="splitsched"))
    state.apply_pod("ADDED", claim_pod("p2", "c2", scheduler_name="splitsched"))
    first, plain = decide(state), decide(state)
    assert (first.pod.name, first.deadline - first.created) == ("p1", 120)
    assert (plain.pod.name, plain.deadline - plain.created) == ("plain", 30)
    assert "persistent volumes" in parked(state).message  # p2: pv-a is taken
    clock.advance(31)
    assert state.expire_overdue() == 1  # only the plain pod's decision
    assert first.decision_id in state.decisions
    assert state.cache.table.storage.is_assumed("pv-a")
    clock.advance(90)
    assert state.expire_overdue() == 1
    assert not state.cache.table.storage.is_assumed("pv-a")
    assert not state.cache.is_assumed(first.pod.uid)
    after_backoff(state, clock)
    outcomes = state.schedule_one() or []
    outcomes += state.schedule_one() or []
    taken = [d.volume_bindings for d in outcomes if isinstance(d, Decision) and d.volume_bindings]
    assert taken and taken[0][0].pv_name == "pv-a"


def resnapshot(
    state: SchedulerState, objects: list[storage.StorageObject], pods: list[models.Pod]
) -> None:
    """The watcher's stream restarts with a fresh snapshot holding these."""
    state.reset()
    for n in NODES:
        state.apply_node("ADDED", n)
    for obj in objects:
        state.apply_storage("ADDED", obj)
    for p in pods:
        state.apply_pod("ADDED", p)
    state.mark_synced()


def local_objects(pv_a: storage.PersistentVolume | None) -> list[storage.StorageObject]:
    local: list[storage.StorageObject] = [
        storage_class("local"),
        claim("c1", cls="local"),
        claim("c2", cls="local"),
    ]
    return [*local, pv_a] if pv_a is not None else local


def test_a_fresh_snapshot_keeps_the_volume_of_a_decision_in_flight(clock: FakeClock) -> None:
    """The binder has not written yet: the snapshot shows the volume available, but the
    decision in flight still holds it until its outcome."""
    state = local_state(clock)
    p1 = claim_pod("p1", "c1", scheduler_name="splitsched")
    p2 = claim_pod("p2", "c2", scheduler_name="splitsched")
    state.apply_pod("ADDED", p1)
    d = decide(state)
    resnapshot(state, local_objects(volume("pv-a", cls="local", node="node-a")), [p1, p2])
    assert state.cache.is_assumed(p1.uid) and state.cache.table.storage.is_assumed("pv-a")
    assert "didn't find available persistent volumes" in parked(state).message  # p2
    state.on_outcome(decision_id=d.decision_id, result=Outcome.FAILED, message="volume step")
    assert not state.cache.table.storage.is_assumed("pv-a")
    after_backoff(state, clock)
    assert decide(state).volume_bindings[0].pv_name == "pv-a"


def test_a_fresh_snapshot_with_the_binders_write_replaces_the_assumption(
    clock: FakeClock,
) -> None:
    state = local_state(clock)
    p1 = claim_pod("p1", "c1", scheduler_name="splitsched")
    p2 = claim_pod("p2", "c2", scheduler_name="splitsched")
    state.apply_pod("ADDED", p1)
    decide(state)
    c1 = state.cache.table.storage.claims[("default", "c1")]
    written = volume("pv-a", cls="local", node="node-a", rv="2",
                     claim_ref=storage.ClaimRef("default", "c1", c1.uid))  # fmt: skip
    resnapshot(state, local_objects(written), [p1, p2])
    view = state.cache.table.storage
    assert not view.is_assumed("pv-a") and view.volume("pv-a") == written
    assert "didn't find available persistent volumes" in parked(state).message  # p2


def test_an_assumed_volume_gone_from_the_fresh_snapshot_leaves_the_view(
    clock: FakeClock,
) -> None:
    state = local_state(clock)
    p1 = claim_pod("p1", "c1", scheduler_name="splitsched")
    state.apply_pod("ADDED", p1)
    decide(state)
    resnapshot(state, local_objects(None), [p1])
    view = state.cache.table.storage
    assert not view.is_assumed("pv-a") and view.volume("pv-a") is None
    assert state.cache.is_assumed(p1.uid)  # the decision itself is still in flight


def test_an_adopted_decision_holds_the_volumes_its_binder_reports(clock: FakeClock) -> None:
    """A new leader (its view warm from the watch, nothing assumed) learns from a binder's
    IN_PROGRESS report of a decision whose volume step may still write: it holds the volume
    as its own, gives the decision the volume deadline, and frees the volume when the
    decision fails."""
    state = local_state(clock)  # a fresh scheduler over the same cluster
    p1 = claim_pod("p1", "c1", scheduler_name="splitsched")
    p2 = claim_pod("p2", "c2", scheduler_name="splitsched")
    state.apply_pod("ADDED", p1)
    state.apply_pod("ADDED", p2)
    writes = (storage.VolumeBinding("default", "c1", "pv-a"),)
    assert state.on_outcome(
        decision_id="old-1", result=Outcome.IN_PROGRESS, pod_uid=p1.uid, node="node-a",
        binder_id="b", volume_bindings=writes,
    )  # fmt: skip
    adopted = state.decisions["old-1"]
    assert adopted.volume_bindings == writes
    assert adopted.deadline - adopted.created == state.volume_bind_timeout
    assert state.cache.table.storage.is_assumed("pv-a")
    assert "didn't find available persistent volumes" in parked(state).message  # p2
    state.on_outcome(decision_id="old-1", result=Outcome.FAILED, message="claimref_reset")
    assert not state.cache.table.storage.is_assumed("pv-a")
    after_backoff(state, clock)
    assert decide(state).volume_bindings[0].pv_name == "pv-a"
