"""API JSON of a Pod -> `models.Pod`, strictly or best-effort.

`pod_from_k8s` is called by the watcher once per list item and watch event with
strict=False: a pod it cannot read still reaches the scheduler, as a best-effort Pod
whose `invalid_reason` says what is wrong, so it is reported unschedulable instead of
silently dropped. The spec's parts are read by `podspec`; this module reads the metadata
(owner, pod group) and assembles the Pod.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from splitsched.core import models
from splitsched.core.convert import fast
from splitsched.core.convert.fields import (
    INT32_MAX,
    BadField,
    ConversionError,
    as_bool,
    as_enum,
    as_int,
    as_list,
    as_object,
    as_str,
    as_str_map,
    as_timestamp,
    named,
    show,
)
from splitsched.core.convert.podclaims import resource_claims
from splitsched.core.convert.podspec import (
    NO_AFFINITIES,
    affinities,
    containers,
    image_volumes,
    init_containers,
    overhead,
    pod_requests,
    scheduling_gates,
    spread_constraints,
    tolerations,
    volumes,
)

POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
POD_GROUP_MIN_MEMBER = "scheduling.x-k8s.io/min-member"
GROUP_ANNOTATION = "splitsched.io/group"
MIN_MEMBER_ANNOTATION = "splitsched.io/min-member"

_PREEMPTION_POLICIES = frozenset({"PreemptLowerPriority", "Never"})
_INT32_MIN = -INT32_MAX - 1


def _owner(value: object) -> models.OwnerRef | None:
    """The controller among metadata.ownerReferences, if any."""
    for i, raw in enumerate(as_list(value, "metadata.ownerReferences")):
        path = f"metadata.ownerReferences[{i}]"
        ref = as_object(raw, path)
        if as_bool(ref.get("controller"), f"{path}.controller"):
            return fast.OwnerRef(
                kind=as_str(ref.get("kind"), f"{path}.kind"),
                name=as_str(ref.get("name"), f"{path}.name"),
                uid=as_str(ref.get("uid"), f"{path}.uid"),
                controller=True,
            )
    return None


def _min_member(annotations: Mapping[str, str], keys: tuple[str, ...]) -> int:
    for key in keys:
        raw = annotations.get(key)
        if raw is not None:
            text = raw.strip()
            if not (text.isascii() and text.isdigit()) or not 1 <= int(text) <= INT32_MAX:
                raise BadField(
                    f"metadata.annotations[{key}]", f"expected a positive integer, got {show(raw)}"
                )
            return int(text)
    return 1


def _group(labels: Mapping[str, str], annotations: Mapping[str, str]) -> models.PodGroupRef | None:
    """The gang the pod belongs to: the coscheduling plugin's pod-group label, or our own
    annotation."""
    name = labels.get(POD_GROUP_LABEL)
    if name:
        keys = (POD_GROUP_MIN_MEMBER, MIN_MEMBER_ANNOTATION)
        return fast.PodGroupRef(name=name, min_member=_min_member(annotations, keys))
    name = annotations.get(GROUP_ANNOTATION)
    if name:
        return fast.PodGroupRef(
            name=name, min_member=_min_member(annotations, (MIN_MEMBER_ANNOTATION,))
        )
    return None


def _priority(value: object) -> int:
    return 0 if value is None else as_int(value, "spec.priority", low=_INT32_MIN, high=INT32_MAX)


def _preemption_policy(value: object) -> str:
    return as_enum(value, "spec.preemptionPolicy", _PREEMPTION_POLICIES, "PreemptLowerPriority")


def read_pod(obj: object) -> models.Pod:
    """The strict conversion, raising BadField. Fields are read in a fixed order, so an
    object with several problems always reports the same one."""
    obj, meta, name = named(obj)
    namespace = as_str(meta.get("namespace"), "metadata.namespace") or "default"
    labels = as_str_map(meta.get("labels"), "metadata.labels")
    annotations = as_str_map(meta.get("annotations"), "metadata.annotations")
    spec = as_object(obj.get("spec"), "spec")
    status = as_object(obj.get("status"), "status")
    host_network = as_bool(spec.get("hostNetwork"), "spec.hostNetwork")
    raw_affinity = spec.get("affinity")
    node_affinity, pod_affinity, anti_affinity = (
        affinities(raw_affinity) if raw_affinity else NO_AFFINITIES
    )
    raw_owners = meta.get("ownerReferences")
    return fast.Pod(
        uid=as_str(meta.get("uid"), "metadata.uid"),
        namespace=namespace,
        name=name,
        labels=labels,
        annotations=annotations,
        scheduler_name=as_str(spec.get("schedulerName"), "spec.schedulerName")
        or "default-scheduler",
        node_name=as_str(spec.get("nodeName"), "spec.nodeName"),
        nominated_node_name=as_str(status.get("nominatedNodeName"), "status.nominatedNodeName"),
        priority=_priority(spec.get("priority")),
        preemption_policy=_preemption_policy(spec.get("preemptionPolicy")),
        containers=containers(spec.get("containers"), "spec.containers", host_network=host_network),
        init_containers=init_containers(spec.get("initContainers"), host_network=host_network),
        overhead=overhead(spec.get("overhead")),
        pod_requests=pod_requests(spec.get("resources")),
        node_selector=as_str_map(spec.get("nodeSelector"), "spec.nodeSelector"),
        node_affinity=node_affinity,
        pod_affinity=pod_affinity,
        pod_anti_affinity=anti_affinity,
        tolerations=tolerations(spec.get("tolerations")),
        topology_spread_constraints=spread_constraints(spec.get("topologySpreadConstraints")),
        scheduling_gates=scheduling_gates(spec.get("schedulingGates")),
        phase=as_str(status.get("phase"), "status.phase") or "Pending",
        deleting=meta.get("deletionTimestamp") is not None,
        owner=_owner(raw_owners) if raw_owners else None,
        group=_group(labels, annotations) if labels or annotations else None,
        resource_version=as_str(meta.get("resourceVersion"), "metadata.resourceVersion"),
        creation_timestamp=as_timestamp(
            meta.get("creationTimestamp"), "metadata.creationTimestamp"
        ),
        image_volumes=image_volumes(spec.get("volumes")),
        volumes=volumes(spec.get("volumes"), name),
        resource_claims=resource_claims(spec, status, f"{namespace}/{name}")
        if spec.get("resourceClaims")
        else (),
    )


# ---- best effort ------------------------------------------------------------------------


def _identity(obj: object) -> tuple[str, str, str]:
    """(uid, namespace, name), tolerating any garbage, for messages and best-effort pods."""
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    if not isinstance(meta, dict):
        return "", "", ""
    uid, ns, name = meta.get("uid"), meta.get("namespace"), meta.get("name")
    return (
        uid if isinstance(uid, str) else "",
        ns if isinstance(ns, str) and ns else "default",
        name if isinstance(name, str) else "",
    )


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _loose_str_map(value: object) -> dict[str, str]:
    if isinstance(value, dict) and all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        return value
    return {}


def _loose_gates(value: object) -> tuple[str, ...]:
    """The gate names that can be read: a malformed pod that is still gated must stay
    untouched like any gated pod (nothing may be written for it), and is reported once
    its gates are gone."""
    if not isinstance(value, list):
        return ()
    names = (g.get("name") if isinstance(g, dict) else None for g in value)
    return tuple(n for n in names if isinstance(n, str) and n)


def _best_effort_pod(obj: object, reason: str) -> models.Pod:
    """Identity and the few scalars the scheduler needs to report the pod (or to leave it
    alone while gated), each taken only if well-typed."""
    uid, namespace, name = _identity(obj)
    d: dict[str, Any] = obj if isinstance(obj, dict) else {}
    meta = d.get("metadata") if isinstance(d.get("metadata"), dict) else {}
    spec = d.get("spec") if isinstance(d.get("spec"), dict) else {}
    status = d.get("status") if isinstance(d.get("status"), dict) else {}
    assert isinstance(meta, dict) and isinstance(spec, dict) and isinstance(status, dict)
    priority = spec.get("priority")
    return fast.Pod(
        uid=uid,
        namespace=namespace,
        name=name,
        labels=_loose_str_map(meta.get("labels")),
        annotations=_loose_str_map(meta.get("annotations")),
        scheduler_name=_text(spec.get("schedulerName")) or "default-scheduler",
        node_name=_text(spec.get("nodeName")),
        scheduling_gates=_loose_gates(spec.get("schedulingGates")),
        priority=priority if type(priority) is int and _INT32_MIN <= priority <= INT32_MAX else 0,
        phase=_text(status.get("phase")) or "Pending",
        deleting=meta.get("deletionTimestamp") is not None,
        resource_version=_text(meta.get("resourceVersion")),
        invalid_reason=reason,
    )


def pod_ref(obj: object) -> str:
    """ "pod <namespace>/<name>" for messages, whatever `obj` holds."""
    _, namespace, name = _identity(obj)
    return f"pod {namespace}/{name or '<unnamed>'}"


def pod_from_k8s(obj: Mapping[str, Any], *, strict: bool = True) -> models.Pod:
    """A Pod from its API JSON. Malformed input raises ConversionError, or with
    strict=False gives a best-effort Pod whose `invalid_reason` says what is wrong, so the
    scheduler reports it unschedulable instead of silently dropping it."""
    try:
        return read_pod(obj)
    except BadField as e:
        error = ConversionError(pod_ref(obj), e.detail)
        if strict:
            raise error from None
        return _best_effort_pod(obj, str(error))
