"""The scheduler's spans in process: an attempt is one trace from the watch event to the
watch's confirmation, a retry is a linked new trace, decisions carry their attempt's trace id
(through a real Scheduler API server), an unsampled pod costs no span, refused and failed
decisions end their trace failed, and a gang's cycle shows on each member's trace. Spans are
recorded by the SDK's in-memory exporter; the end-to-end version, with the three processes
and an OTLP receiver, is tests/e2e/test_tracing.py. Setup and the log filter:
tests/unit/runtime/test_tracing.py; the watcher's and the binder's spans: their folders'
test_tracing.py.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time

import grpc
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from services.binder.spans import NO_CALL, bind_call
from services.scheduler.api import SchedulerApi
from services.scheduler.loops import trace_attempts
from services.scheduler.state import Decision, Outcome, SchedulerState, Unschedulable
from services.scheduler.traces import SchedulingTraces
from splitsched.core import models
from splitsched.runtime import grpcsrv, tracing
from splitsched.v1 import scheduler_pb2, scheduler_pb2_grpc
from tests.support.builders import small_node as node
from tests.support.builders import splitsched_pod as pod
from tests.support.spans import by_name, one, parent_id, span_id, trace_id
from tests.support.traced import run_attempt, traced_state


def test_scheduler_attempt_is_one_trace_from_watch_event_to_confirmation(
    exporter: InMemorySpanExporter,
) -> None:
    state, traces, _ = traced_state()
    watch_carrier = tracing.producer_span("watch_event", attributes={}, at=1_700_000_000.0)
    state.apply_node("ADDED", node("n1"))
    state.apply_node("ADDED", node("n2"))
    state.apply_pod("ADDED", pod("a"))
    traces.observed("uid-a", watch_carrier)
    decision = run_attempt(state, traces)
    assert isinstance(decision, Decision)
    assert not by_name(list(exporter.get_finished_spans()), "schedule_pod")  # still open
    carrier = traces.bind_request("uid-a", decision.decision_id)
    assert carrier["traceparent"]
    traces.bind_sent("uid-a", decision.decision_id, accepted=True)
    assert state.on_outcome(decision_id=decision.decision_id, result=Outcome.BOUND)
    traces.outcome("uid-a", decision.decision_id, kind="BOUND", message="", binder_id="b-0")
    traces.confirmed("uid-a", decision.node)
    assert traces.open_attempts == 0

    spans = list(exporter.get_finished_spans())
    watch = one(spans, "watch_event")
    root = one(spans, "schedule_pod")
    assert trace_id(root) == trace_id(watch) and parent_id(root) == span_id(watch)
    assert root.attributes is not None
    assert root.attributes["k8s.pod.name"] == "a"
    assert root.attributes["k8s.namespace.name"] == "ns"
    assert root.attributes["splitsched.profile"] == "splitsched"
    assert root.attributes["splitsched.attempt"] == 1
    assert root.attributes["k8s.node.name"] == decision.node
    assert root.status.status_code is not StatusCode.ERROR
    children = {s.name: s for s in spans if parent_id(s) == span_id(root)}
    assert set(children) == {"queue_wait", "filter", "score", "assume", "bind_request", "confirm"}
    assert children["filter"].attributes is not None
    assert children["filter"].attributes["splitsched.feasible_nodes"] == 2
    assert children["bind_request"].kind is SpanKind.PRODUCER
    bind_ctx = tracing.span_context(carrier)
    assert bind_ctx is not None and bind_ctx.span_id == span_id(children["bind_request"])
    assert children["confirm"].attributes is not None
    assert children["confirm"].attributes["splitsched.confirmed_by"] == "binder+watch"
    for child in children.values():
        assert child.start_time is not None and child.end_time is not None
        assert root.start_time is not None and root.end_time is not None
        assert root.start_time <= child.start_time <= child.end_time <= root.end_time


def test_unschedulable_attempt_fails_and_the_retry_is_a_linked_new_trace(
    exporter: InMemorySpanExporter,
) -> None:
    state, traces, clock = traced_state()
    watch_carrier = tracing.producer_span("watch_event", attributes={}, at=1_700_000_000.0)
    state.apply_node("ADDED", node("n1", cpu=500))
    state.apply_pod("ADDED", pod("big"))
    traces.observed("uid-big", watch_carrier)
    first = run_attempt(state, traces)
    assert isinstance(first, Unschedulable)
    spans = list(exporter.get_finished_spans())
    root1 = one(spans, "schedule_pod")
    assert root1.status.status_code is StatusCode.ERROR
    assert root1.status.description == first.message
    assert parent_id(root1) == span_id(one(spans, "watch_event"))
    filter1 = one(spans, "filter")
    assert filter1.attributes is not None and filter1.attributes["splitsched.feasible_nodes"] == 0
    assert filter1.status.status_code is StatusCode.ERROR

    state.apply_node("ADDED", node("n2", cpu=1000))  # the pod can fit now
    clock.advance(20.0)
    state.queue.flush()
    second = run_attempt(state, traces)
    assert isinstance(second, Decision)
    traces.confirmed("uid-big", second.node)
    roots = by_name(list(exporter.get_finished_spans()), "schedule_pod")
    assert len(roots) == 2
    root2 = roots[1]
    assert root2.parent is None and trace_id(root2) != trace_id(root1)
    assert root2.attributes is not None and root2.attributes["splitsched.attempt"] == 2
    links = {str((link.attributes or {})["splitsched.link"]): link.context for link in root2.links}
    assert links["previous_attempt"].span_id == span_id(root1)
    assert links["watch_event"].span_id == parent_id(root1)


def test_a_retry_trace_starts_when_the_pod_is_back_in_the_active_queue(
    exporter: InMemorySpanExporter,
) -> None:
    # Issue 21: a retry's trace started when its first attempt ended, so it lasted as
    # long as the pod waited for room (docs/observability.md promises it does not).
    two_hours_ago = time.monotonic() - 7200.0
    state, traces, clock = traced_state(two_hours_ago)
    state.apply_node("ADDED", node("n1", cpu=500))
    state.apply_pod("ADDED", pod("big"))
    assert isinstance(run_attempt(state, traces), Unschedulable)
    clock.advance(3600.0)  # an hour in the unschedulable pool
    state.apply_node("ADDED", node("n2", cpu=1000))  # moves it to active
    second = run_attempt(state, traces)
    assert isinstance(second, Decision)
    traces.confirmed("uid-big", second.node)
    spans = list(exporter.get_finished_spans())
    root2 = by_name(spans, "schedule_pod")[1]
    (wait,) = [s for s in by_name(spans, "queue_wait") if parent_id(s) == span_id(root2)]
    assert root2.start_time is not None and wait.start_time == root2.start_time
    # Within a second of the node's arrival (the clock conversion's rounding), not an
    # hour before it.
    assert abs(root2.start_time - tracing.wall_ns(clock.now())) < 1_000_000_000


async def watched_decisions(servicer: SchedulerApi) -> list[scheduler_pb2.Decision]:
    """The replay of every decision and outcome, through a real server and channel."""
    server = await grpcsrv.serve(
        listen="127.0.0.1:0",
        servicers=[(scheduler_pb2_grpc.add_SchedulerServicer_to_server, servicer)],
        service_names=["splitsched.v1.Scheduler"],
    )
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            stub = scheduler_pb2_grpc.SchedulerStub(channel)
            request = scheduler_pb2.WatchDecisionsRequest(include_outcomes=True, replay=100)
            stream = stub.WatchDecisions(request)
            out: list[scheduler_pb2.Decision] = []
            for _ in servicer.state.recent_events:
                out.append(await stream.read())  # type: ignore[arg-type]
            stream.cancel()
            return out
    finally:
        await server.stop(0)


def test_decisions_carry_the_trace_of_their_attempt(exporter: InMemorySpanExporter) -> None:
    state, traces, clock = traced_state()
    state.apply_node("ADDED", node("n1", cpu=500))
    state.apply_pod("ADDED", pod("big"))
    # The API is made before the first attempt, as the scheduler wires it.
    api = SchedulerApi(state=state, on_change=lambda: None, trace_id_of=traces.trace_id)
    untraced = SchedulerApi(state=state, on_change=lambda: None)
    first = run_attempt(state, traces)
    assert isinstance(first, Unschedulable)
    state.apply_node("ADDED", node("n2", cpu=1000))
    clock.advance(20.0)
    state.queue.flush()
    second = run_attempt(state, traces)
    assert isinstance(second, Decision)
    assert state.on_outcome(decision_id=second.decision_id, result=Outcome.BOUND)
    traces.confirmed("uid-big", second.node)
    root1, root2 = by_name(list(exporter.get_finished_spans()), "schedule_pod")
    assert trace_id(root1) != trace_id(root2)

    async def go() -> None:
        # A stream opened later replays all three with the trace of the attempt behind each.
        decisions = await watched_decisions(api)
        kinds = [scheduler_pb2.Decision.Kind.Name(d.kind) for d in decisions]
        assert kinds == ["UNSCHEDULABLE", "SCHEDULED", "BOUND"]
        assert [int(d.trace_id, 16) for d in decisions] == [
            trace_id(root1),
            trace_id(root2),
            trace_id(root2),
        ]
        # Tracing off: no trace id.
        assert {d.trace_id for d in await watched_decisions(untraced)} == {""}

    asyncio.run(go())


def test_a_pod_the_watcher_did_not_sample_costs_no_span_but_passes_the_decision_on(
    exporter: InMemorySpanExporter,
) -> None:
    state, traces, _ = traced_state()
    unsampled = f"00-{'ab' * 16}-{'cd' * 8}-00"
    state.apply_node("ADDED", node("n1"))
    state.apply_pod("ADDED", pod("a"))
    traces.observed("uid-a", {"traceparent": unsampled})
    decision = run_attempt(state, traces)
    assert isinstance(decision, Decision)
    carrier = traces.bind_request("uid-a", decision.decision_id)
    # The binder is told "not sampled" in the same trace, so it builds nothing either.
    traceparent = carrier["traceparent"]
    assert traceparent.startswith(f"00-{'ab' * 16}-") and traceparent.endswith("-00")
    call = bind_call(
        carrier=carrier, namespace="ns", name="a", uid="uid-a", node=decision.node,
        decision_id=decision.decision_id, accepted_at=0.0,
    )  # fmt: skip
    assert call is NO_CALL
    traces.bind_sent("uid-a", decision.decision_id, accepted=True)
    traces.confirmed("uid-a", decision.node)
    assert traces.open_attempts == 0
    assert list(exporter.get_finished_spans()) == []


def test_refused_and_failed_decisions_end_their_trace_failed(
    exporter: InMemorySpanExporter,
) -> None:
    state, traces, _ = traced_state()
    state.apply_node("ADDED", node("n1"))
    state.apply_pod("ADDED", pod("a"))
    state.apply_pod("ADDED", pod("b", cpu=100))
    da = run_attempt(state, traces)
    db = run_attempt(state, traces)
    assert isinstance(da, Decision) and isinstance(db, Decision)
    traces.bind_request("uid-a", da.decision_id)
    traces.bind_sent("uid-a", da.decision_id, accepted=False, reason="binder queue full")
    traces.outcome("uid-b", db.decision_id, kind="CONFLICT", message="bound elsewhere",
                   binder_id="b-1")  # fmt: skip
    assert traces.open_attempts == 0
    roots = {
        (s.attributes or {})["k8s.pod.name"]: s
        for s in by_name(list(exporter.get_finished_spans()), "schedule_pod")
    }
    assert roots["a"].status.status_code is StatusCode.ERROR
    assert "binder queue full" in (roots["a"].status.description or "")
    assert roots["b"].status.status_code is StatusCode.ERROR
    assert (roots["b"].attributes or {})["error.type"] == "Conflict"


# ---- gangs ----------------------------------------------------------------------------------


def gang_pod(name: str, *, cpu: int, min_member: int) -> models.Pod:
    return dataclasses.replace(pod(name, cpu=cpu), group=models.PodGroupRef("g", min_member))


def gang_attempt(state: SchedulerState, traces: SchedulingTraces) -> list[Decision | Unschedulable]:
    """One cycle traced as the scheduler's loop traces it (its own `trace_attempts`)."""
    traces.begin()
    outcomes = state.schedule_one()
    assert outcomes is not None
    trace_attempts(traces, outcomes)
    return outcomes


def test_each_gang_member_trace_shows_the_gang_cycle_linked_to_the_first_member(
    exporter: InMemorySpanExporter,
) -> None:
    state, traces, _ = traced_state()
    for n in ("n1", "n2", "n3"):
        state.apply_node("ADDED", node(n))
    for name in ("m0", "m1", "m2"):
        state.apply_pod("ADDED", gang_pod(name, cpu=600, min_member=3))
    outcomes = gang_attempt(state, traces)
    assert len(outcomes) == 3 and all(isinstance(o, Decision) for o in outcomes)
    for o in outcomes:
        assert isinstance(o, Decision)
        traces.confirmed(o.pod.uid, o.node)
    spans = list(exporter.get_finished_spans())
    roots = {str((s.attributes or {})["k8s.pod.name"]): s for s in by_name(spans, "schedule_pod")}
    assert len(roots) == 3 and len({trace_id(r) for r in roots.values()}) == 3  # one each
    gang_spans = by_name(spans, "gang_cycle")
    assert len(gang_spans) == 3
    by_parent = {parent_id(s): s for s in gang_spans}
    first = outcomes[0].pod.name
    for member, root in roots.items():
        assert (root.attributes or {})["splitsched.gang.group"] == "ns/g"
        span = by_parent[span_id(root)]  # a child of this member's own root
        attrs = span.attributes or {}
        assert attrs["splitsched.gang.group"] == "ns/g"
        assert attrs["splitsched.gang.min_member"] == 3
        assert attrs["splitsched.gang.members"] == 3
        assert attrs["splitsched.gang.placed"] == 3
        assert attrs["splitsched.gang.result"] == "placed"
        assert span.status.status_code is not StatusCode.ERROR
        links = [link.context.span_id for link in span.links]
        assert links == ([] if member == first else [span_id(roots[first])])


def test_a_gang_that_does_not_fit_shows_a_failed_gang_cycle_with_its_blocking_member(
    exporter: InMemorySpanExporter,
) -> None:
    state, traces, _ = traced_state()
    for n in ("n1", "n2"):
        state.apply_node("ADDED", node(n))
    for name in ("m0", "m1", "m2"):
        state.apply_pod("ADDED", gang_pod(name, cpu=600, min_member=3))
    outcomes = gang_attempt(state, traces)
    assert len(outcomes) == 1 and isinstance(outcomes[0], Unschedulable)
    spans = list(exporter.get_finished_spans())
    root = one(spans, "schedule_pod")
    span = one(spans, "gang_cycle")
    assert parent_id(span) == span_id(root)
    attrs = span.attributes or {}
    assert attrs["splitsched.gang.result"] == "unschedulable"
    assert attrs["splitsched.gang.placed"] == 0 and attrs["splitsched.gang.members"] == 3
    assert str(attrs["splitsched.gang.blocking_member"]).startswith("ns/m")
    assert span.status.status_code is StatusCode.ERROR
    assert state.cache.assumed_pods() == []  # and nothing of the gang is held
