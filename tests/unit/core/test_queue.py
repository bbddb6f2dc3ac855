"""Unit tests of the scheduling queue against kube-scheduler's PriorityQueue semantics:
priority-then-arrival order, exponential backoff (1 s doubling to 10 s), the unschedulable
pool requeued by matching cluster events or after 5 minutes, and the in-flight rule that an
event arriving during a pod's attempt sends it to backoff instead of stranding it."""

from __future__ import annotations

import dataclasses

import hypothesis.strategies as st
import pytest
from hypothesis import settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from splitsched.core.clock import FakeClock
from splitsched.core.framework import ClusterEvent
from splitsched.core.models import Pod
from splitsched.core.queue import QueuedPod, QueueError, SchedulingQueue

NODE_ADD = ClusterEvent.NODE_ADD
NODE_TAINT = ClusterEvent.NODE_TAINT
POD_DELETE = ClusterEvent.ASSIGNED_POD_DELETE
FIT = frozenset({"NodeResourcesFit"})


def pod(uid: str, priority: int = 0, **kw: object) -> Pod:
    return Pod(uid=uid, namespace="ns", name=uid, priority=priority, **kw)  # type: ignore[arg-type]


def make() -> tuple[SchedulingQueue, FakeClock]:
    clock = FakeClock(1000.0)
    return SchedulingQueue(clock=clock), clock


def pop(q: SchedulingQueue) -> QueuedPod:
    qp = q.pop()
    assert qp is not None
    return qp


def drain(q: SchedulingQueue) -> list[str]:
    out = []
    while (qp := q.pop()) is not None:
        out.append(qp.uid)
    return out


def park(q: SchedulingQueue, uid: str, events: frozenset[ClusterEvent]) -> QueuedPod:
    """Pop `uid` (which must be next) and report it unschedulable."""
    qp = pop(q)
    assert qp.uid == uid
    assert q.add_unschedulable(qp, plugins=FIT, events=events) == "unschedulable"
    return qp


# ---- ordering ----------------------------------------------------------------------------
def test_higher_priority_first_then_fifo() -> None:
    q, _ = make()
    for uid, prio in [("a", 0), ("b", 10), ("c", 0), ("d", 10), ("e", -5), ("f", 1000)]:
        q.add(pod(uid, prio))
    assert drain(q) == ["f", "b", "d", "a", "c", "e"]


def test_pop_on_empty_returns_none_and_counts_attempts() -> None:
    q, _ = make()
    assert q.pop() is None
    q.add(pod("a"))
    qp = pop(q)
    assert qp.attempts == 1
    assert qp.first_enqueued == 1000.0
    assert q.lengths() == {
        "active": 0, "backoff": 0, "unschedulable": 0, "in_flight": 1, "gated": 0,
    }  # fmt: skip
    assert q.place_of("a") == "in_flight"
    assert q.pop() is None


def test_requeued_pod_sorts_by_its_failure_time() -> None:
    # kube-scheduler sorts equal priorities by the queue timestamp, refreshed when a pod
    # comes back from a failed attempt: a pod that failed before another arrived goes first.
    q, clock = make()
    q.add(pod("a"))
    qa = pop(q)
    clock.advance(1)
    q.add_backoff(qa)  # failed at 1001, backoff until 1002
    clock.advance(0.5)
    q.add(pod("b"))  # arrives at 1001.5
    clock.advance(0.5)
    q.flush()
    assert drain(q) == ["a", "b"]


def test_priority_update_reorders_active() -> None:
    q, _ = make()
    q.add(pod("a", 1))
    q.add(pod("b", 5))
    q.update(pod("a", 9))
    assert drain(q) == ["a", "b"]


def test_duplicate_add_is_an_update() -> None:
    q, _ = make()
    q.add(pod("a", 1))
    q.add(pod("a", 3))
    assert len(q) == 1
    assert q.lengths()["active"] == 1
    qp = pop(q)
    assert qp.pod.priority == 3
    assert q.pop() is None


# ---- backoff ------------------------------------------------------------------------------
def test_backoff_durations_double_to_the_cap() -> None:
    q, _ = make()
    assert [q.backoff_duration(n) for n in range(0, 8)] == [0, 1, 2, 4, 8, 10, 10, 10]


def test_backoff_after_each_failed_attempt_1_2_4_8_10_10() -> None:
    q, clock = make()
    q.add(pod("a"))
    for expected in (1.0, 2.0, 4.0, 8.0, 10.0, 10.0):
        qp = pop(q)
        assert q.add_backoff(qp) == "backoff"
        clock.advance(expected - 0.01)
        assert q.flush() == 0
        assert q.place_of("a") == "backoff"
        clock.advance(0.01)
        assert q.flush() == 1
        assert q.place_of("a") == "active"
    assert pop(q).attempts == 7


def test_flush_moves_only_expired_backoff_pods() -> None:
    q, clock = make()
    q.add(pod("a"))
    q.add(pod("b"))
    q.add_backoff(pop(q))  # a: until 1001.0
    clock.advance(0.5)
    q.add_backoff(pop(q))  # b: until 1001.5
    clock.advance(0.5)
    assert q.flush() == 1
    assert (q.place_of("a"), q.place_of("b")) == ("active", "backoff")
    clock.advance(0.49)
    assert q.flush() == 0
    clock.advance(0.01)
    assert q.flush() == 1
    assert drain(q) == ["a", "b"]


def test_flush_uses_given_time() -> None:
    q, _ = make()
    q.add(pod("a"))
    q.add_backoff(pop(q))
    assert q.flush(now=1000.5) == 0
    assert q.flush(now=1001.0) == 1
    assert q.place_of("a") == "active"


def test_backoff_expiries_ordered_independently_of_priority() -> None:
    q, clock = make()
    q.add(pod("hi", 100))
    q.add(pod("lo", 0))
    hi = pop(q)
    # hi fails twice (2 s backoff at the second), lo fails once (1 s).
    q.add_backoff(hi)
    clock.advance(1)
    q.flush()
    hi2 = pop(q)
    assert hi2.uid == "hi"
    lo = pop(q)
    q.add_backoff(hi2)  # until now + 2
    q.add_backoff(lo)  # until now + 1
    clock.advance(1)
    assert q.flush() == 1
    assert q.place_of("lo") == "active" and q.place_of("hi") == "backoff"
    clock.advance(1)
    assert q.flush() == 1
    assert drain(q) == ["hi", "lo"]


# ---- unschedulable pool and events ---------------------------------------------------------
def test_event_requeues_only_pods_waiting_for_it() -> None:
    q, clock = make()
    q.add(pod("waits-node"))
    q.add(pod("waits-pod"))
    park(q, "waits-node", frozenset({NODE_ADD}))
    park(q, "waits-pod", frozenset({POD_DELETE}))
    clock.advance(60)  # both backoffs (1 s) long over
    assert q.on_event(NODE_TAINT) == 0
    assert q.lengths()["unschedulable"] == 2
    assert q.on_event(NODE_ADD) == 1
    assert q.place_of("waits-node") == "active"
    assert q.place_of("waits-pod") == "unschedulable"
    assert q.on_event(NODE_ADD) == 0
    assert q.on_event(POD_DELETE) == 1
    assert drain(q) == ["waits-node", "waits-pod"]


def test_a_hinted_event_moves_only_the_pods_its_hint_says_yes_to() -> None:
    """kube's queueing hints: the others keep waiting for the same event."""
    q, clock = make()
    for uid in ("a", "b", "c"):
        q.add(pod(uid))
        park(q, uid, frozenset({NODE_ADD}))
    clock.advance(60)
    assert q.on_event(NODE_ADD, lambda p: p.uid == "b") == 1
    assert [q.place_of(u) for u in "abc"] == ["unschedulable", "active", "unschedulable"]
    assert q.on_event(NODE_ADD, lambda p: False) == 0
    assert q.on_event(NODE_ADD) == 2  # no hint: everyone waiting for it
    assert drain(q) == ["a", "b", "c"]


def test_event_moves_pod_still_backing_off_to_backoff() -> None:
    q, clock = make()
    q.add(pod("a"))
    park(q, "a", frozenset({NODE_ADD, NODE_TAINT}))
    clock.advance(0.5)
    assert q.on_event(NODE_TAINT) == 1
    assert q.place_of("a") == "backoff"
    # It is not registered for NODE_ADD any more.
    assert q.on_event(NODE_ADD) == 0
    clock.advance(0.5)
    q.flush()
    assert q.place_of("a") == "active"


def test_event_during_flight_sends_rejected_pod_to_backoff() -> None:
    q, clock = make()
    q.add(pod("a"))
    qp = pop(q)
    q.on_event(NODE_ADD)  # e.g. a node joined while "a" was being filtered
    assert q.add_unschedulable(qp, plugins=FIT, events=frozenset({NODE_ADD})) == "backoff"
    assert q.lengths()["unschedulable"] == 0
    clock.advance(1)
    q.flush()
    assert q.place_of("a") == "active"


def test_irrelevant_event_during_flight_still_parks() -> None:
    q, _ = make()
    q.add(pod("a"))
    qp = pop(q)
    q.on_event(NODE_TAINT)
    assert q.add_unschedulable(qp, plugins=FIT, events=frozenset({NODE_ADD})) == "unschedulable"


def test_events_before_the_attempt_do_not_count() -> None:
    q, _ = make()
    q.add(pod("a"))
    q.add(pod("b"))
    first = pop(q)
    q.on_event(NODE_ADD)  # arrives while "a" is in flight, before "b" is popped
    q.add_unschedulable(first, plugins=FIT, events=frozenset({NODE_ADD}))
    second = pop(q)
    assert second.uid == "b"
    assert q.add_unschedulable(second, plugins=FIT, events=frozenset({NODE_ADD})) == (
        "unschedulable"
    )
    assert q.place_of("a") == "backoff"


def test_unschedulable_without_plugins_goes_to_backoff() -> None:
    q, _ = make()
    q.add(pod("a"))
    assert q.add_unschedulable(pop(q), plugins=frozenset(), events=frozenset()) == "backoff"


def test_unschedulable_snapshot_remembers_plugins() -> None:
    q, clock = make()
    q.add(pod("a"))
    clock.advance(3)
    qp = pop(q)
    q.add_unschedulable(qp, plugins=frozenset({"TaintToleration"}), events=frozenset())
    got = q.get("a")
    assert got is not None
    assert got.unschedulable_plugins == frozenset({"TaintToleration"})
    assert got.enqueued_at == 1003.0
    assert got.first_enqueued == 1000.0
    assert got.attempts == 1


def test_activated_at_is_when_the_pod_last_entered_active() -> None:
    # Where an attempt's trace starts (services/scheduler/traces.py): a retry's wait in
    # backoff or the unschedulable pool, or a pod's behind its gates, is not counted.
    q, clock = make()
    q.add(pod("parked"))
    q.add(pod("backing-off"))
    q.add(pod("gated", scheduling_gates=("example.com/a",)))
    clock.advance(2)
    parked = pop(q)
    assert parked.activated_at == 1000.0
    q.add_unschedulable(parked, plugins=FIT, events=frozenset({NODE_ADD}))
    q.add_backoff(pop(q))
    clock.advance(58)
    assert q.on_event(NODE_ADD) == 1  # at 1060, its 1 s backoff long over
    q.update(pod("parked", priority=5))  # a re-sort in active keeps its time
    clock.advance(5)
    assert q.flush() == 1  # "backing-off" at 1065
    clock.advance(5)
    q.update(pod("gated"))  # its last gate removed at 1070
    got = {qp.uid: qp for qp in (pop(q), pop(q), pop(q))}
    assert {uid: qp.activated_at for uid, qp in got.items()} == {
        "parked": 1060.0, "backing-off": 1065.0, "gated": 1070.0,
    }  # fmt: skip
    assert got["parked"].enqueued_at == 1002.0  # its failure: backoff ran from there


def test_long_unschedulable_pods_are_flushed_after_five_minutes() -> None:
    q, clock = make()
    q.add(pod("old"))
    park(q, "old", frozenset({NODE_ADD}))
    clock.advance(100)
    q.add(pod("young"))
    park(q, "young", frozenset({NODE_ADD}))
    clock.advance(200)  # "old" has waited exactly 300 s: not longer than the limit
    assert q.flush() == 0
    clock.advance(0.001)
    assert q.flush() == 1
    assert q.place_of("old") == "active"
    assert q.place_of("young") == "unschedulable"
    clock.advance(100)
    assert q.flush() == 1
    assert q.place_of("young") == "active"


# ---- update / delete in each place ----------------------------------------------------------
def test_update_in_backoff_keeps_it_there() -> None:
    q, clock = make()
    q.add(pod("a"))
    q.add_backoff(pop(q))
    q.update(pod("a", labels={"x": "1"}))
    assert q.place_of("a") == "backoff"
    clock.advance(1)
    q.flush()
    assert pop(q).pod.labels == {"x": "1"}


def test_update_in_unschedulable_with_spec_change_moves_it() -> None:
    q, clock = make()
    q.add(pod("a"))
    park(q, "a", frozenset({NODE_ADD}))
    q.update(pod("a", resource_version="2"))  # status-only churn: stays parked
    assert q.place_of("a") == "unschedulable"
    q.update(pod("a", tolerations=()))  # equal spec again: still parked
    assert q.place_of("a") == "unschedulable"
    q.update(pod("a", node_selector={"zone": "b"}))
    assert q.place_of("a") == "backoff"  # failed < 1 s ago
    clock.advance(5)
    q.add(pod("b"))
    park(q, "b", frozenset({NODE_ADD}))
    clock.advance(5)
    q.update(pod("b", labels={"app": "x"}))
    assert q.place_of("b") == "active"


def test_update_during_flight_sends_rejected_pod_to_backoff() -> None:
    q, _ = make()
    q.add(pod("a"))
    qp = pop(q)
    q.update(pod("a", node_selector={"disk": "ssd"}))
    assert q.place_of("a") == "in_flight"
    assert q.add_unschedulable(qp, plugins=FIT, events=frozenset({NODE_ADD})) == "backoff"
    got = q.get("a")
    assert got is not None and got.pod.node_selector == {"disk": "ssd"}


def test_update_of_unknown_pod_adds_it() -> None:
    q, _ = make()
    q.update(pod("a"))
    assert q.place_of("a") == "active"


@pytest.mark.parametrize("place", ["active", "backoff", "unschedulable"])
def test_delete_from_each_queue(place: str) -> None:
    q, _ = make()
    q.add(pod("a"))
    q.add(pod("b"))
    if place != "active":
        qp = pop(q)
        if place == "backoff":
            q.add_backoff(qp)
        else:
            q.add_unschedulable(qp, plugins=FIT, events=frozenset({NODE_ADD}))
    assert q.place_of("a") == place
    assert q.delete("a") is True
    assert "a" not in q
    assert q.delete("a") is False
    assert q.on_event(NODE_ADD) == 0
    q.flush(now=10**9)
    assert drain(q) == ["b"]
    assert q.lengths() == {
        "active": 0, "backoff": 0, "unschedulable": 0, "in_flight": 1, "gated": 0,
    }  # fmt: skip


def test_delete_during_flight_drops_the_requeue() -> None:
    q, _ = make()
    q.add(pod("a"))
    qp = pop(q)
    assert q.delete("a") is True
    assert q.lengths()["in_flight"] == 0
    assert q.add_unschedulable(qp, plugins=FIT, events=frozenset({NODE_ADD})) == "dropped"
    assert "a" not in q
    assert sum(q.lengths().values()) == 0


# ---- done and re-tracking -------------------------------------------------------------------
def test_done_stops_tracking_and_bind_failure_retracks() -> None:
    q, clock = make()
    q.add(pod("a"))
    qp = pop(q)
    assert q.done("a") is True
    assert "a" not in q and sum(q.lengths().values()) == 0
    assert q.done("a") is False
    # The bind failed after the pod was assumed: it comes back with its attempts.
    assert q.add_backoff(qp) == "backoff"
    clock.advance(1)
    q.flush()
    again = pop(q)
    assert (again.uid, again.attempts, again.first_enqueued) == ("a", 2, 1000.0)


def test_returning_a_queued_pod_is_an_error() -> None:
    q, _ = make()
    q.add(pod("a"))
    qp = pop(q)
    q.add_backoff(qp)
    with pytest.raises(QueueError, match="already in the backoff"):
        q.add_unschedulable(qp, plugins=FIT, events=frozenset())
    with pytest.raises(QueueError):
        q.add_backoff(qp)
    assert q.lengths()["backoff"] == 1


def test_pending_pods_lists_waiting_pods_not_in_flight() -> None:
    q, _ = make()
    for uid in "abcd":
        q.add(pod(uid))
    q.add_backoff(pop(q))  # a
    park(q, "b", frozenset({NODE_ADD}))
    pop(q)  # c in flight
    assert sorted(p.uid for p in q.pending_pods()) == ["a", "b", "d"]


def test_many_updates_keep_heap_order() -> None:
    q, _ = make()
    for i in range(200):
        q.add(pod(f"p{i}", 0))
    for rnd in range(5):
        for i in range(200):
            q.update(pod(f"p{i}", (i * 7 + rnd) % 13))
    popped = [pop(q) for _ in range(200)]
    keys = [(-p.pod.priority, int(p.uid[1:])) for p in popped]
    assert keys == sorted(keys)
    assert q.pop() is None


# ---- no pod lost or duplicated --------------------------------------------------------------
UIDS = tuple(f"p{i}" for i in range(10))
EVENTS = st.sampled_from(list(ClusterEvent))


GATES = st.sampled_from([(), (), ("example.com/a",), ("example.com/a", "example.com/b")])


class QueueMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.clock = FakeClock()
        self.q = SchedulingQueue(clock=self.clock)
        self.live: set[str] = set()  # added and not deleted / done
        self.flying: dict[str, QueuedPod] = {}
        self.done_snapshots: dict[str, QueuedPod] = {}
        self.gone: set[str] = set()  # deleted: a uid never comes back
        self.gated: set[str] = set()  # the latest version has scheduling gates

    def _seen(self, uid: str, gates: tuple[str, ...]) -> None:
        self.live.add(uid)
        self.done_snapshots.pop(uid, None)
        if gates:
            self.gated.add(uid)
        else:
            self.gated.discard(uid)

    @rule(uid=st.sampled_from(UIDS), prio=st.integers(-2, 2), gates=GATES)
    def add(self, uid: str, prio: int, gates: tuple[str, ...]) -> None:
        if uid in self.gone:
            return
        self.q.add(pod(uid, prio, scheduling_gates=gates))
        self._seen(uid, gates)

    @rule(
        uid=st.sampled_from(UIDS),
        prio=st.integers(-2, 2),
        label=st.sampled_from("xy"),
        gates=GATES,
    )
    def update(self, uid: str, prio: int, label: str, gates: tuple[str, ...]) -> None:
        if uid in self.gone:
            return
        self.q.update(pod(uid, prio, labels={"l": label}, scheduling_gates=gates))
        self._seen(uid, gates)

    @rule(uid=st.sampled_from(UIDS))
    def delete(self, uid: str) -> None:
        assert self.q.delete(uid) is (uid in self.live)
        self.live.discard(uid)
        self.done_snapshots.pop(uid, None)
        self.gone.add(uid)

    @rule()
    def pop(self) -> None:
        qp = self.q.pop()
        if qp is None:
            assert self.q.lengths()["active"] == 0
            return
        assert qp.uid in self.live and qp.uid not in self.flying
        assert qp.uid not in self.gated and not qp.pod.scheduling_gates
        assert qp.enqueued_at <= qp.activated_at <= self.clock.now()
        self.flying[qp.uid] = qp

    @precondition(lambda self: bool(self.flying))
    @rule(data=st.data(), plugins=st.frozensets(st.sampled_from(["A", "B"])))
    def unschedulable(self, data: st.DataObject, plugins: frozenset[str]) -> None:
        uid = data.draw(st.sampled_from(sorted(self.flying)))
        events = data.draw(st.frozensets(EVENTS, max_size=3))
        where = self.q.add_unschedulable(self.flying.pop(uid), plugins=plugins, events=events)
        assert (where == "dropped") is (uid not in self.live)

    @precondition(lambda self: bool(self.flying))
    @rule(data=st.data())
    def backoff(self, data: st.DataObject) -> None:
        uid = data.draw(st.sampled_from(sorted(self.flying)))
        where = self.q.add_backoff(self.flying.pop(uid))
        assert (where == "dropped") is (uid not in self.live)

    @precondition(lambda self: bool(self.flying))
    @rule(data=st.data())
    def done(self, data: st.DataObject) -> None:
        uid = data.draw(st.sampled_from(sorted(self.flying)))
        qp = self.flying.pop(uid)
        assert self.q.done(uid) is (uid in self.live)
        if uid in self.live:
            self.done_snapshots[uid] = qp
        self.live.discard(uid)

    @precondition(lambda self: bool(self.done_snapshots))
    @rule(data=st.data())
    def bind_failed(self, data: st.DataObject) -> None:
        uid = data.draw(st.sampled_from(sorted(self.done_snapshots)))
        # The queue forgot the pod when it was done: it comes back as the snapshot has it
        # (the scheduler's state passes its latest version).
        snapshot = self.done_snapshots[uid]
        self._seen(uid, ())
        assert self.q.add_backoff(snapshot) in ("backoff", "active")

    @rule(event=EVENTS)
    def event(self, event: ClusterEvent) -> None:
        self.q.on_event(event)

    @rule(dt=st.sampled_from([0.0, 0.5, 1.0, 4.0, 11.0, 301.0]))
    def tick(self, dt: float) -> None:
        self.clock.advance(dt)
        self.q.flush()

    @invariant()
    def every_live_pod_in_exactly_one_place(self) -> None:
        places = {uid: self.q.place_of(uid) for uid in UIDS}
        tracked = {uid for uid, place in places.items() if place is not None}
        assert tracked == self.live
        counts = {"active": 0, "backoff": 0, "unschedulable": 0, "in_flight": 0, "gated": 0}
        for uid in tracked:
            counts[places[uid]] += 1  # type: ignore[index]
        assert self.q.lengths() == counts
        # Gated exactly while the latest version has gates (a pod in flight when it gained
        # them, which the API server forbids, is gated when it comes back).
        waiting = {u for u in tracked if places[u] != "in_flight"}
        assert {u for u in waiting if places[u] == "gated"} == waiting & self.gated
        assert all(p.uid not in self.gated for p in self.q.pending_pods())
        assert {u for u in tracked if places[u] == "in_flight"} == set(self.flying) & self.live
        assert len(self.q) == len(self.live)


QueueMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=60, deadline=None)
test_queue_state_machine = QueueMachine.TestCase


def test_pop_order_after_random_operations_is_by_priority_then_arrival() -> None:
    # Snapshot equality: popping everything yields each active pod exactly once.
    q, _ = make()
    for i in range(30):
        q.add(pod(f"p{i}", i % 3))
    for i in range(0, 30, 4):
        q.delete(f"p{i}")
    out = drain(q)
    expected = sorted(
        (f"p{i}" for i in range(30) if i % 4), key=lambda u: (-(int(u[1:]) % 3), int(u[1:]))
    )
    assert out == expected


def test_queued_pod_is_frozen() -> None:
    q, _ = make()
    q.add(pod("a"))
    qp = pop(q)
    with pytest.raises(dataclasses.FrozenInstanceError):
        qp.attempts = 5  # type: ignore[misc]
