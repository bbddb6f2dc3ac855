"""Tracing setup without a collector: configuration from OTEL_* variables (off when nothing
is configured, console or OTLP exporters, the service name), carriers in and out of gRPC
metadata, and the log filter that puts a span's ids on log lines. Spans are recorded by the
SDK's in-memory exporter (the `exporter` fixture of tests/support/spans.py)."""

from __future__ import annotations

import io
import json
import logging
import threading

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from services.binder.spans import NO_CALL, bind_call
from splitsched.runtime import logs, tracing

OTEL_VARS = (
    "OTEL_SDK_DISABLED",
    "OTEL_TRACES_EXPORTER",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_PROTOCOL",
    "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
    "OTEL_SERVICE_NAME",
)


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


def test_an_endpoint_on_the_grpc_port_gets_grpc_unless_told_otherwise() -> None:
    """Issue 21: `OTEL_EXPORTER_OTLP_ENDPOINT=http://c:4317` alone used to send HTTP to a
    gRPC port and lose every span, with one log line as the only hint."""
    on_4317 = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317"}
    assert tracing.protocol_from_env(on_4317) == "grpc"
    assert "using grpc" in str(tracing.protocol_warning(on_4317))
    traces_only = {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4317"}
    assert tracing.protocol_from_env(traces_only) == "grpc"
    told = {**on_4317, "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}
    assert tracing.protocol_from_env(told) == "http/protobuf"
    assert "spans may be lost" in str(tracing.protocol_warning(told))
    on_4318 = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}
    assert tracing.protocol_from_env(on_4318) == "http/protobuf"
    assert tracing.protocol_warning(on_4318) is None
    assert tracing.protocol_warning({**on_4318, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"})
    assert tracing.protocol_from_env({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:bad"}) == (
        "http/protobuf"
    )


def test_off_when_nothing_is_configured(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in OTEL_VARS:
        monkeypatch.delenv(var, raising=False)
    threads = threading.active_count()
    assert not tracing.setup("scheduler")
    assert not tracing.enabled()
    assert isinstance(tracing.tracer(), trace.NoOpTracer)
    assert bind_call(
        carrier={}, namespace="ns", name="p", uid="u", node="n", decision_id="d", accepted_at=0.0
    ) is NO_CALL  # fmt: skip
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
