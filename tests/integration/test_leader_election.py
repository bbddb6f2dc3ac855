"""The scheduler's Lease election (`services.scheduler.leader`) against the real
kube-apiserver (the session's control plane), with a ServiceAccount that has exactly
`SCHEDULER_RULES`: create, renew, a standby that waits while the Lease is renewed and takes
over after it expires (never while the old holder still counts itself leader), release, the
409 race, and a leader that stops when it sees another holder or cannot renew.

Short timings (3 s leases) keep it quick; nothing asserts on durations. The rest of high
availability: adoption in tests/unit/scheduler/test_adoption.py, the wire in
tests/service/scheduler/test_leader.py.
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

import pytest
from kubernetes import client

from services.scheduler import leader
from splitsched.runtime import kubeclient
from splitsched.testing import kube, stack

T = TypeVar("T")

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
