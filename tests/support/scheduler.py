"""The scheduler's API in process for service tests: the real `SchedulerApi` servicer over a
`SchedulerState` the test feeds by hand, on a loopback port, with a client stub."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

import grpc

from services.scheduler.api import SchedulerApi
from services.scheduler.state import SchedulerState
from splitsched.runtime import grpcsrv
from splitsched.v1 import scheduler_pb2_grpc


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
async def serving(state: SchedulerState) -> AsyncIterator[Served]:
    """The Scheduler API over `state` on a loopback port until the block ends."""
    servicer = SchedulerApi(state=state, on_change=lambda: None)
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
