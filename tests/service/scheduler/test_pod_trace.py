"""GetPodTrace in process: with tracing off, the scheduler's store of recent attempts
(services/scheduler/attempts.py, fed by `tracing.record_locally`) files each finished
attempt of a pod as its span tree, bounded per pod and in pods, and the real Scheduler API
server answers from it. The CLI verb over it: tests/e2e/test_cli.py; its table:
tests/unit/test_cliformat.py.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import grpc
import pytest

from services.scheduler.attempts import PER_POD, AttemptStore
from services.scheduler.state import Decision, SchedulerState, Unschedulable
from splitsched.runtime import tracing
from splitsched.v1 import scheduler_pb2
from tests.support.builders import small_node as node
from tests.support.builders import splitsched_pod as pod
from tests.support.scheduler import serving
from tests.support.traced import run_attempt, traced_state


@pytest.fixture
def store() -> Iterator[AttemptStore]:
    """Tracing off, spans recorded for a store of the last attempts of 2 pods only."""
    assert not tracing.enabled()
    kept = AttemptStore(pods=2)
    tracing.record_locally(kept)
    try:
        yield kept
    finally:
        tracing.shutdown()


def names(store: AttemptStore, pod_name: str) -> list[list[str]]:
    return [[s.name for s in a.spans] for a in store.attempts("ns", pod_name)]


def test_finished_attempts_are_filed_per_pod_bounded_in_attempts_and_pods(
    store: AttemptStore,
) -> None:
    state, traces, _ = traced_state(time.monotonic())
    state.apply_node("ADDED", node("n1", cpu=500))
    state.apply_pod("ADDED", pod("big"))
    assert isinstance(run_attempt(state, traces), Unschedulable)
    (attempt,) = store.attempts("ns", "big")
    assert [s.name for s in attempt.spans] == ["schedule_pod", "queue_wait", "filter"]
    root = attempt.spans[0]
    assert root.error and "Insufficient cpu" in root.status_message
    assert attempt.exported == ""  # tracing off: exported nowhere
    assert attempt.spans[2].parent_span_id == root.span_id

    for _ in range(PER_POD + 2):
        state.queue.flush(now=time.monotonic() + 3600)  # from the pool to active
        assert isinstance(run_attempt(state, traces), Unschedulable)
    assert len(store.attempts("ns", "big")) == PER_POD  # the newest only

    # A decided attempt is filed once its binding is confirmed.
    state.apply_pod("ADDED", pod("small", cpu=100))
    decision = run_attempt(state, traces)
    assert isinstance(decision, Decision)
    assert store.attempts("ns", "small") == []
    traces.bind_request(decision.pod.uid, decision.decision_id)
    traces.bind_sent(decision.pod.uid, decision.decision_id, accepted=True)
    traces.confirmed(decision.pod.uid, decision.node)
    assert names(store, "small") == [
        ["schedule_pod", "queue_wait", "filter", "assume", "bind_request", "confirm"]
    ]
    # A third pod: the pod attempted least recently ("big") is forgotten.
    state.apply_pod("ADDED", pod("other", cpu=100))
    assert isinstance(run_attempt(state, traces), Decision)
    state.apply_pod("DELETED", pod("other", cpu=100))
    traces.gone("uid-other")
    assert store.attempts("ns", "big") == [] and len(names(store, "small")) == 1
    assert len(names(store, "other")) == 1


async def get_trace(
    state: SchedulerState, store: AttemptStore | None, request: scheduler_pb2.GetPodTraceRequest
) -> scheduler_pb2.PodTrace:
    async with serving(state, attempts=store) as served:
        reply: scheduler_pb2.PodTrace = await served.stub.GetPodTrace(request, timeout=10)
        return reply


def code_of(state: SchedulerState, store: AttemptStore | None, ns: str, name: str) -> str:
    request = scheduler_pb2.GetPodTraceRequest(namespace=ns, name=name)
    with pytest.raises(grpc.aio.AioRpcError) as err:
        asyncio.run(get_trace(state, store, request))
    return f"{err.value.code().name}: {err.value.details()}"


def test_get_pod_trace_answers_from_the_store(store: AttemptStore) -> None:
    state, traces, _ = traced_state(time.monotonic())
    state.apply_node("ADDED", node("n1", cpu=500))
    state.apply_pod("ADDED", pod("big"))
    for _ in range(3):
        state.queue.flush(now=time.monotonic() + 3600)  # from the pool to active
        assert isinstance(run_attempt(state, traces), Unschedulable)
    request = scheduler_pb2.GetPodTraceRequest(namespace="ns", name="big")
    reply = asyncio.run(get_trace(state, store, request))
    assert reply.pod.namespace == "ns" and reply.pod.name == "big" and reply.pod.uid == "uid-big"
    assert len(reply.attempts) == 3
    attempts = [a.spans[0].attributes["splitsched.attempt"] for a in reply.attempts]
    assert attempts == ["1", "2", "3"]  # oldest first
    first = reply.attempts[0]
    assert [s.name for s in first.spans] == ["schedule_pod", "queue_wait", "filter"]
    assert first.spans[0].error and first.spans[2].parent_span_id == first.spans[0].span_id
    assert all(s.duration_ns >= 0 and s.start.seconds > 0 for s in first.spans)
    request.attempts = 1
    newest = asyncio.run(get_trace(state, store, request)).attempts
    assert [a.spans[0].attributes["splitsched.attempt"] for a in newest] == ["3"]

    assert code_of(state, store, "ns", "ghost").startswith("NOT_FOUND: pod ns/ghost")
    assert code_of(state, store, "", "big").startswith("INVALID_ARGUMENT")
    assert "no attempts are kept" in code_of(state, None, "ns", "big")
