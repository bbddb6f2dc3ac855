"""API JSON of a Node -> `models.Node`, always strictly.

Called by the watcher once per list item and watch event. A node the scheduler cannot
read raises ConversionError: placing pods on a misread node would be worse than not
seeing it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from splitsched.core import models
from splitsched.core.convert import fast
from splitsched.core.convert.fields import (
    INT64_MAX,
    BadField,
    ConversionError,
    as_bool,
    as_enum,
    as_int,
    as_list,
    as_object,
    as_resources,
    as_str,
    as_str_map,
    as_str_tuple,
    each,
    named,
    required,
    required_str,
)

_TAINT_EFFECTS = frozenset(effect.value for effect in models.TaintEffect)


def _taint(value: object) -> models.Taint:
    t = as_object(value, "")
    key = required_str(t, "key")
    effect = required(t, "effect")
    return fast.Taint(
        key=key,
        value=as_str(t.get("value"), "value"),
        effect=as_enum(effect, "effect", _TAINT_EFFECTS, ""),
    )


def _ready(status: dict[str, Any]) -> bool:
    """The Ready condition. A node that reports none (hand-written clusters) counts as
    ready; kube-scheduler itself only sees readiness through the not-ready taints."""
    ready = True
    for i, raw in enumerate(as_list(status.get("conditions"), "status.conditions")):
        cond = as_object(raw, f"status.conditions[{i}]")
        if cond.get("type") == "Ready":
            ready = as_str(cond.get("status"), f"status.conditions[{i}].status") == "True"
    return ready


def _image(value: object) -> models.ContainerImage:
    image = as_object(value, "")
    names, size = image.get("names"), image.get("sizeBytes")
    return fast.ContainerImage(
        names=as_str_tuple(names, "names") if names else (),
        size_bytes=0 if size is None else as_int(size, "sizeBytes", low=0, high=INT64_MAX),
    )


def read_node(obj: object) -> models.Node:
    """The strict conversion, raising BadField."""
    obj, meta, name = named(obj)
    spec = as_object(obj.get("spec"), "spec")
    status = as_object(obj.get("status"), "status")
    raw_allocatable = status.get("allocatable")
    if raw_allocatable is None:
        allocatable = as_resources(status.get("capacity"), "status.capacity")
    else:
        allocatable = as_resources(raw_allocatable, "status.allocatable")
    ready = _ready(status)
    return fast.Node(
        name=name,
        labels=as_str_map(meta.get("labels"), "metadata.labels"),
        annotations=as_str_map(meta.get("annotations"), "metadata.annotations"),
        taints=each(spec.get("taints"), "spec.taints", _taint),
        allocatable=allocatable,
        unschedulable=as_bool(spec.get("unschedulable"), "spec.unschedulable"),
        ready=ready,
        resource_version=as_str(meta.get("resourceVersion"), "metadata.resourceVersion"),
        uid=as_str(meta.get("uid"), "metadata.uid"),
        images=each(status.get("images"), "status.images", _image),
    )


def node_ref(obj: object) -> str:
    """ "node <name>" for messages, whatever `obj` holds."""
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    name = meta.get("name") if isinstance(meta, dict) else None
    return f"node {name if isinstance(name, str) and name else '<unnamed>'}"


def node_from_k8s(obj: Mapping[str, Any]) -> models.Node:
    """A Node from its API JSON; a node that cannot be read raises ConversionError."""
    try:
        return read_node(obj)
    except BadField as e:
        raise ConversionError(node_ref(obj), e.detail) from None
