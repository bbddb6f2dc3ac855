"""Plain-dict manifests of the objects tests, the demo and the benchmarks create: kwok
Nodes and pending Pods addressed to a scheduler. Pure: nothing here talks to a server
(``splitsched.testing.kube`` creates them)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypedDict

Manifest = dict[str, Any]

#: The annotation kwok selects the nodes it manages by (``key=value``; the control plane
#: starts kwok with this selector).
KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"
KWOK_NODE_ANNOTATION_VALUE = "fake"

DEFAULT_SCHEDULER_NAME = "splitsched"
PAUSE_IMAGE = "registry.k8s.io/pause:3.10"
#: Label put on cluster-scoped objects a test creates, so namespace cleanup removes them.
TEST_NAMESPACE_LABEL = "splitsched.io/test-namespace"


class NodeShape(TypedDict, total=False):
    """``make_node``'s keyword arguments, for helpers that pass them on."""

    cpu: str
    memory: str
    pods: int
    labels: Mapping[str, str] | None
    taints: Sequence[Mapping[str, Any]] | None
    extended: Mapping[str, str] | None


def make_node(
    name: str,
    *,
    cpu: str = "32",
    memory: str = "256Gi",
    pods: int = 110,
    labels: Mapping[str, str] | None = None,
    taints: Sequence[Mapping[str, Any]] | None = None,
    extended: Mapping[str, str] | None = None,
) -> Manifest:
    """A Node manifest kwok will manage; capacity = allocatable = the given resources."""
    resources: dict[str, str] = {"cpu": cpu, "memory": memory, "pods": str(pods)}
    resources.update(extended or {})
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {
                KWOK_NODE_ANNOTATION: KWOK_NODE_ANNOTATION_VALUE,
                "node.alpha.kubernetes.io/ttl": "0",
            },
            "labels": {
                "type": "kwok",
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                **(labels or {}),
            },
        },
        "spec": {"taints": [dict(t) for t in taints]} if taints else {},
        "status": {"capacity": dict(resources), "allocatable": dict(resources)},
    }


def make_pod(
    name: str,
    *,
    scheduler_name: str = DEFAULT_SCHEDULER_NAME,
    cpu: str | None = "100m",
    memory: str | None = "64Mi",
    extended: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
    node_selector: Mapping[str, str] | None = None,
    tolerations: Sequence[Mapping[str, Any]] | None = None,
    affinity: Mapping[str, Any] | None = None,
    priority_class_name: str | None = None,
    image: str = PAUSE_IMAGE,
) -> Manifest:
    """A single-container pod manifest, pending until a ``scheduler_name`` scheduler binds it."""
    requests: dict[str, str] = {}
    if cpu:
        requests["cpu"] = cpu
    if memory:
        requests["memory"] = memory
    requests.update(extended or {})
    container: dict[str, Any] = {"name": "main", "image": image}
    if requests:
        # Extended resources must have limits equal to requests.
        limits = {k: v for k, v in requests.items() if k not in ("cpu", "memory")}
        container["resources"] = {"requests": requests, **({"limits": limits} if limits else {})}
    spec: dict[str, Any] = {
        "schedulerName": scheduler_name,
        "containers": [container],
        "terminationGracePeriodSeconds": 0,
        "automountServiceAccountToken": False,
    }
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    if tolerations:
        spec["tolerations"] = [dict(t) for t in tolerations]
    if affinity:
        spec["affinity"] = dict(affinity)
    if priority_class_name:
        spec["priorityClassName"] = priority_class_name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": dict(labels or {})},
        "spec": spec,
    }


def make_pods(count: int, *, name_prefix: str = "pod", **pod_kwargs: Any) -> list[Manifest]:
    """``count`` pods ``<name_prefix>-<i>``, all built by ``make_pod(**pod_kwargs)``."""
    return [make_pod(f"{name_prefix}-{i}", **pod_kwargs) for i in range(count)]


#: A profile that packs pods onto the fullest node that fits (MostAllocated): nodes fill to
#: exactly their allocatable, so one double-booked pod makes a node overcommitted. The
#: fault tier and the soak schedule with it.
BIN_PACKING_PROFILE: Manifest = {
    "profiles": [
        {
            "schedulerName": DEFAULT_SCHEDULER_NAME,
            "pluginConfig": [
                {"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "MostAllocated"}}}
            ],
            "plugins": {"score": {"disabled": [{"name": "NodeResourcesBalancedAllocation"}]}},
        }
    ]
}
