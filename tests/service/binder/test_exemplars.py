"""Exemplars on the binder's bind latency (issue 21): a sampled traced pod's observation
carries its trace id, served on /metrics in the OpenMetrics format only; the Prometheus
text format (what a scraper gets without asking) stays as it was."""

from __future__ import annotations

import asyncio
import re
import urllib.request

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client.openmetrics.parser import text_string_to_metric_families
from prometheus_client.parser import text_string_to_metric_families as parse_text

from services.binder.metrics import BinderMetrics
from splitsched.runtime.httpsrv import serve_http
from splitsched.v1 import scheduler_pb2
from tests.support.binder import add_pod, bind_request, harness

OPENMETRICS = "application/openmetrics-text; version=1.0.0"
FAMILY = "splitsched_binder_bind_duration_seconds"
TRACE_ID, SPAN_ID = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
SAMPLED = f"00-{TRACE_ID}-{SPAN_ID}-01"


async def bind_one(traceparent: str) -> BinderMetrics:
    """A binder binds one pod whose request carries `traceparent`; its metrics after."""
    async with harness() as h:
        add_pod(h, "p")
        request = bind_request("d-1", "p")
        request.trace_context["traceparent"] = traceparent
        assert (await h.stub.Bind(request)).accepted
        assert (await h.outcome("d-1")).result == scheduler_pb2.BindingOutcome.BOUND
        return h.metrics


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
    metrics = asyncio.run(bind_one(SAMPLED))
    content_type, body = asyncio.run(scrape(metrics, OPENMETRICS))
    assert content_type.startswith("application/openmetrics-text"), content_type
    assert exemplar_trace_ids(body) == [TRACE_ID]
    # The span is the binder's `bind`, which continued the request's trace.
    (bind,) = [s for s in exporter.get_finished_spans() if s.name == "bind"]
    assert bind.context is not None
    assert f'span_id="{bind.context.span_id:016x}"' in body

    for accept in (None, "text/plain", "*/*"):
        content_type, plain = asyncio.run(scrape(metrics, accept))
        assert content_type.startswith("text/plain; version=0.0.4"), (accept, content_type)
        assert "trace_id" not in plain and " # {" not in plain
        (family,) = [f for f in parse_text(plain) if f.name == FAMILY]
        assert {s.name: s.value for s in family.samples}[f"{FAMILY}_count"] == 1


def test_with_the_binders_tracing_off_the_exemplar_is_the_requests_trace() -> None:
    body = asyncio.run(scrape(asyncio.run(bind_one(SAMPLED)), OPENMETRICS))[1]
    assert exemplar_trace_ids(body) == [TRACE_ID]
    assert f'span_id="{SPAN_ID}"' in body  # the scheduler's bind_request


def test_an_unsampled_bind_has_no_exemplar(exporter: InMemorySpanExporter) -> None:
    metrics = asyncio.run(bind_one(f"00-{TRACE_ID}-{SPAN_ID}-00"))
    assert exemplar_trace_ids(asyncio.run(scrape(metrics, OPENMETRICS))[1]) == []
    assert re.search(rf"^{FAMILY}_count 1", asyncio.run(scrape(metrics, None))[1], re.M)
