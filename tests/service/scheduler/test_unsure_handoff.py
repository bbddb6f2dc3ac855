"""Decisions whose fate is unknown are resolved by evidence (issue 9): the service's
hand-off (`BinderDispatch.send_batch` / `preempt`) against in-process gRPC binders. A
batch the binder took before the call broke keeps its room; a binder that cannot be reached
at all gets the decision back at once.

The state machine's side: tests/unit/scheduler/test_unsure.py.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import Any

import grpc

from services.scheduler import main as scheduler_main
from services.scheduler.settings import SchedulerSettings
from splitsched.v1 import binder_pb2, binder_pb2_grpc
from tests.support.builders import small_node as node
from tests.support.builders import splitsched_pod as pod
from tests.support.scheduler import decide


class TakingBinder(binder_pb2_grpc.BinderServicer):
    """Records each request, then never answers (the test stops the server mid-call: the
    binder took the decision and died, or the connection broke, before it answered)."""

    def __init__(self) -> None:
        self.batches: list[binder_pb2.BindBatchRequest] = []
        self.preempts: list[binder_pb2.PreemptRequest] = []
        self.took = asyncio.Event()

    async def BindBatch(
        self, request: binder_pb2.BindBatchRequest, context: Any
    ) -> binder_pb2.BindBatchResponse:
        self.batches.append(request)
        self.took.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    async def Preempt(
        self, request: binder_pb2.PreemptRequest, context: Any
    ) -> binder_pb2.BinderAck:
        self.preempts.append(request)
        self.took.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    async def Bind(self, request: binder_pb2.BindRequest, context: Any) -> binder_pb2.BindResponse:
        raise AssertionError("the scheduler sends batches")

    async def ReportUnschedulable(
        self, request: binder_pb2.UnschedulableReport, context: Any
    ) -> binder_pb2.BinderAck:
        return binder_pb2.BinderAck(accepted=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@asynccontextmanager
async def service(binders: str) -> AsyncIterator[scheduler_main.SchedulerService]:
    settings = SchedulerSettings.load(
        ["--binders", binders, "--bind-timeout", "30", "--settle-seconds", "0"], environ={}
    )
    svc = scheduler_main.SchedulerService(settings)
    await svc.open()
    try:
        yield svc
    finally:
        await svc.dispatch.close()


async def taken_then_broken(
    svc: scheduler_main.SchedulerService, binder: TakingBinder, server: grpc.aio.Server, call: Any
) -> None:
    task = asyncio.create_task(call)
    await asyncio.wait_for(binder.took.wait(), 10)
    await server.stop(0)  # the binder goes away with the decision, unanswered
    await asyncio.wait_for(task, 10)


def fill(svc: scheduler_main.SchedulerService) -> None:
    st = svc.state
    st.mark_synced()
    st.apply_node("ADDED", node("n1"))
    st.apply_pod("ADDED", pod("a"))


def test_batch_the_binder_took_before_the_call_broke_keeps_its_room() -> None:
    async def body() -> None:
        binder = TakingBinder()
        server = grpc.aio.server()
        binder_pb2_grpc.add_BinderServicer_to_server(binder, server)
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        async with service(f"127.0.0.1:{port}") as svc:
            fill(svc)
            d = decide(svc.state)
            await taken_then_broken(svc, binder, server, svc.dispatch.send_batch([d]))
            assert [r.decision_id for r in binder.batches[0].requests] == [d.decision_id]
            # Not released: the binder may still bind it.
            assert svc.state.decisions.get(d.decision_id) is d
            assert svc.state.cache.is_assumed("uid-a")
            assert "uid-a" not in svc.state.queue
            assert svc.state.counters.get("unsure") == 1

    asyncio.run(asyncio.wait_for(body(), 30))


def test_preemption_the_binder_took_before_the_call_broke_keeps_its_room() -> None:
    async def body() -> None:
        binder = TakingBinder()
        server = grpc.aio.server()
        binder_pb2_grpc.add_BinderServicer_to_server(binder, server)
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        async with service(f"127.0.0.1:{port}") as svc:
            st = svc.state
            st.mark_synced()
            st.apply_node("ADDED", node("n1"))
            st.apply_pod("ADDED", replace(pod("low", cpu=800), node_name="n1", priority=1))
            st.apply_pod("ADDED", replace(pod("vip"), priority=100))
            d = decide(st)
            assert d.is_preemption
            await taken_then_broken(svc, binder, server, svc.dispatch.preempt(d))
            assert binder.preempts[0].decision_id == d.decision_id
            assert st.decisions.get(d.decision_id) is d
            assert st.cache.is_assumed("uid-vip")
            assert st.victims_left[d.decision_id] == {"uid-low"}

    asyncio.run(asyncio.wait_for(body(), 30))


def test_unreachable_binder_gets_nothing_so_the_decision_is_requeued_at_once() -> None:
    async def body() -> None:
        async with service(f"127.0.0.1:{free_port()}") as svc:  # nobody listens
            fill(svc)
            d = decide(svc.state)
            await svc.dispatch.send_batch([d])
            assert d.decision_id not in svc.state.decisions
            assert "uid-a" not in svc.state.cache
            assert svc.state.queue.place_of("uid-a") == "backoff"
            assert "unsure" not in svc.state.counters

    asyncio.run(asyncio.wait_for(body(), 30))
