"""Tail keeping in process (splitsched/runtime/tailkeep.py): at head sampling ratio 0, the
attempts of an unschedulable pod, of a retry, of a slow pod and of a failed binding are
still exported, marked `splitsched.kept`, and a fast successful pod's is not. The binder
builds and keeps its `bind` span on its own rule (a failed binding), or because the
scheduler's `traceparent` says the attempt is kept (a retry). Spans are recorded by the
SDK's in-memory exporter (tests/support/spans.py's `tail_exporter`).
"""

from __future__ import annotations

import time

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from services.binder.spans import NO_CALL, RetriedCall, bind_call
from services.scheduler.state import Decision, Unschedulable
from services.scheduler.traces import SchedulingTraces
from tests.support.builders import small_node as node
from tests.support.builders import splitsched_pod as pod
from tests.support.spans import TAIL_SLOWER_THAN, by_name
from tests.support.traced import run_attempt, traced_state

BINDING_CALL = "POST /api/v1/namespaces/{namespace}/pods/{name}/binding"


def kept_roots(exporter: InMemorySpanExporter, name: str = "schedule_pod") -> dict[str, str]:
    """pod name -> why its exported root was kept."""
    out = {}
    for span in by_name(list(exporter.get_finished_spans()), name):
        attrs = span.attributes or {}
        assert span.context is not None and span.context.trace_flags.sampled
        out[str(attrs["k8s.pod.name"])] = str(attrs.get("splitsched.kept", ""))
    return out


def bound(traces: SchedulingTraces, decision: Decision) -> dict[str, str]:
    """Send `decision` to a binder and see it confirmed; returns the carrier sent."""
    carrier = traces.bind_request(decision.pod.uid, decision.decision_id)
    traces.bind_sent(decision.pod.uid, decision.decision_id, accepted=True)
    traces.confirmed(decision.pod.uid, decision.node)
    return carrier


def sampled(carrier: dict[str, str]) -> bool:
    """The sampled flag of a carrier's `traceparent`."""
    return bool(int(carrier["traceparent"][-2:], 16) & 1)


def binder_call(carrier: dict[str, str], name: str) -> RetriedCall:
    return bind_call(
        carrier=carrier, namespace="ns", name=name, uid=f"uid-{name}", node="n1",
        decision_id="d", accepted_at=time.monotonic(),
    )  # fmt: skip


def test_unschedulable_retried_and_slow_attempts_are_kept_and_a_fast_one_is_not(
    tail_exporter: InMemorySpanExporter,
) -> None:
    state, traces, clock = traced_state(time.monotonic())
    state.apply_node("ADDED", node("n1", cpu=500))
    state.apply_pod("ADDED", pod("fast", cpu=100))
    state.apply_pod("ADDED", pod("big"))
    fast = run_attempt(state, traces)
    assert isinstance(fast, Decision) and fast.pod.name == "fast"
    assert not sampled(bound(traces, fast))  # the binder is told: not kept
    assert isinstance(run_attempt(state, traces), Unschedulable)
    assert kept_roots(tail_exporter) == {"big": "failed"}
    # The whole attempt is there, not just its root.
    assert {s.name for s in tail_exporter.get_finished_spans()} >= {"queue_wait", "filter"}

    state.apply_node("ADDED", node("n2", cpu=1000))  # room for the retry
    clock.advance(20.0)  # its backoff over (its trace starts when it is active again)
    state.queue.flush()
    retry = run_attempt(state, traces)
    assert isinstance(retry, Decision) and retry.pod.name == "big"
    carrier = bound(traces, retry)
    assert sampled(carrier)  # the binder is told: kept
    assert kept_roots(tail_exporter) == {"big": "retry"}
    assert "fast" not in kept_roots(tail_exporter)


def test_a_slow_attempt_is_kept(tail_exporter: InMemorySpanExporter) -> None:
    # The pod entered the active queue longer ago than the threshold.
    state, traces, _ = traced_state(time.monotonic() - (TAIL_SLOWER_THAN + 1))
    state.apply_node("ADDED", node("n1"))
    state.apply_pod("ADDED", pod("slow"))
    slow = run_attempt(state, traces)
    assert isinstance(slow, Decision)
    assert sampled(bound(traces, slow))  # slow already when sent: the binder is told
    assert kept_roots(tail_exporter) == {"slow": "slow"}


def test_a_failed_binding_is_kept_by_the_scheduler_and_by_the_binder(
    tail_exporter: InMemorySpanExporter,
) -> None:
    state, traces, _ = traced_state(time.monotonic())
    state.apply_node("ADDED", node("n1"))
    state.apply_pod("ADDED", pod("a"))
    decision = run_attempt(state, traces)
    assert isinstance(decision, Decision)
    carrier = traces.bind_request("uid-a", decision.decision_id)
    traces.bind_sent("uid-a", decision.decision_id, accepted=True)
    traces.outcome("uid-a", decision.decision_id, kind="BIND_FAILED", message="HTTP 500",
                   binder_id="b-1")  # fmt: skip
    assert kept_roots(tail_exporter) == {"a": "failed"}
    assert by_name(list(tail_exporter.get_finished_spans()), "bind_request")

    # The binder was told "not kept", records anyway, and keeps its failed `bind`.
    call = binder_call(carrier, "a")
    assert call is not NO_CALL
    with call:
        call.attempt()
        call.status_code(500)
        call.finish(ok=False, result="FAILED", message="HTTP 500")
    binds = by_name(list(tail_exporter.get_finished_spans()), "bind")
    assert [(s.attributes or {}).get("splitsched.kept") for s in binds] == ["failed"]
    assert binds[0].status.status_code is StatusCode.ERROR
    assert binds[0].context is not None
    assert binds[0].context.trace_id == decision_trace(tail_exporter)
    assert len(by_name(list(tail_exporter.get_finished_spans()), BINDING_CALL)) == 1


def decision_trace(exporter: InMemorySpanExporter) -> int:
    root: ReadableSpan = by_name(list(exporter.get_finished_spans()), "schedule_pod")[0]
    assert root.context is not None
    return int(root.context.trace_id)


def test_the_binder_keeps_what_the_scheduler_kept_and_drops_a_fast_success(
    tail_exporter: InMemorySpanExporter,
) -> None:
    kept = f"00-{'ab' * 16}-{'cd' * 8}-01"
    unkept = f"00-{'ef' * 16}-{'cd' * 8}-00"
    for carrier, name in (({"traceparent": kept}, "kept"), ({"traceparent": unkept}, "fast")):
        with binder_call(carrier, name) as call:
            call.attempt()
            call.status_code(201)
            call.finish(ok=True, result="BOUND")
    binds = by_name(list(tail_exporter.get_finished_spans()), "bind")
    assert [(s.attributes or {})["k8s.pod.name"] for s in binds] == ["kept"]
    assert "splitsched.kept" not in (binds[0].attributes or {})  # head-sampled by the flag
