"""The scheduler's state machine keeps nominated pods' rooms: a scheduler that restarted (or
took over) sees pending preemptors with `status.nominatedNodeName` in the watch and does not
give their rooms to pods of lower or equal priority; the room comes back when the
nomination is cleared, the nominee is deleted or binds elsewhere. Driven directly with a
fake clock: watch events in, decisions out."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from services.scheduler.state import Decision, Outcome, SchedulerState, Unschedulable
from splitsched.core import models
from splitsched.core.clock import FakeClock
from tests.support.builders import small_node as node
from tests.support.builders import splitsched_pod


def pod(name: str, cpu: int = 600, *, priority: int = 100, **kw: Any) -> models.Pod:
    return splitsched_pod(name, cpu, priority=priority, **kw)


def restarted_view(state: SchedulerState) -> models.Pod:
    """What a new leader's snapshot shows after its predecessor's preemption on n1 finished:
    n1 empty, n2 full, the preemptor pending with n1 nominated, and an equal-priority pod
    that never preempts queued ahead of it."""
    state.apply_node("ADDED", node("n1"))
    state.apply_node("ADDED", node("n2"))
    state.apply_pod("ADDED", pod("resident", node_name="n2"))
    state.apply_pod("ADDED", pod("polite", creation_timestamp=1.0, preemption_policy="Never"))
    preemptor = pod("preemptor", creation_timestamp=2.0, nominated_node_name="n1")
    state.apply_pod("ADDED", preemptor)
    state.mark_synced()
    return preemptor


def outcome(state: SchedulerState) -> Decision | Unschedulable:
    out = state.schedule_one()
    assert out is not None and len(out) == 1, out
    return out[0]


def test_equal_priority_pod_does_not_take_the_nominated_room(state: SchedulerState) -> None:
    restarted_view(state)
    first = outcome(state)
    assert isinstance(first, Unschedulable) and first.pod.name == "polite"
    assert "Insufficient cpu" in first.message
    second = outcome(state)
    assert isinstance(second, Decision)
    assert second.pod.name == "preemptor" and second.node == "n1" and not second.victims
    state.cache.check_invariants()


def test_room_held_until_bound_then_the_nomination_is_gone(state: SchedulerState) -> None:
    preemptor = restarted_view(state)
    outcome(state)  # polite parks
    bind = outcome(state)
    assert isinstance(bind, Decision)
    assert state.on_outcome(decision_id=bind.decision_id, result=Outcome.BOUND)
    state.apply_pod("MODIFIED", replace(preemptor, node_name="n1"))
    assert "uid-preemptor" not in state.nominator
    assert len(state.nominator) == 0


@pytest.mark.parametrize("how", ["cleared", "deleted", "bound elsewhere"])
def test_room_comes_back_when_the_nomination_ends(
    state: SchedulerState, clock: FakeClock, how: str
) -> None:
    preemptor = restarted_view(state)
    state.apply_node("ADDED", node("n3", cpu=600))
    state.apply_pod("ADDED", pod("n3-resident", node_name="n3", cpu=100))  # n3 fits no one
    first = outcome(state)
    assert isinstance(first, Unschedulable) and first.pod.name == "polite"
    if how == "cleared":
        state.apply_pod("MODIFIED", replace(preemptor, nominated_node_name=""))
    elif how == "deleted":
        state.apply_pod("DELETED", preemptor)
    else:
        state.apply_pod("DELETED", pod("n3-resident", node_name="n3", cpu=100))
        state.apply_pod("MODIFIED", replace(preemptor, node_name="n3"))
    assert len(state.nominator) == 0
    # The pod the room kept out is requeued by the nomination's end.
    assert state.queue.place_of("uid-polite") in ("active", "backoff")
    if how == "cleared":
        state.apply_pod("DELETED", preemptor)  # out of polite's way in the queue
    clock.advance(30)  # past polite's backoff
    state.queue.flush()
    again = outcome(state)
    assert isinstance(again, Decision), again
    assert again.pod.name == "polite" and again.node == "n1"


def test_higher_priority_pod_may_take_the_nominated_room(state: SchedulerState) -> None:
    restarted_view(state)
    state.apply_pod("ADDED", pod("vip", priority=1000, creation_timestamp=3.0))
    vip = outcome(state)
    assert isinstance(vip, Decision) and vip.pod.name == "vip" and vip.node == "n1"


def test_own_preemption_nominates_and_a_refused_one_follows_the_watch(
    state: SchedulerState,
) -> None:
    state.apply_node("ADDED", node("n1"))
    state.apply_pod("ADDED", pod("low", cpu=800, priority=1, node_name="n1"))
    vip = pod("vip")
    state.apply_pod("ADDED", vip)
    state.mark_synced()
    pre = outcome(state)
    assert isinstance(pre, Decision) and pre.victims
    assert state.nominator.node_of("uid-vip") == "n1"
    # The binder set the nomination before an eviction was refused: the watch shows it.
    state.apply_pod("MODIFIED", replace(vip, nominated_node_name="n1"))
    assert state.on_outcome(decision_id=pre.decision_id, result=Outcome.FAILED, message="PDB")
    assert not state.cache.is_assumed("uid-vip")
    assert state.nominator.node_of("uid-vip") == "n1"
    # Refused before the binder wrote anything: the watch never showed a nomination.
    state.apply_pod("MODIFIED", replace(vip, nominated_node_name=""))
    assert "uid-vip" not in state.nominator


def test_reset_forgets_nominations_and_the_snapshot_brings_them_back(
    state: SchedulerState,
) -> None:
    preemptor = restarted_view(state)
    assert state.nominator.node_of(preemptor.uid) == "n1"
    state.reset()
    assert len(state.nominator) == 0
    state.apply_pod("ADDED", preemptor)
    assert state.nominator.node_of(preemptor.uid) == "n1"
