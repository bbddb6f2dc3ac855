"""The scheduler in process for tests: scheduling cycles on a `SchedulerState` the test feeds
by hand (`decide`, `parked`, `schedule_all`), the real `SchedulerApi` servicer over such
a state on a loopback port, with a client stub (`serving`), and, for the whole scheduler
service, a binder that records what it is sent (`recording_binder`) and the service itself
against a watcher and a binder (`running_scheduler`)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import grpc

from services.scheduler import main as scheduler_main
from services.scheduler.api import SchedulerApi
from services.scheduler.attempts import AttemptStore
from services.scheduler.settings import SchedulerSettings
from services.scheduler.state import Decision, SchedulerState, Unschedulable
from services.watcher import entries, ring
from splitsched.runtime import grpcsrv, service
from splitsched.testing import kube
from splitsched.v1 import binder_pb2, binder_pb2_grpc, scheduler_pb2, scheduler_pb2_grpc


def only(out: list[Decision | Unschedulable] | None) -> Decision | Unschedulable:
    """The one result of a scheduling cycle (fails on none or several)."""
    assert out is not None and len(out) == 1, out
    return out[0]


def decide(state: SchedulerState) -> Decision:
    """Run one scheduling cycle, which must decide (bind or preempt) for one pod."""
    d = only(state.schedule_one())
    assert isinstance(d, Decision), d
    return d


def parked(state: SchedulerState) -> Unschedulable:
    """Run one scheduling cycle, which must find one pod unschedulable."""
    u = only(state.schedule_one())
    assert isinstance(u, Unschedulable), u
    return u


def schedule_all(state: SchedulerState) -> None:
    """Run scheduling cycles until the queue has nothing ready."""
    while state.schedule_one() is not None:
        pass


@dataclass
class Served:
    """A serving Scheduler API: the servicer, a stub on a channel to it, and its address."""

    api: SchedulerApi
    stub: scheduler_pb2_grpc.SchedulerAsyncStub
    target: str


@contextlib.asynccontextmanager
async def serving(
    state: SchedulerState, *, attempts: AttemptStore | None = None
) -> AsyncIterator[Served]:
    """The Scheduler API over `state` (and `attempts`, for GetPodTrace) on a loopback port
    until the block ends."""
    servicer = SchedulerApi(state=state, on_change=lambda: None, attempts=attempts)
    server = await grpcsrv.serve(
        listen="127.0.0.1:0",
        servicers=[(scheduler_pb2_grpc.add_SchedulerServicer_to_server, servicer)],
        service_names=["splitsched.v1.Scheduler"],
    )
    target = f"127.0.0.1:{server.port}"
    channel = grpc.aio.insecure_channel(target)
    try:
        yield Served(servicer, scheduler_pb2_grpc.SchedulerStub(channel), target)
    finally:
        await channel.close()
        await server.stop(0)


# ---- a binder for the whole scheduler service ------------------------------------------------


class RecordingBinder(binder_pb2_grpc.BinderServicer):
    """Accepts everything and reports nothing by itself: records each BindRequest
    (`requests`), FailedScheduling report (`reports`) and preemption (`preempts`)."""

    def __init__(self) -> None:
        self.requests: list[binder_pb2.BindRequest] = []
        self.reports: list[binder_pb2.UnschedulableReport] = []
        self.preempts: list[binder_pb2.PreemptRequest] = []
        self.arrived = asyncio.Event()

    async def BindBatch(
        self, request: binder_pb2.BindBatchRequest, context: Any
    ) -> binder_pb2.BindBatchResponse:
        self.requests.extend(request.requests)
        self.arrived.set()
        return binder_pb2.BindBatchResponse(
            responses=[binder_pb2.BindResponse(decision_id=r.decision_id, accepted=True)
                       for r in request.requests]
        )  # fmt: skip

    async def Bind(self, request: binder_pb2.BindRequest, context: Any) -> binder_pb2.BindResponse:
        raise AssertionError("the scheduler sends batches")

    async def ReportUnschedulable(
        self, request: binder_pb2.UnschedulableReport, context: Any
    ) -> binder_pb2.BinderAck:
        self.reports.append(request)
        self.arrived.set()
        return binder_pb2.BinderAck(accepted=True)

    async def Preempt(
        self, request: binder_pb2.PreemptRequest, context: Any
    ) -> binder_pb2.BinderAck:
        self.preempts.append(request)
        return binder_pb2.BinderAck(accepted=True)

    async def next_request(self, count: int) -> binder_pb2.BindRequest:
        """The `count`th BindRequest, once it has come (20 s at most)."""
        while len(self.requests) < count:
            self.arrived.clear()
            await asyncio.wait_for(self.arrived.wait(), 20)
        return self.requests[count - 1]

    async def report_for(self, pod: str) -> binder_pb2.UnschedulableReport:
        """The first FailedScheduling report of the pod named `pod` (20 s at most)."""
        while not (found := [r for r in self.reports if r.pod.name == pod]):
            self.arrived.clear()
            await asyncio.wait_for(self.arrived.wait(), 20)
        return found[0]


@contextlib.asynccontextmanager
async def recording_binder() -> AsyncIterator[tuple[RecordingBinder, int]]:
    """A `RecordingBinder` serving on a loopback port: (the binder, its port)."""
    binder = RecordingBinder()
    server = await grpcsrv.serve(
        listen="127.0.0.1:0",
        servicers=[(binder_pb2_grpc.add_BinderServicer_to_server, binder)],
        service_names=["splitsched.v1.Binder"],
    )
    await server.set_serving(True)
    try:
        yield binder, server.port
    finally:
        await server.stop(0)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.asynccontextmanager
async def running_scheduler(watcher: int, binder: int, *flags: str) -> AsyncIterator[str]:
    """The whole scheduler service, plaintext on loopback, against the watcher and the
    binder on these ports, with `flags` besides; yields its API's address. Stopped as a
    lost Lease stops it."""
    api = f"127.0.0.1:{free_port()}"
    settings = SchedulerSettings.load(
        ["--listen", api, "--http-listen", "127.0.0.1:0", "--watcher", f"127.0.0.1:{watcher}",
         "--binders", f"127.0.0.1:{binder}", *flags],
        environ={},
    )  # fmt: skip
    svc = scheduler_main.SchedulerService(settings)
    served = asyncio.create_task(service.serve(svc, settings.common))
    try:
        yield api
    finally:
        svc.leadership.stopped_leading()
        await asyncio.wait_for(served, 20)


def named(manifest: dict[str, Any], rv: str = "1") -> dict[str, Any]:
    """A manifest as the API server shows it: with a uid ("uid-<name>") and a version."""
    meta = manifest["metadata"]
    meta.setdefault("uid", f"uid-{meta['name']}")
    meta["resourceVersion"] = rv
    return manifest


async def report(api: str, outcome: scheduler_pb2.BindingOutcome) -> int:
    """Report one outcome as a binder does; how many the scheduler accepted."""
    async with grpc.aio.insecure_channel(api) as channel:
        answer = await scheduler_pb2_grpc.SchedulerStub(channel).ReportBindingOutcome(
            scheduler_pb2.ReportBindingOutcomeRequest(outcomes=[outcome], binder_id="b"),
            timeout=10,
        )
    return answer.accepted


async def report_until_taken(api: str, outcome: scheduler_pb2.BindingOutcome) -> None:
    """Report `outcome` as a binder re-reports it, until the scheduler takes it (it takes
    none before it serves with a synced view)."""
    for _ in range(300):
        try:
            if await report(api, outcome) == 1:
                return
        except grpc.aio.AioRpcError:
            pass  # not serving yet
        await asyncio.sleep(0.1)
    raise AssertionError("the scheduler never took the report")


def low_priority_pod(name: str, namespace: str, now: float) -> ring.Entry:
    """A pod without volumes or claims that the queue tries after the others: its decision
    shows the scheduler is at work."""
    pod = named(kube.make_pod(name))
    pod["metadata"]["namespace"] = namespace
    pod["spec"]["priority"] = -1
    entry = entries.Converter().pod(pod, now)
    assert entry is not None
    return entry
