"""The binder's volume step on the real control plane (issue 18 item 3): the binder process
(``python -m services.binder``, the stack's least-privilege rules: get/patch on PVs and
claims, nothing to list) claims static local PVs for WaitForFirstConsumer claims the way
kube-scheduler's PreBind does, kube-controller-manager's PV controller binds the claims,
and only then is each pod bound. The tests play the scheduler: they send the
BindRequests with ``volume_bindings`` a VolumeBinding plugin would choose
(``tests/support/volumes.py``).

* a StatefulSet-shaped set of 12 pods with one claim each, on 12 local PVs across 3 zones:
  every pod bound to the node holding its PV, every claim Bound to it, no PV claimed twice;
* two decisions racing for one PV: exactly one wins, the other fails with nothing bound;
* a claim to provision with no provisioner at work: annotated with the node, then the
  decision fails with the timeout before its deadline and the pod stays unbound.
"""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client

from splitsched.testing.stack import BINDER_RULES
from splitsched.v1 import binder_pb2, scheduler_pb2
from tests.support.binderproc import BinderProcess, run_binder
from tests.support.volumes import ZONE, StorageSet, bind_request, claimed_twice, storage_set

Outcome = scheduler_pb2.BindingOutcome
SELECTED_NODE = "volume.kubernetes.io/selected-node"
PODS = 12


@pytest.fixture
def binder(kube_api: client.ApiClient, namespace: str, tmp_path: Path) -> Iterator[BinderProcess]:
    with run_binder(
        kube_api, namespace=namespace, directory=tmp_path, rules=BINDER_RULES,
        extra_args=["--shutdown-grace", "2"],
    ) as process:  # fmt: skip
        yield process


@pytest.fixture
def storage(kube_api: client.ApiClient, namespace: str) -> Iterator[StorageSet]:
    with storage_set(kube_api, namespace) as made:
        yield made


def metric(b: BinderProcess, line_start: str) -> float:
    with urllib.request.urlopen(f"{b.http_url}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    for line in text.splitlines():
        if line.startswith(line_start):
            return float(line.split()[-1])
    return 0.0


def test_a_stateful_set_of_12_pods_lands_each_pod_on_the_node_of_its_local_pv(
    binder: BinderProcess, storage: StorageSet
) -> None:
    nodes = storage.add_nodes(per_zone=2)
    local = storage.add_class()
    pvs = storage.add_pvs(per_node=2, storage_class_name=local)
    # Pod i gets the i-th PV: two pods per node, four per zone.
    placements = [(node, pv) for node in nodes for pv in pvs[node]]
    requests = []
    for i, (node, pv) in enumerate(placements[:PODS]):
        pod, _ = storage.add_claimed_pod(f"web-{i}", storage_class_name=local)
        requests.append(bind_request(f"d{i}", pod, node=node, claim=f"data-web-{i}", pv=pv))
    answer = binder.stub.BindBatch(binder_pb2.BindBatchRequest(requests=requests), timeout=10)
    assert all(r.accepted for r in answer.responses), answer
    outcomes = [binder.scheduler.outcome(f"d{i}", timeout=60) for i in range(PODS)]
    assert [o.result for o in outcomes] == [Outcome.BOUND] * PODS, [o.message for o in outcomes]

    zones_used = set()
    for i, (node, pv) in enumerate(placements[:PODS]):
        pod = storage.core.read_namespaced_pod(f"web-{i}", storage.namespace)
        assert pod.spec.node_name == node
        claim = storage.claim(f"data-web-{i}")
        assert claim.status.phase == "Bound" and claim.spec.volume_name == pv
        volume = storage.pv(pv)
        assert volume.spec.claim_ref.uid == claim.metadata.uid
        assert volume.metadata.annotations["pv.kubernetes.io/bound-by-controller"] == "yes"
        zones_used.add(storage.core.read_node(node).metadata.labels[ZONE])
    assert len(zones_used) == 3
    all_pvs = [storage.pv(name) for names in pvs.values() for name in names]
    assert claimed_twice(all_pvs) == []
    assert metric(binder, 'splitsched_binder_volume_steps_total{result="bound"}') == PODS


def test_two_decisions_racing_for_one_pv_bind_exactly_one_claim(
    binder: BinderProcess, storage: StorageSet
) -> None:
    (node,) = storage.add_nodes(per_zone=1, zones=["zone-a"])
    local = storage.add_class()
    (pv,) = storage.add_pvs(per_node=1, storage_class_name=local)[node]
    first, _ = storage.add_claimed_pod("db-0", storage_class_name=local)
    second, _ = storage.add_claimed_pod("db-1", storage_class_name=local)
    requests = [
        bind_request("d0", first, node=node, claim="data-db-0", pv=pv),
        bind_request("d1", second, node=node, claim="data-db-1", pv=pv),
    ]
    binder.stub.BindBatch(binder_pb2.BindBatchRequest(requests=requests), timeout=10)
    outcomes = {o.pod.name: o for o in (binder.scheduler.outcome(d) for d in ("d0", "d1"))}
    won = [name for name, o in outcomes.items() if o.result == Outcome.BOUND]
    assert len(won) == 1, {n: o.message for n, o in outcomes.items()}
    (lost,) = set(outcomes) - set(won)
    assert outcomes[lost].result == Outcome.FAILED
    assert outcomes[lost].message.startswith("volume binding failed (pv_claimed_elsewhere): ")
    assert storage.pv(pv).spec.claim_ref.name == f"data-{won[0]}"
    assert storage.claim(f"data-{lost}").status.phase == "Pending"
    assert storage.core.read_namespaced_pod(lost, storage.namespace).spec.node_name is None


def test_a_claim_nobody_provisions_is_annotated_then_the_decision_times_out(
    binder: BinderProcess, storage: StorageSet
) -> None:
    (node,) = storage.add_nodes(per_zone=1, zones=["zone-b"])
    external = storage.add_class(provisioner="example.com/nobody")
    pod, _ = storage.add_claimed_pod("cache-0", storage_class_name=external)
    request = bind_request("d0", pod, node=node, claim="data-cache-0", pv="", deadline=5.0)
    assert binder.stub.Bind(request, timeout=10).accepted
    outcome = binder.scheduler.outcome("d0", timeout=20)
    assert outcome.result == Outcome.DEADLINE_EXCEEDED
    assert outcome.message.startswith("volume binding failed (timeout): "), outcome.message
    claim = storage.claim("data-cache-0")
    assert claim.metadata.annotations[SELECTED_NODE] == node  # left for the provisioner
    assert claim.status.phase == "Pending"
    assert storage.core.read_namespaced_pod("cache-0", storage.namespace).spec.node_name is None
