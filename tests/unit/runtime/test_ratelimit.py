"""The client's pacing (``splitsched.runtime.ratelimit``) on a FakeClock: the server's 429
with Retry-After holds every new request until it passes, a configured rate is halved once
per hold-off and climbs back, an episode is logged once; and which 429s count as the
server's throttling (``kubeclient.server_throttled``)."""

from __future__ import annotations

import asyncio
import logging

import pytest

from splitsched.core.clock import FakeClock
from splitsched.runtime import kubeclient, ratelimit


class Rig:
    """A limiter whose sleep moves the fake clock, recording each sleep."""

    def __init__(self, *, qps: float = 0.0, burst: int = 1) -> None:
        self.clock = FakeClock(100.0)
        self.sleeps: list[float] = []
        self.told: list[float] = []
        self.limiter = ratelimit.RateLimiter(
            qps=qps, burst=burst, server="https://api", clock=self.clock, sleep=self.sleep,
            on_throttled=self.told.append,
        )  # fmt: skip

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.clock.advance(seconds)
        await asyncio.sleep(0)

    def acquire_at(self) -> float:
        """Acquire once (and release: the answer came); the fake time it was granted."""
        asyncio.run(self.limiter.acquire())
        self.limiter.release()
        return self.clock.now()


def test_without_429_and_without_a_rate_nothing_waits() -> None:
    rig = Rig()
    assert [rig.acquire_at() for _ in range(5)] == [100.0] * 5
    assert rig.sleeps == []


def test_a_429_holds_every_new_request_until_retry_after_passes() -> None:
    rig = Rig()
    rig.limiter.throttled(2.0)
    assert rig.told == [2.0]
    assert rig.limiter.holding() == 2.0
    assert rig.acquire_at() == 102.0
    assert rig.acquire_at() == 102.0  # held once, not per request
    assert rig.limiter.holding() == 0.0


def test_a_later_429_extends_the_hold_off_and_a_shorter_one_does_not_shorten_it() -> None:
    rig = Rig()
    rig.limiter.throttled(3.0)
    rig.clock.advance(1.0)
    rig.limiter.throttled(1.0)  # until 102, already held until 103
    assert rig.limiter.holding() == 2.0
    rig.limiter.throttled(5.0)
    assert rig.acquire_at() == 106.0


def test_waiters_already_queued_wait_for_the_hold_off() -> None:
    rig = Rig(qps=10.0, burst=1)

    async def run() -> list[float]:
        granted: list[float] = []

        async def one() -> None:
            await rig.limiter.acquire()
            granted.append(rig.clock.now())
            rig.limiter.release()

        first = asyncio.create_task(one())
        await first  # the burst's token
        rest = [asyncio.create_task(one()) for _ in range(3)]
        await asyncio.sleep(0)  # queued on the bucket
        rig.limiter.throttled(1.0)
        await asyncio.gather(*rest)
        return granted

    granted = asyncio.run(run())
    assert granted[0] == 100.0
    assert all(t >= 101.0 for t in granted[1:])


def test_a_429_halves_a_configured_rate_once_per_hold_off_then_it_climbs_back() -> None:
    rig = Rig(qps=16.0, burst=1)
    limiter = rig.limiter
    limiter.throttled(1.0)
    assert limiter.rate() == 8.0
    limiter.throttled(1.0)  # the same hold-off: answers to requests sent before it
    assert limiter.rate() == 8.0
    rig.clock.advance(1.0)
    limiter.throttled(1.0)  # a request sent after the hold-off was throttled again
    lowered = (8.0 + 16.0 / ratelimit.RECOVERY_SECONDS) / 2  # halved after 1 s of climbing
    assert limiter.rate() == pytest.approx(lowered)
    rig.clock.advance(ratelimit.RECOVERY_SECONDS / 2)
    assert limiter.rate() == pytest.approx(lowered + 8.0)
    rig.clock.advance(ratelimit.RECOVERY_SECONDS)
    assert limiter.rate() == 16.0


def test_halving_stops_at_the_floor() -> None:
    rig = Rig(qps=16.0, burst=1)
    for _ in range(10):
        rig.limiter.throttled(1.0)
        rig.clock.advance(1.0)
    assert rig.limiter.rate() >= 16.0 * ratelimit.MIN_RATE_FRACTION


def test_no_burst_when_a_hold_off_ends() -> None:
    """Tokens do not pile up while held: after the hold-off requests leave at the lowered
    rate, one every 1/rate seconds."""
    rig = Rig(qps=10.0, burst=10)
    rig.limiter.throttled(5.0)
    times = [rig.acquire_at() for _ in range(3)]
    assert times[0] > 105.0
    assert times[1] - times[0] == pytest.approx(1 / rig.limiter.rate(), rel=0.2)


def test_an_episode_is_logged_once_and_its_end_once(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="splitsched.kubeclient")
    rig = Rig()
    for _ in range(50):
        rig.limiter.throttled(1.0)
    rig.acquire_at()
    started = [r for r in caplog.records if "throttles us" in r.message]
    assert len(started) == 1 and "https://api" in started[0].message
    assert not [r for r in caplog.records if "stopped throttling" in r.message]
    rig.clock.advance(ratelimit.EPISODE_QUIET)
    rig.acquire_at()
    rig.acquire_at()
    ended = [r for r in caplog.records if "stopped throttling" in r.message]
    assert len(ended) == 1 and "50 throttled answers" in ended[0].message
    rig.limiter.throttled(1.0)  # a new episode
    assert len([r for r in caplog.records if "throttles us" in r.message]) == 2


@pytest.mark.parametrize(
    ("response", "throttled"),
    [
        # API Priority and Fairness and max-in-flight answer in plain text.
        (kubeclient.Response(429, "Too many requests, please try again later.\n", 1.0), True),
        (kubeclient.Response(429, {"kind": "Status", "reason": "TooManyRequests"}, 1.0), True),
        (kubeclient.Response(429, "slow down", None), False),  # no Retry-After
        (kubeclient.Response(503, "unavailable", 1.0), False),
        # The Eviction API refusing for a disruption budget is about one pod.
        (
            kubeclient.Response(
                429,
                {"kind": "Status", "details": {"causes": [{"reason": "DisruptionBudget"}]}},
                10.0,
            ),
            False,
        ),
    ],
)
def test_which_answers_are_the_servers_throttling(
    response: kubeclient.Response, throttled: bool
) -> None:
    assert kubeclient.server_throttled(response) is throttled


def test_a_429_halves_the_requests_in_flight_then_the_window_widens_and_lifts() -> None:
    rig = Rig()
    limiter = rig.limiter

    async def run() -> list[int]:
        for _ in range(8):  # eight requests in flight
            await limiter.acquire()
        assert limiter.window.limit is None
        limiter.throttled(1.0)
        assert limiter.window.limit == 4.0  # half of the eight then in flight
        for _ in range(8):
            limiter.release()
        granted: list[int] = []

        async def one(i: int) -> None:
            await limiter.acquire()
            granted.append(i)

        tasks = [asyncio.create_task(one(i)) for i in range(8)]
        for _ in range(5):
            await asyncio.sleep(0)
        held = len(granted)  # Retry-After has passed (the fake sleep moved the clock)
        in_window = len(granted)
        rig.clock.advance(ratelimit.WIDEN_SECONDS)
        limiter.release()  # an answer: the window is one wider now, room for two
        for _ in range(5):
            await asyncio.sleep(0)
        widened = len(granted)
        rig.clock.advance(ratelimit.EPISODE_QUIET)
        for _ in range(limiter.window.inflight):
            limiter.release()
        await limiter.acquire()  # ends the quiet episode: the window is lifted
        await asyncio.gather(*tasks)
        return [held, in_window, widened, len(granted)]

    assert asyncio.run(run()) == [4, 4, 6, 8]
    assert rig.limiter.window.limit is None


def test_quiet_counts_from_the_end_of_a_long_hold_off() -> None:
    """Nothing is sent during a hold-off, so its silence says nothing: the window stays
    until EPISODE_QUIET has passed after it."""
    rig = Rig()
    rig.limiter.throttled(30.0)
    assert rig.acquire_at() == 130.0
    assert rig.limiter.window.limit == 1.0
    rig.clock.advance(ratelimit.EPISODE_QUIET - 1)
    rig.acquire_at()
    assert rig.limiter.window.limit is not None
    rig.clock.advance(1)
    rig.acquire_at()
    assert rig.limiter.window.limit is None


def test_the_window_is_halved_once_per_hold_off() -> None:
    rig = Rig()
    limiter = rig.limiter

    async def run() -> None:
        for _ in range(16):
            await limiter.acquire()
        limiter.throttled(1.0)
        limiter.throttled(1.0)  # answers to requests sent before the hold-off
        assert limiter.window.limit == 8.0
        rig.clock.advance(1.0)
        limiter.throttled(1.0)  # a request sent after it was refused again
        assert limiter.window.limit == 4.0
        rig.clock.advance(1.0 + ratelimit.WIDEN_SECONDS * 3)
        assert limiter.window.limit == 7.0  # one more every WIDEN_SECONDS after the hold

    asyncio.run(run())


def test_a_waiter_cancelled_after_it_was_woken_passes_the_room_on() -> None:
    rig = Rig()
    limiter = rig.limiter

    async def run() -> None:
        await limiter.acquire()
        limiter.throttled(0.0)  # a window of one, taken
        first = asyncio.create_task(limiter.acquire())
        second = asyncio.create_task(limiter.acquire())
        await asyncio.sleep(0)
        limiter.release()  # wakes `first` ...
        first.cancel()  # ... which is cancelled before it runs
        await asyncio.wait_for(second, timeout=5)
        assert limiter.window.inflight == 1

    asyncio.run(run())


def test_a_request_held_back_past_its_budget_is_never_sent() -> None:
    """A Binding must not land after its decision's deadline: the wait in the limiter
    counts against the request's budget, and a request out of budget is not sent."""

    async def run() -> None:
        client = kubeclient.KubeClient(kubeclient.KubeEndpoint(host="http://127.0.0.1:9"))
        client.limiter.throttled(30.0)
        try:
            with pytest.raises(TimeoutError):
                await client.request("POST", "/binding", body={}, budget=0.05)
            assert client.limiter.window.inflight == 0  # nothing was sent
        finally:
            await client.close()

    asyncio.run(run())
