"""A seed's scenario (the cluster and the workload), and its rendering for one run.

The scenario names things locally: nodes ``n00``..., pods ``p00``..., namespaces
``@ns0``...; a cluster-scoped object referenced by name is ``@n03`` (a node), ``@pv03``,
``@sc-bound``. Each run renders it with its own prefix (``<prefix>-n03``) and namespaces,
so the two runs of a seed use fresh objects that correspond one to one, and every
outcome maps back to local names.
"""

from __future__ import annotations

import copy
import random
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from bench.agreement import cluster, devices, features, storage, workload

Manifest = dict[str, Any]

DEFAULT_NODES = 10
DEFAULT_PODS = 30
_OBJECT_REF = re.compile(r"@([a-z][a-z0-9-]*)")
_NS_REF = re.compile(r"@ns\d+")


@dataclass(frozen=True)
class Scenario:
    seed: int
    features: frozenset[str]
    nodes: tuple[Manifest, ...]
    pods: tuple[Manifest, ...]
    #: Namespace slot ("@ns0", ...) -> its labels; pods name their slot.
    namespaces: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    volumes: storage.Storage = field(default_factory=storage.Storage)
    dra: devices.Devices = field(default_factory=devices.Devices)

    @property
    def node_names(self) -> list[str]:
        return [n["metadata"]["name"] for n in self.nodes]


def build(
    seed: int,
    *,
    nodes: int = DEFAULT_NODES,
    pods: int = DEFAULT_PODS,
    chosen: frozenset[str] = features.DEFAULT_FEATURES,
) -> Scenario:
    """The scenario of ``seed``: the same seed, sizes and features give the same scenario."""
    features.check(chosen)
    rng = random.Random(f"agreement-{seed}")
    node_list = cluster.nodes(rng, nodes, chosen)
    pod_list = workload.pods(rng, pods, nodes, chosen)
    # Features added later draw from their own streams: switching one on leaves the rest
    # of the scenario as it was.
    workload.spread_namespaces(random.Random(f"agreement-{seed}-namespaces"), pod_list, chosen)
    storage_rng = random.Random(f"agreement-{seed}-storage")
    volumes = storage.generate(storage_rng, node_list, chosen)
    storage.attach(storage_rng, pod_list, volumes)
    devices_rng = random.Random(f"agreement-{seed}-devices")
    made = devices.attach(devices_rng, pod_list, devices.generate(devices_rng, node_list, chosen))
    workload.gate(random.Random(f"agreement-{seed}-gates"), pod_list, chosen)
    return Scenario(
        seed=seed,
        features=chosen,
        nodes=tuple(node_list),
        pods=tuple(pod_list),
        namespaces=workload.namespaces(chosen),
        volumes=volumes,
        dra=made,
    )


def node_name(prefix: str, local: str) -> str:
    return f"{prefix}-{local}"


def local_node(prefix: str, name: str | None) -> str | None:
    """The local name of a run's node (None stays None; a foreign node keeps its name)."""
    if name is None:
        return None
    head = f"{prefix}-"
    return name[len(head) :] if name.startswith(head) else name


def render(obj: Any, prefix: str, namespaces: Mapping[str, str]) -> Any:
    """A deep copy with every ``@nsX`` made the run's namespace and every other ``@name``
    the run's object ``<prefix>-name``."""
    if isinstance(obj, dict):
        return {k: render(v, prefix, namespaces) for k, v in obj.items()}
    if isinstance(obj, list):
        return [render(v, prefix, namespaces) for v in obj]
    if isinstance(obj, str):
        if _NS_REF.fullmatch(obj):
            return namespaces[obj]
        if ref := _OBJECT_REF.fullmatch(obj):
            return node_name(prefix, ref.group(1))
        return obj
    return copy.deepcopy(obj)


def run_node(manifest: Manifest, prefix: str) -> Manifest:
    """A node of the scenario as one run creates it."""
    out: Manifest = render(manifest, prefix, {})
    local = manifest["metadata"]["name"]
    out["metadata"]["name"] = node_name(prefix, local)
    out["metadata"]["labels"][cluster.HOSTNAME_LABEL] = node_name(prefix, local)
    return out


def run_pod(
    manifest: Manifest, prefix: str, namespaces: Mapping[str, str], scheduler_name: str
) -> Manifest:
    """A pod of the scenario as one run creates it: its namespace, this run's scheduler."""
    out: Manifest = render(manifest, prefix, namespaces)
    out["spec"]["schedulerName"] = scheduler_name
    return out
