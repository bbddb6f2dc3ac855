"""The scheduler service's state machine, driven directly with a fake clock: watch events
in, decisions out, outcomes back. No gRPC, no API server."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from services.scheduler.state import Decision, Outcome, Phase, SchedulerState, Unschedulable
from splitsched.core import algorithm, models, profiles
from splitsched.core.cache import PodState, SchedulerCache
from splitsched.core.clock import FakeClock
from splitsched.core.queue import SchedulingQueue

GI = 1024**3


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
def clock() -> FakeClock:
    return FakeClock(100.0)


@pytest.fixture
def state(clock: FakeClock) -> SchedulerState:
    algo = algorithm.FrameworkAlgorithm(
        cache=SchedulerCache(clock=clock),
        profiles=profiles.load_profiles(None),
        rng=random.Random(0),
    )
    st = SchedulerState(
        algo=algo,
        queue=SchedulingQueue(clock=clock),
        clock=clock,
        scheduler_id="s",
        bind_timeout=30,
    )
    st.mark_synced()
    return st


def decide(state: SchedulerState) -> Decision:
    out = state.schedule_one()
    assert isinstance(out, Decision), out
    return out


def test_pending_pod_is_assumed_then_confirmed_by_outcome_and_watch(state: SchedulerState) -> None:
    state.apply_node("ADDED", node("n1"))
    state.apply_pod("ADDED", pod("a"))
    d = decide(state)
    assert d.node == "n1"
    assert state.cache.is_assumed("uid-a")
    assert state.find("ns", "a").phase is Phase.BINDING  # type: ignore[union-attr]
    assert state.on_outcome(decision_id=d.decision_id, result=Outcome.BOUND)
    assert state.find("ns", "a").phase is Phase.BOUND  # type: ignore[union-attr]
    assert not state.on_outcome(decision_id=d.decision_id, result=Outcome.BOUND)  # idempotent
    state.apply_pod("MODIFIED", replace(pod("a"), node_name="n1"))
    cached = state.cache.get("uid-a")
    assert cached is not None and cached.state is PodState.ADDED
    state.cache.check_invariants()


def test_no_double_booking_while_decisions_are_in_flight(state: SchedulerState) -> None:
    state.apply_node("ADDED", node("n1"))
    state.apply_pod("ADDED", pod("a"))
    state.apply_pod("ADDED", pod("b"))
    decide(state)
    out = state.schedule_one()
    assert isinstance(out, Unschedulable)
    assert "Insufficient cpu" in out.message


def test_bind_failure_forgets_and_requeues_with_backoff(
    state: SchedulerState, clock: FakeClock
) -> None:
    state.apply_node("ADDED", node("n1"))
    state.apply_pod("ADDED", pod("a"))
    d = decide(state)
    state.on_outcome(decision_id=d.decision_id, result=Outcome.FAILED, message="500")
    assert "uid-a" not in state.cache
    assert state.queue.place_of("uid-a") == "backoff"
    assert state.schedule_one() is None  # still backing off
    clock.advance(2)
    state.queue.flush()
    assert decide(state).node == "n1"


def test_conflict_requeues_at_once_and_pod_gone_drops(state: SchedulerState) -> None:
    state.apply_node("ADDED", node("n1", cpu=4000))
    state.apply_pod("ADDED", pod("a"))
    state.apply_pod("ADDED", pod("b"))
    da, db = decide(state), decide(state)
    state.on_outcome(decision_id=da.decision_id, result=Outcome.CONFLICT)
    assert state.queue.place_of("uid-a") == "active"
    state.on_outcome(decision_id=db.decision_id, result=Outcome.POD_GONE)
    assert "uid-b" not in state.cache and "uid-b" not in state.queue
    assert state.find("ns", "b") is None


def test_unschedulable_pod_waits_for_a_node_event(state: SchedulerState) -> None:
    state.apply_node("ADDED", node("n1", cpu=100))
    state.apply_pod("ADDED", pod("a"))
    out = state.schedule_one()
    assert isinstance(out, Unschedulable) and out.report
    assert state.queue.place_of("uid-a") == "unschedulable"
    state.apply_node("ADDED", node("n2"))
    assert state.queue.place_of("uid-a") in ("active", "backoff")


def test_unschedulable_reports_are_rate_limited(state: SchedulerState, clock: FakeClock) -> None:
    state.apply_node("ADDED", node("n1", cpu=100))
    state.apply_pod("ADDED", pod("a"))
    first = state.schedule_one()
    assert isinstance(first, Unschedulable) and first.report
    clock.advance(301)  # the periodic flush retries it
    state.queue.flush()
    second = state.schedule_one()
    assert isinstance(second, Unschedulable)
    clock.advance(1)
    state.queue.flush(clock.now() + 400)
    third = state.schedule_one()
    assert isinstance(third, Unschedulable) and not third.report


def test_pod_deleted_mid_bind_frees_capacity(state: SchedulerState) -> None:
    state.apply_node("ADDED", node("n1"))
    state.apply_pod("ADDED", pod("a"))
    d = decide(state)
    state.apply_pod("DELETED", pod("a"))
    assert "uid-a" not in state.cache
    assert state.on_outcome(decision_id=d.decision_id, result=Outcome.POD_GONE) is False
    state.apply_pod("ADDED", pod("b"))
    assert decide(state).node == "n1"


def test_overdue_decision_released_only_when_still_unbound(
    state: SchedulerState, clock: FakeClock
) -> None:
    state.apply_node("ADDED", node("n1", cpu=4000))
    state.apply_pod("ADDED", pod("a"))
    state.apply_pod("ADDED", pod("b"))
    decide(state)
    decide(state)
    state.apply_pod("MODIFIED", replace(pod("a"), node_name="n1"))  # the watch saw a bound
    clock.advance(31)
    assert state.expire_overdue() == 1  # only b: a was confirmed by the watch
    assert state.cache.get("uid-a") is not None
    assert "uid-b" not in state.cache


def test_other_schedulers_pods_are_ignored_unless_bound(state: SchedulerState) -> None:
    state.apply_node("ADDED", node("n1"))
    state.apply_pod("ADDED", replace(pod("theirs"), scheduler_name="default-scheduler"))
    assert state.schedule_one() is None
    state.apply_pod(
        "MODIFIED", replace(pod("theirs"), scheduler_name="default-scheduler", node_name="n1")
    )
    assert state.cache.get("uid-theirs") is not None  # it holds capacity
    assert state.find("ns", "theirs") is None


def test_resync_keeps_decisions_in_flight_assumed(state: SchedulerState) -> None:
    state.apply_node("ADDED", node("n1"))
    state.apply_pod("ADDED", pod("a"))
    d = decide(state)
    state.reset()
    state.apply_node("ADDED", node("n1"))
    state.apply_pod("ADDED", pod("a"))  # still pending in the fresh snapshot
    state.mark_synced()
    assert state.cache.is_assumed("uid-a")
    assert "uid-a" not in state.queue
    assert state.on_outcome(decision_id=d.decision_id, result=Outcome.BOUND)
