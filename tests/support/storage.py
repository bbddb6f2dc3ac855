"""Builders for storage in unit and service tests: claims, volumes, classes, CSINodes, pods
that use claims, and node tables holding them.

The vocabulary of `builders` extended: `claim("data", cls="fast")` is an unbound claim of
class "fast" in namespace "default" asking 1Gi ReadWriteOnce; `volume("pv-a", cls="fast",
node="n1")` an available 1Gi volume pinned to node n1 by its hostname label (`zone=` pins
it by zone instead); `claim_pod("web", "data")` a pod with a persistentVolumeClaim volume
per claim name. `storage_table(nodes, objects, pods)` is `builders.table_of` with the
storage objects in its view. Nodes made here carry their hostname label.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from splitsched.core import models, storage
from splitsched.core.nodetable import NodeTable
from tests.support.builders import GI, HOSTNAME, ZONE, node, pod, table_of

WFFC = storage.WAIT_FOR_FIRST_CONSUMER
RWO = "ReadWriteOnce"
RWOP = storage.READ_WRITE_ONCE_POD


def claim(
    name: str,
    *,
    cls: str = "",
    namespace: str = "default",
    size: int = GI,
    modes: Sequence[str] = (RWO,),
    volume: str = "",
    bound: bool = False,
    rv: str = "1",
    **fields: Any,
) -> storage.PersistentVolumeClaim:
    """A claim; `bound` makes it Bound to `volume` (which must then be given)."""
    fields.setdefault("phase", storage.CLAIM_BOUND if bound else "Pending")
    return storage.PersistentVolumeClaim(
        namespace=namespace,
        name=name,
        uid=f"uid-claim-{namespace}-{name}",
        resource_version=rv,
        storage_class_name=cls,
        has_storage_class=bool(cls),
        access_modes=tuple(modes),
        request_bytes=size,
        volume_name=volume,
        **fields,
    )


def node_term(key: str, *values: str) -> models.NodeSelectorTerm:
    return models.NodeSelectorTerm((models.NodeSelectorRequirement(key, "In", values),))


def volume(
    name: str,
    *,
    cls: str = "",
    size: int = GI,
    node: str = "",
    zone: str = "",
    modes: Sequence[str] = (RWO,),
    claim_ref: storage.ClaimRef | None = None,
    rv: str = "1",
    **fields: Any,
) -> storage.PersistentVolume:
    """A volume, Available unless `claim_ref` (then Bound); `node` or `zone` pins it with a
    required node affinity on the hostname or zone label."""
    affinity = fields.pop("node_affinity", None)
    fields.setdefault(
        "phase", storage.CLAIM_BOUND if claim_ref is not None else storage.VOLUME_AVAILABLE
    )
    if node:
        affinity = (node_term(HOSTNAME, node),)
    elif zone:
        affinity = (node_term(ZONE, zone),)
    return storage.PersistentVolume(
        name=name,
        uid=f"uid-pv-{name}",
        resource_version=rv,
        storage_class_name=cls,
        access_modes=tuple(modes),
        capacity_bytes=size,
        node_affinity=affinity,
        claim_ref=claim_ref,
        **fields,
    )


def bound_pair(
    claim_name: str, volume_name: str, *, cls: str = "", **volume_fields: Any
) -> tuple[storage.PersistentVolumeClaim, storage.PersistentVolume]:
    """A claim and the volume it is bound to, both ways."""
    c = claim(claim_name, cls=cls, volume=volume_name, bound=True)
    ref = storage.ClaimRef(c.namespace, c.name, c.uid)
    return c, volume(volume_name, cls=cls, claim_ref=ref, **volume_fields)


def storage_class(
    name: str,
    *,
    wffc: bool = True,
    provisioner: str = storage.NO_PROVISIONER,
    topologies: Iterable[Mapping[str, Sequence[str]]] = (),
) -> storage.StorageClass:
    """A class; `topologies` are allowedTopologies terms as {key: values} mappings."""
    return storage.StorageClass(
        name=name,
        resource_version="1",
        provisioner=provisioner,
        volume_binding_mode=WFFC if wffc else storage.IMMEDIATE,
        allowed_topologies=tuple(
            tuple(storage.TopologySelectorRequirement(k, tuple(v)) for k, v in term.items())
            for term in topologies
        ),
    )


def csi_node(name: str, **allocatable: int) -> storage.CSINode:
    """A CSINode; keyword names are driver names with "_" for "." ("ebs_csi_aws_com")."""
    return storage.CSINode(
        name=name,
        resource_version="1",
        allocatable={k.replace("_", "."): v for k, v in allocatable.items()},
    )


def claim_pod(
    name: str = "", *claims: str, ephemeral: Sequence[str] = (), **fields: Any
) -> models.Pod:
    """A pod with a persistentVolumeClaim volume per claim name and an ephemeral volume per
    `ephemeral` name (its claim is "<pod>-<volume>")."""
    p = pod(name, **fields)
    vols = [models.PodVolume(f"vol-{c}", c) for c in claims]
    vols += [models.PodVolume(v, f"{p.name}-{v}", ephemeral=True) for v in ephemeral]
    return dataclasses.replace(p, volumes=tuple(vols))


def host(name: str, **kw: Any) -> models.Node:
    """A node with its hostname label (what local volumes' node affinity names)."""
    return node(name, hostname=True, **kw)


def storage_table(
    nodes: Iterable[models.Node],
    objects: Iterable[storage.StorageObject] = (),
    pods: Iterable[models.Pod] = (),
) -> NodeTable:
    table = table_of(nodes)
    for obj in objects:
        table.storage.set(obj)
    for p in pods:
        assert table.add_pod(p.node_name, p)
    return table
