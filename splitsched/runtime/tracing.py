"""OpenTelemetry tracing for the three services: one trace per scheduling attempt.

Every service's `main` calls `setup(component)` once and `shutdown()` at exit. The
standard variables configure it (read by the SDK where it can):

* `OTEL_TRACES_EXPORTER`: `otlp`, `console`, `none` (comma-separated list). When unset,
  `otlp` is used if `OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is
  set, and tracing stays OFF otherwise (no provider, no exporter thread, and the services
  skip span building: `enabled()` is one attribute read).
* `OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL`: `grpc` or `http/protobuf` (the spec's default);
  endpoint, headers, timeout, compression: the exporters read their own variables.
* `OTEL_SERVICE_NAME` (default `splitsched-<component>`), `OTEL_RESOURCE_ATTRIBUTES`,
  `OTEL_TRACES_SAMPLER` / `OTEL_TRACES_SAMPLER_ARG` (default `parentbased_always_on`),
  `OTEL_BSP_*` (batching), `OTEL_PROPAGATORS` (default W3C tracecontext + baggage),
  `OTEL_SDK_DISABLED=true` switches everything off.

The trace of one attempt crosses the services through our proto `trace_context` map fields
(W3C `traceparent`/`tracestate`), written and read with the configured propagator:

    watcher   watch_event  (PRODUCER; puts its context in ClusterEvent.trace_context)
    scheduler └ schedule_pod (from the enqueue time to the confirmation)
                ├ queue_wait, filter, score, assume   (timed around the core's calls)
                ├ gang_cycle (a gang member: the one cycle that placed its whole gang)
                ├ bind_request (PRODUCER; context in BindRequest.trace_context)
                │ └ binder: bind (CONSUMER) ── one CLIENT span per Binding API call
                └ confirm (from the binder's report to the watch event showing the binding)

One trace is one attempt: a retry starts a new trace linked to the previous one, and each
member of a gang keeps its own trace (`services.scheduler.traces` says how).

This module holds what the services share: setup and shutdown, the carriers that move a
context across the services, sampling checks and small span helpers. Each service builds
its own spans: the watcher its `watch_event` with `producer_span`, the scheduler in
`services.scheduler.traces` (the core's `CycleObserver`, spans built after the fact with
explicit timestamps), the binder in `services.binder` (`bind` and its Binding API calls).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.trace import SpanKind, Status, StatusCode

log = logging.getLogger(__name__)

DEFAULT_PROTOCOL = "http/protobuf"
SCOPE = "splitsched"


@dataclass
class _State:
    tracer: trace.Tracer | None = None
    provider: Any = None  # opentelemetry.sdk.trace.TracerProvider, imported lazily


_state = _State()


def enabled() -> bool:
    """Whether spans are being built in this process (False: skip all tracing work)."""
    return _state.tracer is not None


def tracer() -> trace.Tracer:
    """The process's tracer (a no-op one when tracing is off)."""
    return _state.tracer or trace.NoOpTracer()


def exporters_from_env(environ: Mapping[str, str]) -> list[str]:
    """Which exporters the environment asks for; [] means tracing is off."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return []
    raw = environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if raw:
        names = [n.strip() for n in raw.split(",") if n.strip()]
        return [] if "none" in names else names
    if environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or environ.get(
        "OTEL_EXPORTER_OTLP_ENDPOINT"
    ):
        return ["otlp"]
    return []


def protocol_from_env(environ: Mapping[str, str]) -> str:
    return (
        environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        or environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        or DEFAULT_PROTOCOL
    ).strip()


def _exporter(name: str, environ: Mapping[str, str]) -> Any:
    if name == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter()
    if name != "otlp":
        raise ValueError(f"unknown OTEL_TRACES_EXPORTER {name!r} (otlp, console, none)")
    protocol = protocol_from_env(environ)
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter()
    if protocol in ("http/protobuf", "http"):
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
            OTLPSpanExporter as HttpSpanExporter,
        )

        return HttpSpanExporter()
    raise ValueError(f"unsupported OTLP protocol {protocol!r} (grpc, http/protobuf)")


def setup(component: str, *, exporter: Any = None) -> bool:
    """Configure tracing for `component` (watcher, scheduler, binder) from the environment;
    returns whether it is on. `exporter` (tests) forces it on with a synchronous processor
    and leaves the global provider alone."""
    environ = os.environ
    names = [] if exporter is not None else exporters_from_env(environ)
    if exporter is None and not names:
        return False
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

    attributes: dict[str, str] = {"service.namespace": "splitsched"}
    if not environ.get("OTEL_SERVICE_NAME"):
        attributes[SERVICE_NAME] = f"splitsched-{component}"
    provider = TracerProvider(resource=Resource.create(attributes))  # sampler: from env
    if exporter is not None:
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    else:
        for name in names:
            try:
                provider.add_span_processor(BatchSpanProcessor(_exporter(name, environ)))
            except ValueError as exc:
                log.error("tracing: %s; exporter skipped", exc)
        trace.set_tracer_provider(provider)
    _state.provider = provider
    _state.tracer = provider.get_tracer(SCOPE)
    if exporter is None:
        log.info(
            "tracing on: exporters %s, protocol %s, service %s",
            ",".join(names),
            protocol_from_env(environ),
            provider.resource.attributes.get(SERVICE_NAME),
        )
    return True


def shutdown() -> None:
    """Flush and stop the exporters (bounded by the processors' own timeouts)."""
    provider, _state.provider, _state.tracer = _state.provider, None, None
    if provider is not None:
        provider.shutdown()


# ---- carriers -----------------------------------------------------------------------------


def inject(span: trace.Span) -> dict[str, str]:
    """`span`'s context as a carrier for a proto `trace_context` map (empty if invalid)."""
    carrier: dict[str, str] = {}
    if span.get_span_context().is_valid:
        propagate.inject(carrier, context=trace.set_span_in_context(span))
    return carrier


def extract(carrier: Mapping[str, str] | None) -> otel_context.Context:
    """The context a carrier holds (an empty context, i.e. a new root, if none)."""
    if not carrier:
        return otel_context.Context()
    return propagate.extract(dict(carrier), context=otel_context.Context())


def span_context(carrier: Mapping[str, str] | None) -> trace.SpanContext | None:
    """The remote span context in a carrier, for a span link; None if it has none."""
    if not carrier:
        return None
    ctx = trace.get_current_span(extract(carrier)).get_span_context()
    return ctx if ctx.is_valid else None


def from_metadata(metadata: Iterable[tuple[str, str | bytes]] | None) -> dict[str, str]:
    """The trace headers among gRPC invocation metadata (for callers that propagate the
    context there instead of in the request's `trace_context`)."""
    fields = propagate.get_global_textmap().fields
    out: dict[str, str] = {}
    for key, value in metadata or ():
        if key in fields:
            out[key] = value.decode() if isinstance(value, bytes) else value
    return out


def sampler_follows_parent() -> bool:
    """Whether the provider's sampler is parent-based (OTEL_TRACES_SAMPLER parentbased_*,
    the default), so an unsampled remote parent means an unsampled child."""
    from opentelemetry.sdk.trace.sampling import ParentBased

    provider = _state.provider
    return provider is not None and isinstance(getattr(provider, "sampler", None), ParentBased)


def unsampled_context(carrier: Mapping[str, str]) -> trace.SpanContext | None:
    """The remote span context of a W3C `traceparent` whose sampled flag is off (None if
    it is sampled, absent or malformed); parsed by hand, as it is on the hot path."""
    value = carrier.get("traceparent", "")
    parts = value.split("-")
    if len(parts) != 4 or len(parts[1]) != 32 or len(parts[2]) != 16 or len(parts[3]) != 2:
        return None
    try:
        flags = int(parts[3], 16)
        if flags & trace.TraceFlags.SAMPLED:
            return None
        ctx = trace.SpanContext(
            trace_id=int(parts[1], 16),
            span_id=int(parts[2], 16),
            is_remote=True,
            trace_flags=trace.TraceFlags(flags),
        )
    except ValueError:
        return None
    return ctx if ctx.is_valid else None


def wall_ns(monotonic_seconds: float) -> int:
    """A `time.monotonic()` reading as epoch nanoseconds (span timestamps)."""
    return int((monotonic_seconds + time.time() - time.monotonic()) * 1e9)


def set_error(span: trace.Span, error_type: str, message: str) -> None:
    """Mark a span failed: status ERROR with the reason, and `error.type` (semconv)."""
    span.set_attribute("error.type", error_type)
    span.set_status(Status(StatusCode.ERROR, message))


def producer_span(name: str, *, attributes: Mapping[str, Any], at: float) -> dict[str, str]:
    """A PRODUCER span from `at` (epoch seconds) to now, a new trace's root; returns its
    carrier for the message it produced."""
    span = tracer().start_span(
        name,
        context=otel_context.Context(),
        kind=SpanKind.PRODUCER,
        attributes=attributes,
        start_time=int(at * 1e9),
    )
    span.end()
    return inject(span)


def pod_attributes(namespace: str, name: str, uid: str = "") -> dict[str, Any]:
    attrs: dict[str, Any] = {"k8s.namespace.name": namespace, "k8s.pod.name": name}
    if uid:
        attrs["k8s.pod.uid"] = uid
    return attrs


# ---- a call retried under one span (the binder's bind and its Binding API attempts) ------


class RetriedCall:
    """A parent span with one child span per attempt. The parent is current while the
    object is entered (log lines get its trace and span ids); `NO_CALL` is the no-op twin
    used when tracing is off."""

    def __init__(
        self,
        span: trace.Span,
        *,
        attempt_name: str,
        attempt_attributes: Mapping[str, Any] | None = None,
    ) -> None:
        self.span = span
        self._attempt_name = attempt_name
        self._attempt_attributes = dict(attempt_attributes or {})
        self._attempt: trace.Span | None = None
        self._attempts = 0
        self._token: object = None

    def __enter__(self) -> RetriedCall:
        self._token = otel_context.attach(trace.set_span_in_context(self.span))
        return self

    def __exit__(self, *exc: object) -> None:
        self._end_attempt()
        if self._token is not None:
            otel_context.detach(self._token)  # type: ignore[arg-type]
            self._token = None
        self.span.end()

    def carrier(self) -> dict[str, str]:
        return inject(self.span)

    def attempt(self) -> None:
        """A new attempt begins (the previous one, if still open, ends)."""
        self._end_attempt()
        self._attempts += 1
        attrs = dict(self._attempt_attributes)
        if self._attempts > 1:
            attrs["http.request.resend_count"] = self._attempts - 1
        self._attempt = tracer().start_span(
            self._attempt_name,
            context=trace.set_span_in_context(self.span),
            kind=SpanKind.CLIENT,
            attributes=attrs,
        )

    def status_code(self, code: int) -> None:
        """The attempt's HTTP answer; 4xx/5xx mark it failed (HTTP client semconv)."""
        if self._attempt is None:
            return
        self._attempt.set_attribute("http.response.status_code", code)
        if code >= 400:
            set_error(self._attempt, str(code), f"HTTP {code}")

    def error(self, error_type: str, message: str) -> None:
        """The attempt failed without an HTTP answer (network error, timeout)."""
        if self._attempt is not None:
            set_error(self._attempt, error_type, message)

    def retry_in(self, delay: float) -> None:
        """The attempt failed and the next one follows after `delay` seconds."""
        if self._attempt is not None:
            self._attempt.set_attribute("splitsched.retry_delay_seconds", round(delay, 6))
        self._end_attempt()

    def finish(self, *, ok: bool, result: str, message: str = "") -> None:
        self.span.set_attribute("splitsched.bind.result", result)
        self.span.set_attribute("splitsched.bind.attempts", self._attempts)
        if not ok:
            set_error(self.span, result, message or result)
        self._end_attempt()

    def _end_attempt(self) -> None:
        if self._attempt is not None:
            self._attempt.end()
            self._attempt = None


class _NoCall(RetriedCall):
    """Does nothing, cheaply: what the binder uses when tracing is off."""

    def __init__(self) -> None:
        super().__init__(trace.INVALID_SPAN, attempt_name="")

    def __enter__(self) -> RetriedCall:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def carrier(self) -> dict[str, str]:
        return {}

    def attempt(self) -> None:
        return None

    def status_code(self, code: int) -> None:
        return None

    def error(self, error_type: str, message: str) -> None:
        return None

    def retry_in(self, delay: float) -> None:
        return None

    def finish(self, *, ok: bool, result: str, message: str = "") -> None:
        return None


NO_CALL: RetriedCall = _NoCall()


def bind_call(
    *,
    carrier: Mapping[str, str],
    namespace: str,
    name: str,
    uid: str,
    node: str,
    decision_id: str,
    accepted_at: float,
    server: str = "",
) -> RetriedCall:
    """The binder's `bind` span for one decision, continuing the scheduler's trace from
    the request's carrier; starts at `accepted_at` (monotonic) so the time the decision
    waited for a worker is inside it. `NO_CALL` when tracing is off or not sampled."""
    if _state.tracer is None:
        return NO_CALL
    attrs = pod_attributes(namespace, name, uid)
    attrs["k8s.node.name"] = node
    attrs["splitsched.decision_id"] = decision_id
    span = _state.tracer.start_span(
        "bind",
        context=extract(carrier),
        kind=SpanKind.CONSUMER,
        attributes=attrs,
        start_time=wall_ns(accepted_at),
    )
    if not span.is_recording():
        return NO_CALL
    attempt_attrs: dict[str, Any] = {
        "http.request.method": "POST",
        "url.template": "/api/v1/namespaces/{namespace}/pods/{name}/binding",
        "k8s.node.name": node,
    }
    if server:
        host, _, port = server.partition("://")[2].partition("/")[0].rpartition(":")
        attempt_attrs["server.address"] = host or server
        if port.isdigit():
            attempt_attrs["server.port"] = int(port)
    return RetriedCall(
        span,
        attempt_name="POST /api/v1/namespaces/{namespace}/pods/{name}/binding",
        attempt_attributes=attempt_attrs,
    )
