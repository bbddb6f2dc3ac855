"""Builders for plugin unit tests: nodes, pods and a NodeTable holding them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from splitsched.core import framework, models
from splitsched.core.nodetable import BoolArray, FloatArray, IntArray, NodeTable

GI = 1024**3
MI = 1024**2


def node(
    name: str,
    *,
    cpu: int = 0,
    memory: int = 0,
    pods: int = 110,
    labels: Mapping[str, str] | None = None,
    taints: Iterable[models.Taint] = (),
    extra: Mapping[str, int] | None = None,
    unschedulable: bool = False,
) -> models.Node:
    """A node; cpu in millicores, memory in bytes, `extra` for other allocatable."""
    alloc: dict[str, int] = {models.PODS: pods}
    if cpu:
        alloc[models.CPU] = cpu
    if memory:
        alloc[models.MEMORY] = memory
    alloc.update(extra or {})
    return models.Node(
        name=name,
        labels=dict(labels or {}),
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


_counter = iter(range(1_000_000))


def pod(
    name: str = "",
    *,
    containers: Iterable[models.Container] = (),
    init_containers: Iterable[models.Container] = (),
    **kw: Any,
) -> models.Pod:
    n = next(_counter)
    return models.Pod(
        uid=f"uid-{name or n}-{n}",
        namespace="default",
        name=name or f"pod-{n}",
        containers=tuple(containers),
        init_containers=tuple(init_containers),
        **kw,
    )


def req_pod(cpu: int = 0, memory: int = 0, **kw: Any) -> models.Pod:
    """A one-container pod requesting cpu (millicores) and memory (bytes); zero omitted."""
    requests: dict[str, int] = {}
    if cpu:
        requests[models.CPU] = cpu
    if memory:
        requests[models.MEMORY] = memory
    return pod(containers=[models.Container(name="c", requests=requests)], **kw)


def table_of(
    nodes: Iterable[models.Node],
    assigned: Mapping[str, Iterable[models.Pod]] | None = None,
) -> NodeTable:
    """A NodeTable holding `nodes`, with `assigned[node_name]` pods counted on them."""
    t = NodeTable()
    for nd in nodes:
        t.set_node(nd)
    for node_name, pods in (assigned or {}).items():
        for p in pods:
            assert t.add_pod(node_name, p)
    return t


def all_rows(table: NodeTable) -> IntArray:
    return np.arange(table.n, dtype=np.int64)


def fresh_state() -> framework.CycleState:
    return framework.CycleState()


Assigned = Mapping[str, Iterable[models.Pod]] | None


def bools(mask: BoolArray) -> list[bool]:
    return [bool(x) for x in mask]


def floats(values: FloatArray) -> list[float]:
    return [float(x) for x in values]
