"""The binder's one retry loop, on a fake clock: no server, no real sleeping.

A scripted sender answers each attempt (or raises a network error); sleeping advances a
``FakeClock``, so deadlines, Retry-After and backoff are checked to the millisecond.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

import aiohttp

from services.binder import apirequests
from services.binder.apirequests import ApiRequest
from services.binder.classify import Answer
from services.binder.jobs import PodKey, Retry
from services.binder.retrying import MAX_REQUEST_TIMEOUT, Attempted, Backoff, Hooks, Retrier
from splitsched.core.clock import FakeClock
from splitsched.runtime.kubeclient import Response

T = TypeVar("T")
REQUEST = apirequests.read_pod("ns", "p")


def answer(code: int, message: str = "", retry_after: float | None = None) -> Response:
    return Response(code, {"kind": "Status", "code": code, "message": message}, retry_after)


@dataclass
class ScriptedSender:
    """Answers attempts from a script (the last step repeats); records each attempt."""

    clock: FakeClock
    script: list[Response | BaseException]
    sent: list[tuple[float, float]] = field(default_factory=list)  # (when, budget)

    async def send(self, request: ApiRequest, *, budget: float) -> Answer:
        self.sent.append((self.clock.now(), budget))
        step = self.script.pop(0) if len(self.script) > 1 else self.script[0]
        if isinstance(step, BaseException):
            raise step
        return step


class RecordingHooks(Hooks):
    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def attempt(self) -> None:
        self.calls.append(("attempt",))

    def answered(self, status: int) -> None:
        self.calls.append(("answered", status))

    def failed(self, error: BaseException, message: str) -> None:
        self.calls.append(("failed", type(error).__name__, message))

    def retry_in(self, delay: float, *, error: str, attempt: int) -> None:
        self.calls.append(("retry_in", round(delay, 6), error, attempt))


@dataclass
class Rig:
    clock: FakeClock
    sender: ScriptedSender
    retrier: Retrier
    sleeps: list[float]


def rig(*script: Response | BaseException, base: float = 0.1, cap: float = 5.0) -> Rig:
    clock = FakeClock(1000.0)
    sender = ScriptedSender(clock, list(script))
    sleeps: list[float] = []

    async def sleep(delay: float) -> None:
        sleeps.append(delay)
        clock.advance(delay)

    backoff = Backoff(base, cap, random.Random(7))
    retrier = Retrier(sender, backoff=backoff, clock=clock.now, sleep=sleep)
    return Rig(clock, sender, retrier, sleeps)


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


def test_a_server_error_is_retried_after_a_jittered_backoff_and_leaves_the_call_unsure() -> None:
    r = rig(answer(503, "busy"), answer(200))
    hooks = RecordingHooks()
    done = run(r.retrier.send(REQUEST, deadline=1030.0, hooks=hooks))
    assert done.value == answer(200)
    assert (done.attempts, done.last_status, done.error, done.unsure) == (2, 200, "", True)
    (delay,) = r.sleeps
    assert 0.0 <= delay <= 0.1  # full jitter under base * 2**0
    assert hooks.calls == [
        ("attempt",),
        ("answered", 503),
        ("retry_in", round(delay, 6), "HTTP 503: busy", 1),
        ("attempt",),
        ("answered", 200),
    ]


def test_retry_after_is_honoured_and_throttling_alone_is_not_unsure() -> None:
    r = rig(answer(429, "slow", retry_after=0.7), answer(429, "slow", retry_after=1.5), answer(201))
    done = run(r.retrier.send(REQUEST, deadline=1030.0))
    assert r.sleeps == [0.7, 1.5]
    assert (done.attempts, done.last_status, done.unsure) == (3, 201, False)
    assert [when for when, _ in r.sender.sent] == [1000.0, 1000.7, 1002.2]


def test_a_network_error_is_retried_and_counted_as_maybe_arrived() -> None:
    r = rig(aiohttp.ClientConnectionError("reset by peer"), answer(200))
    hooks = RecordingHooks()
    done = run(r.retrier.send(REQUEST, deadline=1030.0, hooks=hooks))
    assert (done.attempts, done.unsure) == (2, True)
    assert hooks.calls[1] == (
        "failed",
        "ClientConnectionError",
        "network error: ClientConnectionError: reset by peer",
    )


def test_an_answer_the_request_does_not_retry_is_final() -> None:
    r = rig(answer(409, "Precondition failed: UID"), answer(201))
    done = run(r.retrier.send(apirequests.eviction(PodKey("ns", "v", "u")), deadline=1030.0))
    assert (done.value, done.attempts, done.last_status) == (
        answer(409, "Precondition failed: UID"),
        1,
        409,
    )
    assert r.sleeps == []


def test_max_attempts_gives_up_without_a_last_sleep() -> None:
    r = rig(answer(503, "busy"))
    done = run(r.retrier.send(REQUEST, deadline=1030.0, max_attempts=3))
    assert done == Attempted(
        None, 3, 503, "gave up after 3 attempts; last error: HTTP 503: busy", True
    )
    assert len(r.sleeps) == 2


def test_the_deadline_stops_retries_before_a_sleep_that_would_pass_it() -> None:
    r = rig(answer(503, "busy", retry_after=4.0))
    done = run(r.retrier.send(REQUEST, deadline=1010.0))
    assert [when for when, _ in r.sender.sent] == [1000.0, 1004.0, 1008.0]
    assert done.error == (
        "deadline exceeded after 3 attempts (next retry in 4.00s); last error: HTTP 503: busy"
    )


def test_a_passed_deadline_sends_nothing() -> None:
    r = rig(answer(200))
    done = run(r.retrier.send(REQUEST, deadline=1000.0))
    assert done == Attempted(None, 0, 0, "deadline exceeded after 0 attempts", False)
    assert r.sender.sent == []


def test_each_attempt_gets_at_most_the_request_timeout_and_never_past_the_deadline() -> None:
    r = rig(answer(503, retry_after=22.0), answer(200))
    run(r.retrier.send(REQUEST, deadline=1025.0))
    assert r.sender.sent == [(1000.0, MAX_REQUEST_TIMEOUT), (1022.0, 3.0)]


def test_stop_ends_the_loop_quietly() -> None:
    r = rig(answer(503))
    stop = asyncio.Event()

    class StopAfterOne(Hooks):
        def answered(self, status: int) -> None:
            stop.set()

    done = run(r.retrier.send(REQUEST, deadline=1030.0, hooks=StopAfterOne(), stop=stop))
    assert (done.value, done.attempts, done.error) == (None, 1, "")


def test_a_judge_decides_with_its_own_values_and_gets_the_attempt_budget() -> None:
    r = rig(answer(409, "conflict"), answer(409, "conflict"), answer(409, "taken"))
    budgets: list[float] = []

    async def judge(got: Answer, budget: float) -> str | Retry:
        budgets.append(budget)
        if got.message == "taken":
            return "read the pod: bound elsewhere"
        return Retry(f"HTTP 409: {got.message}", unsure=True)

    done = run(r.retrier.run(REQUEST, judge=judge, deadline=1030.0))
    assert (done.value, done.attempts, done.unsure) == ("read the pod: bound elsewhere", 3, True)
    assert budgets[0] == MAX_REQUEST_TIMEOUT
    assert len(budgets) == 3
