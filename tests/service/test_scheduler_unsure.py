"""Decisions whose fate is unknown are resolved by evidence, never by a guess that frees
room a late bind (or eviction) uses (issue 9, restart and resync).

* The state machine (`SchedulerState`, fake clock): a decision whose hand-off failed
  ambiguously stays assumed until an outcome, the watch, or the deadline with the watch;
  a predecessor's preemption re-reported by a binder is adopted as a room held for its
  preemptor, not as a binding; a pending pod's nominated node is tried first.
* The service's hand-off (`BinderDispatch.send_batch` / `preempt`) against in-process
  gRPC binders: a batch the binder took before the call broke keeps its room; a binder that
  cannot be reached at all gets the decision back at once.
"""

from __future__ import annotations

import asyncio
import random
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import Any

import grpc
import pytest

from services.scheduler import main as scheduler_main
from services.scheduler.settings import SchedulerSettings
from services.scheduler.state import Decision, Outcome, Phase, SchedulerState, Unschedulable
from splitsched.core import algorithm, models, profiles
from splitsched.core.cache import PodState, SchedulerCache
from splitsched.core.clock import FakeClock
from splitsched.core.queue import SchedulingQueue
from splitsched.v1 import binder_pb2, binder_pb2_grpc

GI = 1024**3


def node(name: str, cpu: int = 1000) -> models.Node:
    return models.Node(
        name=name, allocatable={models.CPU: cpu, models.MEMORY: 4 * GI, models.PODS: 10}
    )


def pod(name: str, cpu: int = 600, **kw: Any) -> models.Pod:
    return models.Pod(
        uid=f"uid-{name}",
        namespace="ns",
        name=name,
        scheduler_name="splitsched",
        containers=(models.Container("c", {models.CPU: cpu}),),
        **kw,
    )


def new_state(clock: FakeClock) -> SchedulerState:
    algo = algorithm.FrameworkAlgorithm(
        cache=SchedulerCache(clock=clock),
        profiles=profiles.load_profiles(None),
        rng=random.Random(0),
    )
    return SchedulerState(
        algo=algo,
        queue=SchedulingQueue(clock=clock),
        clock=clock,
        scheduler_id="s",
        bind_timeout=30,
        preempt_timeout=60,
    )


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(100.0)


@pytest.fixture
def state(clock: FakeClock) -> SchedulerState:
    st = new_state(clock)
    st.mark_synced()
    return st


def phase(state: SchedulerState, name: str) -> Phase:
    rec = state.find("ns", name)
    assert rec is not None, name
    return rec.phase


def only(out: list[Decision | Unschedulable] | None) -> Decision | Unschedulable:
    assert out is not None and len(out) == 1, out
    return out[0]


def decide(state: SchedulerState) -> Decision:
    d = only(state.schedule_one())
    assert isinstance(d, Decision), d
    return d


def parked(state: SchedulerState) -> Unschedulable:
    u = only(state.schedule_one())
    assert isinstance(u, Unschedulable), u
    return u


# -- (a) an ambiguous hand-off -------------------------------------------------------------


def test_unsure_hand_off_keeps_the_room_until_the_watch_shows_the_late_bind(
    state: SchedulerState, clock: FakeClock
) -> None:
    state.apply_node("ADDED", node("n1"))
    state.apply_pod("ADDED", pod("a"))
    d = decide(state)
    state.unsure(d, "BindBatch DEADLINE_EXCEEDED")
    assert state.cache.is_assumed("uid-a")
    assert "uid-a" not in state.queue
    assert "BindBatch DEADLINE_EXCEEDED" in state.find("ns", "a").message  # type: ignore[union-attr]
    # The room stays taken: another pod does not get it.
    state.apply_pod("ADDED", pod("b"))
    assert "Insufficient cpu" in parked(state).message
    # The binder had it after all: its Binding lands and the watch confirms it.
    clock.advance(10)
    state.apply_pod("MODIFIED", replace(pod("a"), node_name="n1"))
    cached = state.cache.get("uid-a")
    assert cached is not None and cached.state is PodState.ADDED
    assert d.decision_id not in state.decisions
    clock.advance(60)
    assert state.expire_overdue() == 0
    state.cache.check_invariants()


def test_unsure_hand_off_is_released_after_the_deadline_when_the_watch_shows_it_unbound(
    state: SchedulerState, clock: FakeClock
) -> None:
    state.apply_node("ADDED", node("n1"))
    state.apply_pod("ADDED", pod("a"))
    d = decide(state)
    state.unsure(d, "BindBatch UNAVAILABLE")
    clock.advance(29)
    assert state.expire_overdue() == 0
    assert state.cache.is_assumed("uid-a")
    clock.advance(2)
    assert state.expire_overdue() == 1
    assert "uid-a" not in state.cache
    assert state.queue.place_of("uid-a") == "backoff"


def test_unsure_after_the_outcome_already_arrived_changes_nothing(state: SchedulerState) -> None:
    state.apply_node("ADDED", node("n1"))
    state.apply_pod("ADDED", pod("a"))
    d = decide(state)
    assert state.on_outcome(decision_id=d.decision_id, result=Outcome.BOUND)
    state.unsure(d, "BindBatch CANCELLED")
    assert state.find("ns", "a").phase is Phase.BOUND  # type: ignore[union-attr]
    assert "uid-a" not in state.queue


# -- (c) a predecessor's preemption --------------------------------------------------------


def preempting_cluster(state: SchedulerState) -> models.Pod:
    """n1 (1000m) full with a low-priority victim (800m); vip (600m, priority 100) pending
    with a filler (300m, priority 0) that would fit once the victim is gone. Returns the
    victim."""
    state.apply_node("ADDED", node("n1"))
    low = replace(pod("low", cpu=800), node_name="n1", priority=1)
    state.apply_pod("ADDED", low)
    state.apply_pod("ADDED", replace(pod("vip"), priority=100))
    return low


def report(
    state: SchedulerState, result: Outcome, *, victims: tuple[str, ...] = ("uid-low",)
) -> bool:
    return state.on_outcome(
        decision_id="old-leader-7", result=result, pod_uid="uid-vip", node="n1",
        binder_id="b0", preemption=True, victim_uids=victims,
    )  # fmt: skip


def test_preemption_in_flight_is_adopted_as_a_room_held_for_the_preemptor(
    state: SchedulerState,
) -> None:
    low = preempting_cluster(state)
    assert report(state, Outcome.IN_PROGRESS)
    rec = state.find("ns", "vip")
    assert rec is not None and rec.phase is Phase.PREEMPTING and rec.nominated_node == "n1"
    assert state.cache.is_assumed("uid-vip") and "uid-vip" not in state.queue
    assert not report(state, Outcome.IN_PROGRESS)  # known now: nothing changes
    # The evictions' final report is not a binding: the preemptor is not bound yet.
    assert report(state, Outcome.BOUND)
    assert rec.phase is Phase.PREEMPTING
    assert state.take_ready_binds() == []
    # The victim goes; the room it frees is the preemptor's, not the filler's.
    state.apply_pod("DELETED", low)
    state.apply_pod("ADDED", pod("filler", cpu=500))
    ready = state.take_ready_binds()
    assert [(d.pod.name, d.node, d.is_preemption) for d in ready] == [("vip", "n1", False)]
    assert phase(state, "vip") is Phase.BINDING
    assert "Insufficient cpu" in parked(state).message  # the filler: 600 + 500 > 1000
    assert state.on_outcome(decision_id=ready[0].decision_id, result=Outcome.BOUND)
    assert phase(state, "vip") is Phase.BOUND
    state.cache.check_invariants()


def test_final_preemption_report_of_a_predecessor_binds_the_preemptor_where_it_fits(
    state: SchedulerState,
) -> None:
    """The evictions finished while no scheduler led; their report reaches the new
    leader after the victim is gone: the preemptor is bound on its node at once. (Taken
    for a binding, the report would mark the pod bound while nothing binds it.)"""
    low = preempting_cluster(state)
    state.apply_pod("DELETED", low)
    assert report(state, Outcome.BOUND)
    (ready,) = state.take_ready_binds()
    assert (ready.pod.name, ready.node) == ("vip", "n1")
    assert state.cache.is_assumed("uid-vip")
    rec = state.find("ns", "vip")
    assert rec is not None and rec.phase is Phase.BINDING


def test_adopted_preemption_does_not_bind_where_the_pod_no_longer_fits(
    state: SchedulerState,
) -> None:
    low = preempting_cluster(state)
    state.apply_pod("DELETED", low)
    state.apply_pod("ADDED", replace(pod("other", cpu=700), node_name="n1"))  # took the room
    assert not report(state, Outcome.BOUND)
    assert state.take_ready_binds() == []
    assert "uid-vip" not in state.cache and "uid-vip" in state.queue
    state.cache.check_invariants()


def test_failed_preemption_of_a_predecessor_is_ignored(state: SchedulerState) -> None:
    preempting_cluster(state)
    assert not report(state, Outcome.FAILED)
    assert "uid-vip" not in state.cache and "uid-vip" in state.queue


def test_pending_pod_gets_its_nominated_node_back(state: SchedulerState) -> None:
    """An earlier leader's preemption nominated n2 (its victims are gone by now); with
    LeastAllocated the empty n1 would score higher, but the pod goes back to n2."""
    state.apply_node("ADDED", node("n1", cpu=4000))
    state.apply_node("ADDED", node("n2", cpu=1000))
    state.apply_pod("ADDED", replace(pod("plain", cpu=300)))
    assert decide(state).node == "n1"
    state.apply_pod("ADDED", replace(pod("vip", cpu=300), nominated_node_name="n2"))
    assert decide(state).node == "n2"
    # Where the nominated node no longer fits, a full cycle picks another.
    state.apply_pod("ADDED", replace(pod("vip2", cpu=900), nominated_node_name="n2"))
    assert decide(state).node == "n1"


# -- (a) the service's hand-off to binders -------------------------------------------------


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
