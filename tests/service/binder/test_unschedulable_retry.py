"""The binder's FailedScheduling Event and PodScheduled=False condition survive API faults:
each is retried with the Binding's backoff (Retry-After honoured) through 503s, 429s and
connection resets, a bounded number of times, while bindings go on unblocked.

In process: the binder's pool and gRPC server against the fake Kubernetes API of
``tests/support/fakes/kube.py``, through the real ``FaultProxy`` (plain HTTP upstream)
injecting the faults.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import AsyncIterator
from dataclasses import dataclass

import grpc
import pytest
from aiohttp import web

from services.binder import recorder
from services.binder.kubeapi import KubeClient, KubeEndpoint
from services.binder.metrics import BinderMetrics
from services.binder.reporter import OutcomeReporter
from services.binder.server import BinderServicer
from services.binder.worker import BindingPool
from splitsched.runtime import grpcsrv
from splitsched.testing.faultproxy import Fault, FaultProxy
from splitsched.v1 import binder_pb2, binder_pb2_grpc, scheduler_pb2, types_pb2
from tests.support.binder import bind_request, eventually, run
from tests.support.fakes.kube import FakeKube, FakePod
from tests.support.fakes.scheduler import FakeScheduler, start_scheduler

EVENTS = r"/apis/events\.k8s\.io/v1/namespaces/ns/events"
STATUS = r"/api/v1/namespaces/ns/pods/p1/status"
MESSAGE = "0/3 nodes are available: 3 Insufficient cpu."


@dataclass
class Rig:
    kube: FakeKube
    proxy: FaultProxy
    scheduler: FakeScheduler
    stub: binder_pb2_grpc.BinderAsyncStub
    sleeps: list[float]

    async def report(self) -> None:
        ack = await self.stub.ReportUnschedulable(
            binder_pb2.UnschedulableReport(
                pod=types_pb2.PodRef(namespace="ns", name="p1", uid="uid-p1"),
                message=MESSAGE,
                reason="Unschedulable",
                profile="splitsched",
            )
        )
        assert ack.accepted, ack.reason

    def tries(self, method: str, path: str) -> int:
        return sum(
            1
            for x in self.proxy.exchanges
            if x.method == method and path.replace("\\", "") in x.path
        )

    async def logged_tries(self, method: str, path: str, expected: int) -> int:
        """The tries the proxy logged, once it has logged `expected` of them or 2 s passed.

        The proxy logs a forwarded exchange when its answer is back, which is after the fake
        server has acted on it: a test that saw the effect waits for the log to catch up.
        """
        with contextlib.suppress(AssertionError):
            await eventually(lambda: self.tries(method, path) >= expected, within=2.0)
        return self.tries(method, path)


@contextlib.asynccontextmanager
async def rig() -> AsyncIterator[Rig]:
    kube = FakeKube()
    runner = web.AppRunner(kube.app(), handle_signals=False, shutdown_timeout=1.0)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    proxy = FaultProxy(f"http://127.0.0.1:{runner.addresses[0][1]}", ssl_context=False, seed=3)
    proxy.start()
    client = KubeClient(KubeEndpoint(host=proxy.url))
    metrics = BinderMetrics()
    fake_scheduler = FakeScheduler()
    sched_server, sched_port = await start_scheduler(fake_scheduler)
    reporter = OutcomeReporter(
        target=f"127.0.0.1:{sched_port}", binder_id="binder-test", metrics=metrics,
        flush_interval=0.005, backoff_base=0.02, backoff_cap=0.2, rpc_timeout=1.0,
    )  # fmt: skip
    await reporter.start()
    sleeps: list[float] = []

    async def recording_sleep(delay: float) -> None:
        sleeps.append(delay)
        await asyncio.sleep(delay)

    pool = BindingPool(
        kube=client, reporter=reporter, metrics=metrics, binder_id="binder-test", workers=2,
        backoff_base=0.01, backoff_cap=0.05, rng=random.Random(7), sleep=recording_sleep,
    )  # fmt: skip
    pool.start()
    server = await grpcsrv.serve(
        listen="127.0.0.1:0",
        servicers=[(binder_pb2_grpc.add_BinderServicer_to_server, BinderServicer(pool))],
        service_names=["splitsched.v1.Binder"],
    )
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{server.port}")
    try:
        yield Rig(kube, proxy, fake_scheduler, binder_pb2_grpc.BinderStub(channel), sleeps)
    finally:
        await pool.shutdown(0.5)
        await reporter.close()
        await channel.close()
        await server.stop(0)
        await sched_server.stop(0)
        await client.close()
        proxy.stop()
        await runner.cleanup()


def test_a_throttled_scheduled_event_is_sent_again_after_the_hold_off() -> None:
    """Best-effort as the Scheduled Event is, the server's 429 means it never ran: it is
    sent again once Retry-After has passed (a 503 would drop it)."""

    async def body() -> None:
        async with rig() as r:
            r.kube.pods[("ns", "p1")] = FakePod(uid="uid-p1")
            r.proxy.add(Fault.THROTTLE, method="POST", path=EVENTS, seconds=0.2, count=2)
            accepted = await r.stub.Bind(bind_request("d1", "p1"))
            assert accepted.accepted
            events = await eventually(lambda: r.kube.events)
            assert [e["reason"] for e in events] == ["Scheduled"]
            assert await r.logged_tries("POST", EVENTS, 3) == 3

    run(body())


def test_a_503_then_success_still_writes_event_and_condition() -> None:
    async def body() -> None:
        async with rig() as r:
            r.proxy.add(Fault.ERROR, method="POST", path=EVENTS, status=503, count=1)
            r.proxy.add(Fault.ERROR, method="PATCH", path=STATUS, status=503, count=1)
            await r.report()
            events = await eventually(lambda: r.kube.events)
            patches = await eventually(lambda: r.kube.patches)
            assert events[0]["reason"] == "FailedScheduling" and events[0]["note"] == MESSAGE
            (condition,) = patches[0][3]["status"]["conditions"]
            assert condition["status"] == "False" and condition["message"] == MESSAGE
            assert await r.logged_tries("POST", EVENTS, 2) == 2
            assert await r.logged_tries("PATCH", STATUS, 2) == 2
            assert [rule.fired for rule in r.proxy.rules] == [1, 1]

    run(body())


def test_throttling_and_resets_are_retried_honouring_retry_after() -> None:
    async def body() -> None:
        async with rig() as r:
            r.proxy.add(Fault.THROTTLE, method="POST", path=EVENTS, seconds=0.3, count=2)
            r.proxy.add(Fault.RESET, method="PATCH", path=STATUS, count=2)
            await r.report()
            await eventually(lambda: r.kube.events)
            await eventually(lambda: r.kube.patches)
            assert len(r.kube.events) == 1 and len(r.kube.patches) == 1
            assert await r.logged_tries("POST", EVENTS, 3) == 3
            assert await r.logged_tries("PATCH", STATUS, 3) == 3
            # The event waited Retry-After (0.3 s) twice; the resets got the short backoff.
            assert sorted(r.sleeps)[-2:] == [0.3, 0.3]
            assert all(delay <= 0.05 for delay in sorted(r.sleeps)[:-2])

    run(body())


def test_retries_are_bounded_and_never_block_bindings(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="services.binder.recorder")

    async def body() -> None:
        async with rig() as r:
            r.proxy.add(Fault.ERROR, method="POST", path=EVENTS, status=503)  # always
            r.kube.pods[("ns", "b1")] = FakePod(uid="uid-b1")
            await r.report()
            response = await r.stub.Bind(bind_request("d1", "b1"))
            assert response.accepted, response.reason
            outcome = await eventually(lambda: r.scheduler.for_decision("d1"))
            assert outcome[0].result == scheduler_pb2.BindingOutcome.BOUND
            await eventually(lambda: r.kube.patches)  # the condition lands regardless
            gave_up = "event FailedScheduling for ns/p1 not written"
            await eventually(lambda: any(gave_up in m for m in caplog.messages))
            # Every FailedScheduling try, plus b1's Scheduled event (best effort, one try).
            expected = recorder.UNSCHEDULABLE_WRITE_ATTEMPTS + 1
            assert await r.logged_tries("POST", EVENTS, expected) == expected
            assert r.kube.events == []

    run(body())
