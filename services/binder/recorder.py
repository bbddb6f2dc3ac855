"""What the binder records about pods besides Bindings and evictions: the ``Scheduled``,
``Preempted`` and ``FailedScheduling`` Events and the PodScheduled=False condition
(kube-scheduler's event recorder and its status update after a failed cycle).

``services.binder.worker`` calls ``scheduled`` after a BOUND outcome is reported,
``preempted`` on each evicted victim, ``unschedulable`` for the scheduler's reports.
Scheduled and Preempted are best-effort, one try each, but for the API server's own
throttling (429 with Retry-After): that request never ran, so it is sent again, after the
client's shared hold-off, a bounded number of times. FailedScheduling and the condition
are the only record of why a pod waits, so each is retried through 5xx, 429 and resets, a
bounded number of times, and a write that did not land is logged.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from services.binder import apirequests, events
from services.binder.apirequests import ApiRequest
from services.binder.events import EventSource
from services.binder.jobs import BindJob, PodKey, PreemptJob
from services.binder.retrying import MAX_REQUEST_TIMEOUT, NETWORK_ERRORS, Retrier
from splitsched.runtime import kubeclient

log = logging.getLogger(__name__)

#: The FailedScheduling Event and the PodScheduled=False condition are each retried with
#: the Binding's backoff (Retry-After honoured) for at most this long and this many tries.
UNSCHEDULABLE_WRITE_SECONDS = 30.0
UNSCHEDULABLE_WRITE_ATTEMPTS = 8
#: Tries of a best-effort Event the API server throttles (the hold-off paces them).
THROTTLED_EVENT_ATTEMPTS = 5
#: The two parts of an unschedulable report.
EVENT, CONDITION = "FailedScheduling event", "PodScheduled=False condition"
UNSCHEDULABLE_PARTS = frozenset({EVENT, CONDITION})


class Recorder:
    """Writes Events and the PodScheduled condition about pods."""

    def __init__(
        self, *, retrier: Retrier, source: EventSource, clock: Callable[[], float]
    ) -> None:
        self._retrier = retrier
        self._source = source
        self._clock = clock

    async def scheduled(self, job: BindJob) -> None:
        note = f"Successfully assigned {job.namespace}/{job.name} to {job.node}"
        event = self._source.event(
            events.SCHEDULED, job.pod, note, now=self._clock(), profile=job.profile
        )
        await self._create_once(event)

    async def preempted(self, job: PreemptJob, victim: PodKey) -> None:
        note = f"Preempted by pod {job.preemptor.uid} on node {job.node}"
        event = self._source.event(
            events.PREEMPTED, victim, note, now=self._clock(), related=job.preemptor
        )
        await self._create_once(event)

    async def unschedulable(
        self,
        pod: PodKey,
        *,
        message: str,
        reason: str,
        profile: str,
        parts: frozenset[str] = UNSCHEDULABLE_PARTS,
    ) -> frozenset[str]:
        """The FailedScheduling Event and PodScheduled=False (``parts``: which of
        ``EVENT`` and ``CONDITION`` to write), side by side; returns the parts written."""
        now = self._clock()
        deadline = now + UNSCHEDULABLE_WRITE_SECONDS
        writes: dict[str, ApiRequest] = {}
        if EVENT in parts:
            event = self._source.event(
                events.FAILED_SCHEDULING, pod, message, now=now, profile=profile
            )
            writes[EVENT] = apirequests.create_event(event)
        if CONDITION in parts:
            writes[CONDITION] = apirequests.unschedulable_condition(
                pod, reason=reason, message=message, now=now
            )
        landed = await asyncio.gather(
            *(self._write_retried(request, deadline=deadline) for request in writes.values())
        )
        return frozenset(part for part, ok in zip(writes, landed, strict=True) if ok)

    async def _create_once(self, event: dict[str, Any]) -> None:
        request = apirequests.create_event(event)
        for _ in range(THROTTLED_EVENT_ATTEMPTS):
            try:
                answer = await self._retrier.sender.send(request, budget=MAX_REQUEST_TIMEOUT)
            except NETWORK_ERRORS as exc:
                log.warning("%s not written: %s", request.what, exc)
                return
            if not kubeclient.server_throttled(answer):
                break
        if answer.status >= 300:
            log.warning("%s not written: HTTP %d %s", request.what, answer.status, answer.message)

    async def _write_retried(self, request: ApiRequest, *, deadline: float) -> bool:
        """One write with the Binding's retries, at most ``UNSCHEDULABLE_WRITE_ATTEMPTS``
        tries before ``deadline``; logs a write that did not land. True when written."""
        done = await self._retrier.send(
            request, deadline=deadline, max_attempts=UNSCHEDULABLE_WRITE_ATTEMPTS
        )
        answer = done.value
        if answer is not None and request.done(answer):
            if done.attempts > 1:
                log.info("%s written after %d attempts", request.what, done.attempts)
            return True
        why = done.error
        if answer is not None:
            why = f"HTTP {answer.status} {answer.message}"
        log.warning("%s not written: %s", request.what, why)
        return False
