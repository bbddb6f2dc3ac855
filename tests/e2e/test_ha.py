"""Scheduler high availability end to end: two scheduler replicas under leader election
(a Lease; their kubeconfig may touch nothing else), a watcher and two binders as real
processes on the real control plane. The leader is killed with SIGKILL in the middle of a
600-pod run while its binders still carry hundreds of its decisions; the standby must take
over and finish the run with every pod bound, no node over its allocatable, and no pod
bound by two decisions.

Measured and printed (run with -s): kill -> the standby ready, kill -> its first own
decision, and when that was bound.
"""

from __future__ import annotations

import collections
import signal
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from kubernetes import client

from splitsched.testing import invariants, kube, stack
from splitsched.v1 import scheduler_pb2, scheduler_pb2_grpc

pytestmark = pytest.mark.e2e

NODES = 20
NODE_CPU_MILLI = 4000
BEFORE, AFTER = 400, 200  # pods created before the kill and after it
POD_CPU_MILLI = 110  # 600 x 110m on 20 x 4 cores: 82 % of the CPU
# Binders limited to 12 API requests/s each, slower than the pods are created and decided,
# so decisions pile up at the binders: the leader is killed once they carry this many of
# its decisions, enough to outlast the takeover (~8-10 s with this lease) even when the
# bindings take the whole budget and the Scheduled Events wait (a binder writes the Event
# beside the next binding): 300 / (2 x 12/s) = 12.5 s at the least.
BINDER_QPS = "12"
KILL_WITH_IN_FLIGHT = 300
# A shorter lease than the default 10 s keeps the test short; the renew deadline leaves
# a loaded 2-core CI machine room to renew (at 3 s the leader sometimes lost its lease on
# its own before the kill).
ELECTION = ["--lease-duration", "8", "--renew-deadline", "6", "--retry-period", "1"]


@pytest.fixture
def ha_nodes(kube_api: client.ApiClient) -> Iterator[tuple[str, list[str]]]:
    label = f"ha-{uuid.uuid4().hex[:6]}"
    names = kube.create_kwok_nodes(
        kube_api, NODES, name_prefix=label, cpu=f"{NODE_CPU_MILLI}m", memory="32Gi",
        pods=110, labels={"splitsched-ha": label}, workers=10,
    )  # fmt: skip
    try:
        yield label, names
    finally:
        kube.delete_nodes(kube_api, names)


@pytest.fixture
def ha_stack(kube_api: client.ApiClient, tmp_path: Path) -> Iterator[stack.Stack]:
    sa_namespace = kube.create_namespace(kube_api, prefix="splitsched-ha")
    configs = stack.component_kubeconfigs(
        kube_api, namespace=sa_namespace, directory=tmp_path, with_scheduler=True
    )
    running = stack.Stack(
        workdir=tmp_path / "stack",
        watcher_kubeconfig=configs["watcher"],
        binder_kubeconfig=configs["binder"],
        binders=2,
        schedulers=2,
        scheduler_kubeconfig=configs["scheduler"],
        lease_namespace=sa_namespace,
        binder_args=["--qps", BINDER_QPS, "--burst", BINDER_QPS],
        scheduler_args=["--bind-timeout", "60", *ELECTION],
    )
    try:
        running.start(timeout=120)
        yield running
    finally:
        running.stop()
        for log in (tmp_path / "stack").glob("*.log"):
            text = log.read_text(errors="replace")
            if "Traceback" in text:
                print(f"--- {log.name} (has a traceback) ---\n{text[-4000:]}")
        kube.delete_namespace(kube_api, sa_namespace)


class FirstOwnDecision:
    """Follows a scheduler's decision stream (in a thread) and notes when it made its first
    decision of its own (not adopted: the id carries its scheduler id) and when the first
    one was bound."""

    def __init__(self, channel: grpc.Channel, scheduler_id: str, namespace: str) -> None:
        self.prefix = f"{scheduler_id}."
        self.decided: float | None = None
        self.bound: float | None = None
        self._channel = channel
        stub = scheduler_pb2_grpc.SchedulerStub(self._channel)
        request = scheduler_pb2.WatchDecisionsRequest(namespace=namespace, include_outcomes=True)
        self._stream = stub.WatchDecisions(request)
        self._thread = threading.Thread(target=self._follow, daemon=True)
        self._thread.start()

    def _follow(self) -> None:
        try:
            for decision in self._stream:
                if not decision.decision_id.startswith(self.prefix):
                    continue
                if decision.kind == scheduler_pb2.Decision.SCHEDULED and self.decided is None:
                    self.decided = time.monotonic()
                if decision.kind == scheduler_pb2.Decision.BOUND:
                    self.bound = time.monotonic()
                    return
        except grpc.RpcError:
            return

    def close(self) -> None:
        self._stream.cancel()
        self._thread.join(timeout=5)
        self._channel.close()


def health(running: stack.Stack, target: str) -> int:
    """The scheduler's gRPC health, asked with the stack's `ops` client certificate."""
    with running.channel(target) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        request = health_pb2.HealthCheckRequest(service="splitsched.v1.Scheduler")
        return int(stub.Check(request, timeout=5).status)


def metric(svc: stack.Service, name: str) -> float:
    for line in svc.metrics().splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_standby_takes_over_when_the_leader_is_killed_without_double_booking(
    kube_api: client.ApiClient,
    namespace: str,
    ha_nodes: tuple[str, list[str]],
    ha_stack: stack.Stack,
) -> None:
    label, node_names = ha_nodes
    leader = ha_stack.wait_leader(timeout=60)
    (standby,) = [s for s in ha_stack.scheduler_services if s is not leader]
    # The standby has a warm view but serves nothing: not ready, NOT_SERVING.
    assert not standby.ready()
    assert health(ha_stack, standby.grpc_target) == health_pb2.HealthCheckResponse.NOT_SERVING
    serving = health_pb2.HealthCheckResponse.SERVING
    kube.wait_for(lambda: health(ha_stack, leader.grpc_target) == serving, timeout=10,
                  interval=0.1, message="the leader SERVING")  # fmt: skip

    def wave(prefix: str, count: int) -> None:
        pods = kube.make_pods(
            count, name_prefix=prefix, cpu=f"{POD_CPU_MILLI}m", memory="64Mi",
            node_selector={"splitsched-ha": label},
        )  # fmt: skip
        kube.create_pods(kube_api, namespace=namespace, pods=pods, workers=16)

    def pods() -> list[dict[str, Any]]:
        return invariants.list_json(kube_api, f"/api/v1/namespaces/{namespace}/pods")

    def bound() -> int:
        return sum(1 for p in pods() if (p.get("spec") or {}).get("nodeName"))

    def in_flight() -> float:
        return sum(metric(b, "splitsched_binder_inflight") for b in ha_stack.binder_services)

    standby_id = standby.argv[standby.argv.index("--scheduler-id") + 1]
    first_own = FirstOwnDecision(ha_stack.channel(standby.grpc_target), standby_id, namespace)
    try:
        creating = threading.Thread(target=wave, args=("before", BEFORE), daemon=True)
        creating.start()
        kube.wait_for(lambda: in_flight() >= KILL_WITH_IN_FLIGHT, timeout=60, interval=0.1,
                      message=f"{KILL_WITH_IN_FLIGHT} decisions in flight")  # fmt: skip
        assert leader.proc is not None
        leader.proc.send_signal(signal.SIGKILL)
        killed_at = time.monotonic()
        leader.proc.wait(timeout=10)
        bound_at_kill, in_flight_at_kill = bound(), in_flight()
        creating.join(timeout=120)
        wave("after", AFTER)
        new_leader = ha_stack.wait_leader(timeout=60)
        ready_after = time.monotonic() - killed_at
        assert new_leader is standby
        kube.wait_for(lambda: bound() == BEFORE + AFTER, timeout=120, interval=0.5,
                      message=f"all {BEFORE + AFTER} pods bound")  # fmt: skip
        assert first_own.decided is not None and first_own.bound is not None
        decided_after = first_own.decided - killed_at
        bound_after = first_own.bound - killed_at
    finally:
        first_own.close()

    adopted = metric(standby, "splitsched_scheduler_adopted_decisions_total")
    print(
        f"\nHA takeover: {bound_at_kill}/{BEFORE} bound, {in_flight_at_kill:.0f} in flight when "
        f"the leader was killed; the standby ready {ready_after:.1f}s after the kill, its "
        f"first own decision {decided_after:.1f}s after (bound {bound_after:.1f}s after, "
        f"behind the binders' backlog); {adopted:.0f} in-flight decisions adopted"
    )

    # Nothing double-booked: checked from the API server's objects.
    all_nodes, all_pods = invariants.cluster_state(kube_api)
    node_objs = [n for n in all_nodes if n.name in set(node_names)]
    assert len(node_objs) == NODES
    ours = [p for p in all_pods if p.namespace == namespace]
    assert len(ours) == BEFORE + AFTER and all(p.node_name for p in ours)
    assert invariants.overcommitted(node_objs, all_pods) == []
    # Each pod bound by exactly one decision: one Scheduled event per pod.
    events = invariants.list_json(kube_api, f"/apis/events.k8s.io/v1/namespaces/{namespace}/events")
    scheduled = collections.Counter(
        e["regarding"]["name"] for e in events if e.get("reason") == "Scheduled"
    )
    twice = {name: n for name, n in scheduled.items() if n > 1}
    assert not twice, f"pods bound by more than one decision: {twice}"
    assert leader.proc.returncode == -signal.SIGKILL
    # The scenario really had the old leader's work in flight at the takeover.
    assert adopted > 0, "nothing was in flight at the binders when the leader died"
