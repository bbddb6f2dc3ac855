"""Scheduler high availability on the wire, in process: a standby refuses reports
(FAILED_PRECONDITION) and, being NOT_SERVING, gets none from a binder's health-checked
round-robin channel; a binder re-reports its in-flight decisions, never after their final
outcome; a standby is not ready unless told.

The Lease election runs against a real API server in
tests/integration/test_leader_election.py; adoption in tests/unit/scheduler/test_adoption.py.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import grpc
import pytest
from aiohttp import web

from services.binder import worker as binder_worker
from services.binder.jobs import BindJob
from services.binder.kubeapi import KubeClient as BinderKubeClient
from services.binder.kubeapi import KubeEndpoint as BinderEndpoint
from services.binder.metrics import BinderMetrics
from services.binder.reporter import OutcomeReporter
from services.binder.worker import BindingPool
from services.scheduler import main as scheduler_main
from services.scheduler.api import SchedulerApi
from services.scheduler.settings import SchedulerSettings
from services.scheduler.state import Outcome, SchedulerState
from splitsched.core import algorithm, profiles
from splitsched.core.cache import SchedulerCache
from splitsched.core.clock import FakeClock
from splitsched.core.queue import SchedulingQueue
from splitsched.runtime import grpcsrv
from splitsched.v1 import scheduler_pb2, scheduler_pb2_grpc

T = TypeVar("T")
IN_PROGRESS = scheduler_pb2.BindingOutcome.IN_PROGRESS
BOUND = scheduler_pb2.BindingOutcome.BOUND


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(asyncio.wait_for(coro, timeout=90))


async def until(predicate: Callable[[], object], *, within: float = 30.0) -> None:
    end = time.monotonic() + within
    while not predicate():
        if time.monotonic() > end:
            raise AssertionError(f"not true within {within}s")
        await asyncio.sleep(0.02)


# ---- the wire: standby refuses, binders' channels reach only the leader ---------------------


class CountingApi(SchedulerApi):
    def __init__(self, state: SchedulerState) -> None:
        super().__init__(state=state, on_change=lambda: None)
        self.calls = 0

    async def ReportBindingOutcome(
        self, request: scheduler_pb2.ReportBindingOutcomeRequest, context: Any
    ) -> scheduler_pb2.ReportBindingOutcomeResponse:
        self.calls += 1
        return await super().ReportBindingOutcome(request, context)


def bare_state(*, leading: bool) -> SchedulerState:
    clock = FakeClock(0.0)
    algo = algorithm.FrameworkAlgorithm(
        cache=SchedulerCache(clock=clock), profiles=profiles.load_profiles(None)
    )
    st = SchedulerState(
        algo=algo,
        queue=SchedulingQueue(clock=clock),
        clock=clock,
        scheduler_id="s",
        leading=leading,
    )
    st.mark_synced()
    return st


def test_reports_reach_only_the_serving_replica_and_follow_a_failover() -> None:
    async def body() -> None:
        apis = [CountingApi(bare_state(leading=True)), CountingApi(bare_state(leading=False))]
        servers = [
            await grpcsrv.serve(
                listen="127.0.0.1:0",
                servicers=[(scheduler_pb2_grpc.add_SchedulerServicer_to_server, api)],
                service_names=["splitsched.v1.Scheduler"],
            )
            for api in apis
        ]
        await servers[0].set_serving(True)
        await servers[1].set_serving(False)
        target = "ipv4:" + ",".join(f"127.0.0.1:{s.port}" for s in servers)
        reporter = OutcomeReporter(
            target=target, binder_id="b", metrics=BinderMetrics(), flush_interval=0,
            backoff_base=0.02, backoff_cap=0.1, rpc_timeout=2.0,
        )  # fmt: skip
        direct = grpc.aio.insecure_channel(f"127.0.0.1:{servers[1].port}")
        try:
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await scheduler_pb2_grpc.SchedulerStub(direct).ReportBindingOutcome(
                    scheduler_pb2.ReportBindingOutcomeRequest(), timeout=5
                )
            assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
            assert "not the leader" in str(refused.value.details())
            apis[1].calls = 0
            await reporter.start()
            for i in range(10):
                await reporter.put(scheduler_pb2.BindingOutcome(decision_id=f"d{i}", result=BOUND))
                assert await reporter.flush(within=10)
            assert (apis[0].calls, apis[1].calls) == (10, 0)
            assert reporter.connected
            # Failover: the standby leads, the old leader steps down.
            apis[0].state.set_leading(False)
            await servers[0].set_serving(False)
            apis[1].state.set_leading(True)
            await servers[1].set_serving(True)
            for i in range(10, 20):
                await reporter.put(scheduler_pb2.BindingOutcome(decision_id=f"d{i}", result=BOUND))
                assert await reporter.flush(within=10)
            assert apis[1].calls >= 9  # at most one went to the old leader in the switch
            assert reporter.backlog == 0
        finally:
            await reporter.close()
            await direct.close()
            for server in servers:
                await server.stop(0)

    run(body())


class HeldKube:
    """A Binding endpoint that answers 201 only when its pod's event is set."""

    def __init__(self) -> None:
        self.release: dict[str, asyncio.Event] = {}

    def app(self) -> web.Application:
        async def bind(request: web.Request) -> web.Response:
            await self.release.setdefault(request.match_info["name"], asyncio.Event()).wait()
            return web.json_response({"kind": "Status", "status": "Success"}, status=201)

        async def event(_: web.Request) -> web.Response:
            return web.json_response({}, status=201)

        app = web.Application()
        app.router.add_post("/api/v1/namespaces/{ns}/pods/{name}/binding", bind)
        app.router.add_post("/apis/events.k8s.io/v1/namespaces/{ns}/events", event)
        return app


def test_binder_re_reports_in_flight_decisions_never_after_their_outcome(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(binder_worker, "IN_PROGRESS_AFTER", 0.05)

    async def body() -> None:
        held = HeldKube()
        runner = web.AppRunner(held.app(), handle_signals=False, shutdown_timeout=0.5)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        api = CountingApi(bare_state(leading=True))
        received: list[scheduler_pb2.BindingOutcome] = []
        original = api.state.on_outcome

        def record(**kw: Any) -> bool:
            received.append(
                scheduler_pb2.BindingOutcome(
                    decision_id=kw["decision_id"],
                    result=IN_PROGRESS if kw["result"] is Outcome.IN_PROGRESS else BOUND,
                    node=kw["node"],
                )
            )
            return original(**kw)

        api.state.on_outcome = record  # type: ignore[method-assign]
        server = await grpcsrv.serve(
            listen="127.0.0.1:0",
            servicers=[(scheduler_pb2_grpc.add_SchedulerServicer_to_server, api)],
            service_names=["splitsched.v1.Scheduler"],
        )
        await server.set_serving(True)
        kube_client = BinderKubeClient(
            BinderEndpoint(host=f"http://127.0.0.1:{runner.addresses[0][1]}")
        )
        reporter = OutcomeReporter(
            target=f"127.0.0.1:{server.port}", binder_id="b0", metrics=BinderMetrics(),
            flush_interval=0, in_progress_interval=0.1,
        )  # fmt: skip
        pool = BindingPool(
            kube=kube_client, reporter=reporter, metrics=BinderMetrics(), binder_id="b0"
        )
        await reporter.start()
        pool.start()
        try:
            for name in ("p1", "p2"):
                job = BindJob(
                    decision_id=f"d-{name}", namespace="ns", name=name, uid=f"uid-{name}",
                    node="n1", deadline=time.time() + 60, max_attempts=3,
                )  # fmt: skip
                assert pool.submit(job) is None

            def of(decision: str, result: int) -> list[int]:
                return [
                    i for i, o in enumerate(received)
                    if o.decision_id == decision and o.result == result
                ]  # fmt: skip

            await until(lambda: of("d-p1", IN_PROGRESS) and of("d-p2", IN_PROGRESS))
            assert received[of("d-p1", IN_PROGRESS)[0]].node == "n1"
            held.release.setdefault("p1", asyncio.Event()).set()
            await until(lambda: of("d-p1", BOUND))
            bound_at = of("d-p1", BOUND)[0]
            # p2 is still held: wait for two more rounds of its reports.
            await until(lambda: len([i for i in of("d-p2", IN_PROGRESS) if i > bound_at]) >= 2)
            assert all(i < bound_at for i in of("d-p1", IN_PROGRESS))
            # The counter moves when the scheduler's ack arrives, a moment after it recorded.
            await until(lambda: reporter.in_progress_delivered >= 4)
        finally:
            for event in held.release.values():
                event.set()
            held.release.setdefault("p2", asyncio.Event()).set()
            await pool.shutdown(1.0)
            await reporter.close()
            await server.stop(0)
            await kube_client.close()
            await runner.cleanup()

    run(body())


def test_standby_is_not_ready_unless_told_and_never_serves_reports() -> None:
    """/readyz of a synced standby: false by default (a Service routes to the leader only);
    true with --standby-ready (rolling updates wait for readiness), and then only gRPC
    health tells the leader apart."""

    async def body() -> list[bool]:
        seen = []
        for extra in ([], ["--standby-ready"]):
            settings = SchedulerSettings.load(
                ["--leader-elect", "--kubeconfig", "/nonexistent", *extra], environ={}
            )
            # Without __init__ (it would build the algorithm): ready() reads only these.
            service = scheduler_main.SchedulerService.__new__(scheduler_main.SchedulerService)
            service.settings = settings
            service.state = bare_state(leading=False)
            service.binders_ok = True
            seen.append(service.ready())
            service.state.set_leading(True)
            seen.append(service.ready())
        return seen

    assert run(body()) == [False, True, True, True]
