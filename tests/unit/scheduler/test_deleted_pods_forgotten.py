"""Found by the soak (issue 22): the node table memoised every pod's request vectors by
uid and kept them after the pod was deleted, up to a 100,000-entry reset, so the
scheduler's memory (leader and standby alike) grew with every pod the cluster ever ran.
A pod gone for good (deleted, or finished) leaves the memo."""

from __future__ import annotations

from services.scheduler.state import SchedulerState
from splitsched.core.clock import FakeClock
from tests.support.builders import node, pod, scheduler_state


def _state(clock: FakeClock) -> SchedulerState:
    return scheduler_state(clock, nodes=[node(f"n{i}") for i in range(3)], bind_timeout=30)


def test_pods_bound_then_deleted_leave_no_memoised_vectors(clock: FakeClock) -> None:
    state = _state(clock)
    for i in range(200):
        state.apply_pod("ADDED", pod(f"p{i}"))
        bound = pod(f"p{i}", node=f"n{i % 3}")
        state.apply_pod("MODIFIED", bound)
        state.apply_pod("DELETED", bound)
    assert state.cache.table.memoised_pods == 0


def test_pending_pods_filtered_then_deleted_leave_no_memoised_vectors(clock: FakeClock) -> None:
    state = _state(clock)
    for i in range(50):
        pending = pod(f"q{i}")
        state.apply_pod("ADDED", pending)
        state.cache.table.pod_vectors(pending)  # what the resource filters do
        state.apply_pod("DELETED", pending)
    assert state.cache.table.memoised_pods == 0


def test_live_pods_keep_theirs(clock: FakeClock) -> None:
    state = _state(clock)
    for i in range(5):
        state.apply_pod("ADDED", pod(f"r{i}", node="n0"))
    finished = pod("r0", node="n0", phase="Succeeded")
    state.apply_pod("MODIFIED", finished)
    assert state.cache.table.memoised_pods == 4
