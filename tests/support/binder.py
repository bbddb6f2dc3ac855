"""The binder in process for service tests: its worker pool, outcome reporter and gRPC
server against a `FakeKube` on a loopback port and a `FakeScheduler` collecting outcomes
(`harness`), plus the BindRequests and helpers those tests share.

Each test runs its own event loop (`run`), so no pytest asyncio plugin is needed.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import socket
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

import grpc
from aiohttp import web
from google.protobuf.timestamp_pb2 import Timestamp

from services.binder.guard import DEFAULT_PROFILES
from services.binder.kubeapi import KubeClient, KubeEndpoint
from services.binder.metrics import BinderMetrics
from services.binder.pendingpods import PendingPods
from services.binder.reporter import OutcomeReporter
from services.binder.server import BinderServicer
from services.binder.worker import BindingPool
from splitsched.runtime import grpcsrv
from splitsched.v1 import binder_pb2, binder_pb2_grpc, scheduler_pb2, types_pb2
from tests.support.fakes.kube import FakeKube, FakePod
from tests.support.fakes.scheduler import FakeScheduler, start_scheduler

T = TypeVar("T")
Outcome = scheduler_pb2.BindingOutcome


def free_port() -> int:
    """A loopback port nothing listens on (yet)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Harness:
    """A running binder and its fakes; `stub` calls the binder's gRPC server, `sleeps`
    records every backoff the pool slept."""

    kube: FakeKube
    scheduler: FakeScheduler
    pool: BindingPool
    reporter: OutcomeReporter
    metrics: BinderMetrics
    stub: binder_pb2_grpc.BinderAsyncStub
    sleeps: list[float]
    scheduler_port: int

    async def outcome(self, decision_id: str, *, within: float = 10.0) -> Outcome:
        found = await eventually(lambda: self.scheduler.for_decision(decision_id), within=within)
        return found[0]

    def attempts_metric(self, code: str) -> float:
        value = self.metrics.registry.get_sample_value(
            "splitsched_binder_binding_attempts_total", {"code": code}
        )
        return value or 0.0


@contextlib.asynccontextmanager
async def harness(
    *,
    workers: int = 4,
    max_pending: int = 100,
    scheduler_up: bool = True,
    backoff_base: float = 0.01,
    backoff_cap: float = 0.05,
    kube: FakeKube | None = None,
    preempt_deadline: float = 30.0,
    profiles: tuple[str, ...] | None = DEFAULT_PROFILES,
    pending: PendingPods | None = None,
) -> AsyncIterator[Harness]:
    """A binder (pool, reporter, gRPC server) against `kube` (a fresh `FakeKube` by default)
    and a `FakeScheduler` (down when `scheduler_up` is false), torn down after the block;
    it refuses pods of other `profiles` as `main` does (None: no checks), reading a pod
    unless `pending` shows it."""
    kube = kube if kube is not None else FakeKube()
    runner = web.AppRunner(kube.app(), handle_signals=False, shutdown_timeout=1.0)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    kube_port = runner.addresses[0][1]
    metrics = BinderMetrics()
    client = KubeClient(
        KubeEndpoint(host=f"http://127.0.0.1:{kube_port}"),
        on_throttled=lambda _retry_after: metrics.api_throttled.inc(),
    )
    fake_scheduler = FakeScheduler()
    sched_server: grpc.aio.Server | None = None
    scheduler_port = free_port()
    if scheduler_up:
        sched_server, scheduler_port = await start_scheduler(fake_scheduler, port=scheduler_port)
    reporter = OutcomeReporter(
        target=f"127.0.0.1:{scheduler_port}", binder_id="binder-test", metrics=metrics,
        flush_interval=0.005, backoff_base=0.02, backoff_cap=0.2, rpc_timeout=1.0,
    )  # fmt: skip
    await reporter.start()
    sleeps: list[float] = []

    async def recording_sleep(delay: float) -> None:
        sleeps.append(delay)
        await asyncio.sleep(delay)

    pool = BindingPool(
        kube=client, reporter=reporter, metrics=metrics, binder_id="binder-test",
        workers=workers, max_pending=max_pending, backoff_base=backoff_base,
        backoff_cap=backoff_cap, sleep=recording_sleep, rng=random.Random(7),
        preempt_deadline=preempt_deadline, profiles=profiles, pending=pending,
    )  # fmt: skip
    pool.start()
    server = await grpcsrv.serve(
        listen="127.0.0.1:0",
        servicers=[(binder_pb2_grpc.add_BinderServicer_to_server, BinderServicer(pool))],
        service_names=["splitsched.v1.Binder"],
    )
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{server.port}")
    h = Harness(
        kube=kube, scheduler=fake_scheduler, pool=pool, reporter=reporter, metrics=metrics,
        stub=binder_pb2_grpc.BinderStub(channel), sleeps=sleeps,
        scheduler_port=scheduler_port,
    )  # fmt: skip
    try:
        yield h
    finally:
        for hold in [*kube.holds, kube.hold_all]:
            if hold is not None:
                hold.set()
        await pool.shutdown(0.5)
        await reporter.close()
        await channel.close()
        await server.stop(0)
        if sched_server is not None:
            await sched_server.stop(0)
        await client.close()
        await runner.cleanup()


async def eventually(
    predicate: Callable[[], T], *, within: float = 10.0, interval: float = 0.01
) -> T:
    """The first truthy value of `predicate`, polled every `interval`; fails after `within`."""
    end = time.monotonic() + within
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > end:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(interval)


def run(coro: Coroutine[Any, Any, None]) -> None:
    """Run a test body on its own event loop, failing it after a minute."""
    asyncio.run(asyncio.wait_for(coro, timeout=60))


def deadline_in(seconds: float) -> Timestamp:
    """A protobuf Timestamp `seconds` from now (negative: in the past)."""
    ts = Timestamp()
    ts.FromNanoseconds(int((time.time() + seconds) * 1e9))
    return ts


def bind_request(
    decision_id: str,
    name: str,
    *,
    node: str = "node-a",
    uid: str | None = None,
    namespace: str = "ns",
    max_attempts: int = 0,
    deadline: float = 30.0,
) -> binder_pb2.BindRequest:
    """A Bind of pod `namespace/name` (uid ``uid-<name>`` unless given) to `node`, due in
    `deadline` seconds, carrying a trace context."""
    return binder_pb2.BindRequest(
        decision_id=decision_id,
        pod=types_pb2.PodRef(namespace=namespace, name=name, uid=uid or f"uid-{name}"),
        node=node,
        node_version=3,
        max_attempts=max_attempts,
        deadline=deadline_in(deadline),
        trace_context={"traceparent": f"00-{'1' * 32}-{'2' * 16}-01"},
        profile="splitsched",
    )


def add_pod(h: Harness, name: str, *, node: str = "", namespace: str = "ns") -> None:
    """Put a pod (uid ``uid-<name>``, on `node` when given) in the fake API."""
    h.kube.pods[(namespace, name)] = FakePod(uid=f"uid-{name}", node=node)
