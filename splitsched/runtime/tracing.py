"""OpenTelemetry tracing for the three services: one trace per scheduling attempt.

Every service's `main` calls `setup(component)` once and `shutdown()` at exit. The
standard variables configure it (read by the SDK where it can):

* `OTEL_TRACES_EXPORTER`: `otlp`, `console`, `none` (comma-separated list). When unset,
  `otlp` is used if `OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is
  set, and tracing stays OFF otherwise (no provider, no exporter thread, and the services
  skip span building: `enabled()` is one attribute read).
* `OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL`: `grpc` or `http/protobuf` (the spec's default);
  endpoint, headers, timeout, compression: the exporters read their own variables.
* `OTEL_SERVICE_NAME` (default `splitsched-<component>`), `OTEL_RESOURCE_ATTRIBUTES`,
  `OTEL_TRACES_SAMPLER` / `OTEL_TRACES_SAMPLER_ARG` (default `parentbased_always_on`),
  `OTEL_BSP_*` (batching), `OTEL_PROPAGATORS` (default W3C tracecontext + baggage),
  `OTEL_SDK_DISABLED=true` switches everything off.

The trace of one attempt crosses the services through our proto `trace_context` map fields
(W3C `traceparent`/`tracestate`), written and read with the configured propagator:

    watcher   watch_event  (PRODUCER; puts its context in ClusterEvent.trace_context)
    scheduler └ schedule_pod (from the enqueue time to the confirmation)
                ├ queue_wait, filter, score, assume   (timed around the core's calls)
                ├ gang_cycle (a gang member: the one cycle that placed its whole gang)
                ├ bind_request (PRODUCER; context in BindRequest.trace_context)
                │ └ binder: bind (CONSUMER) ── one CLIENT span per Binding API call
                └ confirm (from the binder's report to the watch event showing the binding)

The first attempt is a child of the watch event that queued the pod; a retry (the pod
came back through backoff or the unschedulable pool) starts a new trace *linked* to that
watch event and to the previous attempt, so each trace stays one attempt long and a
pod's history is still one click away. The members of a gang are placed together in one
cycle but keep one trace each: every member's `gang_cycle` span (group, minMember, members
tried, members placed, result) links to the first member's `schedule_pod`.

The scheduler's spans are built after the fact with explicit timestamps (`SchedulingTraces`)
so the scheduling loop does no tracing work at all while tracing is off, and only reads
the clock around the core's calls while it is on.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.trace import Link, SpanKind, Status, StatusCode

log = logging.getLogger(__name__)

DEFAULT_PROTOCOL = "http/protobuf"
SCOPE = "splitsched"


@dataclass
class _State:
    tracer: trace.Tracer | None = None
    provider: Any = None  # opentelemetry.sdk.trace.TracerProvider, imported lazily


_state = _State()


def enabled() -> bool:
    """Whether spans are being built in this process (False: skip all tracing work)."""
    return _state.tracer is not None


def tracer() -> trace.Tracer:
    """The process's tracer (a no-op one when tracing is off)."""
    return _state.tracer or trace.NoOpTracer()


def exporters_from_env(environ: Mapping[str, str]) -> list[str]:
    """Which exporters the environment asks for; [] means tracing is off."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return []
    raw = environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if raw:
        names = [n.strip() for n in raw.split(",") if n.strip()]
        return [] if "none" in names else names
    if environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or environ.get(
        "OTEL_EXPORTER_OTLP_ENDPOINT"
    ):
        return ["otlp"]
    return []


def protocol_from_env(environ: Mapping[str, str]) -> str:
    return (
        environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        or environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        or DEFAULT_PROTOCOL
    ).strip()


def _exporter(name: str, environ: Mapping[str, str]) -> Any:
    if name == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter()
    if name != "otlp":
        raise ValueError(f"unknown OTEL_TRACES_EXPORTER {name!r} (otlp, console, none)")
    protocol = protocol_from_env(environ)
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter()
    if protocol in ("http/protobuf", "http"):
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
            OTLPSpanExporter as HttpSpanExporter,
        )

        return HttpSpanExporter()
    raise ValueError(f"unsupported OTLP protocol {protocol!r} (grpc, http/protobuf)")


def setup(component: str, *, exporter: Any = None) -> bool:
    """Configure tracing for `component` (watcher, scheduler, binder) from the environment;
    returns whether it is on. `exporter` (tests) forces it on with a synchronous processor
    and leaves the global provider alone."""
    environ = os.environ
    names = [] if exporter is not None else exporters_from_env(environ)
    if exporter is None and not names:
        return False
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

    attributes: dict[str, str] = {"service.namespace": "splitsched"}
    if not environ.get("OTEL_SERVICE_NAME"):
        attributes[SERVICE_NAME] = f"splitsched-{component}"
    provider = TracerProvider(resource=Resource.create(attributes))  # sampler: from env
    if exporter is not None:
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    else:
        for name in names:
            try:
                provider.add_span_processor(BatchSpanProcessor(_exporter(name, environ)))
            except ValueError as exc:
                log.error("tracing: %s; exporter skipped", exc)
        trace.set_tracer_provider(provider)
    _state.provider = provider
    _state.tracer = provider.get_tracer(SCOPE)
    if exporter is None:
        log.info(
            "tracing on: exporters %s, protocol %s, service %s",
            ",".join(names),
            protocol_from_env(environ),
            provider.resource.attributes.get(SERVICE_NAME),
        )
    return True


def shutdown() -> None:
    """Flush and stop the exporters (bounded by the processors' own timeouts)."""
    provider, _state.provider, _state.tracer = _state.provider, None, None
    if provider is not None:
        provider.shutdown()


# ---- carriers -----------------------------------------------------------------------------


def inject(span: trace.Span) -> dict[str, str]:
    """`span`'s context as a carrier for a proto `trace_context` map (empty if invalid)."""
    carrier: dict[str, str] = {}
    if span.get_span_context().is_valid:
        propagate.inject(carrier, context=trace.set_span_in_context(span))
    return carrier


def extract(carrier: Mapping[str, str] | None) -> otel_context.Context:
    """The context a carrier holds (an empty context, i.e. a new root, if none)."""
    if not carrier:
        return otel_context.Context()
    return propagate.extract(dict(carrier), context=otel_context.Context())


def span_context(carrier: Mapping[str, str] | None) -> trace.SpanContext | None:
    """The remote span context in a carrier, for a span link; None if it has none."""
    if not carrier:
        return None
    ctx = trace.get_current_span(extract(carrier)).get_span_context()
    return ctx if ctx.is_valid else None


def from_metadata(metadata: Iterable[tuple[str, str | bytes]] | None) -> dict[str, str]:
    """The trace headers among gRPC invocation metadata (for callers that propagate the
    context there instead of in the request's `trace_context`)."""
    fields = propagate.get_global_textmap().fields
    out: dict[str, str] = {}
    for key, value in metadata or ():
        if key in fields:
            out[key] = value.decode() if isinstance(value, bytes) else value
    return out


def wall_ns(monotonic_seconds: float) -> int:
    """A `time.monotonic()` reading as epoch nanoseconds (span timestamps)."""
    return int((monotonic_seconds + time.time() - time.monotonic()) * 1e9)


def set_error(span: trace.Span, error_type: str, message: str) -> None:
    """Mark a span failed: status ERROR with the reason, and `error.type` (semconv)."""
    span.set_attribute("error.type", error_type)
    span.set_status(Status(StatusCode.ERROR, message))


def producer_span(name: str, *, attributes: Mapping[str, Any], at: float) -> dict[str, str]:
    """A PRODUCER span from `at` (epoch seconds) to now, a new trace's root; returns its
    carrier for the message it produced."""
    span = tracer().start_span(
        name,
        context=otel_context.Context(),
        kind=SpanKind.PRODUCER,
        attributes=attributes,
        start_time=int(at * 1e9),
    )
    span.end()
    return inject(span)


def pod_attributes(namespace: str, name: str, uid: str = "") -> dict[str, Any]:
    attrs: dict[str, Any] = {"k8s.namespace.name": namespace, "k8s.pod.name": name}
    if uid:
        attrs["k8s.pod.uid"] = uid
    return attrs


# ---- the scheduler's attempts -------------------------------------------------------------


class QueuedLike(Protocol):
    """What `SchedulingTraces` reads of a queue entry (`splitsched.core.queue.QueuedPod`)."""

    @property
    def attempts(self) -> int: ...

    @property
    def enqueued_at(self) -> float: ...


class PodLike(Protocol):
    @property
    def uid(self) -> str: ...

    @property
    def name(self) -> str: ...

    @property
    def namespace(self) -> str: ...

    @property
    def scheduler_name(self) -> str: ...


@dataclass
class _Cycle:
    """Timestamps (epoch ns) of one scheduling cycle, recorded around the core's calls."""

    uid: str = ""
    queued: QueuedLike | None = None
    start: int = 0
    end: int = 0
    result: Any = None
    score: tuple[int, int] | None = None
    assume: tuple[int, int, bool] | None = None


@dataclass
class _GangCycle:
    """One `place_gang` call of the core: its members, what it placed, and the first
    member's root once built (the other members' `gang_cycle` spans link to it)."""

    start: int
    end: int
    uids: frozenset[str]
    members: int
    placed: int
    blocking: str
    first_root: trace.SpanContext | None = None


@dataclass
class _Attempt:
    root: trace.Span
    decision_id: str
    node: str
    bind_request: trace.Span | None = None
    reported_at: int = 0  # when a binder reported BOUND (epoch ns); 0 before
    binder_id: str = ""


@dataclass
class _Watched:
    carrier: dict[str, str]
    used: bool = False


MAX_TRACKED = 200_000


@dataclass
class SchedulingTraces:
    """The scheduler's per-attempt spans (see the module docstring for the tree).

    Wired by `services.scheduler.main` only when tracing is on: `install` wraps the core
    algorithm's `schedule`, `score` and `assume` on that one instance to read the clock
    around them; the loop calls `begin` before and `attempt` after each
    `SchedulerState.schedule_one`; the watch feeds `observed`/`confirmed`/`gone`; the
    binder round trip feeds `bind_request`/`bind_sent`/`outcome`.
    """

    queued_of: Callable[[str], QueuedLike | None] = lambda _uid: None
    #: Whether our sampler follows a remote parent's decision (the default
    #: parentbased_*): then a pod the watcher did not sample costs no span here.
    _follows_parent: bool = True
    _cycle: _Cycle = field(default_factory=_Cycle)
    _gang: _GangCycle | None = None
    _in_schedule: bool = False
    _open: dict[str, _Attempt] = field(default_factory=dict)  # by pod uid
    _watched: dict[str, _Watched] = field(default_factory=dict)  # by pod uid
    _previous: dict[str, trace.SpanContext] = field(default_factory=dict)  # by pod uid
    #: Sampled traces (hex ids) of decisions and of each pod's latest attempt, for the
    #: API's Decision.trace_id.
    _decision_traces: dict[str, str] = field(default_factory=dict)  # by decision id
    _pod_traces: dict[str, str] = field(default_factory=dict)  # by pod uid

    # -- timing the core -------------------------------------------------------------------
    def install(self, algo: Any, queued_of: Callable[[str], QueuedLike | None]) -> None:
        """Time `algo.schedule` (filter: up to scoring), `algo.score` and `algo.assume`.
        `queued_of(uid)` gives the queue entry of the pod being scheduled (its enqueue
        time and attempt count)."""
        self.queued_of = queued_of
        self._follows_parent = _sampler_follows_parent()
        schedule, score, assume = algo.schedule, algo.score, algo.assume

        def timed_schedule(pod: Any, *args: Any, **kwargs: Any) -> Any:
            cycle = self._cycle = _Cycle(uid=pod.uid, queued=self.queued_of(pod.uid))
            cycle.start = time.time_ns()
            self._in_schedule = True
            try:
                cycle.result = schedule(pod, *args, **kwargs)
            finally:
                self._in_schedule = False
                cycle.end = time.time_ns()
            return cycle.result

        def timed_score(*args: Any, **kwargs: Any) -> Any:
            if not self._in_schedule:
                return score(*args, **kwargs)
            start = time.time_ns()
            try:
                return score(*args, **kwargs)
            finally:
                self._cycle.score = (start, time.time_ns())

        def timed_assume(pod: Any, *args: Any, **kwargs: Any) -> Any:
            start = time.time_ns()
            status = assume(pod, *args, **kwargs)
            if pod.uid == self._cycle.uid:
                self._cycle.assume = (start, time.time_ns(), bool(getattr(status, "ok", True)))
            return status

        algo.schedule = timed_schedule
        algo.score = timed_score
        algo.assume = timed_assume
        place_gang = getattr(algo, "place_gang", None)
        if place_gang is None:
            return

        def timed_place_gang(pods: Any, *args: Any, **kwargs: Any) -> Any:
            start = time.time_ns()
            out = place_gang(pods, *args, **kwargs)
            placed, blocking = out[0], out[1]
            self._gang = _GangCycle(
                start=start,
                end=time.time_ns(),
                uids=frozenset(p.uid for p in pods),
                members=len(pods),
                placed=len(placed),
                blocking=blocking.key if blocking is not None else "",
            )
            return out

        algo.place_gang = timed_place_gang

    def begin(self) -> None:
        """A scheduling attempt is about to run (forget the previous cycle's timings)."""
        self._cycle = _Cycle()
        self._gang = None

    # -- the watch -------------------------------------------------------------------------
    def observed(self, uid: str, carrier: Mapping[str, str]) -> None:
        """A pending pod's watch event with the watcher's span context."""
        if carrier:
            if len(self._watched) >= MAX_TRACKED:
                self._watched.pop(next(iter(self._watched)))
            self._watched[uid] = _Watched(dict(carrier))

    def confirmed(self, uid: str, node: str) -> None:
        """The watch shows the pod bound: the `confirm` span ends the attempt's trace."""
        attempt = self._open.pop(uid, None)
        self._watched.pop(uid, None)
        self._previous.pop(uid, None)
        if attempt is None or not attempt.root.is_recording():
            return
        now = time.time_ns()
        confirm = tracer().start_span(
            "confirm",
            context=trace.set_span_in_context(attempt.root),
            attributes={
                "k8s.node.name": node,
                "splitsched.confirmed_by": "binder+watch" if attempt.reported_at else "watch",
                "splitsched.binder.id": attempt.binder_id,
            },
            start_time=attempt.reported_at or now,
        )
        if node != attempt.node:
            set_error(confirm, "Conflict", f"bound to {node}, decided {attempt.node}")
            set_error(attempt.root, "Conflict", f"bound to {node}, decided {attempt.node}")
        confirm.end(end_time=now)
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
        pod: PodLike,
        *,
        result: str,
        queued: QueuedLike | None = None,
        decision_id: str = "",
        node: str = "",
        message: str = "",
    ) -> None:
        """Build the spans of the attempt that just ran for `pod`. `result`: scheduled or
        preempting (the root stays open until the binding is confirmed or fails), or
        unschedulable/error (the root ends now, failed with `message`). `queued`: the
        pod's queue entry when the caller has it (else the one seen by the core's call).
        A pod the core's `schedule` did not see (a gang member placed with its group) gets
        the root and the queue wait only."""
        cycle = self._cycle
        uid = pod.uid
        timed = cycle.uid == uid and cycle.start > 0
        now = time.time_ns()
        queued = queued or (cycle.queued if timed else None)
        cycle_start = cycle.start if timed else now
        attempt_no = queued.attempts if queued is not None else 0
        enqueued = wall_ns(queued.enqueued_at) if queued is not None else cycle_start
        enqueued = min(enqueued, cycle_start)
        links: list[Link] = []
        watched = self._watched.get(uid)
        if watched is not None and not watched.used:
            watched.used = True
            unsampled = _unsampled(watched.carrier) if self._follows_parent else None
            if unsampled is not None:
                # The watcher did not sample this trace and our sampler follows it: keep
                # its context (so the binder follows too) and build nothing.
                self._keep(uid, trace.NonRecordingSpan(unsampled), result, decision_id, node)
                return
            parent = extract(watched.carrier)
        else:
            parent = otel_context.Context()
            if watched is not None:
                link = span_context(watched.carrier)
                if link is not None:
                    links.append(Link(link, {"splitsched.link": "watch_event"}))
            previous = self._previous.get(uid)
            if previous is not None:
                links.append(Link(previous, {"splitsched.link": "previous_attempt"}))
        attrs = pod_attributes(pod.namespace, pod.name, uid)
        attrs["splitsched.profile"] = pod.scheduler_name
        attrs["splitsched.attempt"] = attempt_no
        group = getattr(pod, "group", None)
        if group is not None:
            attrs["splitsched.gang.group"] = f"{pod.namespace}/{group.name}"
            attrs["splitsched.gang.min_member"] = group.min_member
        tr = tracer()
        root = tr.start_span(
            "schedule_pod", context=parent, attributes=attrs, links=links, start_time=enqueued
        )
        if not root.is_recording():
            self._keep(uid, root, result, decision_id, node)
            return
        self._previous[uid] = root.get_span_context()
        in_root = trace.set_span_in_context(root)
        tr.start_span("queue_wait", context=in_root, start_time=enqueued).end(end_time=cycle_start)
        if timed:
            self._cycle_spans(cycle, in_root, node=node, message=message)
        gang = self._gang
        if gang is not None and uid in gang.uids:
            self._gang_span(gang, root, attributes=attrs, message=message)
        root.set_attribute("splitsched.result", result)
        if result in ("scheduled", "preempting"):
            root.set_attribute("k8s.node.name", node)
            root.set_attribute("splitsched.decision_id", decision_id)
            self._keep(uid, root, result, decision_id, node)
            return
        self._remember(uid, "", root)
        set_error(root, result.capitalize(), message or result)
        root.end(end_time=max(cycle.end if timed else now, now))

    def _remember(self, uid: str, decision_id: str, root: trace.Span) -> None:
        """Note the attempt's trace (if sampled: an unsampled one is in no backend)."""
        ctx = root.get_span_context()
        if not (ctx.is_valid and ctx.trace_flags.sampled):
            self._pod_traces.pop(uid, None)
            return
        trace_id = format(ctx.trace_id, "032x")
        for key, table in ((uid, self._pod_traces), (decision_id, self._decision_traces)):
            if key:
                if len(table) >= MAX_TRACKED and key not in table:
                    table.pop(next(iter(table)))
                table[key] = trace_id

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
        if result not in ("scheduled", "preempting"):
            return
        superseded = self._open.pop(uid, None)
        if superseded is not None:
            self._fail(superseded, "Superseded", "a newer attempt for this pod started")
        if len(self._open) >= MAX_TRACKED:
            self._fail(self._open.pop(next(iter(self._open))), "Abandoned", "too many open")
        self._open[uid] = _Attempt(root=root, decision_id=decision_id, node=node)

    def _cycle_spans(
        self, cycle: _Cycle, in_root: otel_context.Context, *, node: str, message: str
    ) -> None:
        """filter (up to scoring), score and assume, from the timings of the core's calls."""
        tr = tracer()
        scored = cycle.score
        filter_span = tr.start_span("filter", context=in_root, start_time=cycle.start)
        feasible, total = _feasible(cycle.result)
        if feasible is not None:
            filter_span.set_attribute("splitsched.feasible_nodes", feasible)
        if total is not None:
            filter_span.set_attribute("splitsched.nodes", total)
        if feasible == 0:
            set_error(filter_span, "Unschedulable", message or "no feasible node")
        filter_span.end(end_time=scored[0] if scored else cycle.end)
        if scored is not None:
            score_span = tr.start_span("score", context=in_root, start_time=scored[0])
            bind = getattr(cycle.result, "bind", None)
            if bind is not None:
                score_span.set_attribute("k8s.node.name", bind.node)
                score_span.set_attribute("splitsched.score", float(bind.score))
            score_span.end(end_time=scored[1])
        if cycle.assume is not None:
            start, end, ok = cycle.assume
            assume_span = tr.start_span(
                "assume", context=in_root, start_time=start, attributes={"k8s.node.name": node}
            )
            if not ok:
                set_error(assume_span, "Rejected", message or "reserve/permit rejected")
            assume_span.end(end_time=end)

    @staticmethod
    def _gang_span(
        gang: _GangCycle, root: trace.Span, *, attributes: Mapping[str, Any], message: str
    ) -> None:
        """The member's view of the cycle that placed (or could not place) its gang,
        linked to the first member's root: one click from any member to the others."""
        links = []
        if gang.first_root is None:
            gang.first_root = root.get_span_context()
        else:
            links.append(Link(gang.first_root, {"splitsched.link": "gang_first_member"}))
        placed = gang.placed == gang.members
        span = tracer().start_span(
            "gang_cycle",
            context=trace.set_span_in_context(root),
            links=links,
            start_time=gang.start,
            attributes={
                "splitsched.gang.group": attributes.get("splitsched.gang.group", ""),
                "splitsched.gang.min_member": attributes.get("splitsched.gang.min_member", 0),
                "splitsched.gang.members": gang.members,
                "splitsched.gang.placed": gang.placed,
                "splitsched.gang.result": "placed" if placed else "unschedulable",
            },
        )
        if not placed:
            span.set_attribute("splitsched.gang.blocking_member", gang.blocking)
            set_error(span, "Unschedulable", message or f"member {gang.blocking} fits nowhere")
        span.end(end_time=gang.end)

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
            # Not sampled: the binder learns so (and builds nothing either).
            ctx = attempt.root.get_span_context()
            if not ctx.is_valid:
                return {}
            return {
                "traceparent": f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{ctx.trace_flags:02x}"
            }
        attrs: dict[str, Any] = {
            "rpc.system": "grpc",
            "rpc.service": "splitsched.v1.Binder",
            "rpc.method": method,
            "k8s.node.name": attempt.node,
        }
        if binder_target:
            attrs["server.address"] = binder_target
        span = tracer().start_span(
            "preempt_request" if method == "Preempt" else "bind_request",
            context=trace.set_span_in_context(attempt.root),
            kind=SpanKind.PRODUCER,
            attributes=attrs,
        )
        attempt.bind_request = span
        return inject(span)

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


def _sampler_follows_parent() -> bool:
    """Whether the provider's sampler is parent-based (OTEL_TRACES_SAMPLER parentbased_*,
    the default), so an unsampled remote parent means an unsampled child."""
    from opentelemetry.sdk.trace.sampling import ParentBased

    provider = _state.provider
    return provider is not None and isinstance(getattr(provider, "sampler", None), ParentBased)


def _unsampled(carrier: Mapping[str, str]) -> trace.SpanContext | None:
    """The remote span context of a W3C `traceparent` whose sampled flag is off (None if
    it is sampled, absent or malformed); parsed by hand, as it is on the hot path."""
    value = carrier.get("traceparent", "")
    parts = value.split("-")
    if len(parts) != 4 or len(parts[1]) != 32 or len(parts[2]) != 16 or len(parts[3]) != 2:
        return None
    try:
        flags = int(parts[3], 16)
        if flags & trace.TraceFlags.SAMPLED:
            return None
        ctx = trace.SpanContext(
            trace_id=int(parts[1], 16),
            span_id=int(parts[2], 16),
            is_remote=True,
            trace_flags=trace.TraceFlags(flags),
        )
    except ValueError:
        return None
    return ctx if ctx.is_valid else None


def _feasible(result: Any) -> tuple[int | None, int | None]:
    """(feasible nodes, nodes) of a core `ScheduleResult`, when it says."""
    if result is None:
        return None, None
    bind = getattr(result, "bind", None)
    if bind is not None:
        return int(bind.feasible_nodes), None
    wait = getattr(result, "wait", None)
    preempt = getattr(result, "preempt", None)
    if wait is None and preempt is not None:
        wait = preempt.wait
    if wait is not None:
        return 0, int(wait.total_nodes) or None
    return None, None
