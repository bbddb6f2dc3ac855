"""Client-side pacing of the requests one process sends to the API server: a token bucket
(``--qps``/``--burst``, like client-go's) and a hold-off shared by every request when the
server throttles.

``splitsched.runtime.kubeclient.KubeClient`` calls ``acquire`` before each request and
``release`` when the answer came, and ``throttled`` when an answer is the server's own
429 with Retry-After (API Priority and Fairness rejecting, or the max-in-flight limit).
Then no new request leaves until Retry-After has passed, so a pool of workers backs off
as one instead of each retrying on its own and meeting a full priority level again.

The hold-off alone is not enough: the workers released together when it ends fill the
level again at once, and all but a few are refused again (measured: 64 workers against
one seat bound almost nothing). So a throttled client also limits how many requests it
has in flight, since API Priority and Fairness limits concurrency (seats and queue
places), not rate: a window halved at most once per hold-off (from the requests then in
flight) and widened by one every ``WIDEN_SECONDS`` without a 429, lifted when the
episode ends (multiplicative decrease, additive increase).
With a configured rate (``--qps``) the rate is halved the same way and climbs back
linearly over ``RECOVERY_SECONDS`` without a 429.

A run of 429s is one *episode*, logged when it starts and when ``EPISODE_QUIET`` seconds
have passed after the last hold-off without one, never one log line per request.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import Awaitable, Callable

from splitsched.core.clock import Clock, SystemClock

log = logging.getLogger("splitsched.kubeclient")

#: Seconds without a 429 after which a throttling episode is over (and logged as such).
EPISODE_QUIET = 10.0
#: Seconds, after the last 429, in which a lowered rate climbs back to the configured one.
RECOVERY_SECONDS = 30.0
#: Seconds without a 429 after which a throttled client may have one more request in
#: flight. Slow on purpose: every 429 costs a whole Retry-After of silence, so probing
#: for room once per round trip (TCP's pace) would spend most of the time held off.
WIDEN_SECONDS = 2.0
#: The lowest fraction of the configured rate that halving reaches.
MIN_RATE_FRACTION = 1 / 16


class Window:
    """How many requests may be in flight: unlimited (None) until the server throttles;
    then halved at each ``halve`` and widened by one every ``WIDEN_SECONDS`` after it."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._base: float | None = None  # the limit right after the last halving
        self._since = 0.0
        self.inflight = 0
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()

    @property
    def limit(self) -> float | None:
        if self._base is None:
            return None
        return self._base + max(0.0, (self._clock.now() - self._since) // WIDEN_SECONDS)

    async def take(self) -> None:
        while (limit := self.limit) is not None and self.inflight >= limit:
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            except asyncio.CancelledError:
                if waiter.done() and not waiter.cancelled():
                    self._wake()  # woken, then cancelled: pass the room on
                raise
            finally:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)
        self.inflight += 1

    def give_back(self) -> None:
        self.inflight -= 1
        self._wake()

    def halve(self, *, widen_from: float) -> None:
        """Half the requests in flight now (or of the limit), widening again from the
        time `widen_from` (when the hold-off ends)."""
        self._base = max(1.0, (self.limit or self.inflight) // 2)
        self._since = widen_from

    def lift(self) -> None:
        self._base = None
        self._wake()

    def _wake(self) -> None:
        # A waiter waits only while something is in flight, whose answer wakes it here.
        limit, woken = self.limit, 0
        while self._waiters and (limit is None or self.inflight + woken < limit):
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                woken += 1


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
        self.window = Window(self._clock)

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
        first = now >= self._hold_until  # the first 429 since the last hold-off ended
        if first and self._qps > 0:
            self._lowered = max(self._qps * MIN_RATE_FRACTION, self.rate() / 2)
        self._last_429 = now
        self._hold_until = max(self._hold_until, now + retry_after)
        if first:
            self.window.halve(widen_from=self._hold_until)
        self._tokens, self._last = 0.0, self._hold_until  # no burst when it ends
        if self._episode_start is None:
            self._episode_start, self._episode_count = now, 0
            log.warning(
                "API server %s throttles us (429, Retry-After %.1fs): every request waits "
                "until then; at most %d in flight%s",
                self._server, retry_after, self.window.limit or 0,
                f", {self.rate():.1f}/s" if self._qps > 0 else "",
            )  # fmt: skip
        self._episode_count += 1

    async def acquire(self) -> None:
        """Wait for the hold-off to pass, for a token of the current rate, then for room
        in the window; ``release`` must follow once the answer (or an error) came."""
        while True:
            await self._wait_hold_off()
            await self._take_token()
            await self.window.take()
            if self.holding() <= 0:
                return
            self.window.give_back()  # a 429 came while this one waited for room

    def release(self) -> None:
        self.window.give_back()

    async def _take_token(self) -> None:
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
        if now - max(self._last_429, self._hold_until) < EPISODE_QUIET:
            return  # quiet counts from the end of the hold-off: nothing is sent during it
        log.info(
            "API server %s stopped throttling us: %d throttled answers in %.1fs; no limit "
            "on requests in flight again",
            self._server, self._episode_count, self._last_429 - self._episode_start,
        )  # fmt: skip
        self._episode_start = None
        self.window.lift()
