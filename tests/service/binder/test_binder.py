"""Service tests of the binder, in process: its gRPC server, worker pool and reporter against
a fake Kubernetes API (an aiohttp server answering the Binding endpoint with scripted
201/409/404/500/429/connection resets, and otherwise like the real one) and a fake
``Scheduler`` gRPC servicer that collects the outcomes it is sent (the harness and fakes:
``tests/support/binder.py``, ``tests/support/fakes/``).

Each test runs its own event loop (``asyncio.run``), so no pytest asyncio plugin is needed.
"""

from __future__ import annotations

import asyncio
import random
import time

import pytest

from services.binder import worker
from services.binder.kubeapi import parse_retry_after
from services.binder.metrics import BinderMetrics
from services.binder.reporter import OutcomeReporter
from splitsched.runtime.retry import backoff_delay
from splitsched.v1 import (
    binder_pb2,
    scheduler_pb2,
    types_pb2,
)
from tests.support.binder import (
    Harness,
    add_pod,
    bind_request,
    deadline_in,
    eventually,
    free_port,
    harness,
    run,
)
from tests.support.fakes.kube import Scripted
from tests.support.fakes.scheduler import FakeScheduler, start_scheduler

Outcome = scheduler_pb2.BindingOutcome


async def accept(h: Harness, request: binder_pb2.BindRequest) -> None:
    response = await h.stub.Bind(request)
    assert response.accepted, response.reason
    assert response.decision_id == request.decision_id


# -- outcome classes -----------------------------------------------------------------------


def test_201_is_bound_and_reports_every_field_then_writes_scheduled_event() -> None:
    async def body() -> None:
        async with harness() as h:
            add_pod(h, "p1")
            await accept(h, bind_request("d1", "p1", node="node-a"))
            outcome = await h.outcome("d1")
            assert outcome.result == Outcome.BOUND
            assert outcome.pod == types_pb2.PodRef(namespace="ns", name="p1", uid="uid-p1")
            assert outcome.node == "node-a"
            assert outcome.attempts == 1
            assert outcome.last_http_status == 201
            assert outcome.binder_id == "binder-test"
            assert outcome.trace_context["traceparent"].startswith("00-111")
            assert abs(outcome.finished_at.ToNanoseconds() / 1e9 - time.time()) < 10
            # The Binding body: pod uid as a precondition, the node as target.
            (_, ns, name, sent) = h.kube.bindings[0]
            assert (ns, name) == ("ns", "p1")
            assert sent == {
                "apiVersion": "v1",
                "kind": "Binding",
                "metadata": {"name": "p1", "namespace": "ns", "uid": "uid-p1"},
                "target": {"apiVersion": "v1", "kind": "Node", "name": "node-a"},
            }
            assert h.kube.pods[("ns", "p1")].node == "node-a"
            events = await eventually(lambda: h.kube.events)
            event = events[0]
            assert event["reason"] == "Scheduled"
            assert event["type"] == "Normal"
            assert event["action"] == "Binding"
            assert event["note"] == "Successfully assigned ns/p1 to node-a"
            assert event["reportingController"] == "splitsched"
            assert event["reportingInstance"]
            assert event["regarding"] == {
                "apiVersion": "v1", "kind": "Pod", "namespace": "ns", "name": "p1",
                "uid": "uid-p1",
            }  # fmt: skip
            assert event["metadata"]["namespace"] == "ns"
            assert event["eventTime"].endswith("Z")
            assert (
                h.metrics.registry.get_sample_value(
                    "splitsched_binder_outcomes_total", {"result": "BOUND"}
                )
                == 1.0
            )

    run(body())


def test_409_already_on_the_same_node_is_bound() -> None:
    async def body() -> None:
        async with harness() as h:
            add_pod(h, "p1", node="node-a")  # an earlier attempt's response was lost
            await accept(h, bind_request("d1", "p1", node="node-a"))
            outcome = await h.outcome("d1")
            assert outcome.result == Outcome.BOUND
            assert outcome.last_http_status == 409
            assert outcome.attempts == 1

    run(body())


def test_409_on_another_node_is_conflict_and_writes_no_event() -> None:
    async def body() -> None:
        async with harness() as h:
            add_pod(h, "p1", node="node-b")
            await accept(h, bind_request("d1", "p1", node="node-a"))
            outcome = await h.outcome("d1")
            assert outcome.result == Outcome.CONFLICT
            assert "node-b" in outcome.message
            assert h.kube.pods[("ns", "p1")].node == "node-b"
            await asyncio.sleep(0.1)
            assert h.kube.events == []

    run(body())


def test_404_is_pod_gone() -> None:
    async def body() -> None:
        async with harness() as h:
            await accept(h, bind_request("d1", "missing"))
            outcome = await h.outcome("d1")
            assert outcome.result == Outcome.POD_GONE
            assert outcome.last_http_status == 404
            assert outcome.attempts == 1

    run(body())


def test_recreated_pod_with_another_uid_is_pod_gone_and_not_bound() -> None:
    async def body() -> None:
        async with harness() as h:
            add_pod(h, "p1")
            h.kube.pods[("ns", "p1")].uid = "uid-new"
            await accept(h, bind_request("d1", "p1", uid="uid-old"))
            outcome = await h.outcome("d1")
            assert outcome.result == Outcome.POD_GONE
            assert "re-created" in outcome.message
            assert h.kube.pods[("ns", "p1")].node == ""

    run(body())


def test_409_for_a_pod_being_deleted_is_pod_gone() -> None:
    async def body() -> None:
        async with harness() as h:
            add_pod(h, "p1")
            h.kube.pods[("ns", "p1")].deleting = True
            h.kube.script[("ns", "p1")] = [Scripted(409, message="pod p1 is being deleted")]
            await accept(h, bind_request("d1", "p1"))
            assert (await h.outcome("d1")).result == Outcome.POD_GONE

    run(body())


def test_other_4xx_is_failed_with_the_api_message_without_retry() -> None:
    async def body() -> None:
        async with harness() as h:
            add_pod(h, "p1")
            h.kube.script[("ns", "p1")] = [Scripted(403, message="binding is forbidden")]
            await accept(h, bind_request("d1", "p1"))
            outcome = await h.outcome("d1")
            assert outcome.result == Outcome.FAILED
            assert "binding is forbidden" in outcome.message
            assert outcome.last_http_status == 403
            assert outcome.attempts == 1
            assert h.kube.binding_count("p1") == 1

    run(body())


# -- retries -------------------------------------------------------------------------------


def test_5xx_and_connection_reset_are_retried_with_jittered_backoff() -> None:
    async def body() -> None:
        async with harness(backoff_base=0.01, backoff_cap=0.05) as h:
            add_pod(h, "p1")
            h.kube.script[("ns", "p1")] = [
                Scripted(500),
                Scripted(reset=True),
                Scripted(503),
                Scripted(201),
            ]
            await accept(h, bind_request("d1", "p1", max_attempts=5))
            outcome = await h.outcome("d1")
            assert outcome.result == Outcome.BOUND
            assert outcome.attempts == 4
            assert outcome.last_http_status == 201
            assert h.kube.binding_count("p1") == 4
            # Three backoffs, each within full jitter's bound min(cap, base * 2**(n-1)).
            assert len(h.sleeps) == 3
            for n, delay in enumerate(h.sleeps, start=1):
                assert 0.0 <= delay <= min(0.05, 0.01 * 2 ** (n - 1))
            assert h.attempts_metric("500") == 1
            assert h.attempts_metric("error") == 1
            assert h.attempts_metric("503") == 1
            assert h.attempts_metric("201") == 1

    run(body())


def test_429_retry_after_is_honoured() -> None:
    async def body() -> None:
        async with harness(backoff_base=0.001, backoff_cap=0.002) as h:
            add_pod(h, "p1")
            h.kube.script[("ns", "p1")] = [Scripted(429, retry_after="1")]
            await accept(h, bind_request("d1", "p1"))
            outcome = await h.outcome("d1")
            assert outcome.result == Outcome.BOUND
            assert outcome.attempts == 2
            first, second = h.kube.bindings[0][0], h.kube.bindings[1][0]
            assert second - first >= 0.95  # waited Retry-After, not the 2 ms backoff
            assert h.sleeps == [1.0]

    run(body())


def test_a_429_holds_the_other_bindings_of_the_binder_too() -> None:
    """The server's throttling is about the whole client: a binding accepted after p1's
    429 (Retry-After 1) waits for it too, though its own request was never refused."""

    async def body() -> None:
        async with harness(backoff_base=0.001, backoff_cap=0.002) as h:
            add_pod(h, "p1")
            add_pod(h, "p2")
            h.kube.script[("ns", "p1")] = [Scripted(429, retry_after="1")]
            await accept(h, bind_request("d1", "p1"))
            await asyncio.sleep(0.1)  # p1's 429 has come back
            await accept(h, bind_request("d2", "p2"))
            assert (await h.outcome("d2")).result == Outcome.BOUND
            assert (await h.outcome("d1")).result == Outcome.BOUND
            refused_at = h.kube.bindings[0][0]
            p2_at = next(t for t, _, name, _ in h.kube.bindings if name == "p2")
            assert p2_at - refused_at >= 0.95
            throttled = h.metrics.registry.get_sample_value("splitsched_binder_api_throttled_total")
            assert throttled == 1

    run(body())


def test_max_attempts_exhausted_is_deadline_exceeded() -> None:
    async def body() -> None:
        async with harness() as h:
            add_pod(h, "p1")
            h.kube.script[("ns", "p1")] = [Scripted(500) for _ in range(10)]
            await accept(h, bind_request("d1", "p1", max_attempts=3))
            outcome = await h.outcome("d1")
            assert outcome.result == Outcome.DEADLINE_EXCEEDED
            assert outcome.attempts == 3
            assert outcome.last_http_status == 500
            assert h.kube.binding_count("p1") == 3

    run(body())


def test_default_and_capped_max_attempts() -> None:
    async def body() -> None:
        async with harness(backoff_base=0.0005, backoff_cap=0.001) as h:
            add_pod(h, "p1")
            add_pod(h, "p2")
            h.kube.script[("ns", "p1")] = [Scripted(500) for _ in range(50)]
            h.kube.script[("ns", "p2")] = [Scripted(500) for _ in range(50)]
            await accept(h, bind_request("d1", "p1", max_attempts=0))  # default 5
            await accept(h, bind_request("d2", "p2", max_attempts=1000))  # capped at 20
            assert (await h.outcome("d1")).attempts == 5
            assert (await h.outcome("d2")).attempts == 20

    run(body())


def test_deadline_stops_retries() -> None:
    async def body() -> None:
        async with harness(backoff_base=0.05, backoff_cap=0.1) as h:
            add_pod(h, "p1")
            h.kube.script[("ns", "p1")] = [Scripted(500) for _ in range(100)]
            started = time.monotonic()
            await accept(h, bind_request("d1", "p1", max_attempts=20, deadline=0.4))
            outcome = await h.outcome("d1")
            assert outcome.result == Outcome.DEADLINE_EXCEEDED
            assert 1 <= outcome.attempts < 20
            assert time.monotonic() - started < 2.0
            # A Retry-After beyond the deadline ends it at once rather than sleeping.
            add_pod(h, "p2")
            h.kube.script[("ns", "p2")] = [Scripted(429, retry_after="30")]
            started = time.monotonic()
            await accept(h, bind_request("d2", "p2", deadline=5))
            outcome = await h.outcome("d2")
            assert outcome.result == Outcome.DEADLINE_EXCEEDED
            assert outcome.last_http_status == 429
            assert time.monotonic() - started < 3.0

    run(body())


# -- the gRPC surface ----------------------------------------------------------------------


def test_invalid_requests_are_refused_with_a_reason() -> None:
    async def body() -> None:
        async with harness() as h:
            good = bind_request("d1", "p1")
            cases: list[tuple[binder_pb2.BindRequest, str]] = []
            r = binder_pb2.BindRequest()
            r.CopyFrom(good)
            r.decision_id = ""
            cases.append((r, "decision_id"))
            for attr, text in (("namespace", "pod.namespace"), ("name", "pod.name"),
                               ("uid", "pod.uid")):  # fmt: skip
                r = binder_pb2.BindRequest()
                r.CopyFrom(good)
                setattr(r.pod, attr, "")
                cases.append((r, text))
            r = binder_pb2.BindRequest()
            r.CopyFrom(good)
            r.node = ""
            cases.append((r, "node"))
            r = binder_pb2.BindRequest()
            r.CopyFrom(good)
            r.deadline.CopyFrom(deadline_in(-1))
            cases.append((r, "deadline"))
            r = binder_pb2.BindRequest()
            r.CopyFrom(good)
            r.ClearField("deadline")
            cases.append((r, "deadline"))
            for request, word in cases:
                response = await h.stub.Bind(request)
                assert not response.accepted
                assert word in response.reason
            batch = await h.stub.BindBatch(
                binder_pb2.BindBatchRequest(requests=[cases[0][0], good])
            )
            assert [x.accepted for x in batch.responses] == [False, True]
            assert batch.responses[1].decision_id == "d1"
            assert (await h.outcome("d1")).result == Outcome.POD_GONE
            assert h.kube.binding_count("p1") == 1

    run(body())


def test_same_decision_id_is_accepted_once_and_never_bound_twice() -> None:
    async def body() -> None:
        async with harness() as h:
            add_pod(h, "p1")
            release = asyncio.Event()
            h.kube.script[("ns", "p1")] = [Scripted(201, hold=release)]
            await accept(h, bind_request("d1", "p1"))
            await eventually(lambda: h.kube.bindings)
            await accept(h, bind_request("d1", "p1"))  # while in flight
            release.set()
            await h.outcome("d1")
            # After it finished: accepted, the outcome re-reported, no second Binding.
            await accept(h, bind_request("d1", "p1"))
            await eventually(lambda: len(h.scheduler.for_decision("d1")) == 2)
            assert h.kube.binding_count("p1") == 1
            assert [o.result for o in h.scheduler.for_decision("d1")] == [Outcome.BOUND] * 2

    run(body())


def test_full_queue_refuses_with_a_reason() -> None:
    async def body() -> None:
        async with harness(workers=1, max_pending=2) as h:
            h.kube.hold_all = asyncio.Event()
            for i in range(3):
                add_pod(h, f"p{i}")
            await accept(h, bind_request("d0", "p0"))
            await eventually(lambda: h.kube.bindings)  # the only worker is busy
            await accept(h, bind_request("d1", "p1"))
            await accept(h, bind_request("d2", "p2"))
            response = await h.stub.Bind(bind_request("d3", "p3"))
            assert not response.accepted
            assert "queue full" in response.reason
            h.kube.hold_all.set()
            for d in ("d0", "d1", "d2"):
                assert (await h.outcome(d)).result == Outcome.BOUND

    run(body())


def test_report_unschedulable_writes_event_and_condition() -> None:
    async def body() -> None:
        async with harness() as h:
            add_pod(h, "p1")  # read first: the binder writes nothing about a pod not there
            message = "0/3 nodes are available: 3 Insufficient cpu."
            ack = await h.stub.ReportUnschedulable(
                binder_pb2.UnschedulableReport(
                    pod=types_pb2.PodRef(namespace="ns", name="p1", uid="uid-p1"),
                    message=message,
                    reason="Unschedulable",
                    profile="splitsched",
                )
            )
            assert ack.accepted, ack.reason
            events = await eventually(lambda: h.kube.events)
            assert events[0]["reason"] == "FailedScheduling"
            assert events[0]["type"] == "Warning"
            assert events[0]["note"] == message
            assert events[0]["regarding"]["uid"] == "uid-p1"
            ns, name, content_type, patch = (await eventually(lambda: h.kube.patches))[0]
            assert (ns, name) == ("ns", "p1")
            assert content_type == "application/strategic-merge-patch+json"
            (condition,) = patch["status"]["conditions"]
            assert condition["type"] == "PodScheduled"
            assert condition["status"] == "False"
            assert condition["reason"] == "Unschedulable"
            assert condition["message"] == message
            ack = await h.stub.ReportUnschedulable(binder_pb2.UnschedulableReport())
            assert not ack.accepted

    run(body())


# -- reporting -----------------------------------------------------------------------------


def test_outcomes_are_buffered_while_the_scheduler_is_down_and_delivered_later() -> None:
    async def body() -> None:
        async with harness(scheduler_up=False) as h:
            for i in range(3):
                add_pod(h, f"p{i}")
                await accept(h, bind_request(f"d{i}", f"p{i}"))
            await eventually(lambda: h.reporter.backlog == 3 and not h.reporter.connected)
            assert h.metrics.registry.get_sample_value("splitsched_binder_report_backlog") == 3
            server, _ = await start_scheduler(h.scheduler, port=h.scheduler_port)
            try:
                await eventually(lambda: h.reporter.backlog == 0, within=15)
                assert {o.decision_id for o in h.scheduler.outcomes} == {"d0", "d1", "d2"}
                assert all(o.result == Outcome.BOUND for o in h.scheduler.outcomes)
                assert h.reporter.connected
                # Decisions finished after the reconnect are reported too.
                add_pod(h, "p9")
                await accept(h, bind_request("d9", "p9"))
                assert (await h.outcome("d9")).result == Outcome.BOUND
            finally:
                await server.stop(0)

    run(body())


def test_reporter_blocks_workers_instead_of_dropping() -> None:
    async def body() -> None:
        metrics = BinderMetrics()
        port = free_port()
        reporter = OutcomeReporter(
            target=f"127.0.0.1:{port}", binder_id="b", metrics=metrics, max_buffer=2,
            backoff_base=0.01, backoff_cap=0.05, rpc_timeout=0.5,
        )  # fmt: skip
        await reporter.start()
        try:
            await reporter.put(Outcome(decision_id="a"))
            await reporter.put(Outcome(decision_id="b"))
            third = asyncio.create_task(reporter.put(Outcome(decision_id="c")))
            await asyncio.sleep(0.2)
            assert not third.done()  # blocked, nothing dropped
            fake = FakeScheduler()
            server, _ = await start_scheduler(fake, port=port)
            try:
                await asyncio.wait_for(third, timeout=10)
                assert await reporter.flush(within=10)
                assert [o.decision_id for o in fake.outcomes] == ["a", "b", "c"]
            finally:
                await server.stop(0)
        finally:
            await reporter.close()

    run(body())


# -- shutdown ------------------------------------------------------------------------------


def test_graceful_shutdown_fails_queued_finishes_running_refuses_new() -> None:
    async def body() -> None:
        async with harness(workers=1) as h:
            release = asyncio.Event()
            for i in range(3):
                add_pod(h, f"p{i}")
            h.kube.script[("ns", "p0")] = [Scripted(201, hold=release)]
            await accept(h, bind_request("d0", "p0"))
            await eventually(lambda: h.kube.bindings)
            await accept(h, bind_request("d1", "p1"))
            await accept(h, bind_request("d2", "p2"))
            shutdown = asyncio.create_task(h.pool.shutdown(5.0))
            for d in ("d1", "d2"):
                outcome = await h.outcome(d)
                assert outcome.result == Outcome.FAILED
                assert outcome.message == "binder shutting down"
                assert outcome.attempts == 0
            response = await h.stub.Bind(bind_request("d3", "p3"))
            assert not response.accepted
            assert response.reason == "binder shutting down"
            assert not shutdown.done()  # waiting for the running binding
            release.set()
            await asyncio.wait_for(shutdown, timeout=5)
            assert (await h.outcome("d0")).result == Outcome.BOUND
            assert h.kube.binding_count("p1") == 0

    run(body())


def test_shutdown_grace_expiry_reports_an_interrupted_binding_in_progress_not_failed() -> None:
    """The Binding POST was sent and never answered: it may still land (here it does, after
    the binder gave up), so the report must not free the pod's room: IN_PROGRESS, and the
    scheduler's watch or bind deadline decides."""

    async def body() -> None:
        async with harness(workers=2) as h:
            add_pod(h, "p0")
            landing = asyncio.Event()
            h.kube.script[("ns", "p0")] = [Scripted(201, hold=landing)]  # answers only later
            await accept(h, bind_request("d0", "p0"))
            await eventually(lambda: h.kube.bindings)
            started = time.monotonic()
            await h.pool.shutdown(0.3)
            assert time.monotonic() - started < 2.0
            # (The first report of d0 could be a routine IN_PROGRESS heartbeat.)
            (outcome,) = await eventually(
                lambda: [
                    o
                    for o in h.scheduler.for_decision("d0")
                    if o.message.startswith("binder shutting down")
                ]
            )
            assert outcome.result == Outcome.IN_PROGRESS
            assert "unknown" in outcome.message
            assert not any(o.result == Outcome.FAILED for o in h.scheduler.for_decision("d0"))
            landing.set()  # the late Binding lands: its room was never given away
            await eventually(lambda: h.kube.pods[("ns", "p0")].node == "node-a")

    run(body())


def test_in_progress_leaves_out_a_queued_decision_past_its_deadline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """IN_PROGRESS tells the scheduler a Binding may still land, so it holds the decision
    past its own deadline while a binder reports it. A running binding may (its answer can
    be lost and the binder still reading the pod to learn whether it landed); one still
    queued when its deadline passed never starts, so it is not reported."""
    monkeypatch.setattr(worker, "IN_PROGRESS_AFTER", 0.0)

    async def body() -> None:
        async with harness(workers=1) as h:
            release = asyncio.Event()
            add_pod(h, "p0")
            add_pod(h, "p1")
            h.kube.script[("ns", "p0")] = [Scripted(201, hold=release)]
            await accept(h, bind_request("d0", "p0", deadline=10.0))
            await eventually(lambda: h.kube.bindings)
            await accept(h, bind_request("d1", "p1", deadline=0.3))
            assert {o.decision_id for o in h.pool.in_progress()} == {"d0", "d1"}
            await asyncio.sleep(0.4)  # d1's deadline passed while d0 holds the one worker
            assert [o.decision_id for o in h.pool.in_progress()] == ["d0"]
            release.set()
            assert (await h.outcome("d0")).result == Outcome.BOUND
            assert (await h.outcome("d1")).result == Outcome.DEADLINE_EXCEEDED

    run(body())


# -- helpers -------------------------------------------------------------------------------


def test_backoff_delay_is_full_jitter_capped() -> None:
    rng = random.Random(1)
    for attempt in range(1, 12):
        bound = min(5.0, 0.1 * 2 ** (attempt - 1))
        delays = [backoff_delay(attempt, base=0.1, cap=5.0, rng=rng) for _ in range(200)]
        assert all(0.0 <= d <= bound for d in delays)
        assert max(delays) > bound * 0.8  # spread over the whole range, not a fixed delay


def test_parse_retry_after() -> None:
    assert parse_retry_after("3") == 3.0
    assert parse_retry_after(None) is None
    assert parse_retry_after("soon") is None
    now = 1_700_000_000.0
    assert parse_retry_after("Tue, 14 Nov 2023 22:13:30 GMT", now=now) == 10.0
    assert parse_retry_after("Tue, 14 Nov 2023 22:13:00 GMT", now=now) == 0.0
