"""OpenTelemetry tracing for the three services: one trace per scheduling attempt.

Every service's `main` calls `setup(component)` once and `shutdown()` at exit. The
standard variables configure it (read by the SDK where it can):

* `OTEL_TRACES_EXPORTER`: `otlp`, `console`, `none` (comma-separated list). When unset,
  `otlp` is used if `OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is
  set, and tracing stays OFF otherwise (no provider, no exporter thread, and the services
  skip span building: `enabled()` is one attribute read).
* `OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL`: `grpc` or `http/protobuf` (the spec's default;
  but unset with an endpoint on port 4317, OTLP/gRPC's port, it is `grpc`, with a warning:
  HTTP to a gRPC port loses every span); endpoint, headers, timeout, compression: the
  exporters read their own variables.
* `OTEL_SERVICE_NAME` (default `splitsched-<component>`), `OTEL_RESOURCE_ATTRIBUTES`,
  `OTEL_TRACES_SAMPLER` / `OTEL_TRACES_SAMPLER_ARG` (default `parentbased_always_on`),
  `OTEL_BSP_*` (batching), `OTEL_PROPAGATORS` (default W3C tracecontext + baggage),
  `OTEL_SDK_DISABLED=true` switches everything off.
* `SPLITSCHED_TRACES_TAIL` (`on` by default) and `SPLITSCHED_TRACES_KEEP_SLOWER_THAN`
  (seconds, 1): tail keeping in the scheduler and the binder (`splitsched.runtime.tailkeep`:
  failed, retried and slow attempts are exported whatever the head sampler said).

The trace of one attempt crosses the services through our proto `trace_context` map fields
(W3C `traceparent`/`tracestate`), written and read with the configured propagator:

    watcher   watch_event  (PRODUCER; puts its context in ClusterEvent.trace_context)
    scheduler └ schedule_pod (from entering the active queue to the confirmation)
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
import urllib.parse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.trace import SpanKind, Status, StatusCode

if TYPE_CHECKING:
    from splitsched.runtime.tailkeep import TailRule

log = logging.getLogger(__name__)

DEFAULT_PROTOCOL = "http/protobuf"
OTLP_GRPC_PORT, OTLP_HTTP_PORT = 4317, 4318
SCOPE = "splitsched"


@dataclass
class _State:
    tracer: trace.Tracer | None = None
    provider: Any = None  # opentelemetry.sdk.trace.TracerProvider, imported lazily
    tail: TailRule | None = None  # the tail-keeping rule in use (splitsched.runtime.tailkeep)


_state = _State()


def enabled() -> bool:
    """Whether spans are being built in this process (False: skip all tracing work)."""
    return _state.tracer is not None


def tail_rule() -> TailRule | None:
    """The rule by which this process keeps unsampled attempts (None: it keeps none)."""
    return _state.tail


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
    """The protocol asked for; when none is, gRPC for an endpoint on OTLP/gRPC's port 4317
    (HTTP, the spec's default, would silently lose every span there), else the default."""
    explicit = _explicit_protocol(environ)
    if explicit:
        return explicit
    return "grpc" if _endpoint_port(environ) == OTLP_GRPC_PORT else DEFAULT_PROTOCOL


def protocol_warning(environ: Mapping[str, str]) -> str | None:
    """What to tell the operator when the protocol and the endpoint's port disagree, or
    when the protocol was chosen from the port."""
    port, explicit = _endpoint_port(environ), _explicit_protocol(environ)
    if port == OTLP_GRPC_PORT and not explicit:
        return (
            "OTEL_EXPORTER_OTLP_ENDPOINT is on port 4317 (OTLP/gRPC) and no "
            "OTEL_EXPORTER_OTLP_PROTOCOL is set: using grpc"
        )
    if port == OTLP_GRPC_PORT and explicit.startswith("http"):
        return f"OTLP protocol {explicit} on port 4317 (OTLP/gRPC's port): spans may be lost"
    if port == OTLP_HTTP_PORT and explicit == "grpc":
        return "OTLP protocol grpc on port 4318 (OTLP/HTTP's port): spans may be lost"
    return None


def _explicit_protocol(environ: Mapping[str, str]) -> str:
    return (
        environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        or environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        or ""
    ).strip()


def _endpoint_port(environ: Mapping[str, str]) -> int | None:
    endpoint = environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or environ.get(
        "OTEL_EXPORTER_OTLP_ENDPOINT", ""
    )
    try:
        return urllib.parse.urlsplit(endpoint.strip()).port
    except ValueError:
        return None


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


def setup(
    component: str,
    *,
    exporter: Any = None,
    sampler: Any = None,
    tail: TailRule | None = None,
) -> bool:
    """Configure tracing for `component` (watcher, scheduler, binder) from the environment;
    returns whether it is on. `exporter` (tests) forces it on with a synchronous processor,
    the given `sampler` and `tail` rule (the environment's otherwise), and leaves the
    global provider alone."""
    environ = os.environ
    names = [] if exporter is not None else exporters_from_env(environ)
    if exporter is None and not names:
        return False
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

    from splitsched.runtime import tailkeep

    attributes: dict[str, str] = {"service.namespace": "splitsched"}
    if not environ.get("OTEL_SERVICE_NAME"):
        attributes[SERVICE_NAME] = f"splitsched-{component}"
    provider = TracerProvider(resource=Resource.create(attributes), sampler=sampler)
    processors: list[Any] = []
    if exporter is not None:
        processors.append(SimpleSpanProcessor(exporter))
    else:
        tail = tailkeep.TailRule.from_env(environ)
        for name in names:
            try:
                processors.append(BatchSpanProcessor(_exporter(name, environ)))
            except ValueError as exc:
                log.error("tracing: %s; exporter skipped", exc)
        trace.set_tracer_provider(provider)
    roots = tailkeep.ROOTS.get(component)
    if tail is not None and roots is not None:
        provider.sampler = tailkeep.RecordUnsampled(provider.sampler)
        processors = [tailkeep.TailKeeper(processors, roots=roots, rule=tail)]
        _state.tail = tail
    for processor in processors:
        provider.add_span_processor(processor)
    _state.provider = provider
    _state.tracer = provider.get_tracer(SCOPE)
    if exporter is None and (warning := protocol_warning(environ)):
        log.warning("tracing: %s", warning)
    if exporter is None:
        log.info(
            "tracing on: exporters %s, protocol %s, service %s, tail keeping %s",
            ",".join(names),
            protocol_from_env(environ),
            provider.resource.attributes.get(SERVICE_NAME),
            f"slower than {tail.slower_than}s" if tail and roots else "off",
        )
    return True


def record_locally(processor: Any) -> None:
    """Also give every span this process builds to `processor` (the scheduler's store of
    recent attempts), sampled or not; without exporters (tracing off), spans are then
    built for it alone and exported nowhere."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.sampling import ALWAYS_OFF

    from splitsched.runtime.tailkeep import RecordUnsampled

    provider = _state.provider
    if provider is None:
        provider = _state.provider = TracerProvider(sampler=ALWAYS_OFF, shutdown_on_exit=False)
    if not isinstance(provider.sampler, RecordUnsampled):
        provider.sampler = RecordUnsampled(provider.sampler)
    provider.add_span_processor(processor)
    _state.tracer = provider.get_tracer(SCOPE)


def shutdown() -> None:
    """Flush and stop the exporters (bounded by the processors' own timeouts)."""
    provider, _state.provider, _state.tracer = _state.provider, None, None
    _state.tail = None
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
