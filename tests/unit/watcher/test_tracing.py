"""The watcher's spans: a pending pod's watch event starts a trace (a PRODUCER span) whose
context rides on the event to the scheduler; an assigned pod, or tracing off, starts none."""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from services.watcher import entries, ring
from splitsched.runtime import tracing
from splitsched.v1 import watcher_pb2
from tests.support.spans import by_name, one, span_id


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
    converter = entries.Converter()
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
    entry = entries.Converter().pod(pending_pod_json("p"), 1_700_000_000.0)
    assert entry is not None
    event = watcher_pb2.ClusterEvent.FromString(ring._header(5, ring.ADDED) + entry.body)
    assert event.pod.name == "p" and not event.trace_context
