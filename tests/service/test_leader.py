"""Scheduler high availability, piece by piece, in process.

* The Lease election (`services.scheduler.leader`) against the real kube-apiserver (the
  session's control plane), with a ServiceAccount that has exactly `SCHEDULER_RULES`:
  create, renew, a standby that waits while the Lease is renewed and takes over after it
  expires (never while the old holder still counts itself leader), release, the 409 race,
  and a leader that stops when it sees another holder or cannot renew.
* Adoption in `SchedulerState`: a decision a binder re-reports IN_PROGRESS (or BOUND) that
  this scheduler did not make holds its pod's room; anything else is ignored.
* The wire: a standby refuses reports (FAILED_PRECONDITION) and, being NOT_SERVING, gets
  none from a binder's health-checked round-robin channel; a binder re-reports its
  in-flight decisions, never after their final outcome.

Short timings (2 s leases) keep it quick; nothing asserts on durations.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import grpc
import pytest
from aiohttp import web
from kubernetes import client

from services.binder import worker as binder_worker
from services.binder.jobs import BindJob
from services.binder.kubeapi import KubeClient as BinderKubeClient
from services.binder.kubeapi import KubeEndpoint as BinderEndpoint
from services.binder.metrics import BinderMetrics
from services.binder.reporter import OutcomeReporter
from services.binder.worker import BindingPool
from services.scheduler import leader
from services.scheduler import main as scheduler_main
from services.scheduler.api import SchedulerApi
from services.scheduler.settings import SchedulerSettings
from services.scheduler.state import ADOPTED, Decision, Outcome, Phase, SchedulerState
from splitsched.core import algorithm, models, profiles
from splitsched.core.cache import PodState, SchedulerCache
from splitsched.core.clock import FakeClock
from splitsched.core.queue import SchedulingQueue
from splitsched.runtime import grpcsrv, kubeclient
from splitsched.testing import kube, stack
from splitsched.v1 import scheduler_pb2, scheduler_pb2_grpc

T = TypeVar("T")
GI = 1024**3
IN_PROGRESS = scheduler_pb2.BindingOutcome.IN_PROGRESS
BOUND = scheduler_pb2.BindingOutcome.BOUND

# Fast elections: a 3 s lease, given up after 2 s without renewal, tried every 0.3 s.
LEASE_SECONDS = 3.0
RENEW_DEADLINE = 2.0
RETRY = 0.3


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(asyncio.wait_for(coro, timeout=90))


async def until(predicate: Callable[[], object], *, within: float = 30.0) -> None:
    end = time.monotonic() + within
    while not predicate():
        if time.monotonic() > end:
            raise AssertionError(f"not true within {within}s")
        await asyncio.sleep(0.02)


# ---- the Lease, on the real API server ----------------------------------------------------


@dataclass(frozen=True)
class LeaseEnv:
    api: client.ApiClient
    namespace: str
    kubeconfig: Path

    def read(self, name: str) -> Any:
        return client.CoordinationV1Api(self.api).read_namespaced_lease(name, self.namespace)

    def elector(
        self, name: str, identity: str, kubeconfig: Path | None = None
    ) -> leader.LeaderElector:
        endpoint = kubeclient.load_endpoint(str(kubeconfig or self.kubeconfig))
        return leader.LeaderElector(
            client=kubeclient.KubeClient(endpoint),
            namespace=self.namespace,
            name=name,
            identity=identity,
            lease_duration=LEASE_SECONDS,
            renew_deadline=RENEW_DEADLINE,
            retry_period=RETRY,
        )


@pytest.fixture(scope="module")
def lease_env(
    kube_api: client.ApiClient, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LeaseEnv]:
    """A namespace for the Leases and a scheduler ServiceAccount with SCHEDULER_RULES."""
    namespace = kube.create_namespace(kube_api, prefix="lease")
    try:
        kubeconfig = kube.service_account_kubeconfig(
            kube_api,
            namespace=namespace,
            name="scheduler",
            cluster_role_rules=stack.SCHEDULER_RULES,
            directory=tmp_path_factory.mktemp("lease"),
        )
        yield LeaseEnv(kube_api, namespace, kubeconfig)
    finally:
        kube.delete_namespace(kube_api, namespace)


def lease_name() -> str:
    return f"sched-{uuid.uuid4().hex[:8]}"


@dataclass
class Campaign:
    """One candidate's `run` as a task, with what its callbacks saw."""

    elector: leader.LeaderElector
    started: asyncio.Event = field(default_factory=asyncio.Event)
    stopped: asyncio.Event = field(default_factory=asyncio.Event)
    on_start: list[Callable[[], None]] = field(default_factory=list)
    task: asyncio.Task[None] | None = None

    def begin(self) -> Campaign:
        def started() -> None:
            for hook in self.on_start:
                hook()
            self.started.set()

        self.task = asyncio.create_task(
            self.elector.run(on_started_leading=started, on_stopped_leading=self.stopped.set)
        )
        return self

    async def crash(self) -> None:
        """Stop campaigning without releasing, as a killed process would."""
        assert self.task is not None
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task

    async def close(self) -> None:
        await self.crash()
        await self.elector.client.close()


@contextlib.asynccontextmanager
async def campaigns(*electors: leader.LeaderElector) -> AsyncIterator[list[Campaign]]:
    running = [Campaign(e) for e in electors]
    try:
        yield running
    finally:
        for c in running:
            if c.task is not None:
                await c.close()
            else:
                await c.elector.client.close()


def test_first_candidate_creates_the_lease_and_keeps_renewing_it(lease_env: LeaseEnv) -> None:
    name = lease_name()

    async def body() -> None:
        async with campaigns(lease_env.elector(name, "a")) as (a,):
            a.begin()
            await a.started.wait()
            lease = await asyncio.to_thread(lease_env.read, name)
            assert lease.spec.holder_identity == "a"
            assert lease.spec.lease_duration_seconds == int(LEASE_SECONDS)
            assert lease.spec.lease_transitions == 0
            first = lease.spec.renew_time
            seen = a.elector.observations
            await until(lambda: a.elector.observations >= seen + 3)  # three renewals
            lease = await asyncio.to_thread(lease_env.read, name)
            assert lease.spec.holder_identity == "a"
            assert lease.spec.renew_time > first
            assert a.elector.is_leading()
            assert not a.stopped.is_set()

    run(body())


def test_standby_waits_while_renewed_and_takes_over_only_after_expiry(lease_env: LeaseEnv) -> None:
    name = lease_name()

    async def body() -> None:
        electors = (lease_env.elector(name, "a"), lease_env.elector(name, "b"))
        async with campaigns(*electors) as (a, b):
            a.begin()
            await a.started.wait()
            # Whether the old leader still counted itself leader when b took over.
            overlap: list[bool] = []
            b.on_start.append(lambda: overlap.append(a.elector.is_leading()))
            b.begin()
            # Many more reads than one lease duration's worth: a's renewals keep it held.
            await until(lambda: b.elector.observations >= 2 * LEASE_SECONDS / RETRY)
            assert not b.started.is_set()
            assert b.elector.holder == "a"
            assert not b.elector.is_leading()
            await a.crash()  # dies holding the Lease
            await b.started.wait()
            assert overlap == [False], "two leaders at once"
            lease = await asyncio.to_thread(lease_env.read, name)
            assert lease.spec.holder_identity == "b"
            assert lease.spec.lease_transitions == 1
            assert b.elector.is_leading()

    run(body())


def test_released_lease_is_taken_at_once(lease_env: LeaseEnv) -> None:
    name = lease_name()

    async def body() -> None:
        electors = (lease_env.elector(name, "a"), lease_env.elector(name, "b"))
        async with campaigns(*electors) as (a, b):
            a.begin()
            await a.started.wait()
            b.begin()
            await until(lambda: b.elector.observations >= 2)
            await a.crash()
            reads_before = b.elector.observations
            assert await a.elector.release()
            assert not a.elector.is_leading()
            await b.started.wait()
            # Taken at the first read after the release (or the one after, if a read was
            # under way), not after the lease duration's worth of reads an expiry needs.
            assert b.elector.observations <= reads_before + 2
            lease = await asyncio.to_thread(lease_env.read, name)
            assert lease.spec.holder_identity == "b"

    run(body())


def test_two_simultaneous_claims_one_wins_the_other_gets_409(lease_env: LeaseEnv) -> None:
    name = lease_name()

    async def body() -> None:
        electors = (lease_env.elector(name, "a"), lease_env.elector(name, "b"))
        async with campaigns(*electors) as (a, b):
            # Both see no Lease and both create it: the API server lets one POST through.
            seen_a, seen_b = await a.elector.observe(), await b.elector.observe()
            assert seen_a is None and seen_b is None
            assert await a.elector.claim(seen_a)
            assert not await b.elector.claim(seen_b)
            # Released (empty holder): both may claim at the same resourceVersion; the
            # second PUT is stale.
            lease = await asyncio.to_thread(lease_env.read, name)
            lease.spec.holder_identity = ""
            await asyncio.to_thread(
                client.CoordinationV1Api(lease_env.api).replace_namespaced_lease,
                name,
                lease_env.namespace,
                lease,
            )
            seen_b, seen_a = await b.elector.observe(), await a.elector.observe()
            assert b.elector.claimable(seen_b) and a.elector.claimable(seen_a)
            assert await b.elector.claim(seen_b)
            assert not await a.elector.claim(seen_a)
            assert not a.elector.claimable(await a.elector.observe())
            assert a.elector.holder == "b"
            # The loser never counts itself leader.
            assert not a.elector.is_leading()

    run(body())


def test_leader_stops_when_another_holder_took_the_lease(lease_env: LeaseEnv) -> None:
    name = lease_name()

    async def body() -> None:
        async with campaigns(lease_env.elector(name, "a")) as (a,):
            a.begin()
            await a.started.wait()
            coordination = client.CoordinationV1Api(lease_env.api)
            lease = await asyncio.to_thread(lease_env.read, name)
            lease.spec.holder_identity = "intruder"
            await asyncio.to_thread(
                coordination.replace_namespaced_lease, name, lease_env.namespace, lease
            )
            await a.stopped.wait()
            assert a.task is not None
            await asyncio.wait_for(a.task, timeout=10)  # `run` returned
            assert not a.elector.is_leading()
            assert (await asyncio.to_thread(lease_env.read, name)).spec.holder_identity == (
                "intruder"
            )

    run(body())


def test_leader_that_cannot_renew_stops_and_nobody_else_wrote(
    lease_env: LeaseEnv, tmp_path: Path
) -> None:
    """RBAC revoked mid-term: every renewal gets 403; the leader gives up at its renew
    deadline on its own."""
    name = lease_name()
    account = f"revoked-{uuid.uuid4().hex[:6]}"
    kubeconfig = kube.service_account_kubeconfig(
        lease_env.api,
        namespace=lease_env.namespace,
        name=account,
        cluster_role_rules=stack.SCHEDULER_RULES,
        directory=tmp_path,
    )
    rbac = client.RbacAuthorizationV1Api(lease_env.api)

    async def body() -> None:
        async with campaigns(lease_env.elector(name, "a", kubeconfig)) as (a,):
            a.begin()
            await a.started.wait()
            await asyncio.to_thread(
                rbac.delete_cluster_role_binding, f"splitsched-test:{lease_env.namespace}:{account}"
            )
            await a.stopped.wait()
            assert not a.elector.is_leading()
            assert (await asyncio.to_thread(lease_env.read, name)).spec.holder_identity == "a"

    run(body())


def test_elector_rejects_timings_that_would_allow_two_leaders() -> None:
    endpoint = kubeclient.KubeEndpoint(host="http://127.0.0.1:1")
    for duration, deadline in ((10.0, 10.0), (10.0, 12.0)):
        with pytest.raises(leader.LeaderElectionError):
            leader.LeaderElector(
                client=kubeclient.KubeClient(endpoint), namespace="ns", name="l",
                identity="a", lease_duration=duration, renew_deadline=deadline,
            )  # fmt: skip


# ---- adoption in the scheduler's state ----------------------------------------------------


def node(name: str, cpu: int = 1000) -> models.Node:
    return models.Node(
        name=name, allocatable={models.CPU: cpu, models.MEMORY: 4 * GI, models.PODS: 10}
    )


def pod(name: str, cpu: int = 600, node_name: str = "") -> models.Pod:
    return models.Pod(
        uid=f"uid-{name}",
        namespace="ns",
        name=name,
        scheduler_name="splitsched",
        node_name=node_name,
        containers=(models.Container("c", {models.CPU: cpu}),),
    )


@pytest.fixture
def state() -> SchedulerState:
    clock = FakeClock(100.0)
    algo = algorithm.FrameworkAlgorithm(
        cache=SchedulerCache(clock=clock), profiles=profiles.load_profiles(None)
    )
    st = SchedulerState(
        algo=algo, queue=SchedulingQueue(clock=clock), clock=clock, scheduler_id="new",
        bind_timeout=30,
    )  # fmt: skip
    st.apply_node("ADDED", node("n1"))
    st.apply_pod("ADDED", pod("a"))
    st.apply_pod("ADDED", pod("b"))
    st.mark_synced()
    return st


def in_progress(state: SchedulerState, decision_id: str, uid: str, node_name: str) -> bool:
    return state.on_outcome(
        decision_id=decision_id, result=Outcome.IN_PROGRESS, pod_uid=uid, node=node_name,
        binder_id="binder-0",
    )  # fmt: skip


def test_in_progress_report_adopts_the_decision_and_holds_its_room(
    state: SchedulerState,
) -> None:
    events: list[str] = []
    state.listeners.append(lambda e: events.append(f"{e.kind} {e.message}"))
    assert in_progress(state, "old-7", "uid-a", "n1")
    assert state.cache.is_assumed("uid-a")
    assert "uid-a" not in state.queue
    rec = state.find("ns", "a")
    assert rec is not None and (rec.phase, rec.node) == (Phase.BINDING, "n1")
    assert events == [
        f"SCHEDULED {ADOPTED} from binder binder-0: in flight before this scheduler led"
    ]
    # n1 has 400m left: b must not be put there (that would be the double booking).
    out = state.schedule_one()
    assert out is not None and not isinstance(out[0], Decision), out
    # Reported again while still in flight: known now, nothing changes.
    assert not in_progress(state, "old-7", "uid-a", "n1")
    # The final outcome resolves it like any decision.
    assert state.on_outcome(decision_id="old-7", result=Outcome.BOUND)
    rec = state.find("ns", "a")
    assert rec is not None and rec.phase is Phase.BOUND


def test_adopted_decision_that_fails_frees_its_room_and_requeues_its_pod(
    state: SchedulerState,
) -> None:
    assert in_progress(state, "old-1", "uid-a", "n1")
    assert state.on_outcome(decision_id="old-1", result=Outcome.FAILED, message="HTTP 500")
    assert not state.cache.is_assumed("uid-a")
    assert "uid-a" in state.queue
    out = state.schedule_one()  # b now fits on n1
    assert out is not None and isinstance(out[0], Decision) and out[0].node == "n1"


def test_bound_report_for_an_unknown_decision_holds_the_room_until_the_watch_confirms(
    state: SchedulerState,
) -> None:
    assert state.on_outcome(decision_id="old-2", result=Outcome.BOUND, pod_uid="uid-a", node="n1")
    assert state.cache.is_assumed("uid-a")
    out = state.schedule_one()
    assert out is not None and not isinstance(out[0], Decision), out
    state.apply_pod("MODIFIED", pod("a", node_name="n1"))
    cached = state.cache.get("uid-a")
    assert cached is not None and cached.state is PodState.ADDED


def test_reports_that_must_not_be_adopted(state: SchedulerState) -> None:
    # Our own decision for a; another id for the same pod is someone else's stale work.
    ours = state.schedule_one()
    assert ours is not None and isinstance(ours[0], Decision)
    assert not in_progress(state, "old-3", ours[0].pod.uid, "n9")
    assert state.decision_of_pod[ours[0].pod.uid] == ours[0].decision_id
    # Unknown pod; empty node; a final failure for an unknown decision.
    assert not in_progress(state, "old-4", "uid-nobody", "n1")
    assert not in_progress(state, "old-5", "uid-b", "")
    assert not state.on_outcome(
        decision_id="old-6", result=Outcome.FAILED, pod_uid="uid-b", node="n1"
    )
    # A pod the watch shows bound already.
    state.apply_pod("ADDED", pod("c", node_name="n1"))
    assert not in_progress(state, "old-8", "uid-c", "n1")
    # Before the view is synced nothing is adopted (it is not the whole truth yet).
    state.reset()
    state.apply_node("ADDED", node("n1"))
    state.apply_pod("ADDED", pod("d"))
    assert not in_progress(state, "old-9", "uid-d", "n1")
    assert "uid-d" in state.queue


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
