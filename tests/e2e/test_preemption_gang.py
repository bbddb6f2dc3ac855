"""Issue 11 end to end: preemption through the binder's evictions, and gangs placed all
or nothing, on the real control plane. Checked from the API server's objects."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from splitsched.testing import invariants, kube, stack

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def priority_classes(kube_api: client.ApiClient) -> Iterator[dict[str, str]]:
    classes = {
        "low": (10, "PreemptLowerPriority"),
        "mid": (50, "PreemptLowerPriority"),
        "high": (1000, "PreemptLowerPriority"),
        "polite": (1000, "Never"),
    }
    names = kube.create_priority_classes(kube_api, classes, prefix="e2e")
    yield names
    kube.delete_priority_classes(kube_api, names)


def pool_nodes(api: client.ApiClient, pool: str, count: int, cpu: str) -> list[str]:
    return kube.create_kwok_nodes(
        api, count, name_prefix=pool, cpu=cpu, memory="16Gi", labels={"pool": pool}
    )


def pod_on_pool(name: str, pool: str, cpu: str, **kw: Any) -> dict[str, Any]:
    return kube.make_pod(name, cpu=cpu, memory="64Mi", node_selector={"pool": pool}, **kw)


def node_of(api: client.ApiClient, namespace: str, name: str) -> str | None:
    try:
        return kube.get_pod(api, namespace=namespace, name=name).spec.node_name  # type: ignore[no-any-return]
    except client.ApiException as exc:
        if exc.status == 404:
            return None
        raise


def exists(api: client.ApiClient, namespace: str, name: str) -> bool:
    try:
        kube.get_pod(api, namespace=namespace, name=name)
        return True
    except client.ApiException as exc:
        if exc.status == 404:
            return False
        raise


def test_high_priority_pod_preempts_lowest_priority_victims(
    kube_api: client.ApiClient,
    namespace: str,
    running_stack: stack.Stack,
    priority_classes: dict[str, str],
) -> None:
    pool = f"pre-{namespace}"
    nodes = pool_nodes(kube_api, pool, 2, cpu="4")
    try:
        # node 0: low-priority pods; node 1: mid-priority pods. Both full.
        low_node, mid_node = nodes
        victims = [
            pod_on_pool(f"low-{i}", pool, "1", priority_class_name=priority_classes["low"])
            for i in range(4)
        ]
        keepers = [
            pod_on_pool(f"mid-{i}", pool, "1", priority_class_name=priority_classes["mid"])
            for i in range(4)
        ]
        for p, host in [(p, low_node) for p in victims] + [(p, mid_node) for p in keepers]:
            p["spec"]["nodeSelector"]["kubernetes.io/hostname"] = host
        kube.create_pods(kube_api, namespace=namespace, pods=victims + keepers)
        kube.wait_for(
            lambda: all(
                node_of(kube_api, namespace, p["metadata"]["name"]) for p in victims + keepers
            ),
            timeout=60,
            message="victims and keepers bound",
        )
        vip = pod_on_pool("vip", pool, "2", priority_class_name=priority_classes["high"])
        kube.create_pods(kube_api, namespace=namespace, pods=[vip])
        placed = kube.wait_for(
            lambda: node_of(kube_api, namespace, "vip"), timeout=60, message="vip bound"
        )
        assert placed == low_node  # the node whose victims matter least
        gone = [i for i in range(4) if not exists(kube_api, namespace, f"low-{i}")]
        assert len(gone) == 2  # the fewest victims that make room
        assert all(exists(kube_api, namespace, f"mid-{i}") for i in range(4))
        nodes_now, pods_now = invariants.cluster_state(kube_api)
        assert invariants.overcommitted(nodes_now, pods_now) == []
    finally:
        kube.delete_nodes(kube_api, nodes)


def test_pdb_steers_the_choice_and_never_policy_does_not_preempt(
    kube_api: client.ApiClient,
    namespace: str,
    running_stack: stack.Stack,
    priority_classes: dict[str, str],
) -> None:
    pool = f"pdb-{namespace}"
    nodes = pool_nodes(kube_api, pool, 2, cpu="2")
    try:
        guarded = pod_on_pool(
            "guarded", pool, "2", priority_class_name=priority_classes["low"], labels={"app": "db"}
        )
        kube.create_pods(kube_api, namespace=namespace, pods=[guarded])
        kube.wait_for(lambda: node_of(kube_api, namespace, "guarded"), timeout=60, message="bound")
        other = pod_on_pool(
            "other", pool, "2", priority_class_name=priority_classes["mid"], labels={"app": "web"}
        )
        kube.create_pods(kube_api, namespace=namespace, pods=[other])
        other_node = kube.wait_for(
            lambda: node_of(kube_api, namespace, "other"), timeout=60, message="bound"
        )
        kube.create_pdb(
            kube_api,
            namespace=namespace,
            name="db",
            spec={"minAvailable": 1, "selector": {"matchLabels": {"app": "db"}}},
            allowed=0,
        )
        time.sleep(1)
        polite = pod_on_pool("polite", pool, "2", priority_class_name=priority_classes["polite"])
        kube.create_pods(kube_api, namespace=namespace, pods=[polite])
        time.sleep(4)
        assert node_of(kube_api, namespace, "polite") is None  # preemptionPolicy: Never
        assert exists(kube_api, namespace, "guarded") and exists(kube_api, namespace, "other")
        vip = pod_on_pool("vip", pool, "2", priority_class_name=priority_classes["high"])
        kube.create_pods(kube_api, namespace=namespace, pods=[vip])
        placed = kube.wait_for(
            lambda: node_of(kube_api, namespace, "vip"), timeout=60, message="vip bound"
        )
        # The lower-priority pod is PDB-protected, so the mid-priority one is evicted.
        assert placed == other_node
        assert exists(kube_api, namespace, "guarded")
        assert not exists(kube_api, namespace, "other")
    finally:
        kube.delete_nodes(kube_api, nodes)


def gang(name: str, size: int, pool: str, cpu: str) -> list[dict[str, Any]]:
    pods = []
    for i in range(size):
        p = pod_on_pool(f"{name}-{i}", pool, cpu)
        p["metadata"]["annotations"] = {
            "splitsched.io/group": name,
            "splitsched.io/min-member": str(size),
        }
        pods.append(p)
    return pods


def bound_count(api: client.ApiClient, namespace: str, prefix: str) -> int:
    pods = client.CoreV1Api(api).list_namespaced_pod(namespace).items
    return sum(1 for p in pods if p.metadata.name.startswith(prefix) and p.spec.node_name)


def test_gangs_are_all_or_nothing_and_competing_gangs_do_not_deadlock(
    kube_api: client.ApiClient, namespace: str, running_stack: stack.Stack
) -> None:
    pool = f"gang-{namespace}"
    nodes = pool_nodes(kube_api, pool, 4, cpu="4")  # 16 cpus in all
    try:
        kube.create_pods(kube_api, namespace=namespace, pods=gang("fits", 8, pool, "1"))
        kube.wait_for(
            lambda: bound_count(kube_api, namespace, "fits-") == 8, timeout=60, message="gang"
        )
        # 8 cpus left: a gang needing 12 binds none and holds nothing...
        kube.create_pods(kube_api, namespace=namespace, pods=gang("big", 6, pool, "2"))
        # ...and two gangs of 8 x 1 cpu compete for the same 8 cpus: one wins whole.
        kube.create_pods(
            kube_api,
            namespace=namespace,
            pods=gang("red", 8, pool, "1") + gang("blue", 8, pool, "1"),
        )
        kube.wait_for(
            lambda: (
                bound_count(kube_api, namespace, "red-") + bound_count(kube_api, namespace, "blue-")
                == 8
            ),
            timeout=60,
            message="one competing gang bound",
        )
        time.sleep(3)
        red, blue = (
            bound_count(kube_api, namespace, "red-"),
            bound_count(kube_api, namespace, "blue-"),
        )
        assert sorted((red, blue)) == [0, 8]
        assert bound_count(kube_api, namespace, "big-") == 0
        nodes_now, pods_now = invariants.cluster_state(kube_api)
        assert invariants.overcommitted(nodes_now, pods_now) == []
    finally:
        kube.delete_nodes(kube_api, nodes)
