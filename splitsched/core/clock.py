"""Clocks for the pure core: the cache and the queue never call `time` themselves.

The scheduler service passes a `SystemClock`; unit tests pass a `FakeClock` and move time by
hand, so backoff and flush behaviour is tested deterministically without sleeping.
"""

from __future__ import annotations

import time
from typing import Protocol, runtime_checkable


@runtime_checkable
class Clock(Protocol):
    """Monotonic seconds. Only differences between two readings mean anything."""

    def now(self) -> float: ...


class SystemClock:
    """The process's monotonic clock (reading a clock is not I/O, so the core may do it)."""

    __slots__ = ()

    def now(self) -> float:
        return time.monotonic()


class FakeClock:
    """A clock that only moves when told to; it refuses to go backwards, like a monotonic
    clock, so tests cannot build situations the real clock never produces."""

    __slots__ = ("_now",)

    def __init__(self, start: float = 0.0) -> None:
        self._now = float(start)

    def now(self) -> float:
        return self._now

    def set(self, when: float) -> None:
        if when < self._now:
            raise ValueError(f"FakeClock cannot go back from {self._now} to {when}")
        self._now = float(when)

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError(f"FakeClock cannot advance by a negative {seconds}")
        self._now += seconds
