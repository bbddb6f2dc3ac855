"""Unreserve runs on every path that forgets an assumed pod (issue 16).

A counting Reserve plugin (and a Permit plugin that can ask a pod to wait) sits in the
default profile; the scheduler state is driven through bind failure, conflict, a released
preemption, gang rollback, a Permit wait and Explain/Simulate, and after each the plugin
has unreserved every pod it reserved that did not end bound:
reserved == unreserved + bound.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import ClassVar

import pytest

from services.scheduler.api import SchedulerApi
from services.scheduler.state import (
    Decision,
    DecisionEvent,
    EventKind,
    Outcome,
    Phase,
    SchedulerState,
    Unschedulable,
)
from splitsched.core import algorithm, framework, models, profiles
from splitsched.core.cache import SchedulerCache
from splitsched.core.clock import FakeClock
from splitsched.core.queue import SchedulingQueue

GI = 1024**3
WAIT_LABEL = "test/permit-wait"
REJECT_LABEL = "test/reserve-reject"


@dataclass
class CountingReserve:
    """Counts Reserve and Unreserve calls, and knows which pods it holds right now."""

    name: ClassVar[str] = "CountingReserve"
    reserved: int = 0
    unreserved: int = 0
    held: set[str] = field(default_factory=set)

    def reserve(self, state: framework.CycleState, pod: models.Pod, node: str) -> framework.Status:
        assert pod.uid not in self.held, f"{pod.key} reserved twice"
        self.reserved += 1
        self.held.add(pod.uid)
        return framework.Status.success()

    def unreserve(self, state: framework.CycleState, pod: models.Pod, node: str) -> None:
        assert pod.uid in self.held, f"{pod.key} unreserved but never reserved"
        self.unreserved += 1
        self.held.discard(pod.uid)


class RejectingReserve:
    """Rejects pods carrying REJECT_LABEL, after CountingReserve reserved them."""

    name: ClassVar[str] = "RejectingReserve"

    def reserve(self, state: framework.CycleState, pod: models.Pod, node: str) -> framework.Status:
        if WAIT_LABEL in pod.labels or REJECT_LABEL not in pod.labels:
            return framework.Status.success()
        return framework.Status.unschedulable("reserve says no", plugin=self.name)

    def unreserve(self, state: framework.CycleState, pod: models.Pod, node: str) -> None:
        pass


class WaitingPermit:
    """Asks pods carrying WAIT_LABEL to wait: this scheduler holds no waiting pods, so the
    wait times out at once."""

    name: ClassVar[str] = "WaitingPermit"

    def permit(self, state: framework.CycleState, pod: models.Pod, node: str) -> framework.Status:
        if WAIT_LABEL in pod.labels:
            return framework.Status(framework.Code.WAIT, ("waiting for a friend",), self.name)
        return framework.Status.success()


@dataclass
class Harness:
    state: SchedulerState
    clock: FakeClock
    counting: CountingReserve
    bound: set[str]

    def assert_balanced(self) -> None:
        c = self.counting
        assert c.reserved == c.unreserved + len(self.bound), (c, sorted(self.bound))
        assert c.held == self.bound, (c.held, self.bound)

    def decide(self) -> Decision:
        out = self.state.schedule_one()
        assert out is not None and len(out) == 1 and isinstance(out[0], Decision), out
        return out[0]


def node(name: str, cpu: int = 1000) -> models.Node:
    return models.Node(
        name=name, allocatable={models.CPU: cpu, models.MEMORY: 4 * GI, models.PODS: 10}
    )


def pod(name: str, cpu: int = 600, **kw: object) -> models.Pod:
    return models.Pod(
        uid=f"uid-{name}",
        namespace="ns",
        name=name,
        scheduler_name="splitsched",
        containers=(models.Container("c", {models.CPU: cpu}),),
        **kw,  # type: ignore[arg-type]
    )


@pytest.fixture
def harness() -> Iterator[Harness]:
    clock = FakeClock(100.0)
    profs = profiles.load_profiles(None)
    counting = CountingReserve()
    profile = profs["splitsched"]
    profile.reserve += [counting, RejectingReserve()]
    profile.permit.append(WaitingPermit())
    algo = algorithm.FrameworkAlgorithm(
        cache=SchedulerCache(clock=clock), profiles=profs, rng=random.Random(0)
    )
    state = SchedulerState(
        algo=algo, queue=SchedulingQueue(clock=clock), clock=clock, scheduler_id="s"
    )
    h = Harness(state, clock, counting, set())

    def on_event(event: DecisionEvent) -> None:
        if event.kind is EventKind.BOUND:
            h.bound.add(event.pod.uid)

    state.listeners.append(on_event)
    state.mark_synced()
    yield h
    state.cache.check_invariants()


def test_bound_pods_keep_their_reservation(harness: Harness) -> None:
    state = harness.state
    state.apply_node("ADDED", node("n1"))
    state.apply_pod("ADDED", pod("a"))
    d = harness.decide()
    assert harness.counting.held == {"uid-a"}
    assert state.on_outcome(decision_id=d.decision_id, result=Outcome.BOUND)
    state.apply_pod("MODIFIED", replace(pod("a"), node_name="n1"))
    assert harness.counting.reserved == 1
    harness.assert_balanced()


@pytest.mark.parametrize("result", [Outcome.FAILED, Outcome.CONFLICT, Outcome.POD_GONE])
def test_a_failed_binding_unreserves(harness: Harness, result: Outcome) -> None:
    state = harness.state
    state.apply_node("ADDED", node("n1"))
    state.apply_pod("ADDED", pod("a"))
    d = harness.decide()
    assert state.on_outcome(decision_id=d.decision_id, result=result, message="no")
    assert harness.counting.reserved == harness.counting.unreserved == 1
    harness.assert_balanced()


def test_refused_and_overdue_decisions_unreserve(harness: Harness) -> None:
    state = harness.state
    state.apply_node("ADDED", node("n1", cpu=2000))
    state.apply_pod("ADDED", pod("a"))
    state.apply_pod("ADDED", pod("b"))
    first, second = harness.decide(), harness.decide()
    state.refused(first, "binder unreachable")
    state.unsure(second, "deadline exceeded")
    assert harness.counting.held == {second.pod.uid}  # maybe bound: still held
    harness.clock.advance(state.bind_timeout + 1)
    assert state.expire_overdue() == 1
    assert harness.counting.unreserved == 2
    harness.assert_balanced()


def test_a_pod_deleted_while_assumed_unreserves(harness: Harness) -> None:
    state = harness.state
    state.apply_node("ADDED", node("n1"))
    state.apply_pod("ADDED", pod("a"))
    harness.decide()
    state.apply_pod("DELETED", pod("a"))
    assert harness.counting.unreserved == 1
    harness.assert_balanced()


def preemption(harness: Harness) -> tuple[Decision, models.Pod]:
    state = harness.state
    state.apply_node("ADDED", node("n1"))
    low = replace(pod("low", cpu=800), node_name="n1", priority=1)
    state.apply_pod("ADDED", low)
    state.apply_pod("ADDED", replace(pod("vip"), priority=100))
    pre = harness.decide()
    assert pre.is_preemption and harness.counting.held == {"uid-vip"}
    return pre, low


def test_a_released_preemption_unreserves_its_preemptor(harness: Harness) -> None:
    pre, _ = preemption(harness)
    assert harness.state.on_outcome(
        decision_id=pre.decision_id, result=Outcome.FAILED, message="PDB"
    )
    assert harness.counting.unreserved == 1
    harness.assert_balanced()


def test_a_preemption_that_ends_bound_reserves_once(harness: Harness) -> None:
    state = harness.state
    pre, low = preemption(harness)
    assert state.on_outcome(decision_id=pre.decision_id, result=Outcome.BOUND)
    state.apply_pod("DELETED", low)
    (bind,) = state.take_ready_binds()
    assert state.on_outcome(decision_id=bind.decision_id, result=Outcome.BOUND)
    assert harness.counting.reserved == 1 and harness.counting.unreserved == 0
    harness.assert_balanced()


def gang_pod(name: str, *, cpu: int = 600, **kw: object) -> models.Pod:
    return replace(pod(name, cpu=cpu, **kw), group=models.PodGroupRef("g", 3))


def test_gang_rollback_unreserves_every_member_placed(harness: Harness) -> None:
    state = harness.state
    state.apply_node("ADDED", node("n1"))
    state.apply_node("ADDED", node("n2"))
    for name in ("g0", "g1", "g2"):  # two fit, the third fits nowhere
        state.apply_pod("ADDED", gang_pod(name))
    out = state.schedule_one()
    assert out is not None and isinstance(out[0], Unschedulable), out
    assert harness.counting.reserved == 2 and harness.counting.unreserved == 2
    assert len(state.cache) == 0
    harness.assert_balanced()


def test_gang_rollback_when_a_member_waits_on_permit(harness: Harness) -> None:
    state = harness.state
    state.apply_node("ADDED", node("n1", cpu=4000))
    state.apply_pod("ADDED", gang_pod("g0"))
    state.apply_pod("ADDED", gang_pod("g1"))
    state.apply_pod("ADDED", gang_pod("g2", labels={WAIT_LABEL: "yes"}))
    out = state.schedule_one()
    assert out is not None and isinstance(out[0], Unschedulable), out
    assert "waiting for a friend" in out[0].message
    assert harness.counting.reserved == 3 and harness.counting.unreserved == 3
    assert len(state.cache) == 0
    harness.assert_balanced()


def test_a_permit_wait_times_out_at_once_and_unreserves(harness: Harness) -> None:
    state = harness.state
    state.apply_node("ADDED", node("n1"))
    state.apply_pod("ADDED", pod("w", labels={WAIT_LABEL: "yes"}))
    out = state.schedule_one()
    assert out is not None and isinstance(out[0], Unschedulable), out
    assert not state.cache.is_assumed("uid-w")
    assert state.queue.place_of("uid-w") == "backoff"
    assert harness.counting.reserved == harness.counting.unreserved == 1
    harness.assert_balanced()


def test_a_later_reserve_rejection_unreserves_the_earlier_plugins(harness: Harness) -> None:
    state = harness.state
    state.apply_node("ADDED", node("n1"))
    state.apply_pod("ADDED", pod("r", labels={REJECT_LABEL: "yes"}))
    out = state.schedule_one()
    assert out is not None and isinstance(out[0], Unschedulable), out
    assert out[0].message == "reserve says no"
    assert harness.counting.reserved == harness.counting.unreserved == 1
    harness.assert_balanced()


def test_explain_and_simulate_put_every_reservation_back(harness: Harness) -> None:
    state = harness.state
    state.apply_node("ADDED", node("n1", cpu=2000))
    state.apply_pod("ADDED", pod("big", cpu=5000))
    out = state.schedule_one()
    assert out is not None and isinstance(out[0], Unschedulable)
    api = SchedulerApi(state=state, on_change=lambda: None)
    answer = api.simulate(
        [pod("s0"), pod("s1"), pod("s2"), pod("sw", cpu=100, labels={WAIT_LABEL: "y"})],
        gang=False,
        top=3,
    )
    # Three fit; the fourth fits too, but its Permit wait times out at once.
    assert [p.node for p in answer.placements] == ["n1", "n1", "n1", ""]
    assert "waiting for a friend" in answer.placements[3].summary
    assert harness.counting.reserved == 4
    explained = api.explain_pod(pod("big", cpu=5000), phase=Phase.WAITING, include_nodes=True)
    assert explained.feasible_nodes == 0
    assert len(state.cache) == 0
    harness.assert_balanced()


def test_the_balance_check_catches_a_forget_without_unreserve(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The checks above fail when forget skips Unreserve."""
    algo = harness.state.algo
    monkeypatch.setattr(algo, "forget", algo.cache.forget)
    state = harness.state
    state.apply_node("ADDED", node("n1"))
    state.apply_pod("ADDED", pod("a"))
    d = harness.decide()
    state.on_outcome(decision_id=d.decision_id, result=Outcome.FAILED, message="no")
    with pytest.raises(AssertionError):
        harness.assert_balanced()
