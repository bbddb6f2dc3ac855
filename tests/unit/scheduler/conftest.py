"""Fixtures for the scheduler's state-machine tests: a fake clock, and a synced
`SchedulerState` on it with no nodes (tests add what they need through `apply_node`)."""

from __future__ import annotations

import pytest

from services.scheduler.state import SchedulerState
from splitsched.core.clock import FakeClock
from tests.support.builders import scheduler_state


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(100.0)


@pytest.fixture
def state(clock: FakeClock) -> SchedulerState:
    return scheduler_state(clock, bind_timeout=30)
