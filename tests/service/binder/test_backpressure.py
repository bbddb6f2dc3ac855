"""The binder under a burst (docs/backpressure.md): a decision with too little time left
before its deadline is reported DEADLINE_EXCEEDED without a request, so the workers'
rate-limited requests go to decisions that can still be bound; and a request waiting for
a rate-limit token past its budget is never sent (a Binding could land after the
scheduler gave the room away)."""

from __future__ import annotations

import pytest

from services.binder.kubeapi import KubeClient, KubeEndpoint
from services.binder.metrics import BinderMetrics
from services.binder.worker import MIN_START_MARGIN
from splitsched.v1 import binder_pb2, scheduler_pb2
from tests.support.binder import Harness, add_pod, bind_request, harness, run
from tests.support.fakes.kube import FakeKube, FakePod, serving

Outcome = scheduler_pb2.BindingOutcome
REQUESTS = "splitsched_binder_api_requests_total"


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


def test_a_request_is_not_sent_after_its_budget_ran_out_waiting_for_a_token() -> None:
    async def body() -> None:
        kube = FakeKube()
        kube.pods[("ns", "p")] = FakePod(uid="uid-p")
        metrics = BinderMetrics()
        path = "/api/v1/namespaces/ns/pods/p"
        async with serving(kube) as url:
            client = KubeClient(
                KubeEndpoint(host=url), qps=0.5, burst=1, requests=metrics.api_requests
            )
            try:
                assert (await client.request("GET", path, budget=5.0)).status == 200
                # The next token comes in 2 s: a request with 0.2 s to spare must not wait
                # for it and go out late (it would have, before).
                with pytest.raises(TimeoutError):
                    await client.request("GET", path, budget=0.2)
                assert kube.reads == [path]
                sent = {"method": "GET"}
                assert metrics.registry.get_sample_value(REQUESTS, sent) == 1
            finally:
                await client.close()

    run(body())


def test_the_health_probe_does_not_queue_behind_rate_limited_work() -> None:
    """A binder rate-limited by --qps (or held off by the server) still sees a live API
    server as reachable: its /readyz probe skips the limiter. Before, the probe waited
    for a token behind the queued bindings, ran out of budget and turned the binder
    NOT_SERVING, so a new scheduler leader never became ready (tests/e2e/test_ha.py)."""

    async def body() -> None:
        kube = FakeKube()
        kube.pods[("ns", "p")] = FakePod(uid="uid-p")
        async with serving(kube) as url:
            client = KubeClient(KubeEndpoint(host=url), qps=0.2, burst=1)
            try:
                await client.request("GET", "/api/v1/namespaces/ns/pods/p", budget=5.0)
                assert await client.probe(budget=0.5)  # the next token is 5 s away
            finally:
                await client.close()

    run(body())


def test_slow_bindings_never_stop_the_binder_starting_decisions() -> None:
    """A binding's recent duration counts retries and limiter waits, so under faults it can
    exceed a decision's whole deadline; the margin it sets is capped, or every decision
    would be refused unstarted and no binding would ever bring the estimate down (the
    faults tier's mixed runs bound almost nothing: 41,623 outcomes for 300 pods)."""

    async def body() -> None:
        async with harness() as h:
            add_pod(h, "p")
            h.pool._bind_seconds = 20.0  # as after bindings slowed by retries and hold-offs
            await accept(h, bind_request("d-p", "p", deadline=5))
            assert (await h.outcome("d-p")).result == Outcome.BOUND

    run(body())
