"""The scheduler in process for tests: scheduling cycles on a `SchedulerState` the test feeds
by hand (`decide`, `parked`, `schedule_all`), and the real `SchedulerApi` servicer over such
a state on a loopback port, with a client stub (`serving`)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

import grpc

from services.scheduler.api import SchedulerApi
from services.scheduler.state import Decision, SchedulerState, Unschedulable
from splitsched.runtime import grpcsrv
from splitsched.v1 import scheduler_pb2_grpc


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
