"""Spans recorded in memory for tracing tests: the `exporter` fixture turns tracing on for
one test with the SDK's in-memory exporter (registered for every tier by tests/conftest.py),
and the helpers below find spans and their ids in what it recorded."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from splitsched.runtime import tracing


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
