"""The binder under a burst (docs/backpressure.md): a decision with too little time left
before its deadline is reported DEADLINE_EXCEEDED without a request, so the workers'
rate-limited requests go to decisions that can still be bound."""

from __future__ import annotations

from services.binder.worker import MIN_START_MARGIN
from splitsched.v1 import binder_pb2, scheduler_pb2
from tests.support.binder import Harness, add_pod, bind_request, harness, run

Outcome = scheduler_pb2.BindingOutcome


async def accept(h: Harness, request: binder_pb2.BindRequest) -> None:
    response = await h.stub.Bind(request)
    assert response.accepted, response.reason


def test_a_decision_at_the_edge_of_its_deadline_is_not_started() -> None:
    async def body() -> None:
        async with harness() as h:
            add_pod(h, "late")
            add_pod(h, "on-time")
            await accept(h, bind_request("d-late", "late", deadline=MIN_START_MARGIN / 2))
            late = await h.outcome("d-late")
            assert late.result == Outcome.DEADLINE_EXCEEDED and late.attempts == 0
            assert "not started" in late.message
            assert h.kube.reads == [] and h.kube.bindings == []  # no request spent on it
            await accept(h, bind_request("d-on-time", "on-time", deadline=30))
            assert (await h.outcome("d-on-time")).result == Outcome.BOUND

    run(body())
