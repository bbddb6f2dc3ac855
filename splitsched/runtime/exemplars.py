"""OpenMetrics exemplars from trace contexts: a latency observation carries the trace id of
the work it measured, so a dashboard's slow bucket links to that very trace.

Exemplars are served only in the OpenMetrics format (`/metrics` negotiates it, see
`splitsched.runtime.httpsrv`); the Prometheus text format leaves them out.
"""

from __future__ import annotations

from collections.abc import Mapping

from opentelemetry import propagate, trace


def from_carrier(carrier: Mapping[str, str]) -> dict[str, str] | None:
    """The exemplar labels (`trace_id`, `span_id`, lowercase hex as tracing backends print
    them) of a propagated context, or None when there is none or it was not sampled: an
    unsampled trace was exported nowhere, so its id would link to nothing."""
    if not carrier:
        return None
    context = trace.get_current_span(propagate.extract(carrier)).get_span_context()
    if not context.is_valid or not context.trace_flags.sampled:
        return None
    return {
        "trace_id": trace.format_trace_id(context.trace_id),
        "span_id": trace.format_span_id(context.span_id),
    }
