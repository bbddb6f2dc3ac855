"""The binder's spans in process: a Bind continues the scheduler's trace with a span per
binding and a child per Binding API attempt (against an aiohttp API answering 500 then 201),
recorded by the SDK's in-memory exporter."""

from __future__ import annotations

import asyncio
import random
from typing import cast

from aiohttp import web
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from services.binder.kubeapi import KubeClient, KubeEndpoint
from services.binder.metrics import BinderMetrics
from services.binder.reporter import OutcomeReporter
from services.binder.server import BinderServicer, job_from_request
from services.binder.worker import BindingPool
from splitsched.runtime import tracing
from splitsched.v1 import binder_pb2, scheduler_pb2
from tests.support.spans import one, parent_id, span_id, trace_id


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
    assert bind.attributes["splitsched.binder.id"] == "b-0"
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
    """The ServicerContext methods the Bind handler reads: the metadata, and who calls
    (a plaintext client here)."""

    def __init__(self, metadata: list[tuple[str, str]]) -> None:
        self._metadata = metadata

    def invocation_metadata(self) -> list[tuple[str, str]]:
        return self._metadata

    def auth_context(self) -> dict[str, list[bytes]]:
        return {}

    def peer(self) -> str:
        return "ipv4:127.0.0.1:1"
