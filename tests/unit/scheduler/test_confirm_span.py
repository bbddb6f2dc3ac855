"""The `confirm` span names the binder that made the Binding when the scheduler knows it
(its BOUND report came before the watch), and leaves `splitsched.binder.id` off when the
watch came first (issue 21: it used to be set, empty)."""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from services.scheduler.traces import SchedulingTraces
from tests.support.builders import splitsched_pod as pod
from tests.support.spans import one


def confirm_attributes(
    exporter: InMemorySpanExporter, *, reported_by: str | None
) -> dict[str, Any]:
    """Decide pod `a` onto n1, optionally have `reported_by` report it BOUND, then the
    watch shows it bound; the attributes of the `confirm` span that ends its trace."""
    traces = SchedulingTraces()
    traces.attempt(pod("a"), result="scheduled", decision_id="d-1", node="n1")
    if reported_by is not None:
        traces.outcome("uid-a", "d-1", kind="BOUND", message="", binder_id=reported_by)
    traces.confirmed("uid-a", "n1")
    return dict(one(list(exporter.get_finished_spans()), "confirm").attributes or {})


def test_binder_reported_first_confirm_names_it(exporter: InMemorySpanExporter) -> None:
    attrs = confirm_attributes(exporter, reported_by="binder-1")
    assert attrs["splitsched.confirmed_by"] == "binder+watch"
    assert attrs["splitsched.binder.id"] == "binder-1"


def test_watch_came_first_confirm_has_no_binder_id(exporter: InMemorySpanExporter) -> None:
    attrs = confirm_attributes(exporter, reported_by=None)
    assert attrs["splitsched.confirmed_by"] == "watch"
    assert "splitsched.binder.id" not in attrs
