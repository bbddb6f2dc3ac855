"""Conversion between `splitsched.core.storage` values and their `splitsched.v1.types_pb2`
messages: PersistentVolumeClaim, PersistentVolume, StorageClass, CSINode, and a decision's
`VolumeBinding`s.

The watcher encodes what it observes with the `*_to_proto` functions; the scheduler decodes
the stream with `storage_from_event`. One to one, with `splitsched.wire`'s conventions
(selectors and node selector terms are encoded and decoded by its helpers), and these:
`PersistentVolumeClaim.selector` None <-> `has_selector` false, and
`PersistentVolume.node_affinity` None <-> `has_node_affinity` false.
"""

from __future__ import annotations

from collections.abc import Iterable

from splitsched import wire
from splitsched.core import storage
from splitsched.v1 import types_pb2, watcher_pb2

__all__ = [
    "bindings_to_proto",
    "claim_to_proto",
    "class_to_proto",
    "csi_node_to_proto",
    "storage_from_event",
    "volume_to_proto",
]


# ---- encode ---------------------------------------------------------------------------------


def claim_to_proto(claim: storage.PersistentVolumeClaim) -> types_pb2.PersistentVolumeClaim:
    msg = types_pb2.PersistentVolumeClaim(
        namespace=claim.namespace,
        name=claim.name,
        uid=claim.uid,
        resource_version=claim.resource_version,
        storage_class_name=claim.storage_class_name,
        has_storage_class=claim.has_storage_class,
        access_modes=claim.access_modes,
        request_bytes=claim.request_bytes,
        volume_name=claim.volume_name,
        phase=claim.phase,
        selected_node=claim.selected_node,
        volume_mode=claim.volume_mode,
        invalid_reason=claim.invalid_reason,
    )
    if claim.selector is not None:
        msg.has_selector = True
        wire._label_selector_into(claim.selector, msg.selector)
    return msg


def volume_to_proto(volume: storage.PersistentVolume) -> types_pb2.PersistentVolume:
    msg = types_pb2.PersistentVolume(
        name=volume.name,
        uid=volume.uid,
        resource_version=volume.resource_version,
        storage_class_name=volume.storage_class_name,
        access_modes=volume.access_modes,
        capacity_bytes=volume.capacity_bytes,
        phase=volume.phase,
        csi_driver=volume.csi_driver,
        volume_mode=volume.volume_mode,
        invalid_reason=volume.invalid_reason,
    )
    if volume.labels:
        msg.labels.update(volume.labels)
    if volume.node_affinity is not None:
        msg.has_node_affinity = True
        for term in volume.node_affinity:
            wire._node_selector_term_into(term, msg.node_affinity.add())
    if volume.claim_ref is not None:
        ref = volume.claim_ref
        msg.claim_ref.SetInParent()
        msg.claim_ref.namespace, msg.claim_ref.name, msg.claim_ref.uid = (
            ref.namespace, ref.name, ref.uid,
        )  # fmt: skip
    return msg


def class_to_proto(cls: storage.StorageClass) -> types_pb2.StorageClass:
    msg = types_pb2.StorageClass(
        name=cls.name,
        resource_version=cls.resource_version,
        provisioner=cls.provisioner,
        volume_binding_mode=cls.volume_binding_mode,
        is_default=cls.is_default,
    )
    for term in cls.allowed_topologies:
        out = msg.allowed_topologies.add()
        for req in term:
            out.match_label_expressions.add(key=req.key, values=req.values)
    return msg


def csi_node_to_proto(node: storage.CSINode) -> types_pb2.CSINode:
    msg = types_pb2.CSINode(
        name=node.name, resource_version=node.resource_version, invalid_reason=node.invalid_reason
    )
    if node.allocatable:
        msg.allocatable.update(node.allocatable)
    return msg


def bindings_to_proto(
    bindings: Iterable[storage.VolumeBinding], out: Iterable[types_pb2.VolumeBinding]
) -> None:
    """A decision's volume writes into a BindRequest's `volume_bindings`."""
    add = out.add  # type: ignore[attr-defined]
    for b in bindings:
        add(claim_namespace=b.claim_namespace, claim_name=b.claim_name, pv_name=b.pv_name)


def bindings_from_proto(
    msgs: Iterable[types_pb2.VolumeBinding], *, namespace: str
) -> tuple[storage.VolumeBinding, ...]:
    """A BindingOutcome's `volume_bindings` (a claim without a namespace is in the pod's,
    `namespace`)."""
    return tuple(
        storage.VolumeBinding(m.claim_namespace or namespace, m.claim_name, m.pv_name) for m in msgs
    )


# ---- decode ---------------------------------------------------------------------------------


def _claim(msg: types_pb2.PersistentVolumeClaim) -> storage.PersistentVolumeClaim:
    return storage.PersistentVolumeClaim(
        namespace=msg.namespace,
        name=msg.name,
        uid=msg.uid,
        resource_version=msg.resource_version,
        storage_class_name=msg.storage_class_name,
        has_storage_class=msg.has_storage_class,
        access_modes=tuple(msg.access_modes),
        request_bytes=msg.request_bytes,
        volume_name=msg.volume_name,
        phase=msg.phase,
        selector=wire._label_selector(msg.selector) if msg.has_selector else None,
        selected_node=msg.selected_node,
        volume_mode=msg.volume_mode or storage.FILESYSTEM,
        invalid_reason=msg.invalid_reason,
    )


def _volume(msg: types_pb2.PersistentVolume) -> storage.PersistentVolume:
    ref = msg.claim_ref
    return storage.PersistentVolume(
        name=msg.name,
        uid=msg.uid,
        resource_version=msg.resource_version,
        labels=wire._map(msg.labels),
        storage_class_name=msg.storage_class_name,
        access_modes=tuple(msg.access_modes),
        capacity_bytes=msg.capacity_bytes,
        node_affinity=tuple(wire._node_selector_term(t) for t in msg.node_affinity)
        if msg.has_node_affinity
        else None,
        claim_ref=storage.ClaimRef(ref.namespace, ref.name, ref.uid)
        if msg.HasField("claim_ref")
        else None,
        phase=msg.phase,
        csi_driver=msg.csi_driver,
        volume_mode=msg.volume_mode or storage.FILESYSTEM,
        invalid_reason=msg.invalid_reason,
    )


def _class(msg: types_pb2.StorageClass) -> storage.StorageClass:
    return storage.StorageClass(
        name=msg.name,
        resource_version=msg.resource_version,
        provisioner=msg.provisioner,
        volume_binding_mode=msg.volume_binding_mode or storage.IMMEDIATE,
        allowed_topologies=tuple(
            tuple(
                storage.TopologySelectorRequirement(r.key, tuple(r.values))
                for r in term.match_label_expressions
            )
            for term in msg.allowed_topologies
        ),
        is_default=msg.is_default,
    )


def _csi_node(msg: types_pb2.CSINode) -> storage.CSINode:
    return storage.CSINode(
        name=msg.name,
        resource_version=msg.resource_version,
        allocatable=wire._map(msg.allocatable),
        invalid_reason=msg.invalid_reason,
    )


def storage_from_event(event: watcher_pb2.ClusterEvent) -> storage.StorageObject | None:
    """The storage object a ClusterEvent carries (None for any other object)."""
    which = event.WhichOneof("object")
    if which == "pvc":
        return _claim(event.pvc)
    if which == "pv":
        return _volume(event.pv)
    if which == "storage_class":
        return _class(event.storage_class)
    if which == "csi_node":
        return _csi_node(event.csi_node)
    return None
