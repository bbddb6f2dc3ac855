"""Decisions whose fate is unknown are resolved by evidence, never by a guess that frees
room a late bind (or eviction) uses (issue 9, restart and resync), in the state machine
(`SchedulerState`, fake clock; the `clock` and `state` fixtures of conftest.py): a decision
whose hand-off failed ambiguously stays assumed until an outcome, the watch, or the deadline
with the watch; a predecessor's preemption re-reported by a binder is adopted as a room held
for its preemptor, not as a binding; a pending pod's nominated node is tried first.

The service's hand-off to binders: tests/service/scheduler/test_unsure_handoff.py.
"""

from __future__ import annotations

from dataclasses import replace

from services.scheduler.state import Outcome, Phase, SchedulerState
from services.scheduler.state.outcomes import IN_PROGRESS_GRACE, IN_PROGRESS_OVERTIME
from splitsched.core import models
from splitsched.core.cache import PodState
from splitsched.core.clock import FakeClock
from tests.support.builders import small_node as node
from tests.support.builders import splitsched_pod as pod
from tests.support.scheduler import decide, parked


def phase(state: SchedulerState, name: str) -> Phase:
    rec = state.find("ns", name)
    assert rec is not None, name
    return rec.phase


# -- (a) an ambiguous hand-off -------------------------------------------------------------


def test_unsure_hand_off_keeps_the_room_until_the_watch_shows_the_late_bind(
    state: SchedulerState, clock: FakeClock
) -> None:
    state.apply_node("ADDED", node("n1"))
    state.apply_pod("ADDED", pod("a"))
    d = decide(state)
    state.unsure(d, "BindBatch DEADLINE_EXCEEDED")
    assert state.cache.is_assumed("uid-a")
    assert "uid-a" not in state.queue
    assert "BindBatch DEADLINE_EXCEEDED" in state.find("ns", "a").message  # type: ignore[union-attr]
    # The room stays taken: another pod does not get it.
    state.apply_pod("ADDED", pod("b"))
    assert "Insufficient cpu" in parked(state).message
    # The binder had it after all: its Binding lands and the watch confirms it.
    clock.advance(10)
    state.apply_pod("MODIFIED", replace(pod("a"), node_name="n1"))
    cached = state.cache.get("uid-a")
    assert cached is not None and cached.state is PodState.ADDED
    assert d.decision_id not in state.decisions
    clock.advance(60)
    assert state.expire_overdue() == 0
    state.cache.check_invariants()


def test_unsure_hand_off_is_released_after_the_deadline_when_the_watch_shows_it_unbound(
    state: SchedulerState, clock: FakeClock
) -> None:
    state.apply_node("ADDED", node("n1"))
    state.apply_pod("ADDED", pod("a"))
    d = decide(state)
    state.unsure(d, "BindBatch UNAVAILABLE")
    clock.advance(29)
    assert state.expire_overdue() == 0
    assert state.cache.is_assumed("uid-a")
    clock.advance(2)
    assert state.expire_overdue() == 1
    assert "uid-a" not in state.cache
    assert state.queue.place_of("uid-a") == "backoff"


def test_unsure_after_the_outcome_already_arrived_changes_nothing(state: SchedulerState) -> None:
    state.apply_node("ADDED", node("n1"))
    state.apply_pod("ADDED", pod("a"))
    d = decide(state)
    assert state.on_outcome(decision_id=d.decision_id, result=Outcome.BOUND)
    state.unsure(d, "BindBatch CANCELLED")
    assert state.find("ns", "a").phase is Phase.BOUND  # type: ignore[union-attr]
    assert "uid-a" not in state.queue


# -- (c) a predecessor's preemption --------------------------------------------------------


def preempting_cluster(state: SchedulerState) -> models.Pod:
    """n1 (1000m) full with a low-priority victim (800m); vip (600m, priority 100) pending
    with a filler (300m, priority 0) that would fit once the victim is gone. Returns the
    victim."""
    state.apply_node("ADDED", node("n1"))
    low = replace(pod("low", cpu=800), node_name="n1", priority=1)
    state.apply_pod("ADDED", low)
    state.apply_pod("ADDED", replace(pod("vip"), priority=100))
    return low


def report(
    state: SchedulerState, result: Outcome, *, victims: tuple[str, ...] = ("uid-low",)
) -> bool:
    return state.on_outcome(
        decision_id="old-leader-7", result=result, pod_uid="uid-vip", node="n1",
        binder_id="b0", preemption=True, victim_uids=victims,
    )  # fmt: skip


def test_preemption_in_flight_is_adopted_as_a_room_held_for_the_preemptor(
    state: SchedulerState,
) -> None:
    low = preempting_cluster(state)
    assert report(state, Outcome.IN_PROGRESS)
    rec = state.find("ns", "vip")
    assert rec is not None and rec.phase is Phase.PREEMPTING and rec.nominated_node == "n1"
    assert state.cache.is_assumed("uid-vip") and "uid-vip" not in state.queue
    assert not report(state, Outcome.IN_PROGRESS)  # known now: nothing changes
    # The evictions' final report is not a binding: the preemptor is not bound yet.
    assert report(state, Outcome.BOUND)
    assert rec.phase is Phase.PREEMPTING
    assert state.take_ready_binds() == []
    # The victim goes; the room it frees is the preemptor's, not the filler's.
    state.apply_pod("DELETED", low)
    state.apply_pod("ADDED", pod("filler", cpu=500))
    ready = state.take_ready_binds()
    assert [(d.pod.name, d.node, d.is_preemption) for d in ready] == [("vip", "n1", False)]
    assert phase(state, "vip") is Phase.BINDING
    assert "Insufficient cpu" in parked(state).message  # the filler: 600 + 500 > 1000
    assert state.on_outcome(decision_id=ready[0].decision_id, result=Outcome.BOUND)
    assert phase(state, "vip") is Phase.BOUND
    state.cache.check_invariants()


def test_final_preemption_report_of_a_predecessor_binds_the_preemptor_where_it_fits(
    state: SchedulerState,
) -> None:
    """The evictions finished while no scheduler led; their report reaches the new
    leader after the victim is gone: the preemptor is bound on its node at once. (Taken
    for a binding, the report would mark the pod bound while nothing binds it.)"""
    low = preempting_cluster(state)
    state.apply_pod("DELETED", low)
    assert report(state, Outcome.BOUND)
    (ready,) = state.take_ready_binds()
    assert (ready.pod.name, ready.node) == ("vip", "n1")
    assert state.cache.is_assumed("uid-vip")
    rec = state.find("ns", "vip")
    assert rec is not None and rec.phase is Phase.BINDING


def test_adopted_preemption_does_not_bind_where_the_pod_no_longer_fits(
    state: SchedulerState,
) -> None:
    low = preempting_cluster(state)
    state.apply_pod("DELETED", low)
    state.apply_pod("ADDED", replace(pod("other", cpu=700), node_name="n1"))  # took the room
    assert not report(state, Outcome.BOUND)
    assert state.take_ready_binds() == []
    assert "uid-vip" not in state.cache and "uid-vip" in state.queue
    state.cache.check_invariants()


def test_failed_preemption_of_a_predecessor_is_ignored(state: SchedulerState) -> None:
    preempting_cluster(state)
    assert not report(state, Outcome.FAILED)
    assert "uid-vip" not in state.cache and "uid-vip" in state.queue


def test_pending_pod_gets_its_nominated_node_back(state: SchedulerState) -> None:
    """An earlier leader's preemption nominated n2 (its victims are gone by now); with
    LeastAllocated the empty n1 would score higher, but the pod goes back to n2."""
    state.apply_node("ADDED", node("n1", cpu=4000))
    state.apply_node("ADDED", node("n2", cpu=1000))
    state.apply_pod("ADDED", replace(pod("plain", cpu=300)))
    assert decide(state).node == "n1"
    state.apply_pod("ADDED", replace(pod("vip", cpu=300), nominated_node_name="n2"))
    assert decide(state).node == "n2"
    # Where the nominated node no longer fits, a full cycle picks another.
    state.apply_pod("ADDED", replace(pod("vip2", cpu=900), nominated_node_name="n2"))
    assert decide(state).node == "n1"


# -- (d) a binder still on a decision past its deadline ------------------------------------


def test_a_decision_its_binder_still_reports_in_progress_outlives_its_deadline(
    state: SchedulerState, clock: FakeClock
) -> None:
    """A binder whose Binding's answer was lost reads the pod past its own deadline to
    learn whether it landed, reporting IN_PROGRESS meanwhile. A second decision for the
    pod in that time would bind it a second time over (the 409 reads as bound: two
    Scheduled Events) or give its room away: the decision stays until the binder stops
    reporting it (IN_PROGRESS_GRACE), and no longer than IN_PROGRESS_OVERTIME."""
    state.apply_node("ADDED", node("n1"))
    state.apply_pod("ADDED", pod("a"))
    d = decide(state)

    def in_progress() -> None:
        state.on_outcome(
            decision_id=d.decision_id, result=Outcome.IN_PROGRESS, binder_id="b0",
            pod_uid="uid-a", node="n1",
        )  # fmt: skip

    clock.advance(28)
    in_progress()
    clock.advance(8)  # 6 s past the 30 s deadline, 8 s after the report
    assert state.expire_overdue() == 0
    assert state.cache.is_assumed("uid-a")
    clock.advance(IN_PROGRESS_GRACE - 7)  # the binder stopped reporting it
    assert state.expire_overdue() == 1
    assert state.queue.place_of("uid-a") == "backoff"
    assert not state.binder_working


def test_a_decision_reported_in_progress_forever_expires_after_the_overtime(
    state: SchedulerState, clock: FakeClock
) -> None:
    state.apply_node("ADDED", node("n1"))
    state.apply_pod("ADDED", pod("a"))
    d = decide(state)
    expired_at = None
    for second in range(0, 120, 2):
        state.on_outcome(decision_id=d.decision_id, result=Outcome.IN_PROGRESS, binder_id="b0")
        if state.expire_overdue():
            expired_at = second
            break
        clock.advance(2)
    last_held = 30 + IN_PROGRESS_OVERTIME
    assert expired_at is not None and last_held <= expired_at < last_held + 2
    assert "uid-a" not in state.cache
