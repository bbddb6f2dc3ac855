"""Gated pods in the scheduler's state (kube-scheduler's SchedulingGates PreEnqueue plugin):
a pending pod with scheduling gates is GATED, held apart in the queue, never tried, never
nominated, never adopted from a binder, and nothing is emitted for it; the update that
removes its last gate queues it and it is scheduled like any pod. Driven directly with a
fake clock: watch events in, decisions out."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from services.scheduler.state import (
    Decision,
    DecisionEvent,
    Outcome,
    Phase,
    SchedulerState,
    Unschedulable,
)
from splitsched.core import models
from splitsched.core.clock import FakeClock
from tests.support.builders import gang_pod, splitsched_pod
from tests.support.builders import small_node as node
from tests.support.scheduler import decide, parked

GATE = "example.com/foo"


def gated(name: str, *gates: str, **fields: Any) -> models.Pod:
    return splitsched_pod(name, scheduling_gates=gates or (GATE,), **fields)


def listen(state: SchedulerState) -> list[DecisionEvent]:
    events: list[DecisionEvent] = []
    state.listeners.append(events.append)
    return events


def test_a_gated_pod_is_never_tried_and_nothing_is_emitted(state: SchedulerState) -> None:
    # Were it tried, it would preempt the low-priority pod filling n1.
    state.apply_node("ADDED", node("n1"))
    state.apply_pod("ADDED", splitsched_pod("low", 1000, node_name="n1", priority=0))
    events = listen(state)
    state.apply_pod("ADDED", gated("g", GATE, "example.com/bar", priority=1000))
    rec = state.find("ns", "g")
    assert rec is not None and rec.phase is Phase.GATED
    assert rec.message == "waiting for its scheduling gates: example.com/foo, example.com/bar"
    assert state.queue.place_of("uid-g") == "gated"
    assert state.schedule_one() is None
    assert rec.scheduling_attempts == 0 and events == []
    assert not state.decisions and "uid-g" not in state.cache


def test_removing_one_gate_keeps_it_gated_and_the_last_one_queues_it(
    state: SchedulerState, clock: FakeClock
) -> None:
    state.apply_node("ADDED", node("n1"))
    state.apply_pod("ADDED", gated("g", GATE, "example.com/bar"))
    clock.advance(30)
    state.apply_pod("MODIFIED", gated("g", "example.com/bar", resource_version="2"))
    rec = state.find("ns", "g")
    assert rec is not None and rec.phase is Phase.GATED
    assert rec.message == "waiting for its scheduling gates: example.com/bar"
    assert state.schedule_one() is None
    clock.advance(30)
    state.apply_pod("MODIFIED", splitsched_pod("g", resource_version="3"))
    rec = state.find("ns", "g")
    assert rec is not None and rec.phase is Phase.WAITING and rec.message == ""
    assert state.queue.place_of("uid-g") == "active"
    # Seen at 100, queued at 160: the scheduling SLI runs from the latter.
    assert (rec.first_seen, rec.queued_at) == (100.0, 160.0)
    d = decide(state)
    assert (d.pod.name, d.node, d.pod.scheduling_gates) == ("g", "n1", ())
    assert state.records["uid-g"].phase is Phase.BINDING


def test_a_gated_pod_holds_no_nominated_room(state: SchedulerState) -> None:
    # kube-scheduler nominates a pod only when it enters the active queue: a gated pod's
    # status.nominatedNodeName (an earlier preemption) keeps nothing from other pods.
    state.apply_node("ADDED", node("n1"))
    state.apply_pod("ADDED", gated("vip", cpu=600, priority=1000, nominated_node_name="n1"))
    assert "uid-vip" not in state.nominator
    state.apply_pod("ADDED", splitsched_pod("low", cpu=600, priority=0))
    d = decide(state)
    assert (d.pod.name, d.node) == ("low", "n1")
    # Once released, its nomination counts again (it is no longer gated).
    state.apply_pod("MODIFIED", splitsched_pod("vip", 600, priority=1000, nominated_node_name="n1"))
    assert state.nominator.node_of("uid-vip") == "n1"


def test_a_gated_pod_that_gets_a_nomination_is_not_nominated(state: SchedulerState) -> None:
    state.apply_node("ADDED", node("n1"))
    state.apply_pod("ADDED", splitsched_pod("p", nominated_node_name="n1"))
    assert state.nominator.node_of("uid-p") == "n1"
    # Not possible through the API server (gates are only removed), but a gated version
    # always drops the nomination.
    state.apply_pod("MODIFIED", gated("p", nominated_node_name="n1"))
    assert "uid-p" not in state.nominator


def test_deleting_a_gated_pod_forgets_it(state: SchedulerState) -> None:
    state.apply_pod("ADDED", gated("g"))
    state.apply_pod("DELETED", gated("g"))
    assert state.find("ns", "g") is None and "uid-g" not in state.queue


def test_a_binder_report_for_a_gated_pod_is_not_adopted(state: SchedulerState) -> None:
    # A binder still carrying a predecessor's decision for a gated pod (as an older version
    # made them): the API server refuses that Binding, so its room is never held here.
    state.apply_node("ADDED", node("n1"))
    state.apply_pod("ADDED", gated("g"))
    adopted = state.on_outcome(
        decision_id="old-1", result=Outcome.IN_PROGRESS, binder_id="b0", pod_uid="uid-g",
        node="n1",
    )  # fmt: skip
    assert adopted is False
    rec = state.find("ns", "g")
    assert rec is not None and rec.phase is Phase.GATED and "uid-g" not in state.cache


def test_a_gated_gang_member_keeps_its_gang_waiting_until_released(
    state: SchedulerState,
) -> None:
    state.apply_node("ADDED", node("n1", cpu=2000))
    state.apply_pod("ADDED", gang_pod("a", size=2))
    state.apply_pod("ADDED", replace(gang_pod("b", size=2), scheduling_gates=(GATE,)))
    waiting = parked(state)
    assert "1 of 2 members pending" in waiting.message
    assert state.queue.place_of("uid-a") == "unschedulable"
    state.apply_pod("MODIFIED", gang_pod("b", size=2))
    out = state.schedule_one()
    assert out is not None and sorted(d.pod.name for d in out if isinstance(d, Decision)) == [
        "a",
        "b",
    ]


def test_an_invalid_gated_pod_is_left_alone_until_released(state: SchedulerState) -> None:
    state.apply_node("ADDED", node("n1"))
    bad = gated("bad", invalid_reason="pod ns/bad: spec.containers[0]...: invalid quantity")
    state.apply_pod("ADDED", bad)
    assert state.schedule_one() is None
    state.apply_pod("MODIFIED", replace(bad, scheduling_gates=()))
    u = parked(state)
    assert isinstance(u, Unschedulable) and "pod is invalid" in u.message


def test_a_resync_keeps_a_gated_pod_gated(state: SchedulerState) -> None:
    state.apply_pod("ADDED", gated("g"))
    state.reset()
    state.apply_pod("ADDED", gated("g"))
    state.mark_synced()
    rec = state.find("ns", "g")
    assert rec is not None and rec.phase is Phase.GATED
    assert state.queue.lengths()["gated"] == 1 and state.schedule_one() is None
