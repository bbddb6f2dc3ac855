"""What the scheduler remembers of a pod's finished attempt (`services.scheduler.attempts`
files them; `api_views.pod_trace` answers GetPodTrace with them): plain values, no
OpenTelemetry, so the API's conversions stay pure."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class StoredSpan:
    """One ended span, as `GetPodTrace` shows it (times in epoch ns, ids in hex)."""

    name: str
    span_id: str
    parent_span_id: str
    start_ns: int
    end_ns: int
    error: bool
    status_message: str
    attributes: tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class StoredAttempt:
    """One finished attempt: its trace, whether and why it was exported, its spans (the
    root first, then by start time)."""

    trace_id: str
    exported: str
    spans: tuple[StoredSpan, ...]
