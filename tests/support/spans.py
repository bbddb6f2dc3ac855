"""Spans recorded in memory for tracing tests: the `exporter` fixture turns tracing on for
one test with the SDK's in-memory exporter (registered for every tier by tests/conftest.py),
`tail_exporter` the same at head sampling ratio 0 with tail keeping on, and the helpers
below find spans and their ids in what it recorded."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from splitsched.runtime import tracing
from splitsched.runtime.tailkeep import TailRule

#: `tail_exporter`'s threshold: an attempt slower than this is kept.
TAIL_SLOWER_THAN = 2.0


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    """Tracing on for this test, spans recorded synchronously; off again afterwards."""
    memory = InMemorySpanExporter()
    assert tracing.setup("test", exporter=memory)
    try:
        yield memory
    finally:
        tracing.shutdown()


@pytest.fixture
def tail_exporter() -> Iterator[InMemorySpanExporter]:
    """Tracing on at head sampling ratio 0 (parent-based), keeping tails slower than
    `TAIL_SLOWER_THAN` seconds, failed, or retried; off again afterwards."""
    from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

    memory = InMemorySpanExporter()
    sampler = ParentBased(TraceIdRatioBased(0.0))
    rule = TailRule(slower_than=TAIL_SLOWER_THAN)
    assert tracing.setup("test", exporter=memory, sampler=sampler, tail=rule)
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
