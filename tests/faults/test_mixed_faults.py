"""Faults with preemption and gangs in the workload (issue 11's last clause): the promises
of the fault tier still hold when pods preempt each other and gangs are placed all or
nothing.

The workload (``splitsched.testing.mixedload``): 20 kwok nodes in two pools; 96
low-priority fillers fill one pool exactly (a quarter of them guarded by a PDB that allows
no disruption), then high- and mid-priority pods that fit only by preempting, polite pods
(``preemptionPolicy: Never``) that fit nowhere, gangs that fit, a gang that cannot fit as a
whole, a gang short of its minMember, and plain pods: 337 pods. Faults hit it while
preemptions are under way (the first Eviction seen by the binders' proxy):

* the scheduler killed with SIGKILL and restarted: the room it held for preemptors is lost
  with it; the new one rebuilds its view and preempts again where needed;
* a binder killed with SIGKILL while it evicts, and restarted: its preemptions and
  Bindings die with it and are resolved by the watch and the deadlines;
* the proxy injecting 5xx, 429, resets and lost 201s into the binders' traffic, Bindings
  and Evictions alike.

Each ends with ``mixedload.check``: no node over allocatable, placements meet their
constraints, no gang partly bound, no pod lost (a pending pod has a FailedScheduling record
and the core on the final state places it nowhere), evictions only of lower-priority,
unguarded pods by pods allowed to preempt, one Scheduled event per pod, and (from the
proxy's log) no pod with two Bindings accepted.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import pytest
from kubernetes import client

from splitsched.testing import kube, mixedload
from splitsched.testing.faultproxy import Fault, FaultProxy
from tests.support.faults import (
    LONG,
    LONG_REASON,
    RESULTS,
    FaultResult,
    FaultsEnv,
    FaultStack,
)

pytestmark = pytest.mark.faults

PLAN = mixedload.Plan()
EVICTION = r"/pods/[^/]+/eviction$"
#: Added to every Binding and Eviction POST, so kills find both in flight.
WRITE_LATENCY = 0.3
DEAD_SECONDS = 2.0
#: How long the pending set must stay at its expected size to count as settled.
SETTLED_FOR = 3.0


@pytest.fixture(scope="module")
def mixed_pool(kube_api: client.ApiClient) -> Iterator[mixedload.Pool]:
    pool = mixedload.create_pool(kube_api, PLAN)
    try:
        yield pool
    finally:
        kube.delete_nodes(kube_api, pool.nodes)


@pytest.fixture(scope="module")
def priority_classes(kube_api: client.ApiClient) -> Iterator[dict[str, str]]:
    names = mixedload.create_priority_classes(kube_api)
    try:
        yield names
    finally:
        mixedload.delete_priority_classes(kube_api, names)


@dataclass
class MixedRow:
    """A results row with what only a mixed run has (docs/faults.md)."""

    fault: str
    pods: int
    bound: int
    pending: int
    evicted: int
    lost: int
    double_booked: int
    overcommitted_nodes: int
    partial_gangs: int
    wrongful_evictions: int
    unrecorded: int
    seconds: float


class MixedRun:
    """One mixed run: fillers first, then the contenders while a fault strikes."""

    def __init__(
        self,
        mixed: tuple[FaultsEnv, mixedload.Pool, dict[str, str]],
        *,
        proxy: FaultProxy,
        running: FaultStack,
    ) -> None:
        self.env, self.pool, self.classes = mixed
        self.proxy, self.running = proxy, running
        self.created: dict[str, mixedload.Json] = {}
        self.started = 0.0

    def fill(self) -> None:
        """The PDB and the fillers, bound before anything contends for their room."""
        mixedload.create_guard_pdb(self.env.api, self.env.namespace)
        pods = mixedload.fillers(PLAN, self.pool, self.classes)
        self._create(pods)
        kube.wait_for(
            lambda: not any(mixedload.pending_names(self.env.api, self.env.namespace)),
            timeout=120,
            interval=0.5,
            message=f"{len(pods)} fillers bound",
        )

    def contend(self) -> None:
        self.started = time.monotonic()
        self._create(mixedload.contenders(PLAN, self.pool, self.classes))

    def _create(self, pods: list[mixedload.Json]) -> None:
        kube.create_pods(self.env.api, namespace=self.env.namespace, pods=pods, workers=10)
        self.created.update({p["metadata"]["name"]: p for p in pods})

    def wait_evicting(self, *, timeout: float = 60.0) -> int:
        """Wait for the binders' first Eviction POST; returns how many were sent so far."""
        return kube.wait_for(
            lambda: self.evictions(),
            timeout=timeout,
            interval=0.05,
            message="a preemption evicting",
        )

    def evictions(self) -> int:
        return sum(
            1
            for ex in self.proxy.exchanges
            if ex.method == "POST" and ex.path.endswith("/eviction") and ex.forwarded
        )

    def settle(self, *, timeout: float = 180.0) -> None:
        """Wait until only the pods meant to stay pending are pending, for a while (the
        checks then say whether the ones left are honestly unschedulable), and until each
        of them has its FailedScheduling record. Not settled: the checks say which pods
        are stuck and why."""
        env = self.env
        if mixedload.wait_settled(
            env.api, env.namespace, PLAN, timeout=timeout, settled_for=SETTLED_FOR
        ):
            mixedload.wait_recorded(env.api, env.namespace)

    def check(
        self,
        *,
        test: str,
        fault: str,
        injected: dict[str, int],
        allow_unrecorded: bool = False,
    ) -> mixedload.Report:
        """Every promise (``mixedload.check``) plus no pod with two Bindings accepted;
        records the results rows. ``allow_unrecorded``: see ``Report.failures``."""
        env = self.env
        report = mixedload.check(
            env.api,
            namespace=env.namespace,
            pool=self.pool,
            created=self.created,
            profiles_yaml=env.profiles.read_text(),
        )
        accepted: Counter[str] = self.proxy.accepted_bindings()
        doubles = {k: n for k, n in accepted.items() if n > 1}
        seconds = time.monotonic() - self.started
        over_nodes = len({line.split(":")[0] for line in report.overcommitted})
        RESULTS.append(
            FaultResult(
                test=test,
                fault=f"mixed (preemption+gangs): {fault}",
                pods=report.pods,
                lost=len(report.lost),
                double_booked=len(doubles),
                overcommitted_nodes=over_nodes,
                injected=injected,
                seconds=seconds,
            )
        )
        row = MixedRow(
            fault=fault, pods=report.pods, bound=report.bound, pending=len(report.pending),
            evicted=len(report.evicted), lost=len(report.lost), double_booked=len(doubles),
            overcommitted_nodes=over_nodes, partial_gangs=len(report.partial_gangs),
            wrongful_evictions=len(report.wrongful_evictions),
            unrecorded=len(report.unrecorded), seconds=round(seconds, 1),
        )  # fmt: skip
        print(f"mixed run: {row}")
        if path := os.environ.get("SPLITSCHED_FAULTS_REPORT"):
            with Path(f"{path}.mixed").open("a") as out:
                out.write(json.dumps({**asdict(row), "injected": injected}) + "\n")
        failures = report.failures(allow_unrecorded=allow_unrecorded)
        if doubles:
            failures.append(f"pods with more than one Binding accepted: {doubles}")
        tracebacks = "\n".join(s.tracebacks() for s in env.stacks)
        assert not failures, "\n".join(failures) + f"\n{tracebacks}"
        # The run really had preemptions and gangs in it.
        assert report.evicted, "nothing was evicted: no preemption happened"
        assert report.bound >= PLAN.gangs * PLAN.gang_size
        return report


@pytest.fixture
def mixed(
    faults_env: FaultsEnv,
    mixed_pool: mixedload.Pool,
    priority_classes: dict[str, str],
) -> tuple[FaultsEnv, mixedload.Pool, dict[str, str]]:
    return faults_env, mixed_pool, priority_classes


def _start(
    mixed: tuple[FaultsEnv, mixedload.Pool, dict[str, str]], *, seed: int = 1
) -> tuple[MixedRun, FaultProxy]:
    """A stack whose binders talk through a proxy (its log counts Bindings and Evictions)."""
    proxy, config = mixed[0].proxy("binder", seed=seed)
    running = mixed[0].stack(binder_kubeconfig=config, binders=2)
    return MixedRun(mixed, proxy=proxy, running=running), proxy


@pytest.mark.parametrize("victim", ["scheduler", "binder-0"])
def test_mixed_kill9_while_evicting(
    mixed: tuple[FaultsEnv, mixedload.Pool, dict[str, str]],
    victim: str,
    request: pytest.FixtureRequest,
) -> None:
    if victim.startswith("binder") and not LONG:
        # Its preemptions in flight die with it and are released only at the scheduler's
        # 60 s preemption deadline: the run takes over a minute.
        pytest.skip(f"{victim}: {LONG_REASON}")
    run, proxy = _start(mixed)
    run.fill()
    proxy.add(Fault.LATENCY, method="POST", path="/binding$", seconds=WRITE_LATENCY)
    proxy.add(Fault.LATENCY, method="POST", path=EVICTION, seconds=WRITE_LATENCY)
    run.contend()
    run.wait_evicting()
    svc = run.running.service(victim)
    run.running.kill(svc)
    at = run.evictions()
    time.sleep(DEAD_SECONDS)
    run.running.restart(svc)
    run.settle()
    proxy.clear_rules()
    run.check(
        test=request.node.name,
        fault=f"kill -9 {victim} after {at} Evictions sent, restarted {DEAD_SECONDS:g}s later",
        injected={"kill9": 1},
    )


def test_mixed_binder_traffic_faults(
    mixed: tuple[FaultsEnv, mixedload.Pool, dict[str, str]],
    request: pytest.FixtureRequest,
) -> None:
    run, proxy = _start(mixed, seed=13)
    run.fill()
    proxy.add(Fault.LOSE_RESPONSE, method="POST", path="/binding$", when_status=201,
              probability=0.5)  # fmt: skip
    proxy.add(Fault.LOSE_RESPONSE, method="POST", path=EVICTION, when_status=201,
              probability=0.5)  # fmt: skip
    proxy.add(Fault.ERROR, status=503, probability=0.15)
    proxy.add(Fault.THROTTLE, seconds=0.5, probability=0.1)
    proxy.add(Fault.RESET, probability=0.1)
    run.contend()
    run.settle()
    proxy.clear_rules()
    injected = dict(proxy.faults_applied())
    lost_evictions = sum(
        1
        for ex in proxy.exchanges
        if ex.fault is Fault.LOSE_RESPONSE and ex.path.endswith("/eviction")
    )
    assert lost_evictions, "no Eviction answer was lost: the test proved less than it says"
    injected["lost eviction 201s"] = lost_evictions
    run.check(
        test=request.node.name,
        fault="binders: lost 201s 50% (Bindings, Evictions), 503 15%, 429 10%, resets 10%",
        injected=injected,
    )
