"""The binder's spans: one ``bind`` span per decision with one CLIENT child per Binding
API attempt, continuing the scheduler's trace.

``services.binder.worker`` opens the span (``bind_call``) around a decision and hands it
to ``services.binder.binding``, whose retry hooks mark each attempt. Setup, context
propagation and the generic span helpers are ``splitsched.runtime.tracing``'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanKind

from splitsched.runtime.tracing import (
    enabled,
    extract,
    inject,
    pod_attributes,
    set_error,
    tracer,
    wall_ns,
)


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
    binder_id: str = "",
) -> RetriedCall:
    """The binder's `bind` span for one decision, continuing the scheduler's trace from
    the request's carrier; starts at `accepted_at` (monotonic) so the time the decision
    waited for a worker is inside it. `NO_CALL` when tracing is off or not sampled."""
    if not enabled():
        return NO_CALL
    attrs = pod_attributes(namespace, name, uid)
    attrs["k8s.node.name"] = node
    attrs["splitsched.decision_id"] = decision_id
    if binder_id:
        attrs["splitsched.binder.id"] = binder_id
    span = tracer().start_span(
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
