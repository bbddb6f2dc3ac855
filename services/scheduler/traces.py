"""The scheduler's part of a pod's trace: the `schedule_pod` root of each attempt and its
children (queue_wait, filter, score, assume, gang_cycle, bind_request, confirm; the whole
tree across the services is drawn in `splitsched.runtime.tracing`).

The first attempt is a child of the watch event that queued the pod; a retry (the pod
came back through backoff or the unschedulable pool) starts a new trace *linked* to that
watch event and to the previous attempt, so each trace stays one attempt long and a
pod's history is still one click away. Every attempt's root starts when its pod entered
the active queue (`QueuedPod.activated_at`): the wait in backoff or the pool is in none.
The members of a gang are placed together in one cycle but keep one trace each: every
member's `gang_cycle` span (group, minMember, members tried, members placed, result)
links to the first member's `schedule_pod`.

Wired by `services.scheduler.main` only when tracing is on. `SchedulingTraces` is the
core's `CycleObserver` (handed to `FrameworkAlgorithm`): it reads the clock when the core
says a step starts or finishes, and keeps the readings of the current cycle. The loop calls
`begin` before and `attempt` after each `SchedulerState.schedule_one`, which builds the
attempt's spans after the fact with those timestamps; the watch feeds `observed`,
`confirmed` and `gone`; the binder round trip feeds `bind_request`, `bind_sent`, `rebind`
and `outcome`. With tracing off the core calls the no-op observer and none of this runs.
How each span looks is in `services.scheduler.spans`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import Link

from services.scheduler import spans
from splitsched.core import framework, models
from splitsched.core.observer import CycleObserver, Placements
from splitsched.core.queue import QueuedPod
from splitsched.core.results import ScheduleResult
from splitsched.runtime import tailkeep, tracing
from splitsched.runtime.tracing import extract, inject, set_error, span_context, tracer, wall_ns

MAX_TRACKED = 200_000
K = TypeVar("K")
V = TypeVar("V")
#: Results whose root stays open until the binding is confirmed or fails.
DECIDED = ("scheduled", "preempting")


@dataclass
class _Attempt:
    """A decided attempt waiting for its binding: its root and the decision it made."""

    root: trace.Span
    decision_id: str
    node: str
    bind_request: trace.Span | None = None
    reported_at: int = 0  # when a binder reported BOUND (epoch ns); 0 before
    binder_id: str = ""


@dataclass
class _Watched:
    """The watcher's context for a pending pod; `used` once an attempt continued it."""

    carrier: dict[str, str]
    used: bool = False


@dataclass
class _Origin:
    """Where an attempt's trace starts: under the watch event (the first attempt) or as a
    new root with links; `unsampled` when the watcher did not sample the pod and our
    sampler follows it (then nothing is built)."""

    context: otel_context.Context
    links: list[Link] = field(default_factory=list)
    unsampled: trace.SpanContext | None = None


def _activated(queued: QueuedPod | None, cycle_start: int) -> int:
    """Where an attempt's trace and its `queue_wait` start: when the pod last entered the
    active queue (epoch ns), not when it was first queued or last requeued, so the time a
    retry spent in backoff or the unschedulable pool (or a pod behind its gates) is in no
    trace; the cycle's start when the queue did not say."""
    if queued is None or not queued.activated_at:
        return cycle_start
    return min(wall_ns(queued.activated_at), cycle_start)


def _bounded_put(table: dict[K, V], key: K, value: V) -> None:
    """Set `table[key]`, dropping the oldest entry first when the table is full."""
    if len(table) >= MAX_TRACKED and key not in table:
        table.pop(next(iter(table)))
    table[key] = value


class SchedulingTraces(CycleObserver):
    """The scheduler's per-attempt spans (the module docstring says how they are wired).

    `queued_of(uid)` gives the queue entry of the pod being scheduled (when it entered the
    active queue, its attempt count) when the core starts its cycle."""

    def __init__(self, *, queued_of: Callable[[str], QueuedPod | None] = lambda _uid: None) -> None:
        self._queued_of = queued_of
        #: Whether our sampler follows a remote parent's decision (the default
        #: parentbased_*): then a pod the watcher did not sample costs no span here.
        self._follows_parent = tracing.sampler_follows_parent()
        self._cycle = spans.CycleTimes()
        self._gang: spans.GangTimes | None = None
        self._gang_start = 0
        self._open: dict[str, _Attempt] = {}  # by pod uid
        self._watched: dict[str, _Watched] = {}  # by pod uid
        self._previous: dict[str, trace.SpanContext] = {}  # by pod uid
        #: Sampled traces (hex ids) of decisions and of each pod's latest attempt, for the
        #: API's Decision.trace_id.
        self._decision_traces: dict[str, str] = {}  # by decision id
        self._pod_traces: dict[str, str] = {}  # by pod uid

    # -- the core's cycle (CycleObserver): read the clock around each step -----------------
    def schedule_started(self, pod: models.Pod) -> None:
        self._cycle = spans.CycleTimes(
            uid=pod.uid, queued=self._queued_of(pod.uid), start=time.time_ns()
        )

    def schedule_finished(self, pod: models.Pod, result: ScheduleResult) -> None:
        self._cycle.result = result
        self._cycle.end = time.time_ns()

    def score_started(self, pod: models.Pod) -> None:
        self._cycle.score_start = time.time_ns()

    def score_finished(self, pod: models.Pod) -> None:
        self._cycle.score_end = time.time_ns()

    def assume_started(self, pod: models.Pod, node: str) -> None:
        if pod.uid == self._cycle.uid:
            self._cycle.assume_start = time.time_ns()

    def assume_finished(self, pod: models.Pod, node: str, status: framework.Status) -> None:
        if pod.uid == self._cycle.uid:
            self._cycle.assume_end = time.time_ns()
            self._cycle.assume_ok = status.ok

    def gang_started(self, pods: Sequence[models.Pod]) -> None:
        self._gang_start = time.time_ns()

    def gang_finished(
        self, pods: Sequence[models.Pod], placed: Placements, blocking: models.Pod | None
    ) -> None:
        self._gang = spans.GangTimes(
            start=self._gang_start,
            end=time.time_ns(),
            uids=frozenset(p.uid for p in pods),
            members=len(pods),
            placed=len(placed),
            blocking=blocking.key if blocking is not None else "",
        )

    def begin(self) -> None:
        """A scheduling attempt is about to run (forget the previous cycle's timings)."""
        self._cycle = spans.CycleTimes()
        self._gang = None

    # -- the watch -------------------------------------------------------------------------
    def observed(self, uid: str, carrier: Mapping[str, str]) -> None:
        """A pending pod's watch event with the watcher's span context."""
        if carrier:
            _bounded_put(self._watched, uid, _Watched(dict(carrier)))

    def confirmed(self, uid: str, node: str) -> None:
        """The watch shows the pod bound: the `confirm` span ends the attempt's trace."""
        attempt = self._open.pop(uid, None)
        self._watched.pop(uid, None)
        self._previous.pop(uid, None)
        if attempt is None or not attempt.root.is_recording():
            return
        now = time.time_ns()
        spans.confirm_span(
            attempt.root,
            node=node,
            decided=attempt.node,
            reported_at=attempt.reported_at,
            binder_id=attempt.binder_id,
            now=now,
        )
        self._end_bind_request(attempt, now)
        attempt.root.end(end_time=now)

    def gone(self, uid: str) -> None:
        """The pod was deleted (or finished): close its attempt, forget its contexts."""
        self._watched.pop(uid, None)
        self._previous.pop(uid, None)
        self._pod_traces.pop(uid, None)
        attempt = self._open.pop(uid, None)
        if attempt is not None:
            self._fail(attempt, "PodGone", "the pod was deleted before its binding was seen")

    # -- the scheduling cycle --------------------------------------------------------------
    def attempt(
        self,
        pod: models.Pod,
        *,
        result: str,
        queued: QueuedPod | None = None,
        decision_id: str = "",
        node: str = "",
        message: str = "",
    ) -> None:
        """Build the spans of the attempt that just ran for `pod`. `result`: scheduled or
        preempting (the root stays open until the binding is confirmed or fails), or
        unschedulable/error (the root ends now, failed with `message`). `queued`: the
        pod's queue entry when the caller has it (else the one seen when the core's cycle
        started). A pod the core's `schedule` did not see (a gang member placed with its
        group) gets the root and the queue wait only."""
        uid = pod.uid
        now = time.time_ns()
        cycle = self._cycle if self._cycle.uid == uid and self._cycle.start > 0 else None
        origin = self._origin(uid)
        if origin.unsampled is not None:
            # Keep the watcher's unsampled context (so the binder follows it) and build nothing.
            self._keep(uid, trace.NonRecordingSpan(origin.unsampled), result, decision_id, node)
            return
        if queued is None and cycle is not None:
            queued = cycle.queued
        cycle_start = cycle.start if cycle is not None else now
        activated = _activated(queued, cycle_start)
        attrs = spans.root_attributes(pod, queued.attempts if queued is not None else 0)
        root = tracer().start_span(
            "schedule_pod",
            context=origin.context,
            attributes=attrs,
            links=origin.links,
            start_time=activated,
        )
        if not root.is_recording():
            self._keep(uid, root, result, decision_id, node)
            return
        self._previous[uid] = root.get_span_context()
        in_root = trace.set_span_in_context(root)
        tracer().start_span("queue_wait", context=in_root, start_time=activated).end(
            end_time=cycle_start
        )
        if cycle is not None:
            spans.cycle_spans(cycle, in_root, node=node, message=message)
        if self._gang is not None and uid in self._gang.uids:
            spans.gang_span(self._gang, root, attributes=attrs, message=message)
        self._settle_root(root, uid, result, decision_id, node=node, message=message, now=now)

    def _origin(self, uid: str) -> _Origin:
        """The first attempt after a watch event continues its trace (once); any other
        starts a new trace linked to that watch event and to the pod's previous attempt."""
        watched = self._watched.get(uid)
        if watched is not None and not watched.used:
            watched.used = True
            unsampled = tracing.unsampled_context(watched.carrier) if self._follows_parent else None
            if unsampled is not None:
                return _Origin(otel_context.Context(), unsampled=unsampled)
            return _Origin(extract(watched.carrier))
        links: list[Link] = []
        if watched is not None:
            link = span_context(watched.carrier)
            if link is not None:
                links.append(Link(link, {"splitsched.link": "watch_event"}))
        previous = self._previous.get(uid)
        if previous is not None:
            links.append(Link(previous, {"splitsched.link": "previous_attempt"}))
        return _Origin(otel_context.Context(), links)

    def _settle_root(
        self,
        root: trace.Span,
        uid: str,
        result: str,
        decision_id: str,
        *,
        node: str,
        message: str,
        now: int,
    ) -> None:
        """A decided attempt's root stays open for its binding; any other ends `now`, failed."""
        root.set_attribute("splitsched.result", result)
        if result in DECIDED:
            root.set_attribute("k8s.node.name", node)
            root.set_attribute("splitsched.decision_id", decision_id)
            self._keep(uid, root, result, decision_id, node)
            return
        self._remember(uid, "", root)
        set_error(root, result.capitalize(), message or result)
        root.end(end_time=now)

    def _remember(self, uid: str, decision_id: str, root: trace.Span) -> None:
        """Note the attempt's trace (if sampled: an unsampled one is in no backend)."""
        ctx = root.get_span_context()
        if not (ctx.is_valid and ctx.trace_flags.sampled):
            self._pod_traces.pop(uid, None)
            return
        trace_id = format(ctx.trace_id, "032x")
        for key, table in ((uid, self._pod_traces), (decision_id, self._decision_traces)):
            if key:
                _bounded_put(table, key, trace_id)

    def trace_id(self, uid: str, decision_id: str = "") -> str:
        """The hex trace id of `decision_id`'s attempt (and of its outcomes), or without a
        decision id of the pod's latest attempt; empty when none was sampled."""
        if decision_id:
            return self._decision_traces.get(decision_id, "")
        return self._pod_traces.get(uid, "")

    def _keep(self, uid: str, root: trace.Span, result: str, decision_id: str, node: str) -> None:
        """Hold a decided attempt's root until its binding is confirmed or fails (a
        non-recording root too: its context still goes to the binder)."""
        self._remember(uid, decision_id, root)
        if result not in DECIDED:
            return
        superseded = self._open.pop(uid, None)
        if superseded is not None:
            self._fail(superseded, "Superseded", "a newer attempt for this pod started")
        if len(self._open) >= MAX_TRACKED:
            self._fail(self._open.pop(next(iter(self._open))), "Abandoned", "too many open")
        self._open[uid] = _Attempt(root=root, decision_id=decision_id, node=node)

    # -- the binder round trip -------------------------------------------------------------
    def bind_request(
        self, uid: str, decision_id: str, *, method: str = "BindBatch", binder_target: str = ""
    ) -> dict[str, str]:
        """Start the `bind_request` (or `preempt_request` for method Preempt) span of a
        decision being sent; its carrier goes into the request's `trace_context` ({} if
        the attempt is not traced)."""
        attempt = self._open.get(uid)
        if attempt is None or attempt.decision_id != decision_id:
            return {}
        if not attempt.root.is_recording():
            return spans.unsampled_carrier(attempt.root)
        attempt.bind_request = spans.bind_request_span(
            attempt.root, method=method, node=attempt.node, binder_target=binder_target
        )
        carrier = inject(attempt.bind_request)
        if self._kept_already(attempt.root):
            carrier = tailkeep.sampled_carrier(carrier)
        return carrier

    def _kept_already(self, root: trace.Span) -> bool:
        """Whether an unsampled attempt is already known to be kept when its decision is
        sent (a retry, or slow so far): then the binder is told, by the sampled flag."""
        rule = tracing.tail_rule()
        if rule is None or root.get_span_context().trace_flags.sampled:
            return False
        return isinstance(root, ReadableSpan) and rule.reason(root, end_ns=time.time_ns()) != ""

    def bind_sent(self, uid: str, decision_id: str, *, accepted: bool, reason: str = "") -> None:
        """The binder answered the BindBatch: `bind_request` ends; a refusal ends the
        attempt (the pod is requeued, its next attempt is a new trace)."""
        attempt = self._open.get(uid)
        if attempt is None or attempt.decision_id != decision_id:
            return
        if accepted:
            self._end_bind_request(attempt, time.time_ns())
            return
        if attempt.bind_request is not None:
            set_error(attempt.bind_request, "Refused", reason)
        del self._open[uid]
        self._fail(attempt, "Refused", f"binder refused: {reason}")

    def rebind(self, uid: str, decision_id: str) -> None:
        """A preemption's victims are gone and the preemptor is sent to be bound under a
        new decision: the same attempt (and trace) continues."""
        attempt = self._open.get(uid)
        if attempt is not None:
            attempt.decision_id = decision_id
            self._remember(uid, decision_id, attempt.root)
            attempt.root.add_event("victims gone", {"splitsched.decision_id": decision_id})

    def outcome(
        self, uid: str, decision_id: str, *, kind: str, message: str, binder_id: str
    ) -> None:
        """A decision's outcome (`DecisionEvent.kind`): BOUND from a binder waits for the
        watch (`confirmed`); BOUND from the watch itself is handled by `confirmed`; any
        other outcome fails the attempt."""
        attempt = self._open.get(uid)
        if attempt is None or attempt.decision_id != decision_id:
            return
        if kind == "BOUND":
            if binder_id != "watch" and not attempt.reported_at:
                attempt.reported_at = time.time_ns()
                attempt.binder_id = binder_id
                attempt.root.add_event("binder reported bound", {"splitsched.binder.id": binder_id})
            return
        del self._open[uid]
        error_type = {"CONFLICT": "Conflict", "POD_GONE": "PodGone"}.get(kind, "BindFailed")
        self._fail(attempt, error_type, message or kind)

    # -- internals -------------------------------------------------------------------------
    def _end_bind_request(self, attempt: _Attempt, now: int) -> None:
        if attempt.bind_request is not None:
            attempt.bind_request.end(end_time=now)
            attempt.bind_request = None

    def _fail(self, attempt: _Attempt, error_type: str, message: str) -> None:
        now = time.time_ns()
        self._end_bind_request(attempt, now)
        set_error(attempt.root, error_type, message)
        attempt.root.end(end_time=now)

    @property
    def open_attempts(self) -> int:
        return len(self._open)
