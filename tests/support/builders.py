"""Builders for the objects tests feed the core: nodes, pods, node tables, and random small
clusters for hypothesis.

One vocabulary for every unit test: `node` and `pod` take keyword arguments for what a test
cares about and default the rest the way an empty manifest would (a node allocates 110 pods
and nothing else; a pod requests nothing). Named pods get the uid ``uid-<namespace>-<name>``,
so a test can name a pod's uid without holding the pod; unnamed pods get a fresh name.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
from hypothesis import strategies as st

from splitsched.core import algorithm, framework, models, profiles
from splitsched.core.cache import SchedulerCache
from splitsched.core.nodetable import BoolArray, FloatArray, IntArray, NodeTable

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
    nodes: Iterable[models.Node], bound: Iterable[models.Pod] = ()
) -> algorithm.FrameworkAlgorithm:
    """The default profiles' algorithm over a cache holding `nodes` and the `bound` pods
    (each on its node_name), with a seeded random source."""
    cache = SchedulerCache()
    for nd in nodes:
        cache.add_node(nd)
    for p in bound:
        cache.add_pod(p)
    return algorithm.FrameworkAlgorithm(
        cache=cache, profiles=profiles.load_profiles(None), rng=random.Random(0)
    )


# ---- random small clusters for the property tests ---------------------------------------------

TAINT_HARD = models.Taint("dedicated", "x", "NoSchedule")
TAINT_SOFT = models.Taint("soft", "", "PreferNoSchedule")
APP_VALUES = ("a", "b", None)
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
    ns_choice = draw(st.sampled_from(("own", "other", "all")))
    return models.PodAffinityTerm(
        label_selector=draw(st.sampled_from(SELECTORS)),
        topology_key=draw(st.sampled_from(tuple(key_choices))),
        namespaces=("other",) if ns_choice == "other" else (),
        namespace_selector=models.LabelSelector() if ns_choice == "all" else None,
    )


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
