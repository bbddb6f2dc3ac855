"""kill -9 of a binder between the PV binding and the pod Binding (issue 18, faults): the
pod still ends up on the node whose PV it claimed, no PV is bound to two claims, and
nothing is lost.

The binder talks to the API server through a fault proxy that fails every Binding POST
with a 503, so it is held right after its volume step: the local PV claimed for the
pod's claim, the PV controller (kube-controller-manager) done binding the claim, the pod
not bound. It is killed there. Its decision dies with it; the scheduler's deadline would
requeue the pod, and its next decision, sent here to a second binder, finds the volume
step done (nothing is written again: the proxy's log shows no PATCH) and binds the pod. A
decision with a stale view (another node's PV for the same claim) is refused with nothing
written: the claim stays on its PV, the other PV stays free. The tests play the scheduler
(``tests/support/volumes.py``); the scheduler's side of the volume binding is not needed.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from kubernetes import client

from splitsched.testing.faultproxy import Fault, FaultProxy, proxied_kubeconfig
from splitsched.testing.kube import wait_for
from splitsched.testing.stack import BINDER_RULES
from splitsched.v1 import binder_pb2, scheduler_pb2
from tests.support.binderproc import BinderProcess, binder_kubeconfig, run_binder
from tests.support.volumes import bind_request, claimed_twice, storage_set

pytestmark = pytest.mark.faults

Outcome = scheduler_pb2.BindingOutcome


def _decide(binder: BinderProcess, request: binder_pb2.BindRequest) -> Outcome:
    assert binder.stub.Bind(request, timeout=10).accepted
    return binder.scheduler.outcome(request.decision_id, timeout=60)


def _patches(proxy: FaultProxy, since: int = 0) -> list[str]:
    return [e.path for e in proxy.exchanges[since:] if e.method == "PATCH"]


def test_kill9_between_the_pv_binding_and_the_pod_binding(
    kube_api: client.ApiClient, namespace: str, tmp_path: Path
) -> None:
    with storage_set(kube_api, namespace) as storage:
        near, far = storage.add_nodes(per_zone=1, zones=["zone-a", "zone-b"])
        local = storage.add_class()
        pvs = storage.add_pvs(per_node=1, storage_class_name=local)
        pod, _ = storage.add_claimed_pod("web-0", storage_class_name=local)
        kubeconfig = binder_kubeconfig(
            kube_api, namespace=namespace, directory=tmp_path, rules=BINDER_RULES
        )
        with FaultProxy.for_kubeconfig(kubeconfig, name="proxy-binder") as proxy:
            proxied = proxied_kubeconfig(
                kubeconfig, proxy_url=proxy.url, dest=tmp_path / "binder-proxied.kubeconfig"
            )
            proxy.add(Fault.ERROR, method="POST", path="/binding$", status=503)
            with run_binder(
                kube_api, namespace=namespace, directory=tmp_path, rules=BINDER_RULES,
                kubeconfig=proxied, log_name="binder-0.log",
            ) as first:  # fmt: skip
                request = bind_request("d1", pod, node=near, claim="data-web-0",
                                       pv=pvs[near][0], deadline=60)  # fmt: skip
                request.max_attempts = 20
                assert first.stub.Bind(request, timeout=10).accepted

                def held() -> bool:
                    bound = storage.claim("data-web-0").status.phase == "Bound"
                    return bound and proxy.faults_applied()[Fault.ERROR.value] > 0

                wait_for(held, timeout=30, message="the PV bound and a Binding refused")
                first.proc.kill()
                first.proc.wait(timeout=10)
                final = [o for o in first.scheduler.outcomes if o.result != Outcome.IN_PROGRESS]
                assert final == []  # the decision died with its binder
            assert storage.core.read_namespaced_pod("web-0", namespace).spec.node_name is None
            assert storage.pv(pvs[near][0]).spec.claim_ref.name == "data-web-0"

            proxy.clear_rules()
            seen = len(proxy.exchanges)
            with run_binder(
                kube_api, namespace=namespace, directory=tmp_path, rules=BINDER_RULES,
                kubeconfig=proxied, log_name="binder-1.log",
            ) as second:  # fmt: skip
                stale = bind_request("d2", pod, node=far, claim="data-web-0", pv=pvs[far][0])
                refused = _decide(second, stale)
                assert refused.result == Outcome.FAILED
                assert refused.message.startswith(
                    "volume binding failed (claim_bound_elsewhere): "
                ), refused.message
                retried = bind_request("d3", pod, node=near, claim="data-web-0", pv=pvs[near][0])
                outcome = _decide(second, retried)
                assert outcome.result == Outcome.BOUND, outcome.message
            assert _patches(proxy, seen) == []  # the step found its writes done

        assert storage.core.read_namespaced_pod("web-0", namespace).spec.node_name == near
        assert storage.claim("data-web-0").spec.volume_name == pvs[near][0]
        assert storage.pv(pvs[far][0]).spec.claim_ref is None
        assert claimed_twice([storage.pv(pvs[near][0]), storage.pv(pvs[far][0])]) == []
