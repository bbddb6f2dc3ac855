"""Tail keeping: every slow or failed attempt is exported, whatever the head sampler said.

On by default in the scheduler and the binder when tracing is on (`SPLITSCHED_TRACES_TAIL=off`
turns it off). Their sampler then *records* what it would drop (`RecordUnsampled`: RECORD_ONLY
instead of DROP, so the spans exist but are not flagged sampled) and `TailKeeper`, the
provider's span processor, holds those spans in memory by trace until the attempt's local
root ends (`schedule_pod` in the scheduler, `bind` in the binder). Then `keep_reason`
decides from the root alone: failed (status ERROR: unschedulable, refused, a bind that
failed, a conflict), a retry (`splitsched.attempt` > 1), or slower than
`SPLITSCHED_TRACES_KEEP_SLOWER_THAN` seconds (default 1; 0: never for slowness). A kept
trace's spans are exported flagged sampled, the root marked `splitsched.kept` with the
reason; the others are dropped. Head-sampled spans pass straight through.

The binder honours the scheduler's decision when it is known by the time the decision is
sent (a retry, or slow already): the scheduler sets the sampled flag of the `traceparent`
it sends, and the binder's parent-based sampler follows. Otherwise the binder applies the
same rule to its own `bind` span (a failed or slow binding is kept there too).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.sdk.trace.sampling import Decision, Sampler, SamplingResult
from opentelemetry.trace import Link, SpanKind, StatusCode, TraceFlags, TraceState
from opentelemetry.util.types import Attributes

log = logging.getLogger(__name__)

#: The span that ends an attempt in each component that keeps tails (both: a test's
#: process that plays either).
ROOTS = {"scheduler": ("schedule_pod",), "binder": ("bind",), "test": ("schedule_pod", "bind")}
DEFAULT_SLOWER_THAN = 1.0
#: Unsampled traces held at once (each waits for its root); the oldest goes first.
MAX_PENDING = 20_000


@dataclass(frozen=True)
class TailRule:
    """When an attempt is kept: failed, a retry, or slower than `slower_than` seconds."""

    slower_than: float = DEFAULT_SLOWER_THAN

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> TailRule | None:
        """The rule the environment asks for; None when tail keeping is off."""
        if environ.get("SPLITSCHED_TRACES_TAIL", "on").strip().lower() in ("off", "false", "0"):
            return None
        raw = environ.get("SPLITSCHED_TRACES_KEEP_SLOWER_THAN", "").strip()
        try:
            slower = float(raw) if raw else DEFAULT_SLOWER_THAN
        except ValueError:
            log.error("SPLITSCHED_TRACES_KEEP_SLOWER_THAN=%r is not a number: using 1", raw)
            slower = DEFAULT_SLOWER_THAN
        return cls(slower_than=max(slower, 0.0))

    def reason(self, root: ReadableSpan, *, end_ns: int = 0) -> str:
        """Why the attempt that `root` ends is kept ("" when it is not); `end_ns` for a
        root still open (then it cannot have failed yet)."""
        if root.status.status_code is StatusCode.ERROR:
            return "failed"
        attempt = (root.attributes or {}).get("splitsched.attempt", 0)
        if isinstance(attempt, int) and attempt > 1:
            return "retry"
        slow = self.is_slow(root.start_time or 0, end_ns or root.end_time or 0)
        return "slow" if slow else ""

    def is_slow(self, start_ns: int, end_ns: int) -> bool:
        return self.slower_than > 0 and end_ns - start_ns > self.slower_than * 1e9


class RecordUnsampled(Sampler):
    """`inner`'s decisions, but what it drops is still recorded (not sampled)."""

    def __init__(self, inner: Sampler) -> None:
        self.inner = inner

    def should_sample(
        self,
        parent_context: otel_context.Context | None,
        trace_id: int,
        name: str,
        kind: SpanKind | None = None,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
        trace_state: TraceState | None = None,
    ) -> SamplingResult:
        result = self.inner.should_sample(
            parent_context, trace_id, name, kind, attributes, links, trace_state
        )
        if result.decision is not Decision.DROP:
            return result
        return SamplingResult(Decision.RECORD_ONLY, attributes, result.trace_state)

    def get_description(self) -> str:
        return f"RecordUnsampled{{{self.inner.get_description()}}}"


class TraceBuffer:
    """Ended spans held by trace until their attempt's root (a span named in `roots`)
    ends; at most `limit` traces at once, the oldest dropped first."""

    def __init__(self, roots: Sequence[str], limit: int = MAX_PENDING) -> None:
        self.roots = frozenset(roots)
        self.limit = limit
        self._held: dict[int, list[ReadableSpan]] = {}

    def add(self, span: ReadableSpan) -> list[ReadableSpan] | None:
        """Hold `span`; when it is a root, the whole attempt (root last), released."""
        ctx = span.context
        if ctx is None:
            return None
        held = self._held.get(ctx.trace_id)
        if held is None:
            if len(self._held) >= self.limit:
                self._held.pop(next(iter(self._held)))
            held = self._held[ctx.trace_id] = []
        held.append(span)
        if span.name not in self.roots:
            return None
        del self._held[ctx.trace_id]
        return held


class TailKeeper(SpanProcessor):
    """Forwards sampled spans to `processors`; holds the unsampled ones by trace until their
    root span (one named in `roots`) ends, then forwards them (flagged sampled) if `rule`
    keeps the attempt."""

    def __init__(
        self, processors: Sequence[SpanProcessor], *, roots: Sequence[str], rule: TailRule
    ) -> None:
        self.processors = list(processors)
        self.rule = rule
        self._buffer = TraceBuffer(roots)
        self.kept = 0

    def on_start(self, span: Span, parent_context: otel_context.Context | None = None) -> None:
        for p in self.processors:
            p.on_start(span, parent_context=parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        ctx = span.context
        if ctx is None or ctx.trace_flags.sampled:
            self._forward(span)
            return
        held = self._buffer.add(span)
        reason = self.rule.reason(span) if held else ""
        if held and reason:
            self.kept += 1
            for s in held:
                self._forward(sampled_copy(s, {"splitsched.kept": reason} if s is span else {}))

    def _forward(self, span: ReadableSpan) -> None:
        for p in self.processors:
            p.on_end(span)

    def shutdown(self) -> None:
        for p in self.processors:
            p.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return all(p.force_flush(timeout_millis) for p in self.processors)


def sampled_copy(span: ReadableSpan, extra: Mapping[str, Any]) -> ReadableSpan:
    """`span` flagged sampled (exporters skip the others), with `extra` attributes."""
    ctx = span.context
    assert ctx is not None
    flags = TraceFlags(ctx.trace_flags | TraceFlags.SAMPLED)
    return ReadableSpan(
        name=span.name,
        context=trace.SpanContext(ctx.trace_id, ctx.span_id, False, flags, ctx.trace_state),
        parent=span.parent,
        resource=span.resource,
        attributes={**(span.attributes or {}), **extra},
        events=span.events,
        links=span.links,
        kind=span.kind,
        status=span.status,
        start_time=span.start_time,
        end_time=span.end_time,
        instrumentation_scope=span.instrumentation_scope,
    )


def sampled_carrier(carrier: dict[str, str]) -> dict[str, str]:
    """`carrier` with its `traceparent`'s sampled flag on: how the scheduler tells the
    binder an attempt is kept."""
    value = carrier.get("traceparent", "")
    if len(value) == 55 and value[-3] == "-":
        flags = int(value[-2:], 16) | int(TraceFlags.SAMPLED)
        carrier = {**carrier, "traceparent": f"{value[:-2]}{flags:02x}"}
    return carrier
