"""One retry loop for every request the binder sends: Bindings, reading a pod back,
nominations, Evictions, Events and the PodScheduled condition.

``Retrier.run`` sends an ``ApiRequest`` until a judge says an answer decides something,
retrying network errors and the answers the judge turns into a ``Retry`` with exponential
backoff and full jitter (Retry-After honoured), never past the deadline nor more than
``max_attempts`` times, and stopping quietly once ``stop`` is set. The caller watches
through ``Hooks`` (count an attempt, mark the decision written, trace each attempt, log a
retry) and learns from ``Attempted.unsure`` whether a try may have taken effect unheard,
so it can read the object before reporting a failure (the binding's ``settle``).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

import aiohttp

from services.binder.apirequests import ApiRequest
from services.binder.classify import Answer, again
from services.binder.jobs import Retry
from splitsched.runtime.retry import backoff_delay

T = TypeVar("T")

#: What a request may fail with before any answer: it may or may not have arrived.
NETWORK_ERRORS: tuple[type[BaseException], ...] = (aiohttp.ClientError, TimeoutError, OSError)
#: Longest single API request; shorter when the deadline is nearer.
MAX_REQUEST_TIMEOUT = 10.0


class Sender(Protocol):
    """Sends one request (``services.binder.kubeapi.KubeClient`` is one)."""

    async def send(self, request: ApiRequest, *, budget: float) -> Answer: ...


class Hooks:
    """What a caller watches of its retried request; every hook does nothing here."""

    def attempt(self) -> None:
        """An attempt is about to be sent."""

    def answered(self, status: int) -> None:
        """The attempt got an HTTP answer."""

    def failed(self, error: BaseException, message: str) -> None:
        """The attempt got no answer (a network error or timeout)."""

    def retry_in(self, delay: float, *, error: str, attempt: int) -> None:
        """Attempt ``attempt`` failed with ``error``; the next follows in ``delay`` s."""


NO_HOOKS = Hooks()


@dataclass(frozen=True)
class Attempted(Generic[T]):
    """The end of a retried request: the judged answer, or None when retries ran out."""

    value: T | None
    attempts: int
    last_status: int  # 0 after a network error
    error: str  # why retries ran out ("" with a value, or when stopped)
    unsure: bool  # some attempt may have taken effect unheard (see ``Retry.unsure``)


@dataclass(frozen=True)
class Backoff:
    """Full-jitter exponential delays between attempts."""

    base: float
    cap: float
    rng: random.Random

    def delay(self, attempts: int) -> float:
        return backoff_delay(attempts, base=self.base, cap=self.cap, rng=self.rng)


class Retrier:
    """Runs the retry loop with one clock, one sleep and one backoff (tests pass fakes)."""

    def __init__(
        self,
        sender: Sender,
        *,
        backoff: Backoff,
        clock: Callable[[], float],
        sleep: Callable[[float], Awaitable[None]],
    ) -> None:
        self.sender = sender
        self.backoff = backoff
        self._clock = clock
        self._sleep = sleep

    async def send(
        self,
        request: ApiRequest,
        *,
        deadline: float,
        hooks: Hooks = NO_HOOKS,
        max_attempts: int = 0,
        stop: asyncio.Event | None = None,
    ) -> Attempted[Answer]:
        """``run`` with the request's own judgement: an answer its ``retryable`` refuses
        is final."""

        async def judge(answer: Answer, budget: float) -> Answer | Retry:
            return again(answer) if request.retryable(answer) else answer

        return await self.run(
            request, judge=judge, deadline=deadline, hooks=hooks, max_attempts=max_attempts,
            stop=stop,
        )  # fmt: skip

    async def run(
        self,
        request: ApiRequest,
        *,
        judge: Callable[[Answer, float], Awaitable[T | Retry]],
        deadline: float,
        hooks: Hooks = NO_HOOKS,
        max_attempts: int = 0,
        stop: asyncio.Event | None = None,
    ) -> Attempted[T]:
        """Send ``request`` until ``judge`` returns a value rather than a ``Retry``;
        ``max_attempts`` 0 means no limit. The judge gets the attempt's time budget, for
        a question of its own to the API server (a Binding's 409)."""
        attempts, last_status, last_error, unsure = 0, 0, "", False

        def gave_up(why: str) -> Attempted[T]:
            return Attempted(None, attempts, last_status, why, unsure)

        while True:
            if stop is not None and stop.is_set():
                return gave_up("")
            remaining = deadline - self._clock()
            if remaining <= 0:
                last = f"; last error: {last_error}" if last_error else ""
                return gave_up(f"deadline exceeded after {attempts} attempts{last}")
            attempts += 1
            budget = min(MAX_REQUEST_TIMEOUT, remaining)
            verdict, last_status = await self._attempt(request, judge, budget, hooks)
            if not isinstance(verdict, Retry):
                return Attempted(verdict, attempts, last_status, "", unsure)
            last_error, unsure = verdict.error, unsure or verdict.unsure
            if max_attempts and attempts >= max_attempts:
                return gave_up(f"gave up after {attempts} attempts; last error: {last_error}")
            delay = verdict.retry_after
            if delay is None:
                delay = self.backoff.delay(attempts)
            if self._clock() + delay >= deadline:
                return gave_up(
                    f"deadline exceeded after {attempts} attempts (next retry in "
                    f"{delay:.2f}s); last error: {last_error}"
                )
            hooks.retry_in(delay, error=last_error, attempt=attempts)
            await self._sleep(delay)

    async def _attempt(
        self,
        request: ApiRequest,
        judge: Callable[[Answer, float], Awaitable[T | Retry]],
        budget: float,
        hooks: Hooks,
    ) -> tuple[T | Retry, int]:
        """One try: the judgement and the HTTP status (0 when no answer came)."""
        hooks.attempt()
        try:
            answer = await self.sender.send(request, budget=budget)
        except NETWORK_ERRORS as exc:
            error = f"network error: {type(exc).__name__}: {exc}".rstrip(": ")
            hooks.failed(exc, error)
            return Retry(error, unsure=True), 0  # the request may have reached the server
        hooks.answered(answer.status)
        return await judge(answer, budget), answer.status
