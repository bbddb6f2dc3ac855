"""Builders for the objects tests feed the core and the services: nodes, pods, node tables,
an algorithm over a cache, a scheduler state, watcher ring entries, API JSON full of what
the watcher must not stream, and random small clusters for hypothesis.

One vocabulary for every unit test: `node` and `pod` take keyword arguments for what a test
cares about and default the rest the way an empty manifest would (a node allocates 110 pods
and nothing else; a pod requests nothing). Named pods get the uid ``uid-<namespace>-<name>``,
so a test can name a pod's uid without holding the pod; unnamed pods get a fresh name.
Presets a family of tests shares (`cpu_node`/`cpu_pod` for preemption, `small_node`/
`splitsched_pod` for the scheduler's state machine) are built from the same two.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import random
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
from hypothesis import strategies as st

from services.scheduler.state import SchedulerState
from services.watcher import ring
from splitsched import wire
from splitsched.core import algorithm, framework, models, profiles
from splitsched.core.cache import SchedulerCache
from splitsched.core.clock import FakeClock
from splitsched.core.nodetable import BoolArray, FloatArray, IntArray, NodeTable
from splitsched.core.queue import SchedulingQueue

GI = 1024**3
MI = 1024**2
HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"

# ---- nodes and pods ---------------------------------------------------------------------------


def node(
    name: str,
    *,
    cpu: int = 0,
    memory: int = 0,
    pods: int = 110,
    extra: Mapping[str, int] | None = None,
    labels: Mapping[str, str] | None = None,
    zone: str | None = None,
    hostname: bool = False,
    taints: Iterable[models.Taint] = (),
    unschedulable: bool = False,
) -> models.Node:
    """A node; cpu in millicores, memory in bytes, `extra` for other allocatable. `zone` and
    `hostname` add the well-known topology labels the pod-topology plugins read."""
    alloc: dict[str, int] = {models.PODS: pods}
    if cpu:
        alloc[models.CPU] = cpu
    if memory:
        alloc[models.MEMORY] = memory
    alloc.update(extra or {})
    all_labels = dict(labels or {})
    if hostname:
        all_labels[HOSTNAME] = name
    if zone is not None:
        all_labels[ZONE] = zone
    return models.Node(
        name=name,
        labels=all_labels,
        taints=tuple(taints),
        allocatable=alloc,
        unschedulable=unschedulable,
    )


def container(
    requests: Mapping[str, int] | None = None,
    *,
    name: str = "c",
    sidecar: bool = False,
    host_ports: Iterable[models.HostPort] = (),
) -> models.Container:
    """A container; `sidecar` makes it a restartable init container."""
    return models.Container(
        name=name,
        requests=dict(requests or {}),
        host_ports=tuple(host_ports),
        restart_policy="Always" if sidecar else "",
    )


_unnamed = itertools.count()


def pod(
    name: str = "",
    *,
    namespace: str = "default",
    uid: str = "",
    node: str = "",
    labels: Mapping[str, str] | None = None,
    containers: Iterable[models.Container] = (),
    init_containers: Iterable[models.Container] = (),
    **fields: Any,
) -> models.Pod:
    """A pod (uid ``uid-<namespace>-<name>`` unless given) bound to `node` when one is given;
    any other `models.Pod` field by keyword."""
    name = name or f"pod-{next(_unnamed)}"
    return models.Pod(
        uid=uid or f"uid-{namespace}-{name}",
        namespace=namespace,
        name=name,
        labels=dict(labels or {}),
        node_name=node,
        containers=tuple(containers),
        init_containers=tuple(init_containers),
        **fields,
    )


def req_pod(cpu: int = 0, memory: int = 0, **kw: Any) -> models.Pod:
    """A one-container pod requesting cpu (millicores) and memory (bytes); zero omitted."""
    requests: dict[str, int] = {}
    if cpu:
        requests[models.CPU] = cpu
    if memory:
        requests[models.MEMORY] = memory
    return pod(containers=[container(requests)], **kw)


def selector(**match_labels: str) -> models.LabelSelector:
    return models.LabelSelector(match_labels=tuple(sorted(match_labels.items())))


def exists(key: str) -> models.LabelSelector:
    return models.LabelSelector(
        match_expressions=(models.LabelSelectorRequirement(key=key, operator="Exists"),)
    )


def cpu_node(name: str, cpu: int = 4000) -> models.Node:
    """A node allocating only CPU (millicores) and 110 pods: the preemption tests' node."""
    return node(name, cpu=cpu)


def cpu_pod(
    name: str,
    cpu: int,
    *,
    priority: int = 0,
    node: str = "",
    labels: Mapping[str, str] | None = None,
    started: float = 0.0,
    policy: str = "PreemptLowerPriority",
) -> models.Pod:
    """A splitsched pod in namespace "d" requesting only CPU, its uid its name: the preemption
    tests' pod (`started` is its creation time, `policy` its preemptionPolicy)."""
    return pod(
        name,
        namespace="d",
        uid=name,
        node=node,
        labels=labels,
        containers=[container({models.CPU: cpu})],
        scheduler_name="splitsched",
        priority=priority,
        preemption_policy=policy,
        creation_timestamp=started,
    )


def small_node(name: str, cpu: int = 1000) -> models.Node:
    """1 CPU (or `cpu` millicores), 4 GiB and 10 pods: the scheduler state tests' node."""
    return node(name, cpu=cpu, memory=4 * GI, pods=10)


def splitsched_pod(
    name: str, cpu: int = 600, *, namespace: str = "ns", node_name: str = "", **fields: Any
) -> models.Pod:
    """A pod for the splitsched scheduler requesting `cpu` millicores, its uid ``uid-<name>``:
    the scheduler state tests' pod."""
    return pod(
        name,
        namespace=namespace,
        uid=f"uid-{name}",
        node=node_name,
        containers=[container({models.CPU: cpu})],
        scheduler_name="splitsched",
        **fields,
    )


def gang_pod(name: str, *, cpu: int = 400, size: int = 3) -> models.Pod:
    """A `splitsched_pod` of the gang "g", which needs `size` members."""
    return dataclasses.replace(splitsched_pod(name, cpu=cpu), group=models.PodGroupRef("g", size))


# ---- node tables ------------------------------------------------------------------------------

Assigned = Mapping[str, Iterable[models.Pod]] | None


def table_of(
    nodes: Iterable[models.Node],
    pods: Iterable[models.Pod] = (),
    *,
    assigned: Assigned = None,
) -> NodeTable:
    """A NodeTable holding `nodes`, each of `pods` counted on the node its node_name names,
    and `assigned[node_name]` pods counted on that node whatever their node_name."""
    table = NodeTable()
    for nd in nodes:
        table.set_node(nd)
    for p in pods:
        assert table.add_pod(p.node_name, p), f"pod {p.name} names unknown node {p.node_name}"
    for node_name, placed in (assigned or {}).items():
        for p in placed:
            assert table.add_pod(node_name, p)
    return table


def all_rows(table: NodeTable) -> IntArray:
    return np.arange(table.n, dtype=np.int64)


def fresh_state() -> framework.CycleState:
    return framework.CycleState()


def bools(mask: BoolArray) -> list[bool]:
    return [bool(x) for x in mask]


def floats(values: FloatArray) -> list[float]:
    return [float(x) for x in values]


def add_remove_churn(table: NodeTable, pods: Sequence[models.Pod]) -> None:
    """Remove and re-add every other pod so the indexes go through both directions."""
    for p in pods[::2]:
        table.remove_pod(p.node_name, p.uid)
    for p in pods[::2]:
        table.add_pod(p.node_name, p)


def algorithm_over(
    nodes: Iterable[models.Node],
    bound: Iterable[models.Pod] = (),
    *,
    config: str = "",
    seed: int = 0,
) -> algorithm.FrameworkAlgorithm:
    """The algorithm of a scheduler configuration (YAML; "" is the default profile) over a
    cache holding `nodes` and the `bound` pods (each on its node_name), with a seeded
    random source."""
    cache = SchedulerCache()
    for nd in nodes:
        cache.add_node(nd)
    for p in bound:
        cache.add_pod(p)
    return algorithm.FrameworkAlgorithm(
        cache=cache, profiles=profiles.load_profiles_yaml(config), rng=random.Random(seed)
    )


def scheduler_state(
    clock: FakeClock, *, nodes: Iterable[models.Node] = (), **options: Any
) -> SchedulerState:
    """A synced SchedulerState (scheduler id "s") over the default profiles with a seeded
    random source, holding `nodes`; `options` go to SchedulerState (bind_timeout...)."""
    algo = algorithm.FrameworkAlgorithm(
        cache=SchedulerCache(clock=clock),
        profiles=profiles.load_profiles(None),
        rng=random.Random(0),
    )
    state = SchedulerState(
        algo=algo, queue=SchedulingQueue(clock=clock), clock=clock, scheduler_id="s", **options
    )
    for nd in nodes:
        state.apply_node("ADDED", nd)
    state.mark_synced()
    return state


# ---- watcher ring entries -----------------------------------------------------------------------

RING_NOW = 1_700_000_000.0


def node_entry(name: str, rv: str) -> ring.Entry:
    """A watcher ring entry for a 4-CPU node at resource version `rv`."""
    nd = models.Node(name=name, uid=f"uid-{name}", resource_version=rv,
                     allocatable={"cpu": 4000, "pods": 110})  # fmt: skip
    return ring.Entry(
        kind=ring.NODE,
        key=name,
        uid=nd.uid,
        resource_version=rv,
        body=ring.encode_body(wire.node_to_proto(nd), observed_at=RING_NOW),
    )


def pod_entry(name: str, rv: str, *, node: str = "", scheduler: str = "splitsched") -> ring.Entry:
    """A watcher ring entry for a pod in namespace "ns", bound to `node` when given."""
    p = models.Pod(uid=f"uid-{name}", namespace="ns", name=name, resource_version=rv,
                   node_name=node, scheduler_name=scheduler)  # fmt: skip
    return ring.Entry(
        kind=ring.POD,
        key=p.key,
        uid=p.uid,
        resource_version=rv,
        body=ring.encode_body(wire.pod_to_proto(p), observed_at=RING_NOW),
        scheduler_name=scheduler,
        assigned=bool(node),
    )


# ---- API JSON the watcher must trim ------------------------------------------------------------

#: In every value of `leaky_pod_json` and `leaky_node_json` that must not reach the stream.
SECRET_MARKER = "s3cr3t"
#: The image of `leaky_pod_json`'s app container: streamed while the pod is pending.
LEAKY_IMAGE = "registry.example/app:1"


def leaky_pod_json() -> dict[str, Any]:
    """API JSON of a pending splitsched pod in gang "trio" (of 3), labelled app=web,
    requesting 250m cpu, that also holds what the watcher must not stream: env (plain,
    from secrets), envFrom, command, args, pull secrets, volumes and mounts, a probe
    header, a service account, managedFields and secret-looking annotations, each value
    containing `SECRET_MARKER`. Its image, `LEAKY_IMAGE`, is streamed (ImageLocality)."""
    applied = {"spec": {"containers": [{"env": [{"name": "DB", "value": "s3cr3t-applied"}]}]}}
    app = {
        "name": "app",
        "image": LEAKY_IMAGE,
        "command": ["/s3cr3t-command"],
        "args": ["--password=s3cr3t-args"],
        "env": [
            {"name": "DB_PASSWORD", "value": "s3cr3t-env-value"},
            {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "s3cr3t-ref", "key": "t"}}},
        ],
        "envFrom": [{"secretRef": {"name": "s3cr3t-env-from"}}],
        "resources": {"requests": {"cpu": "250m"}, "limits": {"cpu": "500m"}},
        "volumeMounts": [{"name": "creds", "mountPath": "/s3cr3t-mount"}],
        "livenessProbe": {"httpGet": {"path": "/healthz", "port": 8080, "httpHeaders": [
            {"name": "Authorization", "value": "Bearer s3cr3t-probe"}]}},
    }  # fmt: skip
    init = {
        "name": "init",
        "command": ["/s3cr3t-init"],
        "env": [{"name": "K", "value": "s3cr3t-i"}],
    }
    return {
        "metadata": {
            "name": "leaky", "namespace": "ns", "uid": "uid-leaky", "resourceVersion": "7",
            "creationTimestamp": "2024-01-01T00:00:00Z",
            "labels": {"app": "web"},
            "annotations": {
                "kubectl.kubernetes.io/last-applied-configuration": json.dumps(applied),
                "vault.hashicorp.com/agent-inject-token": "s3cr3t-vault-token",
                "example.com/api-key": "s3cr3t-api-key",
                "splitsched.io/group": "trio",
                "splitsched.io/min-member": "3",
            },
            "managedFields": [{"manager": "s3cr3t-manager", "operation": "Apply"}],
        },
        "spec": {
            "schedulerName": "splitsched",
            "serviceAccountName": "s3cr3t-account",
            "imagePullSecrets": [{"name": "s3cr3t-pull"}],
            "containers": [app],
            "initContainers": [init],
            "volumes": [
                {"name": "creds", "secret": {"secretName": "s3cr3t-volume"}},
                {"name": "cfg", "configMap": {"name": "s3cr3t-config-map"}},
                {"name": "host", "hostPath": {"path": "/s3cr3t-host-path"}},
            ],
        },
        "status": {"phase": "Pending"},
    }  # fmt: skip


def leaky_node_json() -> dict[str, Any]:
    """API JSON of a 2-cpu node labelled zone=a with annotations and node info that must
    not reach the stream (each value containing `SECRET_MARKER`)."""
    return {
        "metadata": {
            "name": "n1", "uid": "uid-n1", "resourceVersion": "3",
            "labels": {ZONE: "a"},
            "annotations": {"example.com/bmc-password": "s3cr3t-bmc",
                            "flannel.alpha.coreos.com/public-ip": "s3cr3t-ip"},
        },
        "status": {
            "allocatable": {"cpu": "2", "pods": "110"},
            "nodeInfo": {"machineID": "s3cr3t-machine-id"},
            "addresses": [{"type": "InternalIP", "address": "s3cr3t-address"}],
        },
    }  # fmt: skip


# ---- random small clusters for the property tests ---------------------------------------------

TAINT_HARD = models.Taint("dedicated", "x", "NoSchedule")
TAINT_SOFT = models.Taint("soft", "", "PreferNoSchedule")
APP_VALUES = ("a", "b", None)
NAMESPACE_SELECTORS: Mapping[str, models.LabelSelector] = {
    "all": models.LabelSelector(),
    "team-a": selector(team="a"),
    "no-team": models.LabelSelector(
        match_expressions=(models.LabelSelectorRequirement("team", "DoesNotExist"),)
    ),
}
SELECTORS: tuple[models.LabelSelector | None, ...] = (
    selector(app="a"),
    selector(app="b"),
    exists("app"),
    models.LabelSelector(),
    None,
)


def random_nodes(draw: Any) -> list[models.Node]:
    """1-6 nodes, each maybe zoned, maybe hostname-labelled, maybe tainted, maybe ssd."""
    count = draw(st.integers(1, 6))
    out = []
    for i in range(count):
        out.append(
            node(
                f"n{i}",
                zone=draw(st.sampled_from(("z1", "z2", "z3", None))),
                hostname=draw(st.integers(0, 5)) > 0,
                labels={"disk": "ssd"} if draw(st.booleans()) else {},
                taints=draw(st.sampled_from(((), (TAINT_HARD,), (TAINT_HARD,), (TAINT_SOFT,)))),
            )
        )
    return out


def random_term(
    draw: Any, *, key_choices: Sequence[str] = (ZONE, HOSTNAME)
) -> models.PodAffinityTerm:
    """A term looking in its owner's namespace, in "other", in all namespaces, or in the
    namespaces labelled team=a or without a team label (`NAMESPACE_SELECTORS`)."""
    ns_choice = draw(st.sampled_from(("own", "other", "all", "team-a", "no-team")))
    return models.PodAffinityTerm(
        label_selector=draw(st.sampled_from(SELECTORS)),
        topology_key=draw(st.sampled_from(tuple(key_choices))),
        namespaces=("other",) if ns_choice == "other" else (),
        namespace_selector=NAMESPACE_SELECTORS.get(ns_choice),
    )


def random_namespace_labels(draw: Any) -> dict[str, dict[str, str]]:
    """Labels of namespaces "default" and "other", each maybe unknown to the view."""
    out: dict[str, dict[str, str]] = {}
    for name in ("default", "other"):
        labels = draw(st.sampled_from((None, {}, {"team": "a"}, {"team": "b"})))
        if labels is not None:
            out[name] = labels
    return out


def random_labels(draw: Any) -> dict[str, str]:
    labels: dict[str, str] = {}
    app = draw(st.sampled_from(APP_VALUES))
    if app is not None:
        labels["app"] = app
    if draw(st.booleans()):
        labels["rev"] = draw(st.sampled_from(("1", "2")))
    return labels


def random_pods(draw: Any, node_names: Sequence[str]) -> list[models.Pod]:
    """0-12 assigned pods; some carry required (anti-)affinity terms of their own."""
    count = draw(st.integers(0, 12))
    out = []
    for i in range(count):
        anti = (random_term(draw),) if draw(st.integers(0, 3)) == 0 else ()
        out.append(
            pod(
                f"e{i}",
                node=draw(st.sampled_from(tuple(node_names))),
                namespace=draw(st.sampled_from(("default", "other"))),
                labels=random_labels(draw),
                deleting=draw(st.integers(0, 5)) == 0,
                pod_anti_affinity=models.PodAffinity(required=anti) if anti else None,
            )
        )
    return out


@st.composite
def clusters(draw: Any) -> tuple[list[models.Node], list[models.Pod]]:
    nodes = random_nodes(draw)
    return nodes, random_pods(draw, [n.name for n in nodes])
