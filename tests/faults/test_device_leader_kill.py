"""kill -9 of the scheduler leader while a pod's devices are being written (issue 23,
faults): the new leader must not give the device to another pod.

Two pods, each with its own ResourceClaim for one GPU of a class, and a node with the one
GPU. Two schedulers run under leader election, and the binder reaches the API server
through a proxy that refuses (503) every status update of the first pod's claim: the first
pod's decision is held in the binder's device step, retrying, its claim carrying the
finalizer but no allocation. The leader is killed there, and the second pod waits. The new
leader's watch shows the GPU free; it learns the first decision, with the claim writes it
carries, from the binder's IN_PROGRESS reports and holds the GPU for it, so it judges the
second pod unschedulable on the node while the first claim is still unallocated. Had it
not, it would allocate the GPU to the second pod's claim too (the binder does not check
other claims): one device in two claims. The proxy then lets the status update through:
the first pod is bound with the GPU, and the second waits with its claim unallocated.

(A delay would not do to hold the step: the proxy reads a delayed request's body after the
delay, and the binder hangs up after 10 s, so a write delayed longer never lands.)
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import grpc
import pytest
from kubernetes import client

from services.binder.deviceclaims import FINALIZER
from splitsched.core.devices import judge
from splitsched.testing import faultproxy, kube, stack
from splitsched.testing.faultproxy import Fault
from splitsched.v1 import scheduler_pb2, scheduler_pb2_grpc
from tests.support.devices_cluster import (
    Devices,
    allocated_devices,
    allocated_twice,
    devices_cluster,
)
from tests.support.faults import RESULTS, FaultResult, FaultsEnv, FaultStack

pytestmark = pytest.mark.faults

#: The decision's deadline: the device step retries the refused status update until 2 s
#: before it, which leaves the takeover (the lease below, a sync) well inside it.
BIND_TIMEOUT = "45"
#: A short lease keeps the takeover within seconds (as tests/e2e/test_ha.py).
ELECTION = ["--lease-duration", "6", "--renew-deadline", "4", "--retry-period", "1"]


def _start_stack(
    faults_env: FaultsEnv, kube_api: client.ApiClient, sa_namespace: str, tmp_path: Path
) -> tuple[FaultStack, faultproxy.FaultProxy]:
    """Two schedulers under leader election, one binder behind a proxy (its rules: none)."""
    configs = stack.component_kubeconfigs(
        kube_api, namespace=sa_namespace, directory=tmp_path, with_scheduler=True
    )
    proxy = faultproxy.FaultProxy.for_kubeconfig(configs["binder"], name="proxy-binder-dra")
    proxy.start()
    faults_env.proxies.append(proxy)
    binder_config = faultproxy.proxied_kubeconfig(
        configs["binder"], proxy_url=proxy.url, dest=tmp_path / "binder-proxied.kubeconfig"
    )
    running = FaultStack(
        workdir=tmp_path / "dra-ha-stack",
        watcher_kubeconfig=configs["watcher"],
        binder_kubeconfig=binder_config,
        binders=1,
        schedulers=2,
        scheduler_kubeconfig=configs["scheduler"],
        lease_namespace=sa_namespace,
        scheduler_args=["--bind-timeout", BIND_TIMEOUT, *ELECTION],
    )
    faults_env.stacks.append(running)
    running.start(timeout=120)
    return running, proxy


def test_leader_killed_mid_device_step_the_new_leader_keeps_the_gpu_for_the_first_pod(
    faults_env: FaultsEnv,
    kube_api: client.ApiClient,
    namespace: str,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    sa_namespace = kube.create_namespace(kube_api, prefix="splitsched-faults-dra")
    try:
        with devices_cluster(kube_api, namespace, gpus=1) as devices:
            running, proxy = _start_stack(faults_env, kube_api, sa_namespace, tmp_path)
            leader = running.wait_leader(timeout=60)
            started = time.monotonic()
            held = proxy.add(Fault.ERROR, method="PUT", status=503,
                             path="/resourceclaims/first-gpu/status$")  # fmt: skip
            devices.add_claim("first-gpu")
            first = devices.add_pod("first", ["first-gpu"])
            kube.wait_for(
                lambda: proxy.faults_applied()[Fault.ERROR.value] > 0,
                timeout=30, interval=0.05, message="the first claim's status update refused",
            )  # fmt: skip
            devices.add_claim("second-gpu")
            devices.add_pod("second", ["second-gpu"])
            running.kill(leader)
            new_leader = running.wait_leader(timeout=60)
            assert new_leader is not leader
            resp = kube.wait_for(
                lambda: _judged_on_the_full_node(running, new_leader, devices, "second"),
                timeout=30, message="the second pod judged by the new leader on the full node",
            )  # fmt: skip
            assert allocated_devices(devices.claim("first-gpu")) == []  # still held
            assert FINALIZER in devices.claim("first-gpu")["metadata"]["finalizers"]
            proxy.remove_rule(held)
            kube.wait_for(lambda: _node_of(devices, "first"), timeout=60,
                          message="the first pod bound")  # fmt: skip
            doubles = {k: n for k, n in proxy.accepted_bindings().items() if n > 1}
            claims = devices.claims()
            _record(request, started, doubles=len(doubles))
            assert doubles == {}, doubles
            # One Binding of the first pod: the new leader adopted the decision in flight
            # (deciding the pod again would send a second one).
            assert proxy.forwarded_bindings()[f"{namespace}/first"] == 1
            assert allocated_twice(claims) == [], claims
            assert _node_of(devices, "first") == devices.node
            claim = devices.claim("first-gpu")
            assert allocated_devices(claim) == [_gpu(devices)]
            assert [r["uid"] for r in claim["status"]["reservedFor"]] == [first.metadata.uid]
            assert resp.state == scheduler_pb2.WAITING
            assert _node_of(devices, "second") is None
            assert allocated_devices(devices.claim("second-gpu")) == []
    finally:
        kube.delete_namespace(kube_api, sa_namespace)


def _node_of(devices: Devices, pod_name: str) -> str | None:
    node: str | None = devices.core.read_namespaced_pod(pod_name, devices.namespace).spec.node_name
    return node


def _gpu(devices: Devices) -> tuple[str, str, str]:
    (result,) = devices.allocation("gpu-0").results
    return (result.driver, result.pool, result.device)


def _judged_on_the_full_node(
    running: FaultStack, leader: stack.Service, devices: Devices, pod_name: str
) -> Any:
    """The leader's Explain of the pod once it says the GPU node cannot allocate its
    claim (None before: not judged yet, or the leader not answering)."""
    try:
        with running.channel(leader.grpc_target) as channel:
            resp = scheduler_pb2_grpc.SchedulerStub(channel).Explain(
                scheduler_pb2.ExplainRequest(
                    namespace=devices.namespace, name=pod_name, include_nodes=True
                ),
                timeout=10,
            )
    except grpc.RpcError:
        return None
    reasons = {
        reason
        for verdict in resp.nodes
        if verdict.node == devices.node
        for rejection in verdict.rejections
        if rejection.plugin == "DynamicResources"
        for reason in rejection.reasons
    }
    # Explain's detail: the node's one GPU passes the class, and it is not free.
    held = f"{judge.CANNOT_ALLOCATE}: claim {devices.namespace}/{pod_name}-gpu, request"
    return resp if len(reasons) == 1 and _held_gpu(reasons.pop(), held) else None


def _held_gpu(reason: str, start: str) -> bool:
    return reason.startswith(start) and reason.endswith(
        "1 of the node's devices pass, 0 of them free"
    )


def _record(request: pytest.FixtureRequest, started: float, *, doubles: int) -> None:
    """A row of the faults table (two chosen pods, not the tier's workload)."""
    RESULTS.append(
        FaultResult(
            test=request.node.name,
            fault="kill -9 the scheduler leader (of 2) mid device step (the claim's status "
            "update refused until the new leader judged): it keeps the only GPU for the first pod",
            pods=2,
            lost=0,
            double_booked=doubles,
            overcommitted_nodes=0,
            injected={"kill9": 1},
            seconds=time.monotonic() - started,
        )
    )
