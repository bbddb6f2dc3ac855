"""API JSON of PersistentVolumeClaims, PersistentVolumes, StorageClasses and CSINodes ->
`splitsched.core.storage` values.

Called by the watcher once per list item and watch event. A claim, volume or CSINode it
cannot read still reaches the scheduler, with only its identity and an `invalid_reason`,
so the pods that use it wait with a reason instead of the object silently missing; a
StorageClass that cannot be read raises ConversionError (the watcher skips it and logs
why; the API server never stores one). Kubernetes' defaults that scheduling depends on are
mirrored: volumeMode Filesystem, volumeBindingMode Immediate, and the beta
storage-class annotation read before spec.storageClassName (GetPersistentVolumeClaimClass).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from splitsched.core import storage
from splitsched.core.convert.fields import (
    INT32_MAX,
    BadField,
    ConversionError,
    as_int,
    as_list,
    as_object,
    as_resources,
    as_str,
    as_str_map,
    as_str_tuple,
    at,
    each,
    named,
    required_str,
)
from splitsched.core.convert.selectors import label_selector, node_selector_term

BETA_CLASS_ANNOTATION = "volume.beta.kubernetes.io/storage-class"
DEFAULT_CLASS_ANNOTATIONS = (
    "storageclass.kubernetes.io/is-default-class",
    "storageclass.beta.kubernetes.io/is-default-class",
)


def _identity(obj: object) -> tuple[str, str, str, str]:
    """(namespace, name, uid, resourceVersion), tolerating any garbage."""
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    meta = meta if isinstance(meta, dict) else {}

    def text(key: str) -> str:
        value = meta.get(key)
        return value if isinstance(value, str) else ""

    return text("namespace"), text("name"), text("uid"), text("resourceVersion")


def _storage_bytes(value: object, path: str) -> int:
    """The `storage` entry of a ResourceList (0 when absent)."""
    return as_resources(value, path).get("storage", 0)


def _class_name(meta: dict[str, Any], spec: dict[str, Any]) -> tuple[str, bool]:
    """The class a claim or volume names, and whether it names one at all."""
    annotations = as_str_map(meta.get("annotations"), "metadata.annotations")
    if BETA_CLASS_ANNOTATION in annotations:
        return annotations[BETA_CLASS_ANNOTATION], True
    raw = spec.get("storageClassName")
    return as_str(raw, "spec.storageClassName"), raw is not None


def read_claim(obj: object) -> storage.PersistentVolumeClaim:
    obj, meta, name = named(obj)
    spec = as_object(obj.get("spec"), "spec")
    status = as_object(obj.get("status"), "status")
    annotations = as_str_map(meta.get("annotations"), "metadata.annotations")
    class_name, has_class = _class_name(meta, spec)
    resources = as_object(spec.get("resources"), "spec.resources")
    return storage.PersistentVolumeClaim(
        namespace=as_str(meta.get("namespace"), "metadata.namespace") or "default",
        name=name,
        uid=as_str(meta.get("uid"), "metadata.uid"),
        resource_version=as_str(meta.get("resourceVersion"), "metadata.resourceVersion"),
        storage_class_name=class_name,
        has_storage_class=has_class,
        access_modes=as_str_tuple(spec.get("accessModes"), "spec.accessModes"),
        request_bytes=_storage_bytes(resources.get("requests"), "spec.resources.requests"),
        volume_name=as_str(spec.get("volumeName"), "spec.volumeName"),
        phase=as_str(status.get("phase"), "status.phase") or "Pending",
        selector=at(spec.get("selector"), "spec.selector", label_selector),
        selected_node=annotations.get(storage.SELECTED_NODE, ""),
        volume_mode=as_str(spec.get("volumeMode"), "spec.volumeMode") or storage.FILESYSTEM,
    )


def _claim_ref(value: object) -> storage.ClaimRef | None:
    if value is None:
        return None
    ref = as_object(value, "spec.claimRef")
    return storage.ClaimRef(
        namespace=as_str(ref.get("namespace"), "spec.claimRef.namespace"),
        name=as_str(ref.get("name"), "spec.claimRef.name"),
        uid=as_str(ref.get("uid"), "spec.claimRef.uid"),
    )


def _volume_node_affinity(value: object) -> tuple[Any, ...] | None:
    """spec.nodeAffinity.required's terms; None when there is none (any node)."""
    affinity = as_object(value, "spec.nodeAffinity")
    required = affinity.get("required")
    if required is None:
        return None
    path = "spec.nodeAffinity.required"
    terms = as_object(required, path).get("nodeSelectorTerms")
    return each(terms, f"{path}.nodeSelectorTerms", node_selector_term)


def read_volume(obj: object) -> storage.PersistentVolume:
    obj, meta, name = named(obj)
    spec = as_object(obj.get("spec"), "spec")
    status = as_object(obj.get("status"), "status")
    csi = as_object(spec.get("csi"), "spec.csi")
    return storage.PersistentVolume(
        name=name,
        uid=as_str(meta.get("uid"), "metadata.uid"),
        resource_version=as_str(meta.get("resourceVersion"), "metadata.resourceVersion"),
        labels=as_str_map(meta.get("labels"), "metadata.labels"),
        storage_class_name=_class_name(meta, spec)[0],
        access_modes=as_str_tuple(spec.get("accessModes"), "spec.accessModes"),
        capacity_bytes=_storage_bytes(spec.get("capacity"), "spec.capacity"),
        node_affinity=_volume_node_affinity(spec.get("nodeAffinity")),
        claim_ref=_claim_ref(spec.get("claimRef")),
        phase=as_str(status.get("phase"), "status.phase") or "Pending",
        csi_driver=as_str(csi.get("driver"), "spec.csi.driver"),
        volume_mode=as_str(spec.get("volumeMode"), "spec.volumeMode") or storage.FILESYSTEM,
    )


def _topology_term(value: object) -> tuple[storage.TopologySelectorRequirement, ...]:
    term = as_object(value, "")

    def requirement(raw: object) -> storage.TopologySelectorRequirement:
        req = as_object(raw, "")
        return storage.TopologySelectorRequirement(
            key=required_str(req, "key"), values=as_str_tuple(req.get("values"), "values")
        )

    return each(term.get("matchLabelExpressions"), "matchLabelExpressions", requirement)


def read_class(obj: object) -> storage.StorageClass:
    obj, meta, name = named(obj)
    annotations = as_str_map(meta.get("annotations"), "metadata.annotations")
    mode = as_str(obj.get("volumeBindingMode"), "volumeBindingMode") or storage.IMMEDIATE
    return storage.StorageClass(
        name=name,
        resource_version=as_str(meta.get("resourceVersion"), "metadata.resourceVersion"),
        provisioner=as_str(obj.get("provisioner"), "provisioner"),
        volume_binding_mode=mode,
        allowed_topologies=each(obj.get("allowedTopologies"), "allowedTopologies", _topology_term),
        is_default=any(annotations.get(k) == "true" for k in DEFAULT_CLASS_ANNOTATIONS),
    )


def read_csi_node(obj: object) -> storage.CSINode:
    obj, meta, name = named(obj)
    spec = as_object(obj.get("spec"), "spec")
    allocatable: dict[str, int] = {}
    for i, raw in enumerate(as_list(spec.get("drivers"), "spec.drivers")):
        path = f"spec.drivers[{i}]"
        driver = as_object(raw, path)
        count = as_object(driver.get("allocatable"), f"{path}.allocatable").get("count")
        if count is not None:
            driver_name = as_str(driver.get("name"), f"{path}.name")
            allocatable[driver_name] = as_int(
                count, f"{path}.allocatable.count", low=0, high=INT32_MAX
            )
    return storage.CSINode(
        name=name,
        resource_version=as_str(meta.get("resourceVersion"), "metadata.resourceVersion"),
        allocatable=allocatable,
    )


# ---- the watcher's entry points -----------------------------------------------------------


def claim_from_k8s(obj: Mapping[str, Any]) -> storage.PersistentVolumeClaim:
    """A claim from its API JSON; one that cannot be read keeps its identity and says why
    in `invalid_reason`."""
    try:
        return read_claim(obj)
    except BadField as e:
        namespace, name, uid, version = _identity(obj)
        return storage.PersistentVolumeClaim(
            namespace=namespace or "default", name=name, uid=uid, resource_version=version,
            invalid_reason=e.detail,
        )  # fmt: skip


def volume_from_k8s(obj: Mapping[str, Any]) -> storage.PersistentVolume:
    """A volume from its API JSON; one that cannot be read (a malformed capacity or node
    affinity) keeps its identity, says why in `invalid_reason`, and is taken by no claim."""
    try:
        return read_volume(obj)
    except BadField as e:
        _, name, uid, version = _identity(obj)
        return storage.PersistentVolume(
            name=name, uid=uid, resource_version=version, invalid_reason=e.detail
        )


def class_from_k8s(obj: Mapping[str, Any]) -> storage.StorageClass:
    """A StorageClass from its API JSON; raises ConversionError naming the field."""
    try:
        return read_class(obj)
    except BadField as e:
        name = _identity(obj)[1] or "<unnamed>"
        raise ConversionError(f"storageclass {name}", e.detail) from None


def csi_node_from_k8s(obj: Mapping[str, Any]) -> storage.CSINode:
    """A CSINode from its API JSON; one that cannot be read (a negative count, say) says
    why in `invalid_reason`, and its node takes no pod that would attach volumes."""
    try:
        return read_csi_node(obj)
    except BadField as e:
        _, name, _, version = _identity(obj)
        return storage.CSINode(name=name, resource_version=version, invalid_reason=e.detail)
