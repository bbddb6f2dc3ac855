"""The scheduler service's state machine, driven directly with a fake clock: watch events
in, decisions out, outcomes back. No gRPC, no API server."""

from __future__ import annotations

from dataclasses import replace

from services.scheduler.state import Decision, Outcome, Phase, SchedulerState, Unschedulable
from splitsched.core.cache import PodState
from splitsched.core.clock import FakeClock
from tests.support.builders import gang_pod
from tests.support.builders import small_node as node
from tests.support.builders import splitsched_pod as pod
from tests.support.scheduler import decide
from tests.support.scheduler import parked as park


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


def test_a_report_after_the_watch_confirmed_still_counts_its_binding_calls(
    state: SchedulerState,
) -> None:
    # Issue 21: bind_attempts was 0 for the pods whose binding the watch showed first.
    state.apply_node("ADDED", node("n1"))
    state.apply_pod("ADDED", pod("a"))
    d = decide(state)
    state.apply_pod("MODIFIED", replace(pod("a"), node_name="n1"))
    rec = state.find("ns", "a")
    assert rec is not None and (rec.phase, rec.bind_attempts) == (Phase.BOUND, 0)
    events, counters = list(state.recent_events), dict(state.counters)

    def report(result: Outcome, attempts: int) -> bool:
        return state.on_outcome(
            decision_id=d.decision_id, result=result, attempts=attempts, binder_id="b-0",
            pod_uid="uid-a", node="n1",
        )  # fmt: skip

    # Still binding as the watch saw it: only the final report counts.
    assert not report(Outcome.IN_PROGRESS, 1)
    # Resolves nothing (so not `accepted`), but its two Binding calls count, once.
    assert not report(Outcome.BOUND, 2)
    assert not report(Outcome.BOUND, 2)  # re-sent
    assert (rec.phase, rec.node, rec.bind_attempts) == (Phase.BOUND, "n1", 2)
    # Nothing else changes: no event, no counter, the pod stays in the view as bound.
    assert (list(state.recent_events), state.counters) == (events, counters)
    cached = state.cache.get("uid-a")
    assert cached is not None and cached.state is PodState.ADDED and "uid-a" not in state.queue


def test_no_double_booking_while_decisions_are_in_flight(state: SchedulerState) -> None:
    state.apply_node("ADDED", node("n1"))
    state.apply_pod("ADDED", pod("a"))
    state.apply_pod("ADDED", pod("b"))
    decide(state)
    out = park(state)
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
    out = park(state)
    assert out.report
    assert state.queue.place_of("uid-a") == "unschedulable"
    state.apply_node("ADDED", node("n2"))
    assert state.queue.place_of("uid-a") in ("active", "backoff")


def test_unschedulable_reports_are_rate_limited(state: SchedulerState, clock: FakeClock) -> None:
    state.apply_node("ADDED", node("n1", cpu=100))
    state.apply_pod("ADDED", pod("a"))
    first = park(state)
    assert first.report
    clock.advance(301)  # the periodic flush retries it
    state.queue.flush()
    park(state)
    clock.advance(1)
    state.queue.flush(clock.now() + 400)
    third = park(state)
    assert not third.report


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


def test_an_unschedulable_outcome_names_the_plugins_that_rejected_the_pod(
    state: SchedulerState,
) -> None:
    state.apply_node("ADDED", node("n1"))
    state.apply_pod("ADDED", pod("huge", cpu=5000))
    [out] = state.schedule_one()  # type: ignore[misc]
    assert isinstance(out, Unschedulable) and out.plugins == {"NodeResourcesFit"}


def test_preemption_holds_the_room_then_binds_when_victims_are_gone(state: SchedulerState) -> None:
    state.apply_node("ADDED", node("n1"))
    low = replace(pod("low", cpu=800), node_name="n1", priority=1, scheduler_name="other")
    state.apply_pod("ADDED", low)
    vip = replace(pod("vip", cpu=600), priority=100)
    state.apply_pod("ADDED", vip)
    pre = decide(state)
    assert pre.is_preemption and [v.name for v in pre.victims] == ["low"]
    assert state.find("ns", "vip").phase is Phase.PREEMPTING  # type: ignore[union-attr]
    assert state.cache.is_assumed("uid-vip")  # the room is held
    # Another pod cannot take the room while the victim is being evicted.
    state.apply_pod("ADDED", pod("sneaky", cpu=100))
    assert isinstance(state.schedule_one()[0], Unschedulable)  # type: ignore[index]
    assert state.on_outcome(decision_id=pre.decision_id, result=Outcome.BOUND)
    assert state.take_ready_binds() == []
    state.apply_pod("DELETED", low)
    ready = state.take_ready_binds()
    assert len(ready) == 1 and ready[0].node == "n1" and not ready[0].is_preemption
    assert state.find("ns", "vip").phase is Phase.BINDING  # type: ignore[union-attr]
    state.cache.check_invariants()


def test_refused_eviction_releases_the_room_and_requeues(state: SchedulerState) -> None:
    state.apply_node("ADDED", node("n1"))
    state.apply_pod("ADDED", replace(pod("low", cpu=800), node_name="n1", priority=1))
    state.apply_pod("ADDED", replace(pod("vip", cpu=600), priority=100))
    pre = decide(state)
    state.on_outcome(decision_id=pre.decision_id, result=Outcome.FAILED, message="PDB")
    assert not state.cache.is_assumed("uid-vip")
    assert state.queue.place_of("uid-vip") == "backoff"
    assert state.victims_left == {}


def test_gang_waits_for_min_member_then_binds_all_at_once(state: SchedulerState) -> None:
    state.apply_node("ADDED", node("n1", cpu=2000))
    state.apply_pod("ADDED", gang_pod("g0"))
    state.apply_pod("ADDED", gang_pod("g1"))
    waiting = park(state)
    assert "2 of 3 members pending" in waiting.message
    park(state)
    assert len(state.cache) == 0  # nothing held while waiting
    state.apply_pod("ADDED", gang_pod("g2"))
    out = state.schedule_one()
    assert out is not None and len(out) == 3 and all(isinstance(d, Decision) for d in out)
    assert len(state.queue) == 0


def test_gang_that_cannot_fit_binds_none_and_holds_nothing(state: SchedulerState) -> None:
    state.apply_node("ADDED", node("n1", cpu=1000))
    for i in range(3):
        state.apply_pod("ADDED", gang_pod(f"g{i}"))
    out = park(state)
    assert "does not fit as a whole" in out.message
    assert len(state.cache) == 0
    assert state.gang_blockers[("ns", "g")].startswith("ns/g")
