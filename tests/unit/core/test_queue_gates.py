"""The queue's gated place, kube-scheduler's SchedulingGates PreEnqueue plugin: a pod with
scheduling gates is held apart from active, backoff and the unschedulable pool, is never
popped, moved by a cluster event or flushed by a timeout, and goes to active when an update
shows its last gate removed, keeping its place in line from when it was added."""

from __future__ import annotations

import pytest

from splitsched.core.clock import FakeClock
from splitsched.core.framework import ALL_EVENTS, ClusterEvent
from splitsched.core.models import Pod
from splitsched.core.queue import QueuedPod, SchedulingQueue

GATE = "example.com/foo"
FIT = frozenset({"NodeResourcesFit"})


def pod(uid: str, priority: int = 0, gates: tuple[str, ...] = ()) -> Pod:
    return Pod(uid=uid, namespace="ns", name=uid, priority=priority, scheduling_gates=gates)


def make() -> tuple[SchedulingQueue, FakeClock]:
    clock = FakeClock(1000.0)
    return SchedulingQueue(clock=clock), clock


def drain(q: SchedulingQueue) -> list[str]:
    out = []
    while (qp := q.pop()) is not None:
        out.append(qp.uid)
    return out


def test_a_gated_pod_is_held_apart_and_never_popped() -> None:
    q, clock = make()
    q.add(pod("g", priority=1000, gates=(GATE,)))
    q.add(pod("a"))
    assert q.place_of("g") == "gated"
    assert q.lengths() == {
        "active": 1, "backoff": 0, "unschedulable": 0, "in_flight": 0, "gated": 1,
    }  # fmt: skip
    assert "g" in q and len(q) == 2
    assert [p.uid for p in q.pending_pods()] == ["a"]  # a gang never counts it as pending
    assert drain(q) == ["a"]
    for event in ClusterEvent:
        assert q.on_event(event) == 0
    clock.advance(10_000)
    assert q.flush() == 0
    assert q.pop() is None and q.place_of("g") == "gated"


def test_removing_one_of_two_gates_keeps_it_gated() -> None:
    q, _ = make()
    q.add(pod("g", gates=(GATE, "example.com/bar")))
    q.update(pod("g", gates=("example.com/bar",)))
    assert q.place_of("g") == "gated"
    got = q.get("g")
    assert got is not None and got.pod.scheduling_gates == ("example.com/bar",)


def test_the_last_gate_removed_sends_it_to_active_in_its_place_in_line() -> None:
    # kube-scheduler's queue timestamp is taken when the pod is added (gated or not), so a
    # pod released later still goes before pods of its priority added after it.
    q, clock = make()
    q.add(pod("g", gates=(GATE,)))
    clock.advance(1)
    q.add(pod("a"))
    q.add(pod("low", priority=-1))
    clock.advance(60)
    q.update(pod("g"))
    assert q.place_of("g") == "active"
    first = q.pop()
    assert first is not None
    assert (first.uid, first.attempts, first.pod.scheduling_gates) == ("g", 1, ())
    assert drain(q) == ["a", "low"]


def test_a_released_pod_schedules_at_once_without_backoff() -> None:
    q, _ = make()
    q.add(pod("g", gates=(GATE,)))
    q.add(pod("g"))  # `add` of a tracked pod is its update
    assert q.place_of("g") == "active"


def test_deleting_a_gated_pod_forgets_it() -> None:
    q, _ = make()
    q.add(pod("g", gates=(GATE,)))
    assert q.delete("g") is True
    assert "g" not in q and sum(q.lengths().values()) == 0
    q.update(pod("g"))  # a late update of a deleted pod tracks it anew
    assert q.place_of("g") == "active"


@pytest.mark.parametrize("way", ["unschedulable", "backoff"])
def test_a_pod_that_gained_gates_in_flight_is_gated_on_its_return(way: str) -> None:
    # The API server refuses to add a gate after creation; the queue still never lets a
    # gated pod reach a scheduling cycle, whatever order updates come in.
    q, _ = make()
    q.add(pod("a"))
    qp = q.pop()
    assert qp is not None
    q.update(pod("a", gates=(GATE,)))
    assert q.place_of("a") == "in_flight"
    if way == "unschedulable":
        where = q.add_unschedulable(qp, plugins=FIT, events=ALL_EVENTS)
    else:
        where = q.add_backoff(qp)
    assert where == "gated" and q.pop() is None


@pytest.mark.parametrize("place", ["active", "backoff", "unschedulable"])
def test_a_waiting_pod_that_gained_gates_is_gated(place: str) -> None:
    q, _ = make()
    q.add(pod("a"))
    if place != "active":
        qp = q.pop()
        assert qp is not None
        if place == "backoff":
            q.add_backoff(qp)
        else:
            q.add_unschedulable(qp, plugins=FIT, events=frozenset({ClusterEvent.NODE_ADD}))
    assert q.place_of("a") == place
    q.update(pod("a", gates=(GATE,)))
    assert q.place_of("a") == "gated"
    assert q.on_event(ClusterEvent.NODE_ADD) == 0
    assert q.flush(now=10**9) == 0
    assert q.pop() is None


def test_a_bind_failure_of_a_pod_now_gated_parks_it_gated() -> None:
    q, _ = make()
    q.add(pod("a"))
    qp = q.pop()
    assert qp is not None and q.done("a")
    assert q.add_backoff(QueuedPod(pod=pod("a", gates=(GATE,)), attempts=1)) == "gated"
