"""Conversion between the core's domain models and the gRPC contract's messages.

`splitsched.core.models` (frozen dataclasses) <-> `splitsched.v1.types_pb2` messages. The
watcher encodes every Node and Pod it observes with `node_to_proto` / `pod_to_proto`; the
scheduler decodes every streamed object with `node_from_proto` / `pod_from_proto`, so the
decoders are written for speed: no reflection, empty repeated fields skipped early.

The mapping is one to one, with these conventions:

* quantities are canonical integers on both sides (cpu millicores, bytes, counts);
* `NodeAffinity.required is None` <-> `has_required = false`;
* an optional message (selector, affinity, owner, group) that is None <-> unset;
* `Toleration.toleration_seconds` / `TopologySpreadConstraint.min_domains` None <-> unset
  `optional` field;
* float epoch seconds <-> `google.protobuf.Timestamp` (exact for real timestamps; 0.0 <->
  unset);
* `Pod.deleting` <-> `deletion_timestamp` set (the model keeps no deletion time, so the
  encoder sets the epoch unless the caller passes the real one);
* a LabelSelector's `match_labels` is a proto map, which has no order: the decoder returns
  the pairs sorted by key.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Iterable, Mapping
from typing import TypeVar

from google.protobuf.timestamp_pb2 import Timestamp

from splitsched.core import models
from splitsched.v1 import types_pb2

__all__ = [
    "node_from_proto",
    "node_to_proto",
    "pod_from_proto",
    "pod_key",
    "pod_ref",
    "pod_ref_key",
    "pod_to_proto",
    "timestamp_from_float",
    "timestamp_to_float",
]

_NANOS = 1_000_000_000
_VOLUME_FIELDS = ("name", "claim_name", "ephemeral", "read_only")  # PodVolume, both sides
_VOLUME = operator.attrgetter(*_VOLUME_FIELDS)
_K = TypeVar("_K")
_V = TypeVar("_V")


def _map(m: Mapping[_K, _V]) -> dict[_K, _V]:
    """A proto map as a dict. `dict(m)` and `m.items()` go through Python-level mapping
    mixins on upb maps (several microseconds); a key loop is ~5x faster."""
    return {k: m[k] for k in m} if m else {}


# ---- scalars ----------------------------------------------------------------------------


def timestamp_from_float(seconds: float, out: Timestamp | None = None) -> Timestamp:
    """Float epoch seconds as a Timestamp (nanosecond rounding, nanos always in [0, 1e9))."""
    ts = Timestamp() if out is None else out
    whole = math.floor(seconds)
    nanos = round((seconds - whole) * _NANOS)
    if nanos >= _NANOS:
        whole += 1
        nanos -= _NANOS
    ts.seconds = int(whole)
    ts.nanos = nanos
    return ts


def timestamp_to_float(ts: Timestamp) -> float:
    """A Timestamp as float epoch seconds (the inverse of `timestamp_from_float` for any
    time after 1970-04, where a float's spacing exceeds a nanosecond)."""
    return ts.seconds + ts.nanos / _NANOS


# ---- PodRef -----------------------------------------------------------------------------


def pod_ref(pod: models.Pod) -> types_pb2.PodRef:
    """The PodRef naming `pod`."""
    return types_pb2.PodRef(namespace=pod.namespace, name=pod.name, uid=pod.uid)


def pod_ref_key(ref: types_pb2.PodRef) -> str:
    """ "namespace/name" of a PodRef: the same key as `models.Pod.key`."""
    return f"{ref.namespace}/{ref.name}"


def pod_key(pod: types_pb2.Pod) -> str:
    """ "namespace/name" of a proto Pod without decoding it."""
    return f"{pod.namespace}/{pod.name}"


# ---- selectors and affinity: encode -----------------------------------------------------


def _label_selector_into(sel: models.LabelSelector, out: types_pb2.LabelSelector) -> None:
    out.SetInParent()  # an empty selector (matches everything) must still be "set"
    if sel.match_labels:
        out.match_labels.update(sel.match_labels)
    for req in sel.match_expressions:
        out.match_expressions.add(key=req.key, operator=req.operator, values=req.values)


def _node_selector_term_into(
    term: models.NodeSelectorTerm, out: types_pb2.NodeSelectorTerm
) -> None:
    for req in term.match_expressions:
        out.match_expressions.add(key=req.key, operator=req.operator, values=req.values)
    for req in term.match_fields:
        out.match_fields.add(key=req.key, operator=req.operator, values=req.values)


def _node_affinity_into(na: models.NodeAffinity, out: types_pb2.NodeAffinity) -> None:
    out.SetInParent()
    if na.required is not None:
        out.has_required = True
        for term in na.required:
            _node_selector_term_into(term, out.required.add())
    for pref in na.preferred:
        item = out.preferred.add(weight=pref.weight)
        item.preference.SetInParent()
        _node_selector_term_into(pref.preference, item.preference)


def _pod_affinity_term_into(term: models.PodAffinityTerm, out: types_pb2.PodAffinityTerm) -> None:
    if term.label_selector is not None:
        _label_selector_into(term.label_selector, out.label_selector)
    out.topology_key = term.topology_key
    if term.namespaces:
        out.namespaces.extend(term.namespaces)
    if term.namespace_selector is not None:
        _label_selector_into(term.namespace_selector, out.namespace_selector)
    if term.match_label_keys:
        out.match_label_keys.extend(term.match_label_keys)
    if term.mismatch_label_keys:
        out.mismatch_label_keys.extend(term.mismatch_label_keys)


def _pod_affinity_into(pa: models.PodAffinity, out: types_pb2.PodAffinity) -> None:
    out.SetInParent()
    for term in pa.required:
        _pod_affinity_term_into(term, out.required.add())
    for weighted in pa.preferred:
        item = out.preferred.add(weight=weighted.weight)
        item.term.SetInParent()
        _pod_affinity_term_into(weighted.term, item.term)


def _container_into(c: models.Container, out: types_pb2.Container) -> None:
    out.name = c.name
    if c.requests:
        out.requests.update(c.requests)
    for hp in c.host_ports:
        out.host_ports.add(port=hp.port, protocol=hp.protocol, host_ip=hp.host_ip)
    if c.restart_policy:
        out.restart_policy = c.restart_policy
    if c.image:
        out.image = c.image


# ---- selectors and affinity: decode -----------------------------------------------------


def _label_selector(msg: types_pb2.LabelSelector) -> models.LabelSelector:
    labels = msg.match_labels
    exprs = msg.match_expressions
    return models.LabelSelector(
        match_labels=tuple(sorted([(k, labels[k]) for k in labels])) if labels else (),
        match_expressions=tuple(
            models.LabelSelectorRequirement(r.key, r.operator, tuple(r.values)) for r in exprs
        )
        if exprs
        else (),
    )


def _node_selector_requirements(
    reqs: Iterable[types_pb2.NodeSelectorRequirement],
) -> tuple[models.NodeSelectorRequirement, ...]:
    return tuple(models.NodeSelectorRequirement(r.key, r.operator, tuple(r.values)) for r in reqs)


def _node_selector_term(msg: types_pb2.NodeSelectorTerm) -> models.NodeSelectorTerm:
    return models.NodeSelectorTerm(
        match_expressions=_node_selector_requirements(msg.match_expressions)
        if msg.match_expressions
        else (),
        match_fields=_node_selector_requirements(msg.match_fields) if msg.match_fields else (),
    )


def _node_affinity(msg: types_pb2.NodeAffinity) -> models.NodeAffinity:
    return models.NodeAffinity(
        required=tuple(_node_selector_term(t) for t in msg.required) if msg.has_required else None,
        preferred=tuple(
            models.PreferredSchedulingTerm(p.weight, _node_selector_term(p.preference))
            for p in msg.preferred
        )
        if msg.preferred
        else (),
    )


def _pod_affinity_term(msg: types_pb2.PodAffinityTerm) -> models.PodAffinityTerm:
    return models.PodAffinityTerm(
        label_selector=_label_selector(msg.label_selector)
        if msg.HasField("label_selector")
        else None,
        topology_key=msg.topology_key,
        namespaces=tuple(msg.namespaces),
        namespace_selector=_label_selector(msg.namespace_selector)
        if msg.HasField("namespace_selector")
        else None,
        match_label_keys=tuple(msg.match_label_keys),
        mismatch_label_keys=tuple(msg.mismatch_label_keys),
    )


def _pod_affinity(msg: types_pb2.PodAffinity) -> models.PodAffinity:
    return models.PodAffinity(
        required=tuple(_pod_affinity_term(t) for t in msg.required),
        preferred=tuple(
            models.WeightedPodAffinityTerm(w.weight, _pod_affinity_term(w.term))
            for w in msg.preferred
        ),
    )


def _container(msg: types_pb2.Container) -> models.Container:
    ports = msg.host_ports
    return models.Container(
        name=msg.name,
        requests=_map(msg.requests),
        host_ports=tuple(models.HostPort(p.port, p.protocol, p.host_ip) for p in ports)
        if ports
        else (),
        restart_policy=msg.restart_policy,
        image=msg.image,
    )


def _toleration(msg: types_pb2.Toleration) -> models.Toleration:
    return models.Toleration(
        key=msg.key,
        operator=msg.operator,
        value=msg.value,
        effect=msg.effect,
        toleration_seconds=msg.toleration_seconds if msg.HasField("toleration_seconds") else None,
    )


def _spread_constraint(msg: types_pb2.TopologySpreadConstraint) -> models.TopologySpreadConstraint:
    return models.TopologySpreadConstraint(
        max_skew=msg.max_skew,
        topology_key=msg.topology_key,
        when_unsatisfiable=msg.when_unsatisfiable,
        label_selector=_label_selector(msg.label_selector)
        if msg.HasField("label_selector")
        else None,
        min_domains=msg.min_domains if msg.HasField("min_domains") else None,
        node_affinity_policy=msg.node_affinity_policy,
        node_taints_policy=msg.node_taints_policy,
        match_label_keys=tuple(msg.match_label_keys),
    )


# ---- nodes ------------------------------------------------------------------------------


def node_to_proto(node: models.Node) -> types_pb2.Node:
    """The wire form of a Node."""
    msg = types_pb2.Node(
        name=node.name,
        uid=node.uid,
        resource_version=node.resource_version,
        unschedulable=node.unschedulable,
        ready=node.ready,
    )
    if node.labels:
        msg.labels.update(node.labels)
    if node.annotations:
        msg.annotations.update(node.annotations)
    for t in node.taints:
        msg.taints.add(key=t.key, value=t.value, effect=t.effect)
    if node.allocatable:
        msg.allocatable.update(node.allocatable)
    for image in node.images:
        msg.images.add(names=image.names, size_bytes=image.size_bytes)
    return msg


def node_from_proto(msg: types_pb2.Node) -> models.Node:
    """The model of a streamed Node."""
    taints = msg.taints
    return models.Node(
        name=msg.name,
        labels=_map(msg.labels),
        annotations=_map(msg.annotations),
        taints=tuple(models.Taint(t.key, t.value, t.effect) for t in taints) if taints else (),
        allocatable=_map(msg.allocatable),
        unschedulable=msg.unschedulable,
        ready=msg.ready,
        resource_version=msg.resource_version,
        uid=msg.uid,
        images=tuple(models.ContainerImage(tuple(i.names), i.size_bytes) for i in msg.images),
    )


# ---- pods -------------------------------------------------------------------------------


def pod_to_proto(pod: models.Pod, *, deletion_timestamp: float | None = None) -> types_pb2.Pod:
    """The wire form of a Pod. `deletion_timestamp` (epoch seconds) is the real
    metadata.deletionTimestamp when the caller knows it; a deleting pod without one gets
    the epoch, which still marks it terminating."""
    msg = types_pb2.Pod(
        uid=pod.uid,
        namespace=pod.namespace,
        name=pod.name,
        resource_version=pod.resource_version,
        scheduler_name=pod.scheduler_name,
        node_name=pod.node_name,
        nominated_node_name=pod.nominated_node_name,
        priority=pod.priority,
        preemption_policy=pod.preemption_policy,
        phase=pod.phase,
        invalid_reason=pod.invalid_reason,
        image_volumes=pod.image_volumes,
    )
    _pod_maps_into(pod, msg)
    for c in pod.containers:
        _container_into(c, msg.containers.add())
    for c in pod.init_containers:
        _container_into(c, msg.init_containers.add())
    if pod.node_affinity is not None:
        _node_affinity_into(pod.node_affinity, msg.node_affinity)
    if pod.pod_affinity is not None:
        _pod_affinity_into(pod.pod_affinity, msg.pod_affinity)
    if pod.pod_anti_affinity is not None:
        _pod_affinity_into(pod.pod_anti_affinity, msg.pod_anti_affinity)
    _tolerations_into(pod.tolerations, msg)
    _spread_constraints_into(pod.topology_spread_constraints, msg)
    if pod.scheduling_gates:
        msg.scheduling_gates.extend(pod.scheduling_gates)
    _pod_lifecycle_into(pod, msg, deletion_timestamp=deletion_timestamp)
    for v in pod.volumes:
        msg.volumes.add(**dict(zip(_VOLUME_FIELDS, _VOLUME(v), strict=True)))
    for rc in pod.resource_claims:
        msg.resource_claims.add(
            name=rc.name, claim_name=rc.claim_name, waiting=rc.waiting,
            from_template=rc.from_template,
        )  # fmt: skip
    return msg


def _pod_maps_into(pod: models.Pod, msg: types_pb2.Pod) -> None:
    """The pod's string and quantity maps (empty maps are left unset)."""
    if pod.labels:
        msg.labels.update(pod.labels)
    if pod.annotations:
        msg.annotations.update(pod.annotations)
    if pod.overhead:
        msg.overhead.update(pod.overhead)
    if pod.pod_requests:
        msg.pod_requests.update(pod.pod_requests)
    if pod.node_selector:
        msg.node_selector.update(pod.node_selector)


def _tolerations_into(tolerations: Iterable[models.Toleration], msg: types_pb2.Pod) -> None:
    for t in tolerations:
        tol = msg.tolerations.add(key=t.key, operator=t.operator, value=t.value, effect=t.effect)
        if t.toleration_seconds is not None:
            tol.toleration_seconds = t.toleration_seconds


def _spread_constraints_into(
    constraints: Iterable[models.TopologySpreadConstraint], msg: types_pb2.Pod
) -> None:
    for s in constraints:
        tsc = msg.topology_spread_constraints.add(
            max_skew=s.max_skew,
            topology_key=s.topology_key,
            when_unsatisfiable=s.when_unsatisfiable,
            node_affinity_policy=s.node_affinity_policy,
            node_taints_policy=s.node_taints_policy,
            match_label_keys=s.match_label_keys,
        )
        if s.label_selector is not None:
            _label_selector_into(s.label_selector, tsc.label_selector)
        if s.min_domains is not None:
            tsc.min_domains = s.min_domains


def _pod_lifecycle_into(
    pod: models.Pod, msg: types_pb2.Pod, *, deletion_timestamp: float | None
) -> None:
    """Where the pod comes from and where it is going: owner, gang, creation, deletion."""
    if pod.deleting:
        timestamp_from_float(deletion_timestamp or 0.0, msg.deletion_timestamp)
        msg.deletion_timestamp.SetInParent()
    if pod.owner is not None:
        o = pod.owner
        msg.owner.SetInParent()
        msg.owner.kind = o.kind
        msg.owner.name = o.name
        msg.owner.uid = o.uid
        msg.owner.controller = o.controller
    if pod.group is not None:
        msg.group.SetInParent()
        msg.group.name = pod.group.name
        msg.group.min_member = pod.group.min_member
    if pod.creation_timestamp:
        timestamp_from_float(pod.creation_timestamp, msg.creation_timestamp)


def pod_from_proto(msg: types_pb2.Pod) -> models.Pod:
    """The model of a streamed Pod (the scheduler's hot path: one call per pod event)."""
    containers = msg.containers
    init_containers = msg.init_containers
    tolerations = msg.tolerations
    spread = msg.topology_spread_constraints
    gates = msg.scheduling_gates
    has = msg.HasField
    created = msg.creation_timestamp
    owner: models.OwnerRef | None = None
    if has("owner"):
        o = msg.owner
        owner = models.OwnerRef(o.kind, o.name, o.uid, o.controller)
    return models.Pod(
        uid=msg.uid,
        namespace=msg.namespace,
        name=msg.name,
        labels=_map(msg.labels),
        annotations=_map(msg.annotations),
        scheduler_name=msg.scheduler_name,
        node_name=msg.node_name,
        nominated_node_name=msg.nominated_node_name,
        priority=msg.priority,
        preemption_policy=msg.preemption_policy,
        containers=tuple(_container(c) for c in containers) if containers else (),
        init_containers=tuple(_container(c) for c in init_containers) if init_containers else (),
        overhead=_map(msg.overhead),
        pod_requests=_map(msg.pod_requests),
        node_selector=_map(msg.node_selector),
        node_affinity=_node_affinity(msg.node_affinity) if has("node_affinity") else None,
        pod_affinity=_pod_affinity(msg.pod_affinity) if has("pod_affinity") else None,
        pod_anti_affinity=_pod_affinity(msg.pod_anti_affinity)
        if has("pod_anti_affinity")
        else None,
        tolerations=tuple(_toleration(t) for t in tolerations) if tolerations else (),
        topology_spread_constraints=tuple(_spread_constraint(s) for s in spread) if spread else (),
        scheduling_gates=tuple(gates) if gates else (),
        phase=msg.phase,
        deleting=has("deletion_timestamp"),
        owner=owner,
        group=models.PodGroupRef(msg.group.name, msg.group.min_member) if has("group") else None,
        resource_version=msg.resource_version,
        creation_timestamp=created.seconds + created.nanos / _NANOS
        if has("creation_timestamp")
        else 0.0,
        invalid_reason=msg.invalid_reason,
        image_volumes=tuple(msg.image_volumes),
        volumes=tuple(models.PodVolume(*_VOLUME(v)) for v in msg.volumes) if msg.volumes else (),
        resource_claims=tuple(map(_pod_claim, msg.resource_claims)) if msg.resource_claims else (),
    )


def _pod_claim(msg: types_pb2.PodResourceClaim) -> models.PodResourceClaim:
    return models.PodResourceClaim(msg.name, msg.claim_name, msg.waiting, msg.from_template)
