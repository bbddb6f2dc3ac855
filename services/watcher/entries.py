"""API JSON -> hub entries: each Node, Pod, PodDisruptionBudget, Namespace,
PersistentVolumeClaim, PersistentVolume, StorageClass, CSINode, DeviceClass, ResourceSlice
and ResourceClaim the list/watch reads is converted once (`splitsched.core.convert` ->
`splitsched.wire`, `wire_storage` or `wire_devices` -> a serialised event body) and handed
to the `ClusterHub` as a `ring.Entry`.

Called by the `Reflector` (`services.watcher.listwatch`). Pure but for logging and the
`watch_event` span that starts a pending pod's trace. Applies the watcher-level
scheduler-name filter, and fingerprints what a scheduler reads of each object so updates
that change none of it are absorbed (`ring.ClusterHub.upsert`, `raw_pod_fingerprint`).

The stream carries only what scheduling reads (docs/api.md, "What the watcher streams"):
the typed messages of `splitsched.v1.types` have no place for env, command, args, probes or
volume sources other than claims, images are streamed for pending pods only
(`drop_placed_images`), and of the annotations only `STREAMED_ANNOTATIONS` pass (a claim's
selected-node annotation is read into its message, never streamed as such).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable, MutableMapping
from datetime import datetime
from typing import Any

import orjson

from services.watcher import ring
from splitsched import wire, wire_devices, wire_storage
from splitsched.core import models
from splitsched.core.convert import (
    GROUP_ANNOTATION,
    MIN_MEMBER_ANNOTATION,
    POD_GROUP_MIN_MEMBER,
    ConversionError,
    node_from_k8s,
    pod_from_k8s,
)
from splitsched.core.convert import devices as devices_convert
from splitsched.core.convert import storage as storage_convert
from splitsched.runtime import tracing
from splitsched.v1 import types_pb2

# The logger these lines were always logged under (before the module was split off).
log = logging.getLogger("services.watcher.listwatch")

TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})

#: The only annotations put on the stream: the pod-group keys the conversion reads into
#: `Pod.group`. No plugin reads any other, and annotations are where tools keep what
#: must not spread (kubectl's last-applied-configuration holds the whole manifest with
#: its env values; injectors keep secret paths and tokens there), so the rest stay in the
#: API server. Labels all pass: selectors, affinity and spreading match on them.
STREAMED_ANNOTATIONS = frozenset({GROUP_ANNOTATION, MIN_MEMBER_ANNOTATION, POD_GROUP_MIN_MEMBER})


def _rfc3339(value: object) -> float | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value).timestamp()
    except ValueError:
        return None


class Converter:
    """API JSON -> hub entries, applying the watcher-level scheduler-name filter."""

    def __init__(self, *, scheduler_names: Iterable[str] = ()) -> None:
        self.scheduler_names = frozenset(n for n in scheduler_names if n)

    def pod(self, obj: dict[str, Any], now: float) -> ring.Entry | None:
        """None when the pod does not belong in the view (terminal, or pending for a
        scheduler we don't serve)."""
        pod = pod_from_k8s(obj, strict=False)
        if pod.phase in TERMINAL_PHASES:
            return None
        if (
            self.scheduler_names
            and not pod.node_name
            and pod.scheduler_name not in self.scheduler_names
        ):
            return None
        if pod.invalid_reason:
            log.warning("pod %s is malformed: %s", pod.key, pod.invalid_reason)
        deletion = None
        if pod.deleting:
            deletion = _rfc3339(obj["metadata"].get("deletionTimestamp"))
        msg = wire.pod_to_proto(pod, deletion_timestamp=deletion)
        keep_streamed_annotations(msg.annotations)
        if pod.node_name:
            drop_placed_images(msg)
        fingerprint = _fingerprint(msg)
        carrier = None
        if not pod.node_name and not pod.deleting and tracing.enabled():
            carrier = _observe_pending(pod, now)
        return ring.Entry(
            kind=ring.POD,
            key=pod.key,
            uid=pod.uid,
            resource_version=pod.resource_version,
            body=ring.encode_body(msg, observed_at=now, trace_context=carrier),
            scheduler_name=pod.scheduler_name,
            assigned=bool(pod.node_name),
            fingerprint=fingerprint,
            raw_fingerprint=raw_pod_fingerprint(obj),
        )

    def node(self, obj: dict[str, Any], now: float) -> ring.Entry | None:
        try:
            node = node_from_k8s(obj)
        except ConversionError as e:
            log.error("skipping node that cannot be read: %s", e)
            return None
        msg = wire.node_to_proto(node)
        keep_streamed_annotations(msg.annotations)
        return ring.Entry(
            kind=ring.NODE,
            key=node.name,
            uid=node.uid,
            resource_version=node.resource_version,
            body=ring.encode_body(msg, observed_at=now),
            fingerprint=_fingerprint(msg),
        )

    def pdb(self, obj: dict[str, Any], now: float) -> ring.Entry | None:
        try:
            msg = pdb_to_proto(obj)
        except (TypeError, ValueError, KeyError, AttributeError) as e:
            log.error("skipping PodDisruptionBudget that cannot be read: %s", e)
            return None
        return ring.Entry(
            kind=ring.PDB,
            key=f"{msg.namespace}/{msg.name}",
            uid=str(obj["metadata"].get("uid") or ""),
            resource_version=msg.resource_version,
            body=ring.encode_body(msg, observed_at=now),
        )

    def namespace(self, obj: dict[str, Any], now: float) -> ring.Entry | None:
        """A Namespace's name and labels (InterPodAffinity's namespaceSelector); an update
        that changes neither (status, annotations, finalizers) is absorbed."""
        meta = obj.get("metadata")
        labels = meta.get("labels") if isinstance(meta, dict) else None
        if not isinstance(meta, dict) or not isinstance(meta.get("name"), str):
            log.error("skipping Namespace without a name")
            return None
        if labels is not None and not (
            isinstance(labels, dict)
            and all(isinstance(k, str) and isinstance(v, str) for k, v in labels.items())
        ):
            log.error(
                "skipping Namespace %s: metadata.labels is not a map of strings", meta["name"]
            )
            return None
        msg = types_pb2.Namespace(
            name=meta["name"],
            labels=labels or {},
            resource_version=str(meta.get("resourceVersion") or ""),
        )
        return ring.Entry(
            kind=ring.NAMESPACE,
            key=msg.name,
            uid=str(meta.get("uid") or ""),
            resource_version=msg.resource_version,
            body=ring.encode_body(msg, observed_at=now),
            fingerprint=_fingerprint(msg),
        )

    # ---- storage: claims, volumes, classes, CSINodes (the volume plugins) ----------------
    def pvc(self, obj: dict[str, Any], now: float) -> ring.Entry | None:
        claim = storage_convert.claim_from_k8s(obj)
        _warn_invalid("PersistentVolumeClaim", f"{claim.namespace}/{claim.name}", claim)
        msg = wire_storage.claim_to_proto(claim)
        return _storage_entry(ring.PVC, f"{claim.namespace}/{claim.name}", obj, msg, now)

    def pv(self, obj: dict[str, Any], now: float) -> ring.Entry | None:
        volume = storage_convert.volume_from_k8s(obj)
        _warn_invalid("PersistentVolume", volume.name, volume)
        return _storage_entry(ring.PV, volume.name, obj, wire_storage.volume_to_proto(volume), now)

    def storage_class(self, obj: dict[str, Any], now: float) -> ring.Entry | None:
        try:
            cls = storage_convert.class_from_k8s(obj)
        except ConversionError as e:
            log.error("skipping StorageClass that cannot be read: %s", e)
            return None
        msg = wire_storage.class_to_proto(cls)
        return _storage_entry(ring.STORAGE_CLASS, cls.name, obj, msg, now)

    def csi_node(self, obj: dict[str, Any], now: float) -> ring.Entry | None:
        node = storage_convert.csi_node_from_k8s(obj)
        _warn_invalid("CSINode", node.name, node)
        msg = wire_storage.csi_node_to_proto(node)
        return _storage_entry(ring.CSI_NODE, node.name, obj, msg, now)

    # ---- devices: classes, slices, claims (Dynamic Resource Allocation) ------------------
    def device_class(self, obj: dict[str, Any], now: float) -> ring.Entry | None:
        try:
            cls = devices_convert.class_from_k8s(obj)
        except ConversionError as e:
            log.error("skipping DeviceClass that cannot be read: %s", e)
            return None
        msg = wire_devices.class_to_proto(cls)
        return _storage_entry(ring.DEVICE_CLASS, cls.name, obj, msg, now)

    def resource_slice(self, obj: dict[str, Any], now: float) -> ring.Entry | None:
        slice_ = devices_convert.slice_from_k8s(obj)
        _warn_invalid("ResourceSlice", slice_.name, slice_)
        msg = wire_devices.slice_to_proto(slice_)
        return _storage_entry(ring.RESOURCE_SLICE, slice_.name, obj, msg, now)

    def resource_claim(self, obj: dict[str, Any], now: float) -> ring.Entry | None:
        claim = devices_convert.claim_from_k8s(obj)
        key = f"{claim.namespace}/{claim.name}"
        _warn_invalid("ResourceClaim", key, claim)
        msg = wire_devices.claim_to_proto(claim)
        return _storage_entry(ring.RESOURCE_CLAIM, key, obj, msg, now)


def _warn_invalid(kind: str, key: str, obj: object) -> None:
    reason = getattr(obj, "invalid_reason", "")
    if reason:
        log.warning("%s %s is malformed: %s", kind, key, reason)


def _storage_entry(
    kind: str, key: str, obj: dict[str, Any], msg: ring.StorageMsg | ring.DeviceMsg, now: float
) -> ring.Entry:
    """A storage or device object's entry; its fingerprint lets an update that changes
    nothing streamed (a status condition, another annotation) be absorbed."""
    meta = obj.get("metadata")
    uid = meta.get("uid") if isinstance(meta, dict) else None
    return ring.Entry(
        kind=kind,
        key=key,
        uid=uid if isinstance(uid, str) else "",
        resource_version=msg.resource_version,
        body=ring.encode_body(msg, observed_at=now),
        fingerprint=_fingerprint(msg),
    )


def drop_placed_images(msg: types_pb2.Pod) -> None:
    """Clears, in place, the images of a placed pod: ImageLocality reads only the images of
    the pod being placed, so a running pod's image (which `kubectl set image` changes)
    neither rides on the stream nor makes an update the scheduler must take."""
    for container in (*msg.containers, *msg.init_containers):
        container.ClearField("image")
    msg.ClearField("image_volumes")


def keep_streamed_annotations(annotations: MutableMapping[str, str]) -> None:
    """Drops, in place, every annotation not in `STREAMED_ANNOTATIONS`. Before the
    fingerprint, so an update that changes only such annotations costs the scheduler
    nothing."""
    if annotations:
        for key in [k for k in annotations if k not in STREAMED_ANNOTATIONS]:
            del annotations[key]


def raw_pod_fingerprint(obj: dict[str, Any]) -> bytes:
    """Everything `pod_from_k8s` reads of a pod except its identity and resourceVersion,
    serialised: equal for two versions whose conversions are equal but for the
    resourceVersion and a non-terminal phase, so the second needs no conversion (a
    fraction of its cost). b"" for a terminal pod (it must be converted: it leaves the view)."""
    status = obj.get("status") or {}
    phase = status.get("phase") if isinstance(status, dict) else None
    if phase in TERMINAL_PHASES or not isinstance(status, dict):
        return b""
    meta = obj.get("metadata") or {}
    if not isinstance(meta, dict):
        return b""
    try:
        read = orjson.dumps(
            (
                meta.get("labels"),
                meta.get("annotations"),
                meta.get("ownerReferences"),
                meta.get("deletionTimestamp"),
                meta.get("creationTimestamp"),
                obj.get("spec"),
                status.get("nominatedNodeName"),
                status.get("resourceClaimStatuses"),
            )
        )
    except orjson.JSONEncodeError:
        return b""
    return digest(read)


def _fingerprint(msg: ring.ObjectMsg) -> bytes:
    """The object's bytes without its resourceVersion and, for a pod, its phase (terminal
    pods leave the view, so the phase only tells Pending from Running). After a bind, the
    pod updates that follow (kwok or the kubelet starting it) change nothing else a
    scheduler reads: with this they cost the watcher one serialisation and the scheduler
    nothing."""
    version, msg.resource_version = msg.resource_version, ""
    phase = ""
    if isinstance(msg, types_pb2.Pod):
        phase, msg.phase = msg.phase, ""
    data = msg.SerializeToString(deterministic=True)
    msg.resource_version = version
    if isinstance(msg, types_pb2.Pod):
        msg.phase = phase
    return digest(data)


def digest(data: bytes) -> bytes:
    """A fingerprint's 16 bytes (BLAKE2b-128): only ever compared for equality, and kept
    for every object in the view and every delta in the ring, where the serialised bytes
    themselves cost a copy of each object (and orjson's output carries up to 4 KiB of
    spare allocation: the ring's deltas cost ~6 KiB each before, measured)."""
    return hashlib.blake2b(data, digest_size=16).digest()


def _observe_pending(pod: models.Pod, now: float) -> dict[str, str]:
    """The `watch_event` span that starts a pending pod's scheduling trace; its context
    rides on the ClusterEvent to the scheduler."""
    attrs = tracing.pod_attributes(pod.namespace, pod.name, pod.uid)
    attrs["splitsched.profile"] = pod.scheduler_name
    attrs["splitsched.resource_version"] = pod.resource_version
    return tracing.producer_span("watch_event", attributes=attrs, at=now)


def _label_selector(sel: object, out: types_pb2.LabelSelector) -> None:
    if not isinstance(sel, dict):
        raise TypeError(f"selector: expected an object, got {type(sel).__name__}")
    out.SetInParent()
    labels = sel.get("matchLabels") or {}
    for k, v in labels.items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise TypeError("selector.matchLabels: expected strings")
        out.match_labels[k] = v
    for req in sel.get("matchExpressions") or []:
        out.match_expressions.add(
            key=str(req["key"]),
            operator=str(req["operator"]),
            values=[str(v) for v in req.get("values") or []],
        )


def pdb_to_proto(obj: dict[str, Any]) -> types_pb2.PodDisruptionBudget:
    """A policy/v1 PodDisruptionBudget's scheduling-relevant part (preemption reads it)."""
    meta = obj["metadata"]
    msg = types_pb2.PodDisruptionBudget(
        namespace=str(meta.get("namespace") or "default"),
        name=str(meta["name"]),
        resource_version=str(meta.get("resourceVersion") or ""),
    )
    spec = obj.get("spec") or {}
    if spec.get("selector") is not None:
        _label_selector(spec["selector"], msg.selector)
    allowed = (obj.get("status") or {}).get("disruptionsAllowed", 0)
    if type(allowed) is not int:
        raise TypeError(f"status.disruptionsAllowed: expected an integer, got {allowed!r}")
    msg.disruptions_allowed = allowed
    return msg
