"""Tracing in process: configuration from OTEL_* variables, the log filter, and the span
trees each service builds (watcher event, scheduler attempt, binder bind with its Binding
API attempts), recorded by the SDK's in-memory exporter. The end-to-end version, with the
three processes and an OTLP receiver, is tests/e2e/test_tracing.py."""

from __future__ import annotations

import asyncio
import dataclasses
import io
import json
import logging
import random
import threading
from collections.abc import Iterator
from typing import Any, cast

import grpc
import pytest
from aiohttp import web
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from services.binder.kubeapi import KubeClient, KubeEndpoint
from services.binder.metrics import BinderMetrics
from services.binder.reporter import OutcomeReporter
from services.binder.server import BinderServicer, job_from_request
from services.binder.worker import BindingPool
from services.scheduler.api import SchedulerApi
from services.scheduler.main import SchedulerService
from services.scheduler.state import Decision, Outcome, SchedulerState, Unschedulable
from services.watcher import listwatch, ring
from splitsched.core import algorithm, models, profiles
from splitsched.core.cache import SchedulerCache
from splitsched.core.clock import FakeClock
from splitsched.core.queue import SchedulingQueue
from splitsched.runtime import grpcsrv, logs, tracing
from splitsched.v1 import binder_pb2, scheduler_pb2, scheduler_pb2_grpc, watcher_pb2

GI = 1024**3
OTEL_VARS = (
    "OTEL_SDK_DISABLED",
    "OTEL_TRACES_EXPORTER",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_PROTOCOL",
    "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
    "OTEL_SERVICE_NAME",
)


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    """Tracing on for this test, spans recorded synchronously; off again afterwards."""
    memory = InMemorySpanExporter()
    assert tracing.setup("test", exporter=memory)
    try:
        yield memory
    finally:
        tracing.shutdown()


def by_name(spans: list[ReadableSpan], name: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name == name]


def one(spans: list[ReadableSpan], name: str) -> ReadableSpan:
    found = by_name(spans, name)
    assert len(found) == 1, f"{name}: {[s.name for s in spans]}"
    return found[0]


def parent_id(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def span_id(span: ReadableSpan) -> int:
    assert span.context is not None
    return int(span.context.span_id)


def trace_id(span: ReadableSpan) -> int:
    assert span.context is not None
    return int(span.context.trace_id)


# ---- configuration --------------------------------------------------------------------------


def test_exporters_from_env() -> None:
    assert tracing.exporters_from_env({}) == []
    assert tracing.exporters_from_env({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317"}) == ["otlp"]
    assert tracing.exporters_from_env({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c"}) == [
        "otlp"
    ]
    assert tracing.exporters_from_env({"OTEL_TRACES_EXPORTER": "console,otlp"}) == [
        "console",
        "otlp",
    ]
    assert tracing.exporters_from_env({"OTEL_TRACES_EXPORTER": "none"}) == []
    endpoint_but_disabled = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c", "OTEL_SDK_DISABLED": "true"}
    assert tracing.exporters_from_env(endpoint_but_disabled) == []
    assert tracing.protocol_from_env({}) == "http/protobuf"
    assert tracing.protocol_from_env({"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}) == "grpc"
    both = {"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http"}
    assert tracing.protocol_from_env(both) == "http"


def test_off_when_nothing_is_configured(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in OTEL_VARS:
        monkeypatch.delenv(var, raising=False)
    threads = threading.active_count()
    assert not tracing.setup("scheduler")
    assert not tracing.enabled()
    assert isinstance(tracing.tracer(), trace.NoOpTracer)
    assert tracing.bind_call(
        carrier={}, namespace="ns", name="p", uid="u", node="n", decision_id="d", accepted_at=0.0
    ) is tracing.NO_CALL  # fmt: skip
    assert threading.active_count() == threads  # no exporter thread


def test_console_exporter_and_service_name(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in OTEL_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "console")
    try:
        assert tracing.setup("binder")
        assert tracing.enabled()
        provider = tracing._state.provider
        assert provider.resource.attributes["service.name"] == "splitsched-binder"
    finally:
        tracing.shutdown()
    assert not tracing.enabled()
    monkeypatch.setenv("OTEL_SERVICE_NAME", "my-binder")
    try:
        assert tracing.setup("binder")
        assert tracing._state.provider.resource.attributes["service.name"] == "my-binder"
    finally:
        tracing.shutdown()


def test_otlp_protocol_selects_the_exporter() -> None:
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as Grpc
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as Http

    grpc_exporter = tracing._exporter("otlp", {"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"})
    http_exporter = tracing._exporter("otlp", {"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"})
    default = tracing._exporter("otlp", {})
    try:
        assert isinstance(grpc_exporter, Grpc)
        assert isinstance(http_exporter, Http)
        assert isinstance(default, Http)
        with pytest.raises(ValueError, match="unsupported OTLP protocol"):
            tracing._exporter("otlp", {"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"})
        with pytest.raises(ValueError, match="unknown OTEL_TRACES_EXPORTER"):
            tracing._exporter("zipkin", {})
    finally:
        for exporter in (grpc_exporter, http_exporter, default):
            exporter.shutdown()


def test_carriers_round_trip(exporter: InMemorySpanExporter) -> None:
    span = tracing.tracer().start_span("x")
    carrier = tracing.inject(span)
    span.end()
    assert carrier["traceparent"].startswith("00-")
    ctx = tracing.span_context(carrier)
    assert ctx is not None
    assert ctx.trace_id == span.get_span_context().trace_id
    assert ctx.span_id == span.get_span_context().span_id
    assert tracing.span_context({}) is None
    metadata: list[tuple[str, str | bytes]] = [
        ("traceparent", carrier["traceparent"].encode()),
        ("user-agent", "x"),
    ]
    assert tracing.from_metadata(metadata) == {"traceparent": carrier["traceparent"]}


# ---- logs -----------------------------------------------------------------------------------


def test_log_lines_inside_a_span_carry_its_ids(exporter: InMemorySpanExporter) -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logs.JsonFormatter("test"))
    handler.addFilter(logs.TraceContextFilter())
    logger = logging.getLogger("tracing-unit-test")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        with tracing.tracer().start_as_current_span("work") as span:
            logger.info("inside")
        logger.info("outside")
    finally:
        logger.removeHandler(handler)
    inside, outside = (json.loads(line) for line in stream.getvalue().splitlines())
    ctx = span.get_span_context()
    assert inside["trace_id"] == format(ctx.trace_id, "032x")
    assert inside["span_id"] == format(ctx.span_id, "016x")
    assert "trace_id" not in outside and "span_id" not in outside
    human = logs.HumanFormatter("test")
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "hello", None, None)
    record.trace_id, record.span_id = "a" * 32, "b" * 16
    assert human.format(record).endswith(f"hello trace_id={'a' * 32} span_id={'b' * 16}")


# ---- watcher --------------------------------------------------------------------------------


def pending_pod_json(name: str, node: str = "") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}", "resourceVersion": "7"},
        "spec": {
            "schedulerName": "splitsched",
            "nodeName": node,
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}],
        },
        "status": {"phase": "Pending"},
    }


def test_watcher_puts_its_span_context_on_pending_pod_events(
    exporter: InMemorySpanExporter,
) -> None:
    converter = listwatch.Converter()
    entry = converter.pod(pending_pod_json("p"), 1_700_000_000.0)
    assert entry is not None
    event = watcher_pb2.ClusterEvent.FromString(ring._header(5, ring.ADDED) + entry.body)
    assert event.pod.name == "p" and event.resource_version == "7"
    span = one(list(exporter.get_finished_spans()), "watch_event")
    assert span.kind is SpanKind.PRODUCER
    assert span.attributes is not None
    assert span.attributes["k8s.pod.name"] == "p"
    assert span.attributes["k8s.namespace.name"] == "ns"
    ctx = tracing.span_context(dict(event.trace_context))
    assert ctx is not None and ctx.span_id == span_id(span)
    # An assigned pod starts no trace.
    bound = converter.pod(pending_pod_json("q", node="n1"), 1_700_000_000.0)
    assert bound is not None
    assigned = watcher_pb2.ClusterEvent.FromString(ring._header(6, ring.ADDED) + bound.body)
    assert not assigned.trace_context
    assert len(by_name(list(exporter.get_finished_spans()), "watch_event")) == 1


def test_watcher_events_carry_no_context_when_tracing_is_off() -> None:
    assert not tracing.enabled()
    entry = listwatch.Converter().pod(pending_pod_json("p"), 1_700_000_000.0)
    assert entry is not None
    event = watcher_pb2.ClusterEvent.FromString(ring._header(5, ring.ADDED) + entry.body)
    assert event.pod.name == "p" and not event.trace_context


# ---- scheduler ------------------------------------------------------------------------------


def node(name: str, cpu: int = 1000) -> models.Node:
    return models.Node(
        name=name, allocatable={models.CPU: cpu, models.MEMORY: 4 * GI, models.PODS: 10}
    )


def pod(name: str, cpu: int = 600) -> models.Pod:
    return models.Pod(
        uid=f"uid-{name}",
        namespace="ns",
        name=name,
        scheduler_name="splitsched",
        containers=(models.Container("c", {models.CPU: cpu}),),
    )


def traced_state() -> tuple[SchedulerState, tracing.SchedulingTraces, FakeClock]:
    clock = FakeClock(100.0)
    algo = algorithm.FrameworkAlgorithm(
        cache=SchedulerCache(clock=clock),
        profiles=profiles.load_profiles(None),
        rng=random.Random(0),
    )
    state = SchedulerState(
        algo=algo, queue=SchedulingQueue(clock=clock), clock=clock, scheduler_id="s"
    )
    state.mark_synced()
    traces = tracing.SchedulingTraces()
    traces.install(algo, lambda uid: state.queue.get(uid))
    return state, traces, clock


def run_attempt(
    state: SchedulerState, traces: tracing.SchedulingTraces
) -> Decision | Unschedulable:
    traces.begin()
    out = state.schedule_one()
    assert out is not None and len(out) == 1
    outcome = out[0]
    if isinstance(outcome, Decision):
        traces.attempt(
            outcome.pod,
            result="scheduled",
            queued=outcome.queued,
            decision_id=outcome.decision_id,
            node=outcome.node,
        )
    else:
        traces.attempt(outcome.pod, result="unschedulable", message=outcome.message)
    return outcome


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
    call = tracing.bind_call(
        carrier=carrier, namespace="ns", name="a", uid="uid-a", node=decision.node,
        decision_id=decision.decision_id, accepted_at=0.0,
    )  # fmt: skip
    assert call is tracing.NO_CALL
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


# ---- binder ---------------------------------------------------------------------------------


class CollectingReporter:
    """Stands in for `OutcomeReporter` (the pool only calls `put`)."""

    def __init__(self) -> None:
        self.outcomes: list[scheduler_pb2.BindingOutcome] = []

    async def put(self, outcome: scheduler_pb2.BindingOutcome) -> None:
        self.outcomes.append(outcome)


def flaky_api(fail_first: int) -> web.Application:
    """A Binding endpoint answering 500 `fail_first` times, then 201; Events accepted."""
    calls = {"n": 0}

    async def bind(_: web.Request) -> web.Response:
        calls["n"] += 1
        if calls["n"] <= fail_first:
            return web.json_response({"kind": "Status", "message": "etcd hiccup"}, status=500)
        return web.json_response({"kind": "Status", "status": "Success"}, status=201)

    async def event(_: web.Request) -> web.Response:
        return web.json_response({}, status=201)

    app = web.Application()
    app.router.add_post("/api/v1/namespaces/{ns}/pods/{name}/binding", bind)
    app.router.add_post("/apis/events.k8s.io/v1/namespaces/{ns}/events", event)
    return app


def test_binder_bind_span_continues_the_trace_with_a_child_per_attempt(
    exporter: InMemorySpanExporter,
) -> None:
    parent = tracing.tracer().start_span("bind_request", kind=SpanKind.PRODUCER)
    carrier = tracing.inject(parent)
    parent.end()

    async def scenario() -> scheduler_pb2.BindingOutcome:
        runner = web.AppRunner(flaky_api(fail_first=1))
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        kube = KubeClient(KubeEndpoint(host=f"http://127.0.0.1:{port}"))
        reporter = CollectingReporter()
        pool = BindingPool(
            kube=kube, reporter=cast(OutcomeReporter, reporter), metrics=BinderMetrics(),
            binder_id="b-0", workers=1, backoff_base=0.01, backoff_cap=0.02,
            rng=random.Random(1),
        )  # fmt: skip
        pool.start()
        try:
            request = binder_pb2.BindRequest(decision_id="d-1", node="n1", max_attempts=3)
            request.pod.namespace, request.pod.name, request.pod.uid = "ns", "p", "uid-p"
            request.deadline.FromSeconds(int(pool._clock()) + 30)
            # The context arrives in gRPC metadata only: the servicer copies it over.
            context = FakeContext([("traceparent", carrier["traceparent"])])
            response = await BinderServicer(pool).Bind(request, context)  # type: ignore[arg-type]
            assert response.accepted, response.reason
            for _ in range(200):
                if reporter.outcomes:
                    break
                await asyncio.sleep(0.01)
            assert job_from_request(request).trace_context == carrier
        finally:
            await pool.shutdown(1.0)
            await kube.close()
            await runner.cleanup()
        assert len(reporter.outcomes) == 1
        return reporter.outcomes[0]

    outcome = asyncio.run(scenario())
    assert outcome.result == scheduler_pb2.BindingOutcome.BOUND
    spans = list(exporter.get_finished_spans())
    bind = one(spans, "bind")
    assert bind.kind is SpanKind.CONSUMER
    assert trace_id(bind) == parent.get_span_context().trace_id
    assert parent_id(bind) == parent.get_span_context().span_id
    assert bind.attributes is not None
    assert bind.attributes["k8s.pod.name"] == "p"
    assert bind.attributes["k8s.node.name"] == "n1"
    assert bind.attributes["splitsched.bind.attempts"] == 2
    attempts = sorted(
        (s for s in spans if parent_id(s) == span_id(bind)), key=lambda s: s.start_time or 0
    )
    assert [(s.attributes or {})["http.response.status_code"] for s in attempts] == [500, 201]
    assert attempts[0].status.status_code is StatusCode.ERROR
    assert (attempts[0].attributes or {})["splitsched.retry_delay_seconds"] >= 0  # type: ignore[operator]
    assert "splitsched.retry_delay_seconds" not in (attempts[1].attributes or {})
    assert (attempts[1].attributes or {})["http.request.resend_count"] == 1
    assert all(s.kind is SpanKind.CLIENT for s in attempts)
    # The outcome carries the bind span's context back to the scheduler.
    back = tracing.span_context(dict(outcome.trace_context))
    assert back is not None and back.span_id == span_id(bind)


class FakeContext:
    """The one ServicerContext method the Bind handler reads."""

    def __init__(self, metadata: list[tuple[str, str]]) -> None:
        self._metadata = metadata

    def invocation_metadata(self) -> list[tuple[str, str]]:
        return self._metadata


# ---- gangs ----------------------------------------------------------------------------------


def gang_pod(name: str, *, cpu: int, min_member: int) -> models.Pod:
    return dataclasses.replace(pod(name, cpu=cpu), group=models.PodGroupRef("g", min_member))


def gang_attempt(
    state: SchedulerState, traces: tracing.SchedulingTraces
) -> list[Decision | Unschedulable]:
    """One cycle traced as the scheduler's loop traces it (its own `_trace_attempts`)."""
    traces.begin()
    outcomes = state.schedule_one()
    assert outcomes is not None
    SchedulerService._trace_attempts(traces, outcomes)
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
