"""Binding one decision: POST ``pods/{name}/binding`` until an answer decides, and never
report a failure while a Binding may have landed unheard.

``services.binder.worker`` calls ``Bindings.bind`` for each decision a worker takes:

* 201 -> BOUND; 404 -> POD_GONE; other 4xx -> FAILED with the API's message;
* 409 -> GET the pod (``classify.after_conflict``): on the target node -> BOUND (an
  earlier attempt's answer was lost), on another node -> CONFLICT, gone / re-created
  (other uid) / being deleted -> POD_GONE;
* 5xx, 429 (Retry-After honoured) and network errors are retried with exponential backoff
  and full jitter until ``max_attempts`` or the deadline -> DEADLINE_EXCEEDED. If an
  attempt may have bound the pod unheard (no answer, a 5xx, a 409 the pod could not be
  read after), the pod is read first (``settle``): a failure is only reported once known,
  or late, after the scheduler's own deadline, when it cannot be read.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from services.binder import apirequests, classify
from services.binder.classify import Answer
from services.binder.jobs import DEADLINE_EXCEEDED, BindJob, BindResult, Retry, Verdict
from services.binder.metrics import BinderMetrics
from services.binder.retrying import NETWORK_ERRORS, Hooks, Retrier
from services.binder.spans import NO_CALL, RetriedCall

log = logging.getLogger(__name__)

#: After an attempt whose effect is unknown, how long past the deadline the pod is read
#: before a failure is reported anyway (longer than the scheduler's margin past ours).
UNSURE_SETTLE_SECONDS = 30.0


class _BindingHooks(Hooks):
    """Each Binding attempt: marked written, counted, traced, its retry logged."""

    def __init__(
        self,
        job: BindJob,
        *,
        span: RetriedCall,
        metrics: BinderMetrics,
        writing: Callable[[], None],
    ) -> None:
        self._job = job
        self._span = span
        self._metrics = metrics
        self._writing = writing

    def attempt(self) -> None:
        self._span.attempt()
        self._writing()

    def answered(self, status: int) -> None:
        self._metrics.binding_attempts.labels(code=str(status)).inc()
        self._span.status_code(status)

    def failed(self, error: BaseException, message: str) -> None:
        self._metrics.binding_attempts.labels(code="error").inc()
        self._span.error(type(error).__name__, message)

    def retry_in(self, delay: float, *, error: str, attempt: int) -> None:
        job = self._job
        log.info("binding %s/%s to %s: %s; attempt %d in %.2fs", job.namespace, job.name,
                 job.node, error, attempt + 1, delay)  # fmt: skip
        self._span.retry_in(delay)


class Bindings:
    """Writes Bindings through the binder's one retry loop."""

    def __init__(self, *, retrier: Retrier, metrics: BinderMetrics) -> None:
        self._retrier = retrier
        self._metrics = metrics

    async def bind(
        self, job: BindJob, *, writing: Callable[[], None], span: RetriedCall = NO_CALL
    ) -> BindResult:
        """Bind ``job``'s pod; ``writing`` is called before each attempt is sent."""
        hooks = _BindingHooks(job, span=span, metrics=self._metrics, writing=writing)

        async def judge(answer: Answer, budget: float) -> Verdict | Retry:
            meaning = classify.binding_answer(answer)
            if isinstance(meaning, classify.ReadPod):
                return await self._read_after_conflict(job, answer, budget=budget)
            return meaning

        done = await self._retrier.run(
            apirequests.binding(job), judge=judge, deadline=job.deadline,
            max_attempts=job.max_attempts, hooks=hooks,
        )  # fmt: skip
        if done.value is not None:
            verdict = done.value
            return BindResult(verdict.result, verdict.message, done.attempts, done.last_status)
        gave_up = BindResult(DEADLINE_EXCEEDED, done.error, done.attempts, done.last_status)
        return await self.settle(job, gave_up) if done.unsure else gave_up

    async def _read_after_conflict(
        self, job: BindJob, conflict: Answer, *, budget: float
    ) -> Verdict | Retry:
        """Why a 409: read the pod (a failed read means "retry the Binding, unsure")."""
        try:
            pod = await self._retrier.sender.send(
                apirequests.read_pod(job.namespace, job.name), budget=budget
            )
        except NETWORK_ERRORS as exc:
            log.debug("GET pod after 409 failed for %s: %s", job.decision_id, exc)
            return Retry(classify.http_error(conflict), unsure=True)
        return classify.after_conflict(pod, uid=job.uid, node=job.node, conflict=conflict)

    async def settle(self, job: BindJob, gave_up: BindResult) -> BindResult:
        """Giving up after an attempt whose effect is unknown: a Binding may have landed
        unheard, and a failure reported now would let the scheduler give the pod's room
        to another pod while the pod is using it. So read the pod, retrying for up to
        ``UNSURE_SETTLE_SECONDS`` past the deadline (``classify.settled`` says what it
        shows). When it never answers, ``gave_up`` goes out late: by then the
        scheduler's own bind deadline has passed and its watch decided."""

        async def judge(answer: Answer, budget: float) -> BindResult | Retry:
            known = classify.settled(answer, uid=job.uid, node=job.node, gave_up=gave_up)
            return Retry(classify.http_error(answer)) if known is None else known

        read = await self._retrier.run(
            apirequests.read_pod(job.namespace, job.name), judge=judge,
            deadline=job.deadline + UNSURE_SETTLE_SECONDS,
        )  # fmt: skip
        if read.value is not None:
            return read.value
        message = (
            f"{gave_up.message}; whether the pod is bound is unknown (it could not be "
            f"read for {UNSURE_SETTLE_SECONDS:.0f}s after the deadline)"
        )
        return BindResult(gave_up.result, message, gave_up.attempts, gave_up.last_http_status)
