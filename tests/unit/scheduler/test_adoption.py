"""Adoption in `SchedulerState` after a leader change: a decision a binder re-reports
IN_PROGRESS (or BOUND) that this scheduler did not make holds its pod's room; anything else
is ignored. Driven directly with a fake clock, no server."""

from __future__ import annotations

import pytest

from services.scheduler.state import ADOPTED, Decision, Outcome, Phase, SchedulerState
from splitsched.core import algorithm, profiles
from splitsched.core.cache import PodState, SchedulerCache
from splitsched.core.clock import FakeClock
from splitsched.core.queue import SchedulingQueue
from tests.support.builders import small_node as node
from tests.support.builders import splitsched_pod as pod


@pytest.fixture
def state() -> SchedulerState:
    clock = FakeClock(100.0)
    algo = algorithm.FrameworkAlgorithm(
        cache=SchedulerCache(clock=clock), profiles=profiles.load_profiles(None)
    )
    st = SchedulerState(
        algo=algo, queue=SchedulingQueue(clock=clock), clock=clock, scheduler_id="new",
        bind_timeout=30,
    )  # fmt: skip
    st.apply_node("ADDED", node("n1"))
    st.apply_pod("ADDED", pod("a"))
    st.apply_pod("ADDED", pod("b"))
    st.mark_synced()
    return st


def in_progress(state: SchedulerState, decision_id: str, uid: str, node_name: str) -> bool:
    return state.on_outcome(
        decision_id=decision_id, result=Outcome.IN_PROGRESS, pod_uid=uid, node=node_name,
        binder_id="binder-0",
    )  # fmt: skip


def test_in_progress_report_adopts_the_decision_and_holds_its_room(
    state: SchedulerState,
) -> None:
    events: list[str] = []
    state.listeners.append(lambda e: events.append(f"{e.kind} {e.message}"))
    assert in_progress(state, "old-7", "uid-a", "n1")
    assert state.cache.is_assumed("uid-a")
    assert "uid-a" not in state.queue
    rec = state.find("ns", "a")
    assert rec is not None and (rec.phase, rec.node) == (Phase.BINDING, "n1")
    assert events == [
        f"SCHEDULED {ADOPTED} from binder binder-0: in flight before this scheduler led"
    ]
    # n1 has 400m left: b must not be put there (that would be the double booking).
    out = state.schedule_one()
    assert out is not None and not isinstance(out[0], Decision), out
    # Reported again while still in flight: known now, nothing changes.
    assert not in_progress(state, "old-7", "uid-a", "n1")
    # The final outcome resolves it like any decision.
    assert state.on_outcome(decision_id="old-7", result=Outcome.BOUND)
    rec = state.find("ns", "a")
    assert rec is not None and rec.phase is Phase.BOUND


def test_adopted_decision_that_fails_frees_its_room_and_requeues_its_pod(
    state: SchedulerState,
) -> None:
    assert in_progress(state, "old-1", "uid-a", "n1")
    assert state.on_outcome(decision_id="old-1", result=Outcome.FAILED, message="HTTP 500")
    assert not state.cache.is_assumed("uid-a")
    assert "uid-a" in state.queue
    out = state.schedule_one()  # b now fits on n1
    assert out is not None and isinstance(out[0], Decision) and out[0].node == "n1"


def test_bound_report_for_an_unknown_decision_holds_the_room_until_the_watch_confirms(
    state: SchedulerState,
) -> None:
    assert state.on_outcome(decision_id="old-2", result=Outcome.BOUND, pod_uid="uid-a", node="n1")
    assert state.cache.is_assumed("uid-a")
    out = state.schedule_one()
    assert out is not None and not isinstance(out[0], Decision), out
    state.apply_pod("MODIFIED", pod("a", node_name="n1"))
    cached = state.cache.get("uid-a")
    assert cached is not None and cached.state is PodState.ADDED


def test_reports_that_must_not_be_adopted(state: SchedulerState) -> None:
    # Our own decision for a; another id for the same pod is someone else's stale work.
    ours = state.schedule_one()
    assert ours is not None and isinstance(ours[0], Decision)
    assert not in_progress(state, "old-3", ours[0].pod.uid, "n9")
    assert state.decision_of_pod[ours[0].pod.uid] == ours[0].decision_id
    # Unknown pod; empty node; a final failure for an unknown decision.
    assert not in_progress(state, "old-4", "uid-nobody", "n1")
    assert not in_progress(state, "old-5", "uid-b", "")
    assert not state.on_outcome(
        decision_id="old-6", result=Outcome.FAILED, pod_uid="uid-b", node="n1"
    )
    # A pod the watch shows bound already.
    state.apply_pod("ADDED", pod("c", node_name="n1"))
    assert not in_progress(state, "old-8", "uid-c", "n1")
    # Before the view is synced nothing is adopted (it is not the whole truth yet).
    state.reset()
    state.apply_node("ADDED", node("n1"))
    state.apply_pod("ADDED", pod("d"))
    assert not in_progress(state, "old-9", "uid-d", "n1")
    assert "uid-d" in state.queue
