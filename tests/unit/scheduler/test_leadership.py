"""When a replica may schedule: leading, synced, and settled after it starts serving (so
binders re-report what a predecessor left in flight first); and what losing or winning
the Lease changes. No Lease and no server: the elector's callbacks are called directly."""

from __future__ import annotations

import asyncio
import time

from services.scheduler.leadership import IDLE_SECONDS, Leadership
from services.scheduler.metrics import SchedulerMetrics
from services.scheduler.state import SchedulerState
from splitsched.core import algorithm, profiles
from splitsched.core.cache import SchedulerCache
from splitsched.core.clock import FakeClock
from splitsched.core.queue import SchedulingQueue


def new_leadership(*, settle_seconds: float, leading: bool = True) -> tuple[Leadership, list[int]]:
    clock = FakeClock(0.0)
    algo = algorithm.FrameworkAlgorithm(
        cache=SchedulerCache(clock=clock), profiles=profiles.load_profiles(None)
    )
    state = SchedulerState(
        algo=algo, queue=SchedulingQueue(clock=clock), clock=clock, scheduler_id="s"
    )
    state.set_leading(leading)
    pokes: list[int] = []
    leadership = Leadership(
        state=state,
        metrics=SchedulerMetrics(),
        elector=None,
        settle_seconds=settle_seconds,
        poke=lambda: pokes.append(1),
        stop=lambda: None,
    )
    return leadership, pokes


def leader_gauge(leadership: Leadership) -> float | None:
    return leadership.metrics.registry.get_sample_value("splitsched_scheduler_leader")


def test_without_settling_a_synced_leader_schedules_at_once() -> None:
    leadership, _ = new_leadership(settle_seconds=0)
    assert not leadership.may_schedule()  # not synced yet
    leadership.state.mark_synced()
    assert leadership.may_schedule()
    leadership.state.set_leading(False)
    assert not leadership.may_schedule()
    assert leadership.idle_wait() == IDLE_SECONDS


def test_settling_starts_when_serving_and_shortens_the_idle_wait() -> None:
    leadership, _ = new_leadership(settle_seconds=5.0)
    leadership.state.mark_synced()
    assert not leadership.may_schedule()  # not serving: binders cannot reach us yet
    assert leadership.settle_until is None
    leadership.serving_since = time.monotonic()
    assert not leadership.may_schedule()  # settling
    assert leadership.settle_until is not None
    assert 0.01 <= leadership.idle_wait() <= IDLE_SECONDS
    leadership.settle_until = time.monotonic() - 0.1
    assert leadership.may_schedule()
    assert leadership.idle_wait() == 0.01


def test_winning_the_lease_settles_again_and_losing_it_stops_with_exit_code_1() -> None:
    leadership, pokes = new_leadership(settle_seconds=3.0, leading=False)
    assert leader_gauge(leadership) == 0
    leadership.settle_until = 1.0
    leadership.started_leading()
    assert leadership.state.leading and leadership.settle_until is None
    assert leader_gauge(leadership) == 1 and pokes == [1]
    stopped = asyncio.Event()
    leadership.stop = stopped.set
    leadership.stopped_leading()
    assert not leadership.state.leading
    assert leader_gauge(leadership) == 0
    assert leadership.exit_code == 1 and stopped.is_set()
