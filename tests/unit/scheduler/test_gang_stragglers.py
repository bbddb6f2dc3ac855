"""A gang member whose binding failed after the rest of its gang bound (its binder was
killed, the deadline passed with the pod still unbound) is requeued alone. It must then
join the gang that already stands, not wait for a quorum of pending members that will
never come: that left a partly bound gang and a pod pending forever. Found by the mixed
fault runs' checks (``tests/faults/test_mixed_faults.py``)."""

from __future__ import annotations

from dataclasses import replace

from services.scheduler.state import Decision, Outcome, SchedulerState, Unschedulable
from splitsched.core.clock import FakeClock
from tests.support.builders import gang_pod
from tests.support.builders import small_node as node


def test_a_requeued_member_of_a_bound_gang_is_placed_alone(
    state: SchedulerState, clock: FakeClock
) -> None:
    state.apply_node("ADDED", node("n1", cpu=2000))
    for i in range(3):
        state.apply_pod("ADDED", gang_pod(f"g{i}"))
    out = state.schedule_one()
    assert out is not None and len(out) == 3
    first, second, lost = out
    assert isinstance(first, Decision) and isinstance(second, Decision)
    assert isinstance(lost, Decision)
    for d in (first, second):
        state.apply_pod("MODIFIED", replace(d.pod, node_name=d.node))
    state.on_outcome(decision_id=lost.decision_id, result=Outcome.FAILED, message="gone")
    clock.advance(30)
    state.queue.flush()
    again = state.schedule_one()
    assert again is not None and len(again) == 1
    assert isinstance(again[0], Decision), again[0]
    assert again[0].pod.uid == lost.pod.uid


def test_a_gang_short_of_its_quorum_still_waits(state: SchedulerState) -> None:
    """A bound pod of a same-named group in another namespace is not a member."""
    state.apply_node("ADDED", node("n1", cpu=4000))
    stranger = replace(gang_pod("x"), namespace="other", uid="uid-other-x", node_name="n1")
    state.apply_pod("ADDED", stranger)
    state.apply_pod("ADDED", gang_pod("g0"))
    state.apply_pod("ADDED", gang_pod("g1"))
    out = state.schedule_one()
    assert out is not None and isinstance(out[0], Unschedulable)
    assert "2 of 3 members pending" in out[0].message
    assert out[0].plugins == {"Gang"}  # what the per-plugin failure counter counts
