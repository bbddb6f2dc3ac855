"""Client-side pacing of the requests one process sends to the API server: a token bucket
(``--qps``/``--burst``, like client-go's) and a hold-off shared by every request when the
server throttles.

``splitsched.runtime.kubeclient.KubeClient`` calls ``acquire`` before each request and
``throttled`` when an answer is the server's own 429 with Retry-After (API Priority and
Fairness rejecting, or the max-in-flight limit): no new request leaves until Retry-After
has passed, so a pool of workers backs off as one instead of each retrying on its own
and meeting a full priority level again. With a configured rate the rate is also halved,
at most once per hold-off, and climbs back linearly to the configured one over
``RECOVERY_SECONDS`` without a 429 (additive increase, multiplicative decrease): workers
released together at the end of a hold-off would otherwise fill the level at once and
be rejected again. Without a configured rate (qps 0) there is no rate to lower: the
hold-off alone paces, at the interval the server asks for.

A run of 429s is one *episode* (logged when it starts and when ``EPISODE_QUIET`` seconds
have passed without one), never one log line per request.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from splitsched.core.clock import Clock, SystemClock

log = logging.getLogger("splitsched.kubeclient")

#: Seconds without a 429 after which a throttling episode is over (and logged as such).
EPISODE_QUIET = 10.0
#: Seconds, after the last 429, in which a lowered rate climbs back to the configured one.
RECOVERY_SECONDS = 30.0
#: The lowest fraction of the configured rate that halving reaches.
MIN_RATE_FRACTION = 1 / 16


class RateLimiter:
    """A token bucket (qps 0: no limit) and the shared hold-off. `clock` and `sleep` are
    injected so tests drive time by hand (``splitsched.core.clock.FakeClock``);
    `on_throttled` is told of every throttling answer (a metric counts them)."""

    def __init__(
        self,
        *,
        qps: float,
        burst: int,
        server: str = "",
        clock: Clock | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        on_throttled: Callable[[float], None] | None = None,
    ) -> None:
        self._qps = qps
        self._burst = float(max(1, burst))
        self._server = server
        self._clock = clock or SystemClock()
        self._sleep = sleep
        self._on_throttled = on_throttled
        self._tokens = self._burst
        self._last = self._clock.now()
        self._lock = asyncio.Lock()
        self._hold_until = float("-inf")
        self._lowered = qps  # the rate right after the last decrease
        self._last_429 = float("-inf")
        self._episode_start: float | None = None
        self._episode_count = 0

    def rate(self) -> float:
        """The rate now in force: the configured one, or a lowered one climbing back."""
        if self._qps <= 0:
            return 0.0
        regained = (self._clock.now() - self._last_429) / RECOVERY_SECONDS * self._qps
        return min(self._qps, self._lowered + max(0.0, regained))

    def holding(self) -> float:
        """Seconds left before a new request may leave (0 when not held off)."""
        return max(0.0, self._hold_until - self._clock.now())

    def throttled(self, retry_after: float) -> None:
        """The server answered 429 with `retry_after`: hold every new request until then.
        The first 429 after a hold-off ended (an answer to a request sent since) lowers
        the rate; the others only extend the hold-off."""
        now = self._clock.now()
        if self._on_throttled is not None:
            self._on_throttled(retry_after)
        if self._qps > 0 and now >= self._hold_until:
            self._lowered = max(self._qps * MIN_RATE_FRACTION, self.rate() / 2)
        self._last_429 = now
        self._hold_until = max(self._hold_until, now + retry_after)
        self._tokens, self._last = 0.0, self._hold_until  # no burst when it ends
        if self._episode_start is None:
            self._episode_start, self._episode_count = now, 0
            log.warning(
                "API server %s throttles us (429, Retry-After %.1fs): every request waits "
                "until then%s",
                self._server, retry_after,
                f"; rate lowered to {self.rate():.1f}/s" if self._qps > 0 else "",
            )  # fmt: skip
        self._episode_count += 1

    async def acquire(self) -> None:
        """Wait for the hold-off to pass, then for a token of the current rate."""
        await self._wait_hold_off()
        if self._qps <= 0:
            return
        async with self._lock:
            while True:
                await self._wait_hold_off()  # a 429 may have arrived while queued
                now = self._clock.now()
                rate = self.rate()
                self._tokens = min(self._burst, self._tokens + (now - self._last) * rate)
                self._last = now
                if self._tokens >= 1.0:
                    self._tokens -= 1.0
                    return
                await self._sleep((1.0 - self._tokens) / rate)

    async def _wait_hold_off(self) -> None:
        while (left := self.holding()) > 0:
            await self._sleep(left)
        self._end_quiet_episode()

    def _end_quiet_episode(self) -> None:
        if self._episode_start is None:
            return
        now = self._clock.now()
        if now - self._last_429 < EPISODE_QUIET:
            return
        log.info(
            "API server %s stopped throttling us: %d throttled answers in %.1fs",
            self._server, self._episode_count, self._last_429 - self._episode_start,
        )  # fmt: skip
        self._episode_start = None
