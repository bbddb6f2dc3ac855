"""How the scheduler's spans look: their names, attributes, timings and failures.

`services.scheduler.traces.SchedulingTraces` decides *when* an attempt's spans are built
and which attempt they belong to; the functions here build each span from what was
recorded of the core's cycle (`CycleTimes`, `GangTimes`: epoch nanoseconds read around the
core's steps) and end it at once with those explicit timestamps. The tree they make is
drawn in `services.scheduler.traces` and docs/observability.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Link, SpanKind

from splitsched.core import models
from splitsched.core.queue import QueuedPod
from splitsched.core.results import ScheduleResult
from splitsched.runtime.tracing import pod_attributes, set_error, tracer

#: The RPC attributes (semconv) of every span of a call to the Binder service.
BINDER_RPC = {"rpc.system": "grpc", "rpc.service": "splitsched.v1.Binder"}


@dataclass
class CycleTimes:
    """One `schedule` call of the core as the observer saw it, with the scoring inside it
    and the `assume` of the same pod after it (epoch ns; 0: did not happen)."""

    uid: str = ""
    queued: QueuedPod | None = None
    start: int = 0
    end: int = 0
    result: ScheduleResult | None = None
    score_start: int = 0
    score_end: int = 0
    assume_start: int = 0
    assume_end: int = 0
    assume_ok: bool = True


@dataclass
class GangTimes:
    """One `place_gang` call of the core: its members, what it placed, and the first
    member's root once built (the other members' `gang_cycle` spans link to it)."""

    start: int
    end: int
    uids: frozenset[str]
    members: int
    placed: int
    blocking: str
    first_root: trace.SpanContext | None = None


def root_attributes(pod: models.Pod, attempt: int) -> dict[str, Any]:
    """The `schedule_pod` root's attributes: the pod, its profile, which attempt, its gang."""
    attrs = pod_attributes(pod.namespace, pod.name, pod.uid)
    attrs["splitsched.profile"] = pod.scheduler_name
    attrs["splitsched.attempt"] = attempt
    if pod.group is not None:
        attrs["splitsched.gang.group"] = f"{pod.namespace}/{pod.group.name}"
        attrs["splitsched.gang.min_member"] = pod.group.min_member
    return attrs


def cycle_spans(
    cycle: CycleTimes, in_root: otel_context.Context, *, node: str, message: str
) -> None:
    """filter (up to scoring), score and assume, from the timings of the core's steps."""
    tr = tracer()
    filter_span = tr.start_span("filter", context=in_root, start_time=cycle.start)
    feasible, total = feasible_nodes(cycle.result)
    if feasible is not None:
        filter_span.set_attribute("splitsched.feasible_nodes", feasible)
    if total is not None:
        filter_span.set_attribute("splitsched.nodes", total)
    if feasible == 0:
        set_error(filter_span, "Unschedulable", message or "no feasible node")
    filter_span.end(end_time=cycle.score_start if cycle.score_end else cycle.end)
    if cycle.score_end:
        score_span = tr.start_span("score", context=in_root, start_time=cycle.score_start)
        bind = cycle.result.bind if cycle.result is not None else None
        if bind is not None:
            score_span.set_attribute("k8s.node.name", bind.node)
            score_span.set_attribute("splitsched.score", float(bind.score))
        score_span.end(end_time=cycle.score_end)
    if cycle.assume_end:
        assume_span = tr.start_span(
            "assume",
            context=in_root,
            start_time=cycle.assume_start,
            attributes={"k8s.node.name": node},
        )
        if not cycle.assume_ok:
            set_error(assume_span, "Rejected", message or "reserve/permit rejected")
        assume_span.end(end_time=cycle.assume_end)


def gang_span(
    gang: GangTimes, root: trace.Span, *, attributes: Mapping[str, Any], message: str
) -> None:
    """The member's view of the cycle that placed (or could not place) its gang, linked to
    the first member's root: one click from any member to the others."""
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


def confirm_span(
    root: trace.Span, *, node: str, decided: str, reported_at: int, binder_id: str, now: int
) -> None:
    """`confirm`: from a binder's BOUND report (or from now, if the watch came first) to
    the watch event showing the pod on `node`; a node other than the decided one fails
    it and the root. `splitsched.binder.id` names the binder that reported, and is left
    off when the watch came first: the scheduler does not know then which binder made
    the Binding (the binder's `bind` span in the same trace says)."""
    attributes: dict[str, Any] = {
        "k8s.node.name": node,
        "splitsched.confirmed_by": "binder+watch" if reported_at else "watch",
    }
    if binder_id:
        attributes["splitsched.binder.id"] = binder_id
    confirm = tracer().start_span(
        "confirm",
        context=trace.set_span_in_context(root),
        attributes=attributes,
        start_time=reported_at or now,
    )
    if node != decided:
        set_error(confirm, "Conflict", f"bound to {node}, decided {decided}")
        set_error(root, "Conflict", f"bound to {node}, decided {decided}")
    confirm.end(end_time=now)


def bind_request_span(
    root: trace.Span, *, method: str, node: str, binder_target: str
) -> trace.Span:
    """`bind_request` (or `preempt_request` for method Preempt): the decision on its way
    to a binder, a PRODUCER child of the attempt's root."""
    attrs: dict[str, Any] = {**BINDER_RPC, "rpc.method": method, "k8s.node.name": node}
    if binder_target:
        attrs["server.address"] = binder_target
    return tracer().start_span(
        "preempt_request" if method == "Preempt" else "bind_request",
        context=trace.set_span_in_context(root),
        kind=SpanKind.PRODUCER,
        attributes=attrs,
    )


def unsampled_carrier(root: trace.Span) -> dict[str, str]:
    """The carrier of an attempt that is not sampled: its `traceparent` with the sampled
    flag off, so the binder learns so and builds nothing either ({} if no context)."""
    ctx = root.get_span_context()
    if not ctx.is_valid:
        return {}
    return {"traceparent": f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{ctx.trace_flags:02x}"}


def feasible_nodes(result: ScheduleResult | None) -> tuple[int | None, int | None]:
    """(feasible nodes, nodes) of a core `ScheduleResult`, when it says."""
    if result is None:
        return None, None
    if result.bind is not None:
        return int(result.bind.feasible_nodes), None
    wait = result.wait
    if wait is None and result.preempt is not None:
        wait = result.preempt.wait
    if wait is not None:
        return 0, int(wait.total_nodes) or None
    return None, None
