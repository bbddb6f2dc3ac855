"""Flow control towards the binders (issue 22): the window over bindings in flight, and
what the state does with a binder's congestion signals. The loop's side, against a slow
gRPC binder: tests/service/scheduler/test_flow_control.py."""

from __future__ import annotations

from services.scheduler.state import Decision, Outcome, SchedulerState
from services.scheduler.state.flow import MIN_WINDOW, FlowWindow
from splitsched.core.clock import FakeClock
from tests.support.builders import gang_pod, scheduler_state
from tests.support.builders import small_node as node
from tests.support.builders import splitsched_pod as pod
from tests.support.scheduler import decide


def test_window_grows_on_time_only_while_used_and_shrinks_when_late() -> None:
    w = FlowWindow(cap=1000, bind_timeout=30)
    start = w.size
    w.bound(created=0, now=1, in_flight=start)  # on time, window in use
    assert w.size == start + 1
    w.bound(created=0, now=1, in_flight=0)  # on time, but nothing tested the window
    assert w.size == start + 1
    w.bound(created=0, now=20, in_flight=start)  # later than half the bind timeout
    assert w.size == start


def test_window_halves_once_per_round_and_stays_between_floor_and_cap() -> None:
    w = FlowWindow(cap=100, bind_timeout=30)
    assert w.size == 100
    w.congested(created=1, now=5)
    assert w.size == 50
    w.congested(created=2, now=6)  # made before the cut: the same congestion
    assert w.size == 50
    for t in range(10, 20):
        w.congested(created=t, now=t)
    assert w.size == MIN_WINDOW
    for _ in range(5000):
        w.bound(created=30, now=31, in_flight=w.size)
    assert w.size == 100


def test_window_grows_by_one_per_window_once_the_binders_pushed_back() -> None:
    w = FlowWindow(cap=1000, bind_timeout=30)
    w.congested(created=1, now=2)
    assert not w.slow_start
    size = w.size
    for _ in range(size + 2):  # a window's worth, and a little for the growth
        w.bound(created=3, now=4, in_flight=size)
    assert w.size == size + 1  # slow start would have doubled it


def test_full_window_stops_taking_pods_and_an_outcome_frees_room() -> None:
    st = scheduler_state(FakeClock(100.0), nodes=[node("n1")], bind_timeout=30, max_in_flight=2)
    for name in "abc":
        st.apply_pod("ADDED", pod(name, cpu=100))
    first, second = decide(st), decide(st)
    assert not st.may_send()
    assert st.queue.lengths()["active"] == 1
    st.on_outcome(decision_id=first.decision_id, result=Outcome.BOUND)
    assert st.may_send()
    assert second.decision_id in st.decisions


def one_decision(clock: FakeClock) -> tuple[SchedulerState, Decision]:
    """A state with a window of 64 and one decision in flight, for pod "a"."""
    st = scheduler_state(clock, nodes=[node("n1")], bind_timeout=30, max_in_flight=64)
    st.apply_pod("ADDED", pod("a"))
    return st, decide(st)


def test_binder_queue_full_requeues_to_active_not_backoff_and_shrinks_the_window() -> None:
    clock = FakeClock(100.0)
    st, d = one_decision(clock)
    clock.advance(1)
    st.refused(d, "binder queue full (10000 decisions pending)", congested=True)
    assert st.queue.place_of("uid-a") == "active"
    assert st.flow.size == 32
    assert "uid-a" not in st.cache


def test_binder_deadline_exceeded_requeues_to_active_without_backoff() -> None:
    clock = FakeClock(100.0)
    st, d = one_decision(clock)
    clock.advance(25)
    st.on_outcome(
        decision_id=d.decision_id, result=Outcome.DEADLINE_EXCEEDED, message="not started"
    )
    assert st.queue.place_of("uid-a") == "active"
    assert st.flow.size == 32


def test_a_binding_tried_and_given_up_backs_off_and_counts_as_an_attempt() -> None:
    """DEADLINE_EXCEEDED after Binding calls (``--bind-attempts`` spent on a 500, say) is
    the API server's failure, not a full intake: the pod backs off with its attempts
    counted on (the retry's trace is kept as one), and the window stays."""
    clock = FakeClock(100.0)
    st, d = one_decision(clock)
    window = st.flow.size
    clock.advance(1)
    st.on_outcome(
        decision_id=d.decision_id, result=Outcome.DEADLINE_EXCEEDED, attempts=1,
        message="gave up after 1 attempts; last error: HTTP 500",
    )  # fmt: skip
    assert st.queue.place_of("uid-a") == "backoff"
    assert st.flow.size == window
    clock.advance(60)
    st.queue.flush()
    again = st.queue.pop()
    assert again is not None and again.attempts == 2


def test_other_refusals_and_failures_still_back_off() -> None:
    st = scheduler_state(FakeClock(100.0), nodes=[node("n1")], bind_timeout=30)
    st.apply_pod("ADDED", pod("a", cpu=100))
    st.apply_pod("ADDED", pod("b", cpu=100))
    window = st.flow.size
    st.refused(decide(st), "binder shutting down")
    st.on_outcome(decision_id=decide(st).decision_id, result=Outcome.FAILED, message="boom")
    assert st.queue.place_of("uid-a") == "backoff"
    assert st.queue.place_of("uid-b") == "backoff"
    assert st.flow.size == window  # not congestion


def test_a_gang_goes_whole_when_the_window_has_any_room() -> None:
    st: SchedulerState = scheduler_state(
        FakeClock(100.0), nodes=[node("n1"), node("n2")], bind_timeout=30, max_in_flight=2
    )
    st.apply_pod("ADDED", pod("solo", cpu=100))
    decide(st)
    for name in ("g1", "g2", "g3"):
        st.apply_pod("ADDED", gang_pod(name, size=3))
    assert st.may_send()
    outcomes = st.schedule_one()
    assert outcomes is not None and len(outcomes) == 3  # over the window, not split
    assert st.bindings_in_flight == 4
    assert not st.may_send()
