"""The binder's work: a bounded queue of decisions and a pool of asyncio workers binding them.

``services.binder.server`` submits validated decisions (``submit``) and unschedulable
reports (``report_unschedulable``); ``services.binder.main`` starts the pool and calls
``shutdown`` on SIGTERM. Each decision becomes one ``BindingOutcome`` handed to the
``OutcomeReporter``:

* 201 -> BOUND, then a ``Scheduled`` Event (best-effort, after the outcome is reported);
* 409 -> GET the pod: on the target node -> BOUND (an earlier attempt's response was lost),
  on another node -> CONFLICT, gone / re-created (other uid) / being deleted -> POD_GONE;
* 404 -> POD_GONE; other 4xx -> FAILED with the API's message;
* 5xx, 429 (Retry-After honoured) and network errors are retried with exponential backoff
  and full jitter until ``max_attempts`` or the deadline -> DEADLINE_EXCEEDED. If an
  attempt may have bound the pod unheard (no answer, a 5xx, a 409 the pod could not be
  read after), the pod is read first (``_settle``): a failure is only reported once known,
  or late, after the scheduler's own deadline, when it cannot be read.

Decisions accepted more than ``IN_PROGRESS_AFTER`` seconds ago and not finished (queued or
binding) are re-reported as IN_PROGRESS every couple of seconds (``in_progress``, sent by
the reporter), so a scheduler that took over or restarted adopts them instead of giving
their room to other pods. Preemptions in flight are too (``preemption`` set, with their
victims): a new leader holds the room their evictions free for the preemptor.

``shutdown`` fails the decisions it never started; one still running after the grace whose
Binding (or evictions) may have reached the API server is reported IN_PROGRESS instead of
FAILED, so the scheduler keeps its room until the watch or its deadline decides.

Preemptions (``submit_preemption``, kube-scheduler's DefaultPreemption "prepareCandidate"
step) run as their own tasks, not through the queue: merge-PATCH the preemptor's
``status.nominatedNodeName`` (uid-checked), then POST an Eviction for every victim (uid
precondition; the API server enforces PodDisruptionBudgets), then a ``Preempted`` Event on
each evicted victim. One ``BindingOutcome`` with the preemption's decision id reports it:

* BOUND -> nomination set and every victim evicted (404 / uid mismatch: already gone);
* FAILED -> an eviction was refused (429 from a PDB, ``last_http_status`` 429) or failed
  with another 4xx; the victims not yet attempted are left alone, like kube-scheduler;
* POD_GONE -> the preemptor was deleted or re-created; CONFLICT -> it is already bound;
* DEADLINE_EXCEEDED -> 5xx / 429 / network errors retried until ``preempt_deadline``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime as dt
import logging
import random
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from services.binder.kubeapi import HttpResult, KubeClient
from services.binder.metrics import BinderMetrics
from services.binder.reporter import OutcomeReporter
from splitsched.runtime import tracing
from splitsched.runtime.retry import backoff_delay
from splitsched.v1 import scheduler_pb2, types_pb2

log = logging.getLogger(__name__)

Result = scheduler_pb2.BindingOutcome.Result
BOUND = scheduler_pb2.BindingOutcome.BOUND
CONFLICT = scheduler_pb2.BindingOutcome.CONFLICT
POD_GONE = scheduler_pb2.BindingOutcome.POD_GONE
FAILED = scheduler_pb2.BindingOutcome.FAILED
DEADLINE_EXCEEDED = scheduler_pb2.BindingOutcome.DEADLINE_EXCEEDED
IN_PROGRESS = scheduler_pb2.BindingOutcome.IN_PROGRESS
#: A decision is re-reported IN_PROGRESS once it has been in flight this long (seconds).
IN_PROGRESS_AFTER = 1.0

SHUTTING_DOWN = "binder shutting down"
#: Longest single API request; shorter when the deadline is nearer.
MAX_REQUEST_TIMEOUT = 10.0
#: After an attempt whose effect is unknown, how long past the deadline the pod is read
#: before a failure is reported anyway (longer than the scheduler's margin past ours).
UNSURE_SETTLE_SECONDS = 30.0
#: events.k8s.io/v1 limits ``note`` to 1 KiB.
EVENT_NOTE_LIMIT = 1024
#: How many finished decisions are remembered for idempotent re-submission.
FINISHED_MEMORY = 20_000

NETWORK_ERRORS: tuple[type[BaseException], ...] = (aiohttp.ClientError, TimeoutError, OSError)
#: Evictions of one preemption's victims in flight at once.
EVICTION_CONCURRENCY = 16
#: The StatusCause type the Eviction API gives when a PodDisruptionBudget forbids it.
DISRUPTION_BUDGET_CAUSE = "DisruptionBudget"
#: The FailedScheduling Event and the PodScheduled=False condition are each retried with
#: the Binding's backoff (Retry-After honoured) for at most this long and this many tries.
UNSCHEDULABLE_WRITE_SECONDS = 30.0
UNSCHEDULABLE_WRITE_ATTEMPTS = 8


def _causes(response: HttpResult) -> list[str]:
    """The messages of a Status's ``details.causes``."""
    body = response.body if isinstance(response.body, dict) else {}
    causes = (body.get("details") or {}).get("causes") or []
    return [str(c.get("message")) for c in causes if isinstance(c, dict) and c.get("message")]


def _uid_cause(response: HttpResult) -> bool:
    """A 422 because the patch's metadata.uid is not the object's (it was re-created)."""
    body = response.body if isinstance(response.body, dict) else {}
    causes = (body.get("details") or {}).get("causes") or []
    return any(isinstance(c, dict) and c.get("field") == "metadata.uid" for c in causes)


def _budget_refusal(response: HttpResult) -> bool:
    """The Eviction API refused because of PodDisruptionBudgets (final, not retried):
    a 429 with a DisruptionBudget cause, or the 500 for a pod under several PDBs."""
    body = response.body if isinstance(response.body, dict) else {}
    if response.status == 429:
        causes = (body.get("details") or {}).get("causes") or []
        return (
            any(isinstance(c, dict) and c.get("reason") == DISRUPTION_BUDGET_CAUSE for c in causes)
            or "disruption budget" in response.message.lower()
        )
    return response.status == 500 and "more than one poddisruptionbudget" in (
        response.message.lower()
    )


def _retryable_status(response: HttpResult) -> bool:
    return response.status in (409, 429) or response.status >= 500


def _retryable_eviction(response: HttpResult) -> bool:
    if _budget_refusal(response):
        return False
    if response.status == 409:  # retry a write conflict; a failed uid precondition is final
        return "precondition" not in response.message.lower()
    return response.status == 429 or response.status >= 500


def _ignore_code(code: str) -> None:
    pass


def _retryable_create(response: HttpResult) -> bool:
    """A create worth trying again: throttled or a server error. A 409 means an earlier
    attempt whose answer was lost created it (the name is the same)."""
    return response.status == 429 or response.status >= 500


@dataclass(frozen=True)
class BindJob:
    """One accepted decision."""

    decision_id: str
    namespace: str
    name: str
    uid: str
    node: str
    deadline: float  # wall-clock seconds (time.time())
    max_attempts: int
    node_version: int = 0
    profile: str = ""
    trace_context: Mapping[str, str] = field(default_factory=dict)
    accepted_at: float = field(default_factory=time.monotonic)


@dataclass(frozen=True)
class BindResult:
    """What happened to a decision, before it becomes a ``BindingOutcome``."""

    result: int
    message: str
    attempts: int
    last_http_status: int


@dataclass(frozen=True)
class PodKey:
    """A pod by namespace, name and uid (a preemption victim)."""

    namespace: str
    name: str
    uid: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class PreemptJob:
    """One accepted preemption: nominate ``preemptor`` to ``node``, evict ``victims``."""

    decision_id: str
    preemptor: PodKey
    node: str
    victims: tuple[PodKey, ...]
    deadline: float  # wall-clock seconds (time.time())
    message: str = ""
    trace_context: Mapping[str, str] = field(default_factory=dict)
    accepted_at: float = field(default_factory=time.monotonic)


@dataclass(frozen=True)
class Attempted:
    """The end of a retried API call: the final answer, or None when retries ran out."""

    response: HttpResult | None
    attempts: int
    last_status: int
    error: str  # why retries ran out ("" when there is a response)


@dataclass(frozen=True)
class Eviction:
    """What happened to one victim."""

    victim: PodKey
    #: evicted | gone | refused | failed | deadline | skipped
    state: str
    message: str
    attempts: int
    last_status: int


def micro_time(when: float) -> str:
    """An RFC 3339 MicroTime (``2006-01-02T15:04:05.000000Z``)."""
    stamp = dt.datetime.fromtimestamp(when, tz=dt.UTC)
    return stamp.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def make_event(
    *,
    namespace: str,
    pod_name: str,
    pod_uid: str,
    event_type: str,
    reason: str,
    action: str,
    note: str,
    controller: str,
    instance: str,
    now: float,
) -> dict[str, Any]:
    """An ``events.k8s.io/v1`` Event about a pod, shaped like kube-scheduler's recorder's."""
    regarding: dict[str, str] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "namespace": namespace,
        "name": pod_name,
    }
    if pod_uid:
        regarding["uid"] = pod_uid
    suffix = f".{time.time_ns():x}"
    return {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": pod_name[: 253 - len(suffix)] + suffix, "namespace": namespace},
        "eventTime": micro_time(now),
        "reportingController": controller[:128],
        "reportingInstance": instance[:128],
        "action": action,
        "reason": reason,
        "type": event_type,
        "regarding": regarding,
        "note": note[:EVENT_NOTE_LIMIT],
    }


class BindingPool:
    """Accepts decisions into a bounded queue and binds them with ``workers`` coroutines."""

    def __init__(
        self,
        *,
        kube: KubeClient,
        reporter: OutcomeReporter,
        metrics: BinderMetrics,
        binder_id: str,
        workers: int = 64,
        max_pending: int = 10_000,
        backoff_base: float = 0.1,
        backoff_cap: float = 5.0,
        event_controller: str = "splitsched",
        preempt_deadline: float = 30.0,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        rng: random.Random | None = None,
    ) -> None:
        self._kube = kube
        self._reporter = reporter
        self._metrics = metrics
        self.binder_id = binder_id
        self._workers = max(1, workers)
        self._max_pending = max(1, max_pending)
        self._backoff_base = backoff_base
        self._backoff_cap = backoff_cap
        self._event_controller = event_controller
        self._preempt_deadline = preempt_deadline
        self._clock = clock
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._queue: asyncio.Queue[BindJob] = asyncio.Queue(maxsize=self._max_pending)
        #: Accepted and not finished (queued or binding), by decision id.
        self._active: dict[str, BindJob] = {}
        #: Being bound right now, by decision id.
        self._running: dict[str, BindJob] = {}
        #: Decisions (bindings and preemptions) whose first write to the API server was
        #: sent: interrupted, their effect is unknown.
        self._written: set[str] = set()
        self._finished: OrderedDict[str, scheduler_pb2.BindingOutcome] = OrderedDict()
        self._tasks: list[asyncio.Task[None]] = []
        self._side_tasks: set[asyncio.Task[None]] = set()
        #: Accepted preemptions not yet reported, and their tasks, by decision id.
        self._preemptions: dict[str, PreemptJob] = {}
        self._preempt_tasks: dict[str, asyncio.Task[None]] = {}
        self._idle = asyncio.Event()
        self._idle.set()
        self.shutting_down = False
        reporter.in_progress_source = self.in_progress

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        if not self._tasks:
            self._tasks = [
                asyncio.create_task(self._worker(), name=f"binder-worker-{i}")
                for i in range(self._workers)
            ]

    @property
    def inflight(self) -> int:
        return len(self._active)

    def in_progress(self) -> list[scheduler_pb2.BindingOutcome]:
        """IN_PROGRESS reports for the decisions accepted at least ``IN_PROGRESS_AFTER``
        seconds ago and not finished (queued or binding)."""
        cutoff = time.monotonic() - IN_PROGRESS_AFTER
        bindings = [
            scheduler_pb2.BindingOutcome(
                decision_id=job.decision_id,
                pod=types_pb2.PodRef(namespace=job.namespace, name=job.name, uid=job.uid),
                node=job.node,
                result=IN_PROGRESS,
                message="in flight",
                binder_id=self.binder_id,
            )
            for job in list(self._active.values())
            if job.accepted_at <= cutoff
        ]
        preemptions = [
            self._preemption_outcome(job, IN_PROGRESS, "preemption in flight")
            for job in list(self._preemptions.values())
            if job.accepted_at <= cutoff
        ]
        return bindings + preemptions

    def _preemption_outcome(
        self, job: PreemptJob, result: int, message: str
    ) -> scheduler_pb2.BindingOutcome:
        """A preemption's outcome: pod = the preemptor, node = the nominated node, and
        the victims, so a scheduler that did not make it can hold its room."""
        pod = job.preemptor
        return scheduler_pb2.BindingOutcome(
            decision_id=job.decision_id,
            pod=types_pb2.PodRef(namespace=pod.namespace, name=pod.name, uid=pod.uid),
            node=job.node,
            result=result,  # type: ignore[arg-type]
            message=message,
            binder_id=self.binder_id,
            trace_context=dict(job.trace_context),
            preemption=True,
            victims=[
                types_pb2.PodRef(namespace=v.namespace, name=v.name, uid=v.uid) for v in job.victims
            ],
        )

    async def shutdown(self, grace: float) -> None:
        """Refuse new work, fail queued decisions at once, give running ones ``grace``."""
        self.shutting_down = True
        while True:
            try:
                job = self._queue.get_nowait()
            except asyncio.QueueEmpty:
                break
            await self._finish(job, BindResult(FAILED, SHUTTING_DOWN, 0, 0), event=False)
        loop = asyncio.get_running_loop()
        end = loop.time() + grace
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._idle.wait(), timeout=max(0.0, end - loop.time()))
        if self._side_tasks or self._preempt_tasks:
            await asyncio.wait(
                {*self._side_tasks, *self._preempt_tasks.values()},
                timeout=max(0.0, end - loop.time()),
            )
        interrupted = list(self._running.values())
        preempt_tasks = list(self._preempt_tasks.values())
        for task in [*self._tasks, *self._side_tasks, *preempt_tasks]:
            task.cancel()
        await asyncio.gather(
            *self._tasks, *self._side_tasks, *preempt_tasks, return_exceptions=True
        )
        self._tasks = []
        unknown = (
            f"{SHUTTING_DOWN}: interrupted after {grace:.0f}s grace with a request to the API "
            "server in flight; whether it landed is unknown (the watch decides)"
        )
        in_flight = [*self._preemptions, *(job.decision_id for job in interrupted)]
        unsure = [d for d in in_flight if d in self._written]
        if unsure:
            log.warning(
                "shutdown: %d decisions interrupted with a request to the API server in "
                "flight: reported IN_PROGRESS (not FAILED), so their rooms stay held",
                len(unsure),
            )
        for preemption in list(self._preemptions.values()):
            if preemption.decision_id in self._written:  # evictions may have been sent
                await self._finish_preemption(
                    preemption, IN_PROGRESS, unknown, attempts=0, status=0
                )
                continue
            message = f"{SHUTTING_DOWN} (preemption interrupted after {grace:.0f}s grace)"
            await self._finish_preemption(preemption, FAILED, message, attempts=0, status=0)
        for job in interrupted:
            if job.decision_id not in self._active:
                continue
            if job.decision_id in self._written:  # the Binding may still land
                await self._finish(job, BindResult(IN_PROGRESS, unknown, 0, 0), event=False)
                continue
            message = f"{SHUTTING_DOWN} (binding interrupted after {grace:.0f}s grace)"
            await self._finish(job, BindResult(FAILED, message, 0, 0), event=False)

    # -- intake ----------------------------------------------------------------------------

    def submit(self, job: BindJob) -> str | None:
        """Enqueue a decision; None when accepted, else why it was refused."""
        if self.shutting_down:
            return SHUTTING_DOWN
        if job.decision_id in self._active:
            return None  # idempotent: already queued or binding
        previous = self._finished.get(job.decision_id)
        if previous is not None:
            # Already done: tell the scheduler again rather than bind twice.
            self._spawn(self._reporter.put(previous))
            return None
        try:
            self._queue.put_nowait(job)
        except asyncio.QueueFull:
            return f"binder queue full ({self._max_pending} decisions pending)"
        self._active[job.decision_id] = job
        self._idle.clear()
        self._metrics.inflight.set(len(self._active))
        return None

    def submit_preemption(self, job: PreemptJob) -> str | None:
        """Start a preemption; None when accepted (or already known), else why refused."""
        if self.shutting_down:
            return SHUTTING_DOWN
        if job.decision_id in self._preemptions:
            return None  # idempotent: already running
        previous = self._finished.get(job.decision_id)
        if previous is not None:
            self._spawn(self._reporter.put(previous))
            return None
        if len(self._preemptions) >= self._max_pending:
            return f"too many preemptions in flight ({len(self._preemptions)})"
        self._preemptions[job.decision_id] = job
        task = asyncio.create_task(self._run_preemption(job), name=f"preempt-{job.decision_id}")
        self._preempt_tasks[job.decision_id] = task
        task.add_done_callback(lambda _: self._preempt_tasks.pop(job.decision_id, None))
        return None

    def preemption_deadline(self) -> float:
        """When a preemption accepted now must be finished (wall clock)."""
        return self._clock() + self._preempt_deadline

    def report_unschedulable(
        self,
        *,
        namespace: str,
        name: str,
        uid: str,
        message: str,
        reason: str,
        profile: str,
    ) -> str | None:
        """Start writing the FailedScheduling Event and PodScheduled=False; None if accepted."""
        if self.shutting_down:
            return SHUTTING_DOWN
        if len(self._side_tasks) >= self._max_pending:
            return f"too many unschedulable reports pending ({len(self._side_tasks)})"
        self._spawn(
            self._write_unschedulable(
                namespace=namespace, name=name, uid=uid, message=message,
                reason=reason or "Unschedulable", profile=profile,
            )
        )  # fmt: skip
        return None

    def _spawn(self, coro: Awaitable[None]) -> None:
        async def run() -> None:
            await coro

        task = asyncio.create_task(run())
        self._side_tasks.add(task)
        task.add_done_callback(self._side_tasks.discard)

    # -- the work --------------------------------------------------------------------------

    async def _worker(self) -> None:
        while True:
            job = await self._queue.get()
            if self.shutting_down:
                await self._finish(job, BindResult(FAILED, SHUTTING_DOWN, 0, 0), event=False)
                continue
            self._running[job.decision_id] = job
            call = self._trace(job)
            with call:
                try:
                    result = await self._bind(job, call=call)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # a bug, not an API answer: report it, keep the worker
                    log.exception("binding %s failed unexpectedly", job.decision_id)
                    result = BindResult(FAILED, f"binder error: {exc!r}", 0, 0)
                call.finish(
                    ok=result.result == BOUND,
                    result=Result.Name(result.result),  # type: ignore[arg-type]
                    message=result.message,
                )
            await self._finish(job, result, event=True, trace_context=call.carrier())

    def _trace(self, job: BindJob) -> tracing.RetriedCall:
        """The job's `bind` span continuing the scheduler's trace (a no-op when off)."""
        if not tracing.enabled():
            return tracing.NO_CALL
        return tracing.bind_call(
            carrier=job.trace_context, namespace=job.namespace, name=job.name, uid=job.uid,
            node=job.node, decision_id=job.decision_id, accepted_at=job.accepted_at,
            server=self._kube.endpoint.host,
        )  # fmt: skip

    async def _finish(
        self,
        job: BindJob,
        result: BindResult,
        *,
        event: bool,
        trace_context: Mapping[str, str] | None = None,
    ) -> None:
        """Report the outcome; it carries `trace_context` (the bind span's) back to the
        scheduler, or the request's own context when the bind was not traced."""
        outcome = scheduler_pb2.BindingOutcome(
            decision_id=job.decision_id,
            pod=types_pb2.PodRef(namespace=job.namespace, name=job.name, uid=job.uid),
            node=job.node,
            result=result.result,  # type: ignore[arg-type]
            message=result.message,
            attempts=result.attempts,
            last_http_status=result.last_http_status,
            binder_id=self.binder_id,
            trace_context=dict(trace_context or job.trace_context),
        )
        outcome.finished_at.FromNanoseconds(int(self._clock() * 1e9))
        self._metrics.outcomes.labels(result=Result.Name(result.result)).inc()  # type: ignore[arg-type]
        self._metrics.bind_duration.observe(time.monotonic() - job.accepted_at)
        self._finished[job.decision_id] = outcome
        if len(self._finished) > FINISHED_MEMORY:
            self._finished.popitem(last=False)
        try:
            await self._reporter.put(outcome)
        finally:
            self._active.pop(job.decision_id, None)
            self._running.pop(job.decision_id, None)
            self._written.discard(job.decision_id)
            self._metrics.inflight.set(len(self._active))
            if not self._active:
                self._idle.set()
        if event and result.result == BOUND:
            # The Event is a second request per pod, as costly as the Binding: written
            # beside the next binding rather than before it (kube-scheduler's recorder is
            # asynchronous too), up to one per worker, then inline as back-pressure.
            if len(self._side_tasks) < self._workers:
                self._spawn(self._write_scheduled_event(job))
            else:
                await self._write_scheduled_event(job)

    async def _bind(
        self, job: BindJob, *, call: tracing.RetriedCall = tracing.NO_CALL
    ) -> BindResult:
        attempts = 0
        last_status = 0
        last_error = ""
        unsure = False  # an attempt may have bound the pod without our hearing it
        while True:
            remaining = job.deadline - self._clock()
            if remaining <= 0:
                gave_up = BindResult(
                    DEADLINE_EXCEEDED,
                    f"deadline exceeded after {attempts} attempts"
                    + (f"; last error: {last_error}" if last_error else ""),
                    attempts,
                    last_status,
                )
                return await self._settle(job, gave_up) if unsure else gave_up
            attempts += 1
            call.attempt()
            retry_after: float | None = None
            budget = min(MAX_REQUEST_TIMEOUT, remaining)
            self._written.add(job.decision_id)
            try:
                response = await self._kube.bind(
                    namespace=job.namespace, name=job.name, uid=job.uid, node=job.node,
                    budget=budget,
                )  # fmt: skip
            except NETWORK_ERRORS as exc:
                self._metrics.binding_attempts.labels(code="error").inc()
                last_status = 0
                last_error = f"network error: {type(exc).__name__}: {exc}".rstrip(": ")
                call.error(type(exc).__name__, last_error)
                unsure = True  # the request may have reached the API server
            else:
                code = response.status
                self._metrics.binding_attempts.labels(code=str(code)).inc()
                call.status_code(code)
                last_status = code
                if 200 <= code < 300:
                    return BindResult(BOUND, "", attempts, code)
                if code == 404:
                    message = response.message or "pod not found"
                    return BindResult(POD_GONE, message, attempts, code)
                if code == 409:
                    resolved = await self._resolve_conflict(job, response, budget=budget)
                    if resolved is not None:
                        return BindResult(resolved[0], resolved[1], attempts, code)
                    last_error = f"HTTP 409: {response.message}"
                    unsure = True  # bound somewhere, and the pod could not be read
                elif code == 429 or code >= 500:
                    retry_after = response.retry_after
                    last_error = f"HTTP {code}: {response.message}"
                    unsure = unsure or code >= 500  # a 5xx may come after the write
                else:
                    return BindResult(FAILED, f"HTTP {code}: {response.message}", attempts, code)
            if attempts >= job.max_attempts:
                gave_up = BindResult(
                    DEADLINE_EXCEEDED,
                    f"gave up after {attempts} attempts; last error: {last_error}",
                    attempts,
                    last_status,
                )
                return await self._settle(job, gave_up) if unsure else gave_up
            delay = (
                retry_after
                if retry_after is not None
                else backoff_delay(
                    attempts, base=self._backoff_base, cap=self._backoff_cap, rng=self._rng
                )
            )
            if self._clock() + delay >= job.deadline:
                gave_up = BindResult(
                    DEADLINE_EXCEEDED,
                    f"deadline exceeded after {attempts} attempts (next retry in {delay:.2f}s); "
                    f"last error: {last_error}",
                    attempts,
                    last_status,
                )
                return await self._settle(job, gave_up) if unsure else gave_up
            log.info("binding %s/%s to %s: %s; attempt %d in %.2fs", job.namespace, job.name,
                     job.node, last_error, attempts + 1, delay)  # fmt: skip
            call.retry_in(delay)
            await self._sleep(delay)

    async def _settle(self, job: BindJob, gave_up: BindResult) -> BindResult:
        """Giving up after an attempt whose effect is unknown (no answer, a 5xx, a 409 the
        pod could not be read after): a Binding may have landed unheard, and a failure
        reported now would let the scheduler give the pod's room to another pod while the
        pod is using it. So read the pod, retrying for up to ``UNSURE_SETTLE_SECONDS``
        past the deadline: on the target node -> BOUND, on another -> CONFLICT, gone or
        re-created -> POD_GONE, still unbound -> ``gave_up`` (now known to be true). When
        it never answers, ``gave_up`` goes out late: by then the scheduler's own bind
        deadline has passed and its watch decided."""
        until = job.deadline + UNSURE_SETTLE_SECONDS
        tries = 0
        while True:
            tries += 1
            budget = max(0.5, min(MAX_REQUEST_TIMEOUT, until - self._clock()))
            try:
                got = await self._kube.get_pod(namespace=job.namespace, name=job.name,
                                               budget=budget)  # fmt: skip
            except NETWORK_ERRORS:
                got = None
            if got is not None and got.status == 404:
                return BindResult(POD_GONE, "pod deleted", gave_up.attempts, 404)
            if got is not None and got.status == 200 and isinstance(got.body, dict):
                meta = got.body.get("metadata") or {}
                bound_to = str((got.body.get("spec") or {}).get("nodeName") or "")
                uid = str(meta.get("uid") or "")
                n, status = gave_up.attempts, gave_up.last_http_status
                if job.uid and uid and uid != job.uid:
                    message = f"pod was re-created (uid {uid}, the decision was for {job.uid})"
                    return BindResult(POD_GONE, message, n, status)
                if bound_to == job.node:
                    message = f"bound to {bound_to} by an attempt whose answer was lost"
                    return BindResult(BOUND, message, n, status)
                if bound_to:
                    return BindResult(CONFLICT, f"pod is bound to node {bound_to}", n, status)
                if meta.get("deletionTimestamp"):
                    return BindResult(POD_GONE, "pod is being deleted", n, status)
                return gave_up
            if self._clock() >= until:
                message = (
                    f"{gave_up.message}; whether the pod is bound is unknown (it could not be "
                    f"read for {UNSURE_SETTLE_SECONDS:.0f}s after the deadline)"
                )
                return dataclasses.replace(gave_up, message=message)
            await self._sleep(
                backoff_delay(tries, base=self._backoff_base, cap=self._backoff_cap, rng=self._rng)
            )

    async def _resolve_conflict(
        self, job: BindJob, response: HttpResult, *, budget: float
    ) -> tuple[int, str] | None:
        """Why a 409: read the pod. None means 'transient, retry'."""
        try:
            got = await self._kube.get_pod(namespace=job.namespace, name=job.name, budget=budget)
        except NETWORK_ERRORS as exc:
            log.debug("GET pod after 409 failed for %s: %s", job.decision_id, exc)
            return None
        if got.status == 404:
            return POD_GONE, "pod deleted"
        if got.status != 200 or not isinstance(got.body, dict):
            if got.status == 429 or got.status >= 500:
                return None
            return FAILED, f"HTTP 409 ({response.message}); reading the pod: HTTP {got.status}"
        meta = got.body.get("metadata") or {}
        spec = got.body.get("spec") or {}
        uid = str(meta.get("uid") or "")
        bound_to = str(spec.get("nodeName") or "")
        if job.uid and uid and uid != job.uid:
            return POD_GONE, f"pod was re-created (uid {uid}, the decision was for {job.uid})"
        if bound_to == job.node:
            return BOUND, f"already bound to {bound_to}"
        if bound_to:
            return CONFLICT, f"pod is already bound to node {bound_to}"
        if meta.get("deletionTimestamp"):
            return POD_GONE, "pod is being deleted"
        return None

    # -- preemption ------------------------------------------------------------------------

    async def _run_preemption(self, job: PreemptJob) -> None:
        try:
            result, message, attempts, status, evicted = await self._preempt(job)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a bug, not an API answer: report it
            log.exception("preemption %s failed unexpectedly", job.decision_id)
            result, message, attempts, status = FAILED, f"binder error: {exc!r}", 0, 0
            evicted = []
        await self._finish_preemption(job, result, message, attempts=attempts, status=status)
        if evicted:
            await asyncio.gather(*(self._write_preempted_event(job, v) for v in evicted))

    async def _finish_preemption(
        self, job: PreemptJob, result: int, message: str, *, attempts: int, status: int
    ) -> None:
        if self._preemptions.pop(job.decision_id, None) is None:
            return  # already reported
        self._written.discard(job.decision_id)
        outcome = self._preemption_outcome(job, result, message)
        outcome.attempts, outcome.last_http_status = attempts, status
        outcome.finished_at.FromNanoseconds(int(self._clock() * 1e9))
        self._metrics.preemptions.labels(result=Result.Name(result)).inc()  # type: ignore[arg-type]
        self._finished[job.decision_id] = outcome
        if len(self._finished) > FINISHED_MEMORY:
            self._finished.popitem(last=False)
        await self._reporter.put(outcome)

    async def _preempt(self, job: PreemptJob) -> tuple[int, str, int, int, list[PodKey]]:
        """Nominate, then evict; (result, message, attempts, last HTTP status, evicted)."""
        nominated = await self._nominate(job)
        attempts, status = nominated.attempts, nominated.last_http_status
        if nominated.result != BOUND:
            return nominated.result, nominated.message, attempts, status, []
        stop = asyncio.Event()
        limit = asyncio.Semaphore(EVICTION_CONCURRENCY)

        async def evict(victim: PodKey) -> Eviction:
            async with limit:
                if stop.is_set():
                    return Eviction(victim, "skipped", "not attempted", 0, 0)
                done = await self._evict(victim, deadline=job.deadline, stop=stop)
            if done.state in ("refused", "failed"):
                stop.set()  # like kube-scheduler: the first error cancels the rest
            return done

        self._written.add(job.decision_id)  # from here on, victims may be evicted
        evictions = await asyncio.gather(*(evict(v) for v in job.victims))
        attempts += sum(e.attempts for e in evictions)
        evicted = [e.victim for e in evictions if e.state == "evicted"]
        done = [e for e in evictions if e.state in ("evicted", "gone")]
        for e in evictions:
            if e.attempts:
                status = e.last_status
        summary = f"evicted {len(evicted)} of {len(job.victims)} victims"
        skipped = sum(1 for e in evictions if e.state == "skipped")
        if skipped:
            summary += f", {skipped} not attempted"
        failures = (("refused", FAILED), ("failed", FAILED), ("deadline", DEADLINE_EXCEEDED))
        for state, result in failures:
            bad = [e for e in evictions if e.state == state]
            if bad:
                text = "; ".join([*(e.message for e in bad), summary])
                return result, text, attempts, bad[0].last_status, evicted
        count = len(job.victims)
        message = f"preempted {count} victim{'' if count == 1 else 's'}"
        gone = len(done) - len(evicted)
        if gone:
            message += f" ({gone} already gone)"
        return BOUND, message, attempts, status, evicted

    async def _nominate(self, job: PreemptJob) -> BindResult:
        """Set the preemptor's ``status.nominatedNodeName`` (result BOUND when done)."""
        pod = job.preemptor
        # metadata.uid in a merge patch is checked: another uid is refused (422, immutable).
        patch = {"metadata": {"uid": pod.uid}, "status": {"nominatedNodeName": job.node}}

        def call(budget: float) -> Awaitable[HttpResult]:
            return self._kube.patch_pod_status(
                namespace=pod.namespace, name=pod.name, patch=patch,
                content_type="application/merge-patch+json", budget=budget,
            )  # fmt: skip

        done = await self._with_retries(
            call, deadline=job.deadline, retryable=_retryable_status, count=_ignore_code
        )
        tries = done.attempts
        if done.response is None:
            message = f"setting nominatedNodeName: {done.error}"
            return BindResult(DEADLINE_EXCEEDED, message, tries, done.last_status)
        response = done.response
        code = response.status
        if code == 404:
            return BindResult(POD_GONE, "preemptor not found", tries, code)
        if code == 422 and _uid_cause(response):
            message = f"preemptor was re-created (not uid {pod.uid})"
            return BindResult(POD_GONE, message, tries, code)
        if not 200 <= code < 300:
            message = f"setting nominatedNodeName: HTTP {code}: {response.message}"
            return BindResult(FAILED, message, tries, code)
        body = response.body if isinstance(response.body, dict) else {}
        bound_to = str((body.get("spec") or {}).get("nodeName") or "")
        if (body.get("metadata") or {}).get("deletionTimestamp"):
            return BindResult(POD_GONE, "preemptor is being deleted", tries, code)
        if bound_to:
            message = f"preemptor is already bound to node {bound_to}"
            return BindResult(CONFLICT, message, tries, code)
        return BindResult(BOUND, "", tries, code)

    async def _evict(self, victim: PodKey, *, deadline: float, stop: asyncio.Event) -> Eviction:
        def call(budget: float) -> Awaitable[HttpResult]:
            return self._kube.evict_pod(
                namespace=victim.namespace, name=victim.name, uid=victim.uid, budget=budget
            )

        def count(code: str) -> None:
            self._metrics.evictions.labels(code=code).inc()

        done = await self._with_retries(
            call, deadline=deadline, retryable=_retryable_eviction, count=count, stop=stop
        )
        response = done.response
        if response is None:
            if stop.is_set() and not done.error:
                return Eviction(victim, "skipped", "not attempted", done.attempts, 0)
            message = f"eviction of {victim}: {done.error}"
            return Eviction(victim, "deadline", message, done.attempts, done.last_status)
        code = response.status
        if 200 <= code < 300:
            return Eviction(victim, "evicted", "", done.attempts, code)
        if code == 404:
            return Eviction(victim, "gone", "already gone", done.attempts, code)
        if code == 409:  # the uid precondition failed: the victim was re-created
            return Eviction(victim, "gone", "re-created", done.attempts, code)
        if _budget_refusal(response):
            reason = response.message
            causes = _causes(response)
            if causes:
                reason += f" ({'; '.join(causes)})"
            message = f"eviction of {victim} refused: {reason}"
            return Eviction(victim, "refused", message, done.attempts, code)
        message = f"eviction of {victim} failed: HTTP {code}: {response.message}"
        return Eviction(victim, "failed", message, done.attempts, code)

    async def _with_retries(
        self,
        call: Callable[[float], Awaitable[HttpResult]],
        *,
        deadline: float,
        retryable: Callable[[HttpResult], bool],
        count: Callable[[str], None],
        stop: asyncio.Event | None = None,
    ) -> Attempted:
        """Call until an answer ``retryable`` rejects, retrying with backoff to ``deadline``.

        Retries stop quietly (no response, empty error) once ``stop`` is set.
        """
        attempts = 0
        last_status = 0
        last_error = ""
        while True:
            if stop is not None and stop.is_set():
                return Attempted(None, attempts, last_status, "")
            remaining = deadline - self._clock()
            if remaining <= 0:
                error = f"deadline exceeded after {attempts} attempts"
                if last_error:
                    error += f"; last error: {last_error}"
                return Attempted(None, attempts, last_status, error)
            attempts += 1
            retry_after: float | None = None
            try:
                response = await call(min(MAX_REQUEST_TIMEOUT, remaining))
            except NETWORK_ERRORS as exc:
                count("error")
                last_status = 0
                last_error = f"network error: {type(exc).__name__}: {exc}".rstrip(": ")
            else:
                count(str(response.status))
                last_status = response.status
                if not retryable(response):
                    return Attempted(response, attempts, last_status, "")
                retry_after = response.retry_after
                last_error = f"HTTP {response.status}: {response.message}"
            delay = (
                retry_after
                if retry_after is not None
                else backoff_delay(
                    attempts, base=self._backoff_base, cap=self._backoff_cap, rng=self._rng
                )
            )
            if self._clock() + delay >= deadline:
                error = (
                    f"deadline exceeded after {attempts} attempts (next retry in {delay:.2f}s); "
                    f"last error: {last_error}"
                )
                return Attempted(None, attempts, last_status, error)
            await self._sleep(delay)

    async def _write_preempted_event(self, job: PreemptJob, victim: PodKey) -> None:
        controller = self._event_controller
        event = make_event(
            namespace=victim.namespace,
            pod_name=victim.name,
            pod_uid=victim.uid,
            event_type="Normal",
            reason="Preempted",
            action="Preempting",
            note=f"Preempted by pod {job.preemptor.uid} on node {job.node}",
            controller=controller,
            instance=f"{controller}-{self.binder_id}",
            now=self._clock(),
        )
        event["related"] = {
            "apiVersion": "v1", "kind": "Pod", "namespace": job.preemptor.namespace,
            "name": job.preemptor.name, "uid": job.preemptor.uid,
        }  # fmt: skip
        await self._create_event(victim.namespace, event)

    # -- events and conditions (best-effort) -----------------------------------------------

    async def _create_event(self, namespace: str, event: dict[str, Any]) -> None:
        try:
            result = await self._kube.create_event(namespace=namespace, event=event)
        except NETWORK_ERRORS as exc:
            log.warning("event %s for %s/%s not written: %s", event["reason"], namespace,
                        event["regarding"]["name"], exc)  # fmt: skip
            return
        if result.status >= 300:
            log.warning(
                "event %s for %s/%s not written: HTTP %d %s",
                event["reason"], namespace, event["regarding"]["name"], result.status,
                result.message,
            )  # fmt: skip

    def _controller(self, profile: str) -> str:
        return profile or self._event_controller

    async def _write_scheduled_event(self, job: BindJob) -> None:
        controller = self._controller(job.profile)
        event = make_event(
            namespace=job.namespace,
            pod_name=job.name,
            pod_uid=job.uid,
            event_type="Normal",
            reason="Scheduled",
            action="Binding",
            note=f"Successfully assigned {job.namespace}/{job.name} to {job.node}",
            controller=controller,
            instance=f"{controller}-{self.binder_id}",
            now=self._clock(),
        )
        await self._create_event(job.namespace, event)

    async def _write_unschedulable(
        self,
        *,
        namespace: str,
        name: str,
        uid: str,
        message: str,
        reason: str,
        profile: str,
    ) -> None:
        """The FailedScheduling Event and PodScheduled=False, side by side, each retried
        through 5xx, 429 and resets (``_write_retried``): the only record of why the pod
        waits, so one lost write must not leave it pending with no reason shown."""
        controller = self._controller(profile)
        now = self._clock()
        event = make_event(
            namespace=namespace,
            pod_name=name,
            pod_uid=uid,
            event_type="Warning",
            reason="FailedScheduling",
            action="Scheduling",
            note=message,
            controller=controller,
            instance=f"{controller}-{self.binder_id}",
            now=now,
        )
        condition = {
            "type": "PodScheduled",
            "status": "False",
            "reason": reason,
            "message": message,
            "lastProbeTime": None,
            "lastTransitionTime": micro_time(now)[:19] + "Z",
        }
        patch = {"status": {"conditions": [condition]}}
        deadline = now + UNSCHEDULABLE_WRITE_SECONDS

        def create(budget: float) -> Awaitable[HttpResult]:
            return self._kube.create_event(namespace=namespace, event=event)

        def patch_status(budget: float) -> Awaitable[HttpResult]:
            return self._kube.patch_pod_status(
                namespace=namespace, name=name, patch=patch, budget=budget
            )

        await asyncio.gather(
            self._write_retried(
                f"event FailedScheduling for {namespace}/{name}", create,
                deadline=deadline, retryable=_retryable_create, done_codes=(409,),
            ),
            self._write_retried(
                f"PodScheduled condition of {namespace}/{name}", patch_status,
                deadline=deadline, retryable=_retryable_status, done_codes=(),
            ),
        )  # fmt: skip

    async def _write_retried(
        self,
        what: str,
        call: Callable[[float], Awaitable[HttpResult]],
        *,
        deadline: float,
        retryable: Callable[[HttpResult], bool],
        done_codes: tuple[int, ...],
    ) -> bool:
        """One write with the Binding's retries, at most ``UNSCHEDULABLE_WRITE_ATTEMPTS``
        tries before ``deadline``; logs a write that did not land. True when written."""
        tries = 0
        enough = asyncio.Event()

        def count(code: str) -> None:
            nonlocal tries
            tries += 1
            if tries >= UNSCHEDULABLE_WRITE_ATTEMPTS:
                enough.set()  # no further try; the answer of this one still counts

        done = await self._with_retries(
            call, deadline=deadline, retryable=retryable, count=count, stop=enough
        )
        response = done.response
        if response is not None and (response.status < 300 or response.status in done_codes):
            if done.attempts > 1:
                log.info("%s written after %d attempts", what, done.attempts)
            return True
        last = f"HTTP {done.last_status}" if done.last_status else "a network error"
        why = done.error or f"gave up after {done.attempts} attempts (the last: {last})"
        if response is not None:
            why = f"HTTP {response.status} {response.message}"
        log.warning("%s not written: %s", what, why)
        return False
