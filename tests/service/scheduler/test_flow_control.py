"""The scheduler slows to its binders' pace (issue 22): the scheduling loop against a slow
in-process gRPC binder never has more bindings in flight than its window, the pods wait
in the active queue meanwhile (not in backoff), and every one binds in the end.

The window itself and the state's handling of congestion: tests/unit/scheduler/
test_flow_window.py.
"""

from __future__ import annotations

import asyncio
from typing import Any

import grpc

from services.scheduler import main as scheduler_main
from services.scheduler.loops import SchedulingLoop
from services.scheduler.settings import SchedulerSettings
from services.scheduler.state import Outcome
from splitsched.v1 import binder_pb2, binder_pb2_grpc
from tests.support.builders import small_node as node
from tests.support.builders import splitsched_pod as pod

PODS = 200
CAP = 30


class SlowBinder(binder_pb2_grpc.BinderServicer):
    """Takes every decision, binds them one at a time and reports each through the
    scheduler's state (as ReportBindingOutcome does); records the most it held at once and
    the scheduler's queues whenever a batch came."""

    def __init__(self) -> None:
        self.svc: scheduler_main.SchedulerService | None = None
        self.pending: asyncio.Queue[str] = asyncio.Queue()
        self.peak = 0
        self.active_seen: list[int] = []
        self.backoff_seen: list[int] = []
        self.bound = 0
        self.all_bound = asyncio.Event()

    async def BindBatch(
        self, request: binder_pb2.BindBatchRequest, context: Any
    ) -> binder_pb2.BindBatchResponse:
        assert self.svc is not None
        lengths = self.svc.state.queue.lengths()
        self.active_seen.append(lengths.get("active", 0))
        self.backoff_seen.append(lengths.get("backoff", 0))
        response = binder_pb2.BindBatchResponse()
        for r in request.requests:
            self.pending.put_nowait(r.decision_id)
            response.responses.add(decision_id=r.decision_id, accepted=True)
        self.peak = max(self.peak, self.pending.qsize())
        return response

    async def Bind(self, request: binder_pb2.BindRequest, context: Any) -> binder_pb2.BindResponse:
        raise AssertionError("the scheduler sends batches")

    async def Preempt(
        self, request: binder_pb2.PreemptRequest, context: Any
    ) -> binder_pb2.BinderAck:
        raise AssertionError("nothing to preempt here")

    async def ReportUnschedulable(
        self, request: binder_pb2.UnschedulableReport, context: Any
    ) -> binder_pb2.BinderAck:
        raise AssertionError("every pod fits")

    async def work(self) -> None:
        while True:
            decision_id = await self.pending.get()
            await asyncio.sleep(0.002)
            assert self.svc is not None
            self.svc.state.on_outcome(decision_id=decision_id, result=Outcome.BOUND)
            self.svc.poke()
            self.bound += 1
            if self.bound == PODS:
                self.all_bound.set()


def test_loop_keeps_bindings_in_flight_within_the_window_and_all_bind() -> None:
    async def body() -> None:
        binder = SlowBinder()
        server = grpc.aio.server()
        binder_pb2_grpc.add_BinderServicer_to_server(binder, server)
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        settings = SchedulerSettings.load(
            ["--binders", f"127.0.0.1:{port}", "--settle-seconds", "0",
             "--max-decisions-in-flight", str(CAP)],
            environ={},
        )  # fmt: skip
        svc = binder.svc = scheduler_main.SchedulerService(settings)
        await svc.open()
        st = svc.state
        st.mark_synced()
        for i in range(PODS // 10):
            st.apply_node("ADDED", node(f"n{i}"))
        for i in range(PODS):
            st.apply_pod("ADDED", pod(f"p{i}", cpu=100))
        loop = SchedulingLoop(
            state=st, metrics=svc.metrics, dispatch=svc.dispatch, leadership=svc.leadership,
            wake=svc.wake, stopping=svc.stopping, poke=svc.poke,
        )  # fmt: skip
        tasks = [asyncio.create_task(loop.run()), asyncio.create_task(binder.work())]
        await binder.all_bound.wait()
        svc.stopping.set()
        svc.poke()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await svc.dispatch.close()
        await server.stop(0)

        assert binder.peak <= CAP
        assert max(binder.active_seen) > 0  # the others waited in the active queue
        assert max(binder.backoff_seen) == 0
        waits = svc.metrics.registry.get_sample_value("splitsched_scheduler_flow_waits_total")
        assert waits is not None and waits > 0
        assert not st.decisions and st.counters["bound"] == PODS

    asyncio.run(asyncio.wait_for(body(), 60))
