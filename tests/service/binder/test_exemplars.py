"""Exemplars on the binder's bind latency (issue 21): a sampled traced pod's observation
carries its trace id, served on /metrics in the OpenMetrics format only; the Prometheus
text format (what a scraper gets without asking) stays as it was."""

from __future__ import annotations

import asyncio
import random
import re
import urllib.request
from typing import cast

from aiohttp import web
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from prometheus_client.openmetrics.parser import text_string_to_metric_families
from prometheus_client.parser import text_string_to_metric_families as parse_text

from services.binder.kubeapi import KubeClient, KubeEndpoint
from services.binder.metrics import BinderMetrics
from services.binder.reporter import OutcomeReporter
from services.binder.server import job_from_request
from services.binder.worker import BindingPool
from splitsched.runtime import tracing
from splitsched.runtime.httpsrv import serve_http
from splitsched.v1 import binder_pb2, scheduler_pb2

OPENMETRICS = "application/openmetrics-text; version=1.0.0"
FAMILY = "splitsched_binder_bind_duration_seconds"
UNSAMPLED = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"


class CollectingReporter:
    """Stands in for `OutcomeReporter` (the pool only calls `put`)."""

    def __init__(self) -> None:
        self.outcomes: list[scheduler_pb2.BindingOutcome] = []

    async def put(self, outcome: scheduler_pb2.BindingOutcome) -> None:
        self.outcomes.append(outcome)


async def bind_one(metrics: BinderMetrics, carrier: dict[str, str]) -> None:
    """One decision bound by a pool against an API server that answers 201."""

    async def bind(_: web.Request) -> web.Response:
        return web.json_response({"kind": "Status", "status": "Success"}, status=201)

    async def event(_: web.Request) -> web.Response:
        return web.json_response({}, status=201)

    app = web.Application()
    app.router.add_post("/api/v1/namespaces/{ns}/pods/{name}/binding", bind)
    app.router.add_post("/apis/events.k8s.io/v1/namespaces/{ns}/events", event)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    kube = KubeClient(KubeEndpoint(host=f"http://127.0.0.1:{port}"))
    reporter = CollectingReporter()
    pool = BindingPool(
        kube=kube, reporter=cast(OutcomeReporter, reporter), metrics=metrics,
        binder_id="b-0", workers=1, rng=random.Random(1),
    )  # fmt: skip
    pool.start()
    try:
        request = binder_pb2.BindRequest(decision_id="d-1", node="n1", max_attempts=3)
        request.pod.namespace, request.pod.name, request.pod.uid = "ns", "p", "uid-p"
        request.deadline.FromSeconds(int(pool._clock()) + 30)
        request.trace_context.update(carrier)
        assert pool.submit(job_from_request(request)) is None
        for _ in range(300):
            if reporter.outcomes:
                break
            await asyncio.sleep(0.01)
    finally:
        await pool.shutdown(1.0)
        await kube.close()
        await runner.cleanup()
    assert [o.result for o in reporter.outcomes] == [scheduler_pb2.BindingOutcome.BOUND]


async def scrape(metrics: BinderMetrics, accept: str | None) -> tuple[str, str]:
    """(Content-Type, body) of /metrics served by `serve_http`, asked with `accept`."""
    runner, port = await serve_http(
        host="127.0.0.1", port=0, ready=lambda: True, metrics=metrics.registry
    )
    headers = {"Accept": accept} if accept is not None else {}
    request = urllib.request.Request(f"http://127.0.0.1:{port}/metrics", headers=headers)
    try:

        def get() -> tuple[str, str]:
            with urllib.request.urlopen(request, timeout=5) as resp:
                return str(resp.headers["Content-Type"]), resp.read().decode()

        return await asyncio.to_thread(get)
    finally:
        await runner.cleanup()


def exemplar_trace_ids(body: str) -> list[str]:
    """The trace ids of the bind latency buckets' exemplars, read by prometheus_client's
    OpenMetrics parser (which also refuses a malformed exposition)."""
    families = text_string_to_metric_families(body)  # type: ignore[no-untyped-call]
    (family,) = [f for f in families if f.name == FAMILY]
    return [s.exemplar.labels["trace_id"] for s in family.samples if s.exemplar is not None]


def test_a_sampled_bind_carries_its_trace_id_in_openmetrics_only(
    exporter: InMemorySpanExporter,
) -> None:
    parent = tracing.tracer().start_span("bind_request", kind=SpanKind.PRODUCER)
    carrier = tracing.inject(parent)
    parent.end()
    metrics = BinderMetrics()
    asyncio.run(bind_one(metrics, carrier))

    content_type, body = asyncio.run(scrape(metrics, OPENMETRICS))
    assert content_type.startswith("application/openmetrics-text"), content_type
    assert exemplar_trace_ids(body) == [f"{parent.get_span_context().trace_id:032x}"]

    for accept in (None, "text/plain", "*/*"):
        content_type, plain = asyncio.run(scrape(metrics, accept))
        assert content_type.startswith("text/plain; version=0.0.4"), (accept, content_type)
        assert "trace_id" not in plain and " # {" not in plain
        (family,) = [f for f in parse_text(plain) if f.name == FAMILY]
        assert {s.name: s.value for s in family.samples}[f"{FAMILY}_count"] == 1


def test_an_unsampled_bind_has_no_exemplar(exporter: InMemorySpanExporter) -> None:
    metrics = BinderMetrics()
    asyncio.run(bind_one(metrics, {"traceparent": UNSAMPLED}))
    assert exemplar_trace_ids(asyncio.run(scrape(metrics, OPENMETRICS))[1]) == []
    assert re.search(rf"^{FAMILY}_count 1", asyncio.run(scrape(metrics, None))[1], re.M)
