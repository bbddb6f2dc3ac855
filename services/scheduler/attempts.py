"""The scheduler's memory of each pod's last scheduling attempts as span trees: what the
Scheduler API's `GetPodTrace` (and `splitsched trace POD`) answers from, with no tracing
backend.

`AttemptStore` is a span processor: `services.scheduler.main` hands it to
`tracing.record_locally`, which gives it every span the scheduler builds, sampled or not
(with tracing off, spans are then built for it alone and exported nowhere). It holds an
attempt's spans until its `schedule_pod` root ends, then files a compact copy under the
pod: the last `PER_POD` attempts of each of the last `pods` pods attempted.
"""

from __future__ import annotations

from collections import deque

from opentelemetry import context as otel_context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.trace import StatusCode

from services.scheduler.attempt_records import StoredAttempt, StoredSpan
from splitsched.runtime import tracing
from splitsched.runtime.tailkeep import TraceBuffer

ROOT = "schedule_pod"
#: Attempts remembered per pod.
PER_POD = 5
#: Pods remembered by default (`--trace-store-pods`).
DEFAULT_PODS = 2000


def _stored(span: ReadableSpan) -> StoredSpan:
    ctx, parent = span.context, span.parent
    return StoredSpan(
        name=span.name,
        span_id=format(ctx.span_id, "016x") if ctx is not None else "",
        parent_span_id=format(parent.span_id, "016x") if parent is not None else "",
        start_ns=span.start_time or 0,
        end_ns=span.end_time or 0,
        error=span.status.status_code is StatusCode.ERROR,
        status_message=span.status.description or "",
        attributes=tuple((k, str(v)) for k, v in (span.attributes or {}).items()),
    )


def exported_as(root: ReadableSpan) -> str:
    """Why the attempt that `root` ends reached the tracing backend ("" if it did not)."""
    ctx = root.context
    if ctx is not None and ctx.trace_flags.sampled:
        return "sampled"
    rule = tracing.tail_rule()
    return rule.reason(root) if rule is not None else ""


class AttemptStore(SpanProcessor):
    """The last `PER_POD` finished attempts of each of the last `pods` pods, by
    (namespace, name); the pod least recently attempted is forgotten first."""

    def __init__(self, *, pods: int = DEFAULT_PODS) -> None:
        self.pods = pods
        self._buffer = TraceBuffer((ROOT,))
        self._by_pod: dict[tuple[str, str], deque[StoredAttempt]] = {}

    def on_start(self, span: Span, parent_context: otel_context.Context | None = None) -> None:
        return None

    def on_end(self, span: ReadableSpan) -> None:
        held = self._buffer.add(span)
        if held:
            self._file(held)

    def _file(self, held: list[ReadableSpan]) -> None:
        root = held[-1]
        attrs = root.attributes or {}
        key = (str(attrs.get("k8s.namespace.name", "")), str(attrs.get("k8s.pod.name", "")))
        ctx = root.context
        attempt = StoredAttempt(
            trace_id=format(ctx.trace_id, "032x") if ctx is not None else "",
            exported=exported_as(root),
            spans=(_stored(root), *sorted(map(_stored, held[:-1]), key=lambda s: s.start_ns)),
        )
        attempts = self._by_pod.pop(key, None)
        if attempts is None:
            if len(self._by_pod) >= self.pods:
                self._by_pod.pop(next(iter(self._by_pod)))
            attempts = deque(maxlen=PER_POD)
        attempts.append(attempt)
        self._by_pod[key] = attempts  # re-inserted: the most recently attempted is last

    def attempts(self, namespace: str, name: str) -> list[StoredAttempt]:
        """The pod's remembered attempts, oldest first."""
        return list(self._by_pod.get((namespace, name), ()))

    def shutdown(self) -> None:
        return None

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True
