"""The scheduling loop and the housekeeping loop of the scheduler service.

The scheduling loop runs the pure core (`SchedulerState.schedule_one`) one pod (or one
gang) at a time, in slices of `SLICE_SECONDS` so the event loop keeps serving the watch,
the API and binders' reports between slices; each slice's decisions go to binders in
batches of at most `MAX_BATCH`, preemptions and FailedScheduling reports one by one. It
sleeps while leadership says it may not schedule, the active queue is empty or the flow
window towards the binders is full (`state.flow`), until something pokes it (a watch
batch, a report, an API change, a binder's answer, an expiry). The housekeeping loop
flushes the backoff and unschedulable queues and expires decisions past their bind
deadline once a second. Created by `services.scheduler.main`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Sequence

from services.scheduler.dispatch import MAX_BATCH, BinderDispatch
from services.scheduler.leadership import Leadership
from services.scheduler.metrics import SchedulerMetrics
from services.scheduler.state import Decision, SchedulerState, Unschedulable
from services.scheduler.traces import SchedulingTraces

log = logging.getLogger("splitsched.scheduler")

SLICE_SECONDS = 0.02  # how long the scheduling loop runs before yielding to I/O
HOUSEKEEPING_SECONDS = 1.0
#: The longest the loop sleeps on an empty active queue (a poke wakes it sooner).
EMPTY_QUEUE_SECONDS = 1.0

Outcomes = Sequence[Decision | Unschedulable]


def trace_attempts(traces: SchedulingTraces, outcomes: Outcomes) -> None:
    """Close each pod's scheduling-attempt span with what the cycle decided."""
    for outcome in outcomes:
        if isinstance(outcome, Decision):
            traces.attempt(
                outcome.pod,
                result="preempting" if outcome.is_preemption else "scheduled",
                queued=outcome.queued,
                decision_id=outcome.decision_id,
                node=outcome.node,
            )
        else:
            traces.attempt(outcome.pod, result="unschedulable", message=outcome.message)


class SchedulingLoop:
    """Decides for the queue's pods and hands the decisions to `dispatch`."""

    def __init__(
        self,
        *,
        state: SchedulerState,
        metrics: SchedulerMetrics,
        dispatch: BinderDispatch,
        leadership: Leadership,
        wake: asyncio.Event,
        stopping: asyncio.Event,
        poke: Callable[[], None],
        traces: SchedulingTraces | None = None,
    ) -> None:
        self.state = state
        self.metrics = metrics
        self.dispatch = dispatch
        self.leadership = leadership
        self.wake = wake
        self.stopping = stopping
        self.poke = poke
        self.traces = traces

    async def run(self) -> None:
        while not self.stopping.is_set():
            if not self.leadership.may_schedule():
                await self._sleep_until_woken(self.leadership.idle_wait())
                continue
            self._slice()
            lengths = self.state.queue.lengths()
            self.metrics.queue_lengths(lengths)
            if lengths.get("active", 0) == 0:
                await self._sleep_until_woken(EMPTY_QUEUE_SECONDS)
            elif not self.state.may_send():
                # The flow window is full: the pods wait in the active queue until an
                # outcome, the watch or an expiry frees room, each of which pokes.
                self.metrics.flow_waits.inc()
                await self._sleep_until_woken(None)
            else:
                await asyncio.sleep(0)

    def _slice(self) -> None:
        """Schedule for up to `SLICE_SECONDS`, then send what was decided."""
        decisions: list[Decision] = self.state.take_ready_binds()
        if self.traces is not None:
            for d in decisions:
                self.traces.rebind(d.pod.uid, d.decision_id)
        reports: list[Unschedulable] = []
        started = time.perf_counter()
        while time.perf_counter() - started < SLICE_SECONDS and self.state.may_send():
            t0 = time.perf_counter()
            if self.traces is not None:
                self.traces.begin()
            outcomes = self.state.schedule_one()
            if outcomes is None:
                break
            elapsed = time.perf_counter() - t0
            if self.traces is not None:
                trace_attempts(self.traces, outcomes)
            self._sort(outcomes, elapsed, decisions, reports)
            if len(decisions) >= MAX_BATCH:
                self.dispatch.send(decisions)
                decisions = []
        if decisions:
            self.dispatch.send(decisions)
        for report in reports:
            self.dispatch.send_report(report)

    def _sort(
        self,
        outcomes: Outcomes,
        elapsed: float,
        decisions: list[Decision],
        reports: list[Unschedulable],
    ) -> None:
        """Count one cycle's outcomes; preemptions leave at once, bindings and reports
        are collected for the end of the slice."""
        for outcome in outcomes:
            profile = outcome.pod.scheduler_name
            if isinstance(outcome, Decision) and outcome.is_preemption:
                self.metrics.attempt("preempting", profile)
                self.dispatch.send_preemption(outcome)
            elif isinstance(outcome, Decision):
                decisions.append(outcome)
                self.metrics.attempt("scheduled", profile, seconds=elapsed)
            else:
                self.metrics.attempt("unschedulable", profile, seconds=elapsed)
                self.metrics.rejected(outcome.plugins, profile)
                if outcome.report:
                    reports.append(outcome)

    async def _sleep_until_woken(self, seconds: float | None) -> None:
        self.wake.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.wake.wait(), seconds)

    async def housekeeping(self) -> None:
        """Once a second: move due pods back to the active queue and, while leading with a
        synced view, requeue decisions past their bind deadline."""
        while not self.stopping.is_set():
            await asyncio.sleep(HOUSEKEEPING_SECONDS)
            moved = self.state.queue.flush()
            active = self.state.synced and self.state.leading
            expired = self.state.expire_overdue() if active else 0
            if expired:
                log.warning("%d decisions passed their bind deadline unbound: requeued", expired)
            if moved or expired:
                self.poke()
