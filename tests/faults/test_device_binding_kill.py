"""kill -9 of a binder between writing a ResourceClaim's allocation and the pod's Binding
(issue 23, faults): the pod still ends up on the node with the devices its claim holds, no
device is allocated to two claims, no claim stays reserved for a pod bound elsewhere, and
nothing is lost.

The binder talks to the API server through a fault proxy that fails every Binding POST
with a 503, so it is held right after its device step: the claim's finalizer, allocation
(``gpu-0``) and reservation for the pod written, the pod not bound. It is killed there. Its
decision dies with it; the scheduler's deadline would requeue the pod. A decision with a
stale view (the same pod, its claim given ``gpu-1``) is refused with nothing written: the
claim keeps its one device. The decision the scheduler sends next, once it sees the claim
allocated and reserved for the pod (a claim write with no allocation, or the same one),
finds the device step done (no claim written: the proxy's log shows no PUT nor PATCH of a
claim) and binds the pod. The tests play the scheduler (``tests/support/devices_cluster.py``).
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from splitsched.testing.faultproxy import Fault, FaultProxy, proxied_kubeconfig
from splitsched.testing.kube import wait_for
from splitsched.testing.stack import BINDER_RULES
from splitsched.v1 import binder_pb2, scheduler_pb2
from tests.support.binderproc import BinderProcess, binder_kubeconfig, run_binder
from tests.support.devices_cluster import (
    Devices,
    allocated_devices,
    allocated_twice,
    bind_request,
    devices_cluster,
)

pytestmark = pytest.mark.faults

Outcome = scheduler_pb2.BindingOutcome


def _decide(binder: BinderProcess, request: binder_pb2.BindRequest) -> Outcome:
    assert binder.stub.Bind(request, timeout=10).accepted
    return binder.scheduler.outcome(request.decision_id, timeout=60)


def _claim_writes(proxy: FaultProxy, since: int = 0) -> list[str]:
    """The PUTs and PATCHes of ResourceClaims (or their status) through the proxy."""
    return [
        f"{e.method} {e.path}"
        for e in proxy.exchanges[since:]
        if e.method in ("PUT", "PATCH") and "/resourceclaims/" in e.path
    ]


def _reserved_for(claim: dict[str, Any]) -> list[str]:
    """The uids the claim is reserved for."""
    return [str(r.get("uid")) for r in (claim.get("status") or {}).get("reservedFor") or []]


def _held_after_the_device_step(devices: Devices, proxy: FaultProxy, pod_uid: str) -> bool:
    claim = devices.claim("gpus")
    written = allocated_devices(claim) != [] and _reserved_for(claim) == [pod_uid]
    return written and proxy.faults_applied()[Fault.ERROR.value] > 0


def test_kill9_between_the_claim_allocation_and_the_pod_binding(
    kube_api: client.ApiClient, namespace: str, tmp_path: Path
) -> None:
    with devices_cluster(kube_api, namespace) as devices:
        uid = devices.add_claim("gpus")
        devices.add_claim("spare")  # never written: the list of claims holds two
        pod = devices.add_pod("trainer", ["gpus"])
        kubeconfig = binder_kubeconfig(
            kube_api, namespace=namespace, directory=tmp_path, rules=BINDER_RULES
        )
        with FaultProxy.for_kubeconfig(kubeconfig, name="proxy-binder") as proxy:
            proxied = proxied_kubeconfig(
                kubeconfig, proxy_url=proxy.url, dest=tmp_path / "binder-proxied.kubeconfig"
            )
            binders = _Binders(kube_api, namespace, tmp_path, proxied)
            _kill_the_binder_after_its_device_step(binders, devices, proxy, pod, uid)
            held = devices.claim("gpus")
            assert allocated_devices(held) == [_gpu(devices, "gpu-0")]
            assert _reserved_for(held) == [pod.metadata.uid]
            proxy.clear_rules()
            seen = len(proxy.exchanges)
            _decide_again(binders, devices, proxy, pod, uid)
            assert _claim_writes(proxy, seen) == []  # the step found its writes done

        assert _node_of(devices, "trainer") == devices.node
        claim = devices.claim("gpus")
        assert allocated_devices(claim) == [_gpu(devices, "gpu-0")]
        assert _reserved_for(claim) == [pod.metadata.uid]
        claims = devices.claims()
        assert len(claims) == 2
        assert allocated_twice(claims) == []


class _Binders:
    """Starts binders, one after the other, with the ServiceAccount behind the proxy."""

    def __init__(
        self, kube_api: client.ApiClient, namespace: str, directory: Path, kubeconfig: Path
    ) -> None:
        self.kube_api, self.namespace = kube_api, namespace
        self.directory, self.kubeconfig = directory, kubeconfig
        self.started = 0

    def run(self) -> contextlib.AbstractContextManager[BinderProcess]:
        self.started += 1
        return run_binder(
            self.kube_api, namespace=self.namespace, directory=self.directory,
            rules=BINDER_RULES, kubeconfig=self.kubeconfig,
            log_name=f"binder-{self.started - 1}.log",
        )  # fmt: skip


def _kill_the_binder_after_its_device_step(
    binders: _Binders, devices: Devices, proxy: FaultProxy, pod: Any, uid: str
) -> None:
    """A binder whose Bindings all fail (503) writes the claim's gpu-0 and is killed then:
    its decision has no outcome, the pod is not bound."""
    proxy.add(Fault.ERROR, method="POST", path="/binding$", status=503)
    with binders.run() as first:
        request = bind_request("d1", pod, node=devices.node, deadline=60,
                               writes=[("gpus", uid, devices.allocation("gpu-0"))])  # fmt: skip
        request.max_attempts = 20
        assert first.stub.Bind(request, timeout=10).accepted
        wait_for(
            lambda: _held_after_the_device_step(devices, proxy, pod.metadata.uid),
            timeout=30, message="the claim allocated and reserved, a Binding refused",
        )  # fmt: skip
        first.proc.kill()
        first.proc.wait(timeout=10)
        final = [o for o in first.scheduler.outcomes if o.result != Outcome.IN_PROGRESS]
        assert final == []  # the decision died with its binder
    assert _node_of(devices, "trainer") is None


def _decide_again(
    binders: _Binders, devices: Devices, proxy: FaultProxy, pod: Any, uid: str
) -> None:
    """A second binder refuses a stale decision (gpu-1 for the claim) with nothing written,
    then binds the pod for the decisions the scheduler sends once it sees the claim: one
    only reserving the claim, one with the same allocation."""
    with binders.run() as second:
        seen = len(proxy.exchanges)
        stale = bind_request("d2", pod, node=devices.node,
                             writes=[("gpus", uid, devices.allocation("gpu-1"))])  # fmt: skip
        refused = _decide(second, stale)
        assert refused.result == Outcome.FAILED
        assert refused.message.startswith("device binding failed (allocated_elsewhere): "), (
            refused.message
        )
        assert _claim_writes(proxy, seen) == []  # refused with nothing written
        assert _node_of(devices, "trainer") is None
        for decision, allocation in (("d3", None), ("d4", devices.allocation("gpu-0"))):
            retried = bind_request(decision, pod, node=devices.node,
                                   writes=[("gpus", uid, allocation)])  # fmt: skip
            outcome = _decide(second, retried)
            assert outcome.result == Outcome.BOUND, (decision, outcome.message)


def _node_of(devices: Devices, pod_name: str) -> str | None:
    node: str | None = devices.core.read_namespaced_pod(pod_name, devices.namespace).spec.node_name
    return node


def _gpu(devices: Devices, name: str) -> tuple[str, str, str]:
    """(driver, pool, device) of one GPU of the node's slice."""
    (result,) = devices.allocation(name).results
    return (result.driver, result.pool, result.device)
