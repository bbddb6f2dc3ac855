"""Bad-input pods through the real stack (issue 9): pods the API server accepts but that
stretch the watcher, the scheduler and the binders, among ordinary pods.

A pod with 2,000 containers and one with thousands of labels (both fit, so both must bind),
an unknown extended resource, absurd requests, and quantities at the ends of what the API
server accepts (1n, 8Ei, int64's maximum of cores). Each that cannot run must end with
PodScheduled=False and a reason naming what is wrong; the ordinary pods must all bind; no
service may exit; no node may be over its allocatable. Every check reads the API server's
objects.
"""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client

from splitsched.testing import invariants, kube, stack

pytestmark = pytest.mark.e2e

NORMAL = 20
MANY_CONTAINERS = 2000
MANY_LABELS = 3000


def many_containers_pod() -> dict[str, Any]:
    pod = kube.make_pod("many-containers", cpu=None, memory=None)
    pod["spec"]["containers"] = [
        {
            "name": f"c{i}",
            "image": kube.PAUSE_IMAGE,
            "resources": {"requests": {"cpu": "1m", "memory": "1Mi"}},
        }
        for i in range(MANY_CONTAINERS)
    ]
    return pod


def many_labels_pod() -> dict[str, Any]:
    # Keys and values at the API's length limits: prefix/name (name 63), value 63.
    labels = {f"fuzz.example.com/k{i:05d}-{'x' * 56}": "v" * 63 for i in range(MANY_LABELS)}
    return kube.make_pod("many-labels", labels=labels)


def quantity_pod(name: str, **requests: str) -> dict[str, Any]:
    pod = kube.make_pod(name, cpu=None, memory=None)
    pod["spec"]["containers"][0]["resources"] = {"requests": dict(requests)}
    return pod


#: Pods that cannot be placed, and what their reason must say.
UNSCHEDULABLE = {
    "unknown-resource": "Insufficient example.com/foo",
    "absurd-cpu": "Insufficient cpu",
    "absurd-memory": "Insufficient memory",
    "overflow-cpu": "requests.cpu",
    "overflow-memory": "memory",  # "Insufficient memory", or its quantity out of range
}


def bad_pods() -> list[dict[str, Any]]:
    return [
        many_containers_pod(),
        many_labels_pod(),
        kube.make_pod("tiny-cpu", cpu="1n", memory="1"),
        kube.make_pod("unknown-resource", extended={"example.com/foo": "1"}),
        quantity_pod("absurd-cpu", cpu="1e6"),
        quantity_pod("absurd-memory", memory="7Ei"),
        quantity_pod("overflow-cpu", cpu="9223372036854775807"),
        quantity_pod("overflow-memory", memory="8Ei"),
    ]


def scheduled_condition(pod: Any) -> tuple[str, str, str] | None:
    for cond in pod.status.conditions or []:
        if cond.type == "PodScheduled":
            return str(cond.status), str(cond.reason or ""), str(cond.message or "")
    return None


def test_bad_input_pods_get_a_reason_and_harm_no_one(
    kube_api: client.ApiClient, namespace: str, running_stack: stack.Stack
) -> None:
    services = [running_stack.watcher, *running_stack.scheduler_services]
    services += running_stack.binder_services
    normal = kube.make_pods(NORMAL, name_prefix="normal", cpu="100m", memory="64Mi")
    # Bad ones first, so the ordinary pods queue behind them.
    kube.create_pods(kube_api, namespace=namespace, pods=[*bad_pods(), *normal], workers=4)
    core = client.CoreV1Api(kube_api)
    must_bind = {p["metadata"]["name"] for p in normal} | {
        "many-containers",
        "many-labels",
        "tiny-cpu",
    }

    def settled() -> dict[str, Any] | None:
        pods = {p.metadata.name: p for p in core.list_namespaced_pod(namespace).items}
        bound = all(pods[n].spec.node_name for n in must_bind if n in pods)
        reasoned = all(
            (c := scheduled_condition(pods[n])) is not None and c[0] == "False" and c[2]
            for n in UNSCHEDULABLE
            if n in pods
        )
        return (
            pods
            if bound and reasoned and len(pods) == len(must_bind) + len(UNSCHEDULABLE)
            else None
        )

    pods = kube.wait_for(settled, timeout=90, interval=1.0, message="bound or explained")
    for name, expected in UNSCHEDULABLE.items():
        condition = scheduled_condition(pods[name])
        assert condition is not None and condition[0] == "False", (name, condition)
        assert not pods[name].spec.node_name
        assert expected in condition[2], f"{name}: {condition}"
    assert len(pods["many-containers"].spec.containers) == MANY_CONTAINERS
    dead = [svc.name for svc in services if not svc.alive()]
    assert dead == [], f"services exited: {dead}"
    nodes, all_pods = invariants.cluster_state(kube_api)
    assert invariants.overcommitted(nodes, all_pods) == []
    assert invariants.placement_violations(nodes, all_pods) == []
