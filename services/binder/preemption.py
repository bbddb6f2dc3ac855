"""A preemption, kube-scheduler's DefaultPreemption "prepareCandidate" step: merge-PATCH
the preemptor's ``status.nominatedNodeName`` (uid-checked), then POST an Eviction for
every victim (uid precondition; the API server enforces PodDisruptionBudgets).

``services.binder.worker`` runs one ``Preempter.run`` per accepted ``PreemptJob`` as its
own task, reports the ``PreemptionResult`` and writes a ``Preempted`` Event on each
evicted victim:

* BOUND -> nomination set and every victim evicted (404 / uid mismatch: already gone);
* FAILED -> an eviction was refused (429 from a PDB, ``last_http_status`` 429) or failed
  with another 4xx; the victims not yet attempted are left alone, like kube-scheduler;
* POD_GONE -> the preemptor was deleted or re-created; CONFLICT -> it is already bound;
* DEADLINE_EXCEEDED -> 5xx / 429 / network errors retried until the job's deadline.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from services.binder import apirequests, classify
from services.binder.jobs import (
    BOUND,
    DEADLINE_EXCEEDED,
    FAILED,
    BindResult,
    Eviction,
    EvictionState,
    PodKey,
    PreemptJob,
)
from services.binder.metrics import BinderMetrics
from services.binder.retrying import Hooks, Retrier

#: Evictions of one preemption's victims in flight at once.
EVICTION_CONCURRENCY = 16

#: Which victim states end a preemption, and as what (the first found wins).
_FAILURES = (
    (EvictionState.REFUSED, FAILED),
    (EvictionState.FAILED, FAILED),
    (EvictionState.DEADLINE, DEADLINE_EXCEEDED),
)


@dataclass(frozen=True)
class PreemptionResult:
    """The preemption's outcome (attempts: the nomination's and the evictions' API calls)
    and the victims it evicted."""

    done: BindResult
    evicted: tuple[PodKey, ...]


class _CountEvictions(Hooks):
    def __init__(self, metrics: BinderMetrics) -> None:
        self._metrics = metrics

    def answered(self, status: int) -> None:
        self._metrics.evictions.labels(code=str(status)).inc()

    def failed(self, error: BaseException, message: str) -> None:
        self._metrics.evictions.labels(code="error").inc()


class Preempter:
    """Nominates a preemptor and evicts its victims."""

    def __init__(self, *, retrier: Retrier, metrics: BinderMetrics) -> None:
        self._retrier = retrier
        self._count = _CountEvictions(metrics)

    async def run(self, job: PreemptJob, *, evicting: Callable[[], None]) -> PreemptionResult:
        """Nominate, then evict (``evicting`` is called before the first Eviction)."""
        nominated = await self._nominate(job)
        if nominated.result != BOUND:
            return PreemptionResult(nominated, ())
        stop = asyncio.Event()
        limit = asyncio.Semaphore(EVICTION_CONCURRENCY)

        async def evict(victim: PodKey) -> Eviction:
            async with limit:
                if stop.is_set():
                    return Eviction(victim, EvictionState.SKIPPED, "not attempted", 0, 0)
                done = await self._evict(victim, deadline=job.deadline, stop=stop)
            if done.state in (EvictionState.REFUSED, EvictionState.FAILED):
                stop.set()  # like kube-scheduler: the first error cancels the rest
            return done

        evicting()
        evictions = await asyncio.gather(*(evict(v) for v in job.victims))
        return summarize(job, evictions, nominated=nominated)

    async def _nominate(self, job: PreemptJob) -> BindResult:
        """Set the preemptor's ``status.nominatedNodeName`` (result BOUND when done)."""
        request = apirequests.nomination(job.preemptor, job.node)
        done = await self._retrier.send(request, deadline=job.deadline)
        if done.value is None:
            message = f"setting nominatedNodeName: {done.error}"
            return BindResult(DEADLINE_EXCEEDED, message, done.attempts, done.last_status)
        verdict = classify.nomination_answer(done.value, preemptor=job.preemptor)
        return BindResult(verdict.result, verdict.message, done.attempts, done.value.status)

    async def _evict(self, victim: PodKey, *, deadline: float, stop: asyncio.Event) -> Eviction:
        done = await self._retrier.send(
            apirequests.eviction(victim), deadline=deadline, hooks=self._count, stop=stop
        )
        if done.value is None:
            if stop.is_set() and not done.error:
                return Eviction(victim, EvictionState.SKIPPED, "not attempted", done.attempts, 0)
            message = f"eviction of {victim}: {done.error}"
            return Eviction(
                victim, EvictionState.DEADLINE, message, done.attempts, done.last_status
            )
        state, message = classify.eviction_answer(done.value, victim=victim)
        return Eviction(victim, state, message, done.attempts, done.value.status)


def summarize(
    job: PreemptJob, evictions: Sequence[Eviction], *, nominated: BindResult
) -> PreemptionResult:
    """One result for a nomination and its victims' evictions."""
    attempts = nominated.attempts + sum(e.attempts for e in evictions)
    status = nominated.last_http_status
    for e in evictions:
        if e.attempts:
            status = e.last_status
    evicted = tuple(e.victim for e in evictions if e.state is EvictionState.EVICTED)
    summary = f"evicted {len(evicted)} of {len(job.victims)} victims"
    skipped = sum(1 for e in evictions if e.state is EvictionState.SKIPPED)
    if skipped:
        summary += f", {skipped} not attempted"
    for state, result in _FAILURES:
        bad = [e for e in evictions if e.state is state]
        if bad:
            text = "; ".join([*(e.message for e in bad), summary])
            return PreemptionResult(BindResult(result, text, attempts, bad[0].last_status), evicted)
    count = len(job.victims)
    message = f"preempted {count} victim{'' if count == 1 else 's'}"
    gone = sum(1 for e in evictions if e.state is EvictionState.GONE)
    if gone:
        message += f" ({gone} already gone)"
    return PreemptionResult(BindResult(BOUND, message, attempts, status), evicted)
