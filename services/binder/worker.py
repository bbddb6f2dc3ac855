"""The binder's work: a bounded queue of decisions, a pool of asyncio workers binding them,
preemptions as their own tasks, and one ``BindingOutcome`` for each, handed to the
``OutcomeReporter``.

``services.binder.server`` submits validated decisions (``submit``), preemptions
(``submit_preemption``) and unschedulable reports (``report_unschedulable``);
``services.binder.main`` starts the pool and calls ``shutdown`` on SIGTERM. The work itself
is done elsewhere: ``volumes`` and ``devices`` (the volume and device steps before a
Binding, for the decisions that carry them), ``binding`` (a Binding and its retries; what
the answers mean), ``preemption`` (nominate, then evict), ``recorder`` (Events and the
PodScheduled condition), all sending through the one retry loop of ``retrying``.

Decisions accepted more than ``IN_PROGRESS_AFTER`` seconds ago and not finished (queued with
time left, or binding) are re-reported as IN_PROGRESS every couple of seconds
(``in_progress``, sent by the reporter), so a scheduler that took over or restarted
adopts them instead of giving their room (and the volumes of their volume step: every
outcome carries them) to other pods, and one past its own deadline waits for them.
Preemptions in flight are too (``preemption`` set, with their victims): a new leader holds
the room their evictions free for the preemptor.

``shutdown`` fails the decisions it never started; one still running after the grace whose
Binding (or evictions) may have reached the API server is reported IN_PROGRESS instead of
FAILED, so the scheduler keeps its room until the watch or its deadline decides.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping

from services.binder import jobs
from services.binder.admission import Admission
from services.binder.binding import Bindings
from services.binder.deallocation import reports_deallocating
from services.binder.devices import DeviceStep
from services.binder.events import EventSource
from services.binder.jobs import (
    BOUND,
    DEADLINE_EXCEEDED,
    FAILED,
    IN_PROGRESS,
    POD_GONE,
    BindJob,
    BindResult,
    ClaimWrite,
    PodKey,
    PreemptJob,
    Result,
)
from services.binder.kubeapi import KubeClient
from services.binder.metrics import BinderMetrics
from services.binder.pendingpods import PendingPods
from services.binder.preemption import Preempter, PreemptionResult
from services.binder.recorder import Recorder
from services.binder.reporter import OutcomeReporter
from services.binder.retrying import Backoff, Retrier
from services.binder.spans import NO_CALL, RetriedCall, bind_call
from services.binder.unschedulable import Report
from services.binder.volumes import VolumeStep
from splitsched.runtime import exemplars, tracing
from splitsched.v1 import scheduler_pb2

log = logging.getLogger(__name__)

#: A decision is re-reported IN_PROGRESS once it has been in flight this long (seconds).
IN_PROGRESS_AFTER = 1.0
SHUTTING_DOWN = "binder shutting down"
#: How many finished decisions are remembered for idempotent re-submission.
FINISHED_MEMORY = 20_000
#: A decision is not started with less time left than this, nor than twice what a
#: binding has lately taken (seconds): see ``BindingPool._too_late``.
MIN_START_MARGIN = 0.25
#: ... and never more than this: a binding's duration counts its retries and its waits
#: for the limiter, so under faults or throttling it grows past the decisions' whole
#: deadline, and twice it refused every decision, so none ran to bring it down again.
MAX_START_MARGIN = 1.0


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
        profiles: Collection[str] | None = None,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        rng: random.Random | None = None,
        pending: PendingPods | None = None,
    ) -> None:
        self._kube, self._reporter, self._metrics = kube, reporter, metrics
        self.binder_id = binder_id
        self._workers = max(1, workers)
        self._max_pending = max(1, max_pending)
        self._preempt_deadline = preempt_deadline
        self._clock = clock
        backoff = Backoff(backoff_base, backoff_cap, rng or random.Random())
        retrier = Retrier(kube, backoff=backoff, clock=clock, sleep=sleep)
        self._bindings = Bindings(retrier=retrier, metrics=metrics)
        self._volumes = VolumeStep(retrier=retrier, metrics=metrics, clock=clock, sleep=sleep)
        self._devices = DeviceStep(retrier=retrier, metrics=metrics, clock=clock)
        self._preempter = Preempter(retrier=retrier, metrics=metrics)
        #: ``services.binder.guard``'s refusals (None in tests of other parts: no checks).
        self._admission = Admission.serving(profiles, retrier, metrics, clock, pending)
        source = EventSource(controller=event_controller, binder_id=binder_id)
        self._recorder = Recorder(retrier=retrier, source=source, clock=clock)
        self._reports = reports_deallocating(
            retrier=retrier, admission=self._admission, recorder=self._recorder, metrics=metrics,
            clock=clock, sleep=sleep, spawn=self._spawn, stopping=lambda: self.shutting_down,
        )  # fmt: skip
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
        self._bind_seconds = 0.0  # a binding's recent duration (``_too_late``)
        self.shutting_down = False
        reporter.in_progress_source = self.in_progress
        metrics.watch_pool(queued=self._queue.qsize, side_writes=lambda: len(self._side_tasks))

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
        seconds ago and not finished: running, or queued with time left. One queued past
        its deadline will never send a Binding (``_too_late``), so it is not reported: the
        scheduler holds a decision past its own deadline while a binder reports it."""
        cutoff = time.monotonic() - IN_PROGRESS_AFTER
        now = self._clock()
        in_flight = BindResult(IN_PROGRESS, "in flight", 0, 0)
        bindings = [
            self._report(job, in_flight, trace_context={})
            for job in list(self._active.values())
            if job.accepted_at <= cutoff
            and (job.decision_id in self._running or job.deadline > now)
        ]
        preempting = BindResult(IN_PROGRESS, "preemption in flight", 0, 0)
        preemptions = [
            jobs.preemption_outcome(job, preempting, binder_id=self.binder_id)
            for job in list(self._preemptions.values())
            if job.accepted_at <= cutoff
        ]
        return bindings + preemptions

    async def shutdown(self, grace: float) -> None:
        """Refuse new work, fail queued decisions at once, give running ones ``grace``."""
        self.shutting_down = True
        while True:
            try:
                job = self._queue.get_nowait()
            except asyncio.QueueEmpty:
                break
            await self._finish(job, BindResult(FAILED, SHUTTING_DOWN, 0, 0), event=False)
        await self._wait_for_work(grace)
        interrupted = list(self._running.values())
        tasks = [*self._tasks, *self._side_tasks, *self._preempt_tasks.values()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._tasks = []
        await self._report_interrupted(interrupted, grace)

    async def _wait_for_work(self, grace: float) -> None:
        """Until the running bindings, side writes and preemptions end, or ``grace``."""
        loop = asyncio.get_running_loop()
        end = loop.time() + grace
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._idle.wait(), timeout=max(0.0, end - loop.time()))
        if self._side_tasks or self._preempt_tasks:
            await asyncio.wait(
                {*self._side_tasks, *self._preempt_tasks.values()},
                timeout=max(0.0, end - loop.time()),
            )

    async def _report_interrupted(self, interrupted: Iterable[BindJob], grace: float) -> None:
        """The outcomes of the work the grace cut short: IN_PROGRESS where a write may
        still land (the watch decides), FAILED where none was sent."""
        interrupted = [job for job in interrupted if job.decision_id in self._active]
        in_flight = [*self._preemptions, *(job.decision_id for job in interrupted)]
        unsure = [d for d in in_flight if d in self._written]
        if unsure:
            log.warning(
                "shutdown: %d decisions interrupted with a request to the API server in "
                "flight: reported IN_PROGRESS (not FAILED), so their rooms stay held",
                len(unsure),
            )
        for preemption in list(self._preemptions.values()):
            result = self._interrupted(preemption.decision_id, "preemption", grace)
            await self._finish_preemption(preemption, result)
        for job in interrupted:
            await self._finish(job, self._interrupted(job.decision_id, "binding", grace))

    def _interrupted(self, decision_id: str, kind: str, grace: float) -> BindResult:
        if decision_id in self._written:  # the Binding (or evictions) may still land
            message = (
                f"{SHUTTING_DOWN}: interrupted after {grace:.0f}s grace with a request to the "
                "API server in flight; whether it landed is unknown (the watch decides)"
            )
            return BindResult(IN_PROGRESS, message, 0, 0)
        message = f"{SHUTTING_DOWN} ({kind} interrupted after {grace:.0f}s grace)"
        return BindResult(FAILED, message, 0, 0)

    # -- intake ----------------------------------------------------------------------------

    def submit(self, job: BindJob) -> str | None:
        """Enqueue a decision; None when accepted, else why it was refused."""
        if self.shutting_down:
            return SHUTTING_DOWN
        if job.decision_id in self._active:
            return None  # idempotent: already queued or binding
        if self._report_again(job.decision_id):
            return None  # already done: tell the scheduler again rather than bind twice
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
        if job.decision_id in self._preemptions or self._report_again(job.decision_id):
            return None  # idempotent: already running, or done and reported again
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
        caller: str = "",
        deallocate: tuple[ClaimWrite, ...] = (),
    ) -> str | None:
        """Start writing the FailedScheduling Event and PodScheduled=False; None if accepted.
        ``services.binder.unschedulable`` writes nothing for a pod ``Admission`` refuses
        (another scheduler's) or that is gone: the report could otherwise mark any pod
        unschedulable."""
        if self.shutting_down:
            return SHUTTING_DOWN
        report = Report(
            PodKey(namespace, name, uid), message=message, reason=reason or "Unschedulable",
            profile=profile, caller=caller, deallocate=deallocate,
        )  # fmt: skip
        if len(self._side_tasks) >= self._max_pending and not self._reports.writing(report):
            return f"too many unschedulable reports pending ({len(self._side_tasks)})"
        self._reports.submit(report)
        return None

    def _report_again(self, decision_id: str) -> bool:
        """Re-send a finished decision's outcome; False when it is not known finished.
        Not re-sent while ``max_pending`` side writes are running (a scheduler repeating
        decisions while the reporter's buffer is full would otherwise pile up tasks
        without bound): the scheduler asks again, or the watch or its deadline decides."""
        previous = self._finished.get(decision_id)
        if previous is not None and len(self._side_tasks) < self._max_pending:
            self._spawn(self._reporter.put(previous))
        return previous is not None

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
            late = self._too_late(job)
            if late is not None:
                await self._finish(job, late, event=False)
                continue
            self._running[job.decision_id] = job
            started = time.monotonic()
            span = self._trace(job)
            with span:
                result = await self._bind(job, span)
                span.finish(
                    ok=result.result == BOUND,
                    result=Result.Name(result.result),  # type: ignore[arg-type]
                    message=result.message,
                )
            if result.result == BOUND:
                took = time.monotonic() - started
                self._bind_seconds = took if not self._bind_seconds else (
                    0.8 * self._bind_seconds + 0.2 * took
                )  # fmt: skip
            await self._finish(job, result, event=True, trace_context=span.carrier())

    def _too_late(self, job: BindJob) -> BindResult | None:
        """DEADLINE_EXCEEDED, before any request, for a decision with too little time left
        to be bound. Under a burst the queue holds decisions older than their deadline:
        the workers skip those at no cost and would otherwise all start the ones at the
        very edge, each spending a rate-limited read and then missing its deadline anyway
        (throughput fell to a few bindings a second in the 50,000-pod bench)."""
        left = job.deadline - self._clock()
        if left >= max(MIN_START_MARGIN, min(MAX_START_MARGIN, 2 * self._bind_seconds)):
            return None
        waited = time.monotonic() - job.accepted_at
        message = (
            f"not started: {max(left, 0.0):.2f}s left before its deadline after {waited:.1f}s "
            f"in the binder's queue; a binding takes about {self._bind_seconds:.2f}s here"
        )
        return BindResult(DEADLINE_EXCEEDED, message, 0, 0)

    async def _bind(self, job: BindJob, span: RetriedCall) -> BindResult:
        def writing() -> None:
            self._written.add(job.decision_id)

        try:
            refused = None if self._admission is None else await self._admission.binding(job)
            if refused is not None:
                return refused
            if job.volumes:
                failed = await self._volumes.run(job)
                if failed is not None:
                    return failed
            reserved: tuple[ClaimWrite, ...] = ()
            if job.claim_writes:
                failed, reserved = await self._devices.reserve(job)
                if failed is not None:
                    return failed
            bound = await self._bindings.bind(job, writing=writing, span=span)
            if reserved and bound.result in (FAILED, POD_GONE):  # not bound, for certain
                await self._devices.undo(job, reserved)
            return bound
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a bug, not an API answer: report it, keep the worker
            log.exception("binding %s failed unexpectedly", job.decision_id)
            return BindResult(FAILED, f"binder error: {exc!r}", 0, 0)

    def _trace(self, job: BindJob) -> RetriedCall:
        """The job's `bind` span continuing the scheduler's trace (a no-op when off)."""
        if not tracing.enabled():
            return NO_CALL
        return bind_call(
            carrier=job.trace_context, namespace=job.namespace, name=job.name, uid=job.uid,
            node=job.node, decision_id=job.decision_id, accepted_at=job.accepted_at,
            server=self._kube.endpoint.host, binder_id=self.binder_id,
        )  # fmt: skip

    async def _finish(
        self,
        job: BindJob,
        result: BindResult,
        *,
        event: bool = False,
        trace_context: dict[str, str] | None = None,
    ) -> None:
        """Report the outcome; it carries `trace_context` (the bind span's) back to the
        scheduler, or the request's own context when the bind was not traced. ``event``:
        write the ``Scheduled`` Event when bound."""
        carrier = trace_context or job.trace_context
        log.debug(
            "decision %s for %s/%s on %s: %s after %d attempts: %s", job.decision_id,
            job.namespace, job.name, job.node, Result.Name(result.result),  # type: ignore[arg-type]
            result.attempts, result.message,
        )  # fmt: skip
        report = self._report(job, result, trace_context=carrier)
        self._metrics.outcomes.labels(result=Result.Name(result.result)).inc()  # type: ignore[arg-type]
        self._metrics.bind_duration.observe(
            time.monotonic() - job.accepted_at, exemplar=exemplars.from_carrier(carrier)
        )
        self._remember(report)
        try:
            await self._reporter.put(report)
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
                self._spawn(self._recorder.scheduled(job))
            else:
                await self._recorder.scheduled(job)

    def _report(
        self, job: BindJob, result: BindResult, *, trace_context: Mapping[str, str]
    ) -> scheduler_pb2.BindingOutcome:
        return jobs.outcome(
            job.decision_id, pod=job.pod, node=job.node, result=result,
            binder_id=self.binder_id, trace_context=trace_context, volumes=job.volumes,
            claims=job.claim_writes,
        )  # fmt: skip

    def _remember(self, report: scheduler_pb2.BindingOutcome) -> None:
        """Stamp a final outcome and keep it for idempotent re-submission."""
        report.finished_at.FromNanoseconds(int(self._clock() * 1e9))
        self._finished[report.decision_id] = report
        if len(self._finished) > FINISHED_MEMORY:
            self._finished.popitem(last=False)

    # -- preemption ------------------------------------------------------------------------

    async def _run_preemption(self, job: PreemptJob) -> None:
        def evicting() -> None:
            self._written.add(job.decision_id)  # from here on, victims may be evicted

        evicted: tuple[PodKey, ...] = ()
        try:
            refused = None if self._admission is None else await self._admission.preemption(job)
            preempted = (
                PreemptionResult(refused, ())
                if refused is not None
                else await self._preempter.run(job, evicting=evicting)
            )
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a bug, not an API answer: report it
            log.exception("preemption %s failed unexpectedly", job.decision_id)
            result = BindResult(FAILED, f"binder error: {exc!r}", 0, 0)
        else:
            result, evicted = preempted.done, preempted.evicted
        await self._finish_preemption(job, result)
        if evicted:
            await asyncio.gather(*(self._recorder.preempted(job, v) for v in evicted))

    async def _finish_preemption(self, job: PreemptJob, result: BindResult) -> None:
        if self._preemptions.pop(job.decision_id, None) is None:
            return  # already reported
        self._written.discard(job.decision_id)
        report = jobs.preemption_outcome(job, result, binder_id=self.binder_id)
        self._metrics.preemptions.labels(result=Result.Name(result.result)).inc()  # type: ignore[arg-type]
        self._remember(report)
        await self._reporter.put(report)
