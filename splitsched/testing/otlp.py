"""A small OTLP trace receiver: an in-process gRPC `TraceService` that keeps every span the
services export (OTEL_EXPORTER_OTLP_PROTOCOL=grpc), flattened into `Span`s.

Used by tests/e2e/test_tracing.py and `bench.latency_hops` (and `scripts/render-trace.py`
reads the JSON it dumps); in the test tooling package, not under tests/, because the bench
needs it too and the code never imports the tests.
The server runs on gRPC's own thread pool, so synchronous tests can poll `spans()` while the
services export; `stop()` ends it.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable
from concurrent import futures
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.common.v1 import common_pb2
from opentelemetry.proto.trace.v1 import trace_pb2

KINDS = {
    trace_pb2.Span.SPAN_KIND_INTERNAL: "INTERNAL",
    trace_pb2.Span.SPAN_KIND_SERVER: "SERVER",
    trace_pb2.Span.SPAN_KIND_CLIENT: "CLIENT",
    trace_pb2.Span.SPAN_KIND_PRODUCER: "PRODUCER",
    trace_pb2.Span.SPAN_KIND_CONSUMER: "CONSUMER",
}
STATUS = {
    trace_pb2.Status.STATUS_CODE_UNSET: "UNSET",
    trace_pb2.Status.STATUS_CODE_OK: "OK",
    trace_pb2.Status.STATUS_CODE_ERROR: "ERROR",
}


@dataclass(frozen=True)
class Link:
    trace_id: str
    span_id: str
    attributes: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Span:
    """One received span, ids in lowercase hex (as OTLP backends print them)."""

    service: str
    name: str
    trace_id: str
    span_id: str
    parent_span_id: str  # "" for a root
    kind: str
    start_ns: int
    end_ns: int
    status: str
    status_message: str
    attributes: dict[str, Any]
    events: list[str]
    links: list[Link]

    @property
    def pod(self) -> str:
        return str(self.attributes.get("k8s.pod.name", ""))


def _value(v: common_pb2.AnyValue) -> Any:
    which = v.WhichOneof("value")
    if which == "array_value":
        return [_value(x) for x in v.array_value.values]
    if which == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in v.kvlist_value.values}
    return getattr(v, which) if which else None


def _attrs(kvs: Iterable[common_pb2.KeyValue]) -> dict[str, Any]:
    return {kv.key: _value(kv.value) for kv in kvs}


def flatten(request: trace_service_pb2.ExportTraceServiceRequest) -> list[Span]:
    out: list[Span] = []
    for rs in request.resource_spans:
        service = str(_attrs(rs.resource.attributes).get("service.name", ""))
        for ss in rs.scope_spans:
            for s in ss.spans:
                out.append(
                    Span(
                        service=service,
                        name=s.name,
                        trace_id=s.trace_id.hex(),
                        span_id=s.span_id.hex(),
                        parent_span_id=s.parent_span_id.hex(),
                        kind=KINDS.get(s.kind, str(s.kind)),
                        start_ns=s.start_time_unix_nano,
                        end_ns=s.end_time_unix_nano,
                        status=STATUS.get(s.status.code, str(s.status.code)),
                        status_message=s.status.message,
                        attributes=_attrs(s.attributes),
                        events=[e.name for e in s.events],
                        links=[
                            Link(link.trace_id.hex(), link.span_id.hex(), _attrs(link.attributes))
                            for link in s.links
                        ],
                    )
                )
    return out


class _Servicer(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self, receiver: OtlpReceiver) -> None:
        self._receiver = receiver

    def Export(
        self, request: trace_service_pb2.ExportTraceServiceRequest, context: grpc.ServicerContext
    ) -> trace_service_pb2.ExportTraceServiceResponse:
        self._receiver.add(flatten(request))
        return trace_service_pb2.ExportTraceServiceResponse()


class OtlpReceiver:
    """`with OtlpReceiver() as r:` ... `r.endpoint` for OTEL_EXPORTER_OTLP_ENDPOINT."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self._lock = threading.Lock()
        self._spans: list[Span] = []
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        add = trace_service_pb2_grpc.add_TraceServiceServicer_to_server
        add(_Servicer(self), self._server)  # type: ignore[no-untyped-call]
        self.port = self._server.add_insecure_port(f"{host}:0")
        self.endpoint = f"http://{host}:{self.port}"
        self.exports = 0

    def start(self) -> OtlpReceiver:
        self._server.start()
        return self

    def stop(self) -> None:
        self._server.stop(grace=1.0).wait(5)

    def __enter__(self) -> OtlpReceiver:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def add(self, spans: list[Span]) -> None:
        with self._lock:
            self._spans.extend(spans)
            self.exports += 1

    def spans(self) -> list[Span]:
        with self._lock:
            return list(self._spans)

    def dump(self, path: Path) -> None:
        """Every span as JSON (one list), the input of scripts/render-trace.py."""
        path.write_text(json.dumps([asdict(s) for s in self.spans()], indent=1))


def load(path: Path) -> list[Span]:
    """Spans from a `dump` file."""
    out: list[Span] = []
    for raw in json.loads(path.read_text()):
        raw["links"] = [Link(**link) for link in raw.get("links", [])]
        out.append(Span(**raw))
    return out
