"""Issue 5's promises, end to end: real pods through watcher, scheduler and binders.

Every check reads the API server's objects, never our logs.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from typing import Any

import pytest
from kubernetes import client

from splitsched.core import models
from splitsched.testing import invariants, kube, stack

pytestmark = pytest.mark.e2e

GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def pods_in(api: client.ApiClient, namespace: str) -> list[models.Pod]:
    _, pods = invariants.cluster_state(api)
    return [p for p in pods if p.namespace == namespace]


def wait_bound(
    api: client.ApiClient, namespace: str, expected: int, timeout: float
) -> list[models.Pod]:
    def enough() -> list[models.Pod] | None:
        pods = pods_in(api, namespace)
        return pods if sum(1 for p in pods if p.node_name) >= expected else None

    return kube.wait_for(enough, timeout=timeout, interval=1.0, message=f"{expected} pods bound")


def events_for(api: client.ApiClient, namespace: str, name: str) -> list[Any]:
    evs = client.CoreV1Api(api).list_namespaced_event(
        namespace, field_selector=f"involvedObject.name={name}"
    )
    return list(evs.items)


def failed_scheduling_messages(api: client.ApiClient, namespace: str, name: str) -> list[str]:
    return [
        str(e.message) for e in events_for(api, namespace, name) if e.reason == "FailedScheduling"
    ]


def mixed_workload() -> tuple[list[dict[str, Any]], set[str]]:
    """450 pods that fit (8 GPU pods for 8 GPUs) and 20 that cannot."""
    pods: list[dict[str, Any]] = []
    for i in range(200):
        pods.append(kube.make_pod(f"web-{i}", cpu="100m", memory="128Mi", labels={"app": "web"}))
        pods[-1]["spec"]["topologySpreadConstraints"] = [
            {
                "maxSkew": 1,
                "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": "web"}},
            }
        ]
    for i in range(200):
        pods.append(
            kube.make_pod(f"batch-{i}", cpu="250m", memory="512Mi", labels={"app": "batch"})
        )
    for i in range(10):
        pods.append(
            kube.make_pod(f"db-{i}", cpu="100m", memory="256Mi", node_selector={"disktype": "ssd"})
        )
    for i in range(8):
        pods.append(
            kube.make_pod(
                f"train-{i}",
                cpu="1",
                memory="1Gi",
                extended={"nvidia.com/gpu": "1"},
                tolerations=[GPU_TOLERATION],
            )
        )
    anti = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchLabels": {"app": "cache"}},
                    "topologyKey": "kubernetes.io/hostname",
                }
            ]
        }
    }
    for i in range(16):
        pods.append(
            kube.make_pod(
                f"cache-{i}", cpu="50m", memory="64Mi", labels={"app": "cache"}, affinity=anti
            )
        )
    unfit: set[str] = set()
    for i in range(8):
        pods.append(kube.make_pod(f"huge-{i}", cpu="64", memory="1Gi"))
        unfit.add(f"huge-{i}")
    for i in range(6):
        pods.append(
            kube.make_pod(f"lost-{i}", node_selector={"topology.kubernetes.io/zone": "zone-z"})
        )
        unfit.add(f"lost-{i}")
    for i in range(6):
        pods.append(kube.make_pod(f"notol-{i}", extended={"nvidia.com/gpu": "1"}))
        unfit.add(f"notol-{i}")
    return pods, unfit


def test_500_pods_bind_within_capacity_and_constraints(
    kube_api: client.ApiClient, namespace: str, running_stack: stack.Stack
) -> None:
    manifests, unfit = mixed_workload()
    kube.create_pods(kube_api, namespace=namespace, pods=manifests)
    fit = len(manifests) - len(unfit)
    pods = wait_bound(kube_api, namespace, fit, timeout=240)
    bound = {p.name for p in pods if p.node_name}
    assert bound == {p["metadata"]["name"] for p in manifests} - unfit
    nodes, all_pods = invariants.cluster_state(kube_api)
    assert invariants.overcommitted(nodes, all_pods) == []
    assert invariants.placement_violations(nodes, pods) == []
    # Unfit pods stay pending, with a FailedScheduling event that names why.
    expected = {
        "huge": "Insufficient cpu",
        "lost": "node affinity/selector",
        "notol": "untolerated taint",
    }
    for name in sorted(unfit):
        pod = next(p for p in pods if p.name == name)
        assert not pod.node_name
        messages = kube.wait_for(
            lambda n=name: failed_scheduling_messages(kube_api, namespace, n),  # type: ignore[misc]
            timeout=30,
            message=f"FailedScheduling event for {name}",
        )
        assert any(expected[name.split("-")[0]] in m for m in messages), messages
    # Three binders each bound a real share.
    shares = {}
    for svc in running_stack.binder_services:
        found = re.findall(
            r'splitsched_binder_outcomes_total\{result="BOUND"\} (\S+)', svc.metrics()
        )
        shares[svc.name] = float(found[0]) if found else 0.0
    assert sum(shares.values()) >= fit
    assert all(v >= fit * 0.1 for v in shares.values()), shares


def test_pods_for_other_schedulers_are_never_touched(
    kube_api: client.ApiClient, namespace: str, running_stack: stack.Stack
) -> None:
    kube.create_pods(
        kube_api,
        namespace=namespace,
        pods=[kube.make_pod("theirs", scheduler_name="default-scheduler"), kube.make_pod("ours")],
    )
    wait_bound(kube_api, namespace, 1, timeout=60)
    time.sleep(2)
    theirs = kube.get_pod(kube_api, namespace=namespace, name="theirs")
    assert not theirs.spec.node_name
    assert events_for(kube_api, namespace, "theirs") == []


def test_deleted_pending_pod_does_not_stall_and_node_added_later_is_used(
    kube_api: client.ApiClient, namespace: str, running_stack: stack.Stack
) -> None:
    pool = f"late-{namespace}"
    kube.create_pods(
        kube_api,
        namespace=namespace,
        pods=[
            kube.make_pod("doomed", node_selector={"pool": pool}),
            kube.make_pod("waiter", node_selector={"pool": pool}),
        ],
    )
    time.sleep(2)
    client.CoreV1Api(kube_api).delete_namespaced_pod("doomed", namespace, grace_period_seconds=0)
    node = kube.create_kwok_nodes(
        kube_api, 1, name_prefix=pool, cpu="2", memory="4Gi", labels={"pool": pool}
    )
    try:
        started = time.monotonic()
        pods = wait_bound(kube_api, namespace, 1, timeout=30)
        assert next(p for p in pods if p.name == "waiter").node_name == node[0]
        assert time.monotonic() - started < 30
    finally:
        kube.delete_nodes(kube_api, node)


def test_cordoned_node_gets_no_new_pods(
    kube_api: client.ApiClient, namespace: str, running_stack: stack.Stack
) -> None:
    pool = f"cordon-{namespace}"
    names = kube.create_kwok_nodes(
        kube_api, 2, name_prefix=pool, cpu="8", memory="8Gi", labels={"pool": pool}
    )
    try:
        core = client.CoreV1Api(kube_api)
        core.patch_node(names[0], {"spec": {"unschedulable": True}})
        time.sleep(1)
        kube.create_pods(
            kube_api,
            namespace=namespace,
            pods=kube.make_pods(20, name_prefix="p", node_selector={"pool": pool}),
        )
        pods = wait_bound(kube_api, namespace, 20, timeout=60)
        assert Counter(p.node_name for p in pods) == {names[1]: 20}
    finally:
        kube.delete_nodes(kube_api, names)
