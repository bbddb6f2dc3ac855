"""The scheduler's tracing in process: a `SchedulerState` whose core reports to a
`SchedulingTraces` (`traced_state`), and one attempt run and traced as the loop does it
(`run_attempt`)."""

from __future__ import annotations

import random

from services.scheduler.state import Decision, SchedulerState, Unschedulable
from services.scheduler.traces import SchedulingTraces
from splitsched.core import algorithm, profiles
from splitsched.core.cache import SchedulerCache
from splitsched.core.clock import FakeClock
from splitsched.core.queue import SchedulingQueue


def traced_state(start: float = 100.0) -> tuple[SchedulerState, SchedulingTraces, FakeClock]:
    """A state whose queue runs on a fake clock from `start` (monotonic seconds, as the
    real one: the spans turn its readings into wall time)."""
    clock = FakeClock(start)
    traces = SchedulingTraces(queued_of=lambda uid: state.queue.get(uid))
    algo = algorithm.FrameworkAlgorithm(
        cache=SchedulerCache(clock=clock),
        profiles=profiles.load_profiles(None),
        rng=random.Random(0),
        observer=traces,
    )
    state = SchedulerState(
        algo=algo, queue=SchedulingQueue(clock=clock), clock=clock, scheduler_id="s"
    )
    state.mark_synced()
    return state, traces, clock


def run_attempt(state: SchedulerState, traces: SchedulingTraces) -> Decision | Unschedulable:
    traces.begin()
    out = state.schedule_one()
    assert out is not None and len(out) == 1
    outcome = out[0]
    if isinstance(outcome, Decision):
        traces.attempt(
            outcome.pod,
            result="scheduled",
            queued=outcome.queued,
            decision_id=outcome.decision_id,
            node=outcome.node,
        )
    else:
        traces.attempt(outcome.pod, result="unschedulable", message=outcome.message)
    return outcome
