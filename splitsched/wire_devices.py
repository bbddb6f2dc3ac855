"""Conversion between `splitsched.core.devices.model` values and their
`splitsched.v1.types_pb2` messages: DeviceClass, ResourceSlice, ResourceClaim and a claim's
DeviceAllocation.

The watcher encodes what it observes with the `*_to_proto` functions; the scheduler decodes
the stream with `devices_from_event`. One to one, with `splitsched.wire`'s conventions for
node selector terms, and these: a node selector None <-> `has_node_selector` false; a
capacity's, counter's or capacity request's exact fraction <-> "numerator/denominator"; a
claim not allocated <-> no `allocation` field; a claim without controller owner <-> no
`owner` field.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from fractions import Fraction

from splitsched import wire
from splitsched.core import models
from splitsched.core.devices import model, semver
from splitsched.v1 import types_pb2, watcher_pb2

DeviceObject = model.DeviceClass | model.ResourceSlice | model.ResourceClaim

__all__ = [
    "DeviceObject",
    "allocation_from_proto",
    "allocation_to_proto",
    "claim_to_proto",
    "class_to_proto",
    "devices_from_event",
    "slice_to_proto",
]


# ---- encode ---------------------------------------------------------------------------------


def _terms_into(terms: Iterable[models.NodeSelectorTerm], out: object) -> None:
    for term in terms:
        wire._node_selector_term_into(term, out.add())  # type: ignore[attr-defined]


def _attribute_into(value: model.AttributeValue, out: types_pb2.DeviceAttribute) -> None:
    if isinstance(value, bool):
        out.bool = value
    elif isinstance(value, int):
        out.int = value
    elif isinstance(value, str):
        out.string = value
    else:
        out.version = value.text


def _fraction(amount: Fraction) -> str:
    return f"{amount.numerator}/{amount.denominator}"


def _amounts(amounts: Mapping[str, Fraction]) -> dict[str, str]:
    return {name: _fraction(amount) for name, amount in amounts.items()}


def _counter_sets(sets: Iterable[model.CounterSet]) -> list[types_pb2.CounterSet]:
    return [types_pb2.CounterSet(name=c.name, counters=_amounts(c.counters)) for c in sets]


def _device_into(device: model.Device, out: types_pb2.Device) -> None:
    out.name = device.name
    for name, value in device.attributes.items():
        _attribute_into(value, out.attributes[name])
    out.capacity.update(_amounts(device.capacity))
    out.node_name, out.all_nodes = device.node_name, device.all_nodes
    if device.node_selector is not None:
        out.has_node_selector = True
        _terms_into(device.node_selector, out.node_selector)
    for taint in device.taints:
        out.taints.add(key=taint.key, value=taint.value, effect=taint.effect)
    out.consumes_counters.extend(_counter_sets(device.consumes_counters))
    out.allow_multiple_allocations = device.allow_multiple_allocations
    out.binding_conditions.extend(device.binding_conditions)
    out.binding_failure_conditions.extend(device.binding_failure_conditions)
    out.binds_to_node = device.binds_to_node


def slice_to_proto(s: model.ResourceSlice) -> types_pb2.ResourceSlice:
    msg = types_pb2.ResourceSlice(
        name=s.name, driver=s.driver, pool=s.pool, generation=s.generation,
        slice_count=s.slice_count, node_name=s.node_name, all_nodes=s.all_nodes,
        per_device_node_selection=s.per_device_node_selection,
        resource_version=s.resource_version, invalid_reason=s.invalid_reason,
    )  # fmt: skip
    if s.node_selector is not None:
        msg.has_node_selector = True
        _terms_into(s.node_selector, msg.node_selector)
    for device in s.devices:
        _device_into(device, msg.devices.add())
    msg.shared_counters.extend(_counter_sets(s.shared_counters))
    return msg


def class_to_proto(c: model.DeviceClass) -> types_pb2.DeviceClass:
    return types_pb2.DeviceClass(
        name=c.name, selectors=c.selectors, config=c.config, resource_version=c.resource_version
    )


def _spec_to_proto(spec: model.RequestSpec) -> types_pb2.DeviceRequestSpec:
    return types_pb2.DeviceRequestSpec(
        name=spec.name, device_class=spec.device_class, selectors=spec.selectors,
        mode=spec.mode, count=spec.count, admin_access=spec.admin_access,
        tolerations=map(_toleration_to_proto, spec.tolerations),
        capacity_requests=_amounts(spec.capacity_requests),
    )  # fmt: skip


def _toleration_to_proto(t: model.DeviceToleration) -> types_pb2.DeviceToleration:
    return types_pb2.DeviceToleration(
        key=t.key, operator=t.operator, value=t.value, effect=t.effect
    )


def allocation_to_proto(a: model.Allocation, out: types_pb2.DeviceAllocation) -> None:
    out.SetInParent()
    for r in a.results:
        out.results.add(
            request=r.request, driver=r.driver, pool=r.pool, device=r.device,
            admin_access=r.admin_access,
        )  # fmt: skip
    if a.node_selector is not None:
        out.has_node_selector = True
        _terms_into(a.node_selector, out.node_selector)
    for c in a.config:
        out.config.add(source=c.source, requests=c.requests, configuration=c.configuration)


def claim_to_proto(c: model.ResourceClaim) -> types_pb2.ResourceClaim:
    msg = types_pb2.ResourceClaim(
        namespace=c.namespace, name=c.name, uid=c.uid, resource_version=c.resource_version,
        deleting=c.deleting, invalid_reason=c.invalid_reason,
    )  # fmt: skip
    for request in c.requests:
        out = msg.requests.add(name=request.name)
        if request.exactly is not None:
            out.exactly.CopyFrom(_spec_to_proto(request.exactly))
        out.first_available.extend(_spec_to_proto(s) for s in request.first_available)
    for constraint in c.constraints:
        msg.constraints.add(
            attribute=constraint.attribute, requests=constraint.requests,
            distinct_attribute=constraint.distinct_attribute,
        )  # fmt: skip
    for config in c.config:
        msg.config.add(requests=config.requests, configuration=config.configuration)
    if c.allocation is not None:
        allocation_to_proto(c.allocation, msg.allocation)
    for ref in c.reserved_for:
        msg.reserved_for.add(
            resource=ref.resource, name=ref.name, uid=ref.uid, api_group=ref.api_group
        )
    if c.owner is not None:
        o = c.owner
        msg.owner.CopyFrom(
            types_pb2.OwnerReference(kind=o.kind, name=o.name, uid=o.uid, controller=o.controller)
        )
    return msg


# ---- decode ---------------------------------------------------------------------------------


def _terms(
    has: bool, msgs: Iterable[types_pb2.NodeSelectorTerm]
) -> tuple[models.NodeSelectorTerm, ...] | None:
    return tuple(wire._node_selector_term(t) for t in msgs) if has else None


def _attribute(msg: types_pb2.DeviceAttribute) -> model.AttributeValue:
    which = msg.WhichOneof("value")
    if which == "int":
        return msg.int
    if which == "bool":
        return msg.bool
    if which == "version":
        return semver.parse(msg.version)
    return msg.string


def _fractions(msg: Mapping[str, str]) -> dict[str, Fraction]:
    return {k: Fraction(v) for k, v in msg.items()}


def _sets(msgs: Iterable[types_pb2.CounterSet]) -> tuple[model.CounterSet, ...]:
    return tuple(model.CounterSet(c.name, _fractions(c.counters)) for c in msgs)


def _device(msg: types_pb2.Device) -> model.Device:
    return model.Device(
        name=msg.name,
        attributes={k: _attribute(v) for k, v in msg.attributes.items()},
        capacity=_fractions(msg.capacity),
        node_name=msg.node_name,
        node_selector=_terms(msg.has_node_selector, msg.node_selector),
        all_nodes=msg.all_nodes,
        taints=tuple(model.DeviceTaint(t.key, t.value, t.effect) for t in msg.taints),
        consumes_counters=_sets(msg.consumes_counters),
        allow_multiple_allocations=msg.allow_multiple_allocations,
        binding_conditions=tuple(msg.binding_conditions),
        binding_failure_conditions=tuple(msg.binding_failure_conditions),
        binds_to_node=msg.binds_to_node,
    )


def _slice(msg: types_pb2.ResourceSlice) -> model.ResourceSlice:
    return model.ResourceSlice(
        name=msg.name, driver=msg.driver, pool=msg.pool, generation=msg.generation,
        slice_count=msg.slice_count, node_name=msg.node_name,
        node_selector=_terms(msg.has_node_selector, msg.node_selector),
        all_nodes=msg.all_nodes, per_device_node_selection=msg.per_device_node_selection,
        devices=tuple(_device(d) for d in msg.devices),
        resource_version=msg.resource_version, invalid_reason=msg.invalid_reason,
        shared_counters=_sets(msg.shared_counters),
    )  # fmt: skip


def _class(msg: types_pb2.DeviceClass) -> model.DeviceClass:
    return model.DeviceClass(
        msg.name, tuple(msg.selectors), tuple(msg.config), msg.resource_version
    )


def _spec(msg: types_pb2.DeviceRequestSpec) -> model.RequestSpec:
    return model.RequestSpec(
        msg.name, msg.device_class, tuple(msg.selectors), msg.mode, msg.count, msg.admin_access,
        tolerations=tuple(
            model.DeviceToleration(t.key, t.operator, t.value, t.effect) for t in msg.tolerations
        ),
        capacity_requests=_fractions(msg.capacity_requests),
    )  # fmt: skip


def allocation_from_proto(msg: types_pb2.DeviceAllocation) -> model.Allocation:
    return model.Allocation(
        results=tuple(
            model.DeviceResult(r.request, r.driver, r.pool, r.device, r.admin_access)
            for r in msg.results
        ),
        node_selector=_terms(msg.has_node_selector, msg.node_selector),
        config=tuple(
            model.AllocatedConfig(c.source, tuple(c.requests), c.configuration) for c in msg.config
        ),
    )


def _claim(msg: types_pb2.ResourceClaim) -> model.ResourceClaim:
    return model.ResourceClaim(
        namespace=msg.namespace, name=msg.name, uid=msg.uid,
        resource_version=msg.resource_version,
        requests=tuple(
            model.DeviceRequest(
                r.name, _spec(r.exactly) if r.HasField("exactly") else None,
                tuple(_spec(s) for s in r.first_available),
            )
            for r in msg.requests
        ),
        constraints=tuple(
            model.MatchAttribute(c.attribute, tuple(c.requests), c.distinct_attribute)
            for c in msg.constraints
        ),
        config=tuple(model.ClaimConfig(tuple(c.requests), c.configuration) for c in msg.config),
        allocation=allocation_from_proto(msg.allocation) if msg.HasField("allocation") else None,
        reserved_for=tuple(
            model.ConsumerRef(r.resource, r.name, r.uid, r.api_group) for r in msg.reserved_for
        ),
        deleting=msg.deleting, invalid_reason=msg.invalid_reason,
        owner=_owner(msg.owner) if msg.HasField("owner") else None,
    )  # fmt: skip


def _owner(msg: types_pb2.OwnerReference) -> models.OwnerRef:
    return models.OwnerRef(msg.kind, msg.name, msg.uid, msg.controller)


def devices_from_event(event: watcher_pb2.ClusterEvent) -> DeviceObject | None:
    """The DRA object a ClusterEvent carries (None for any other object)."""
    which = event.WhichOneof("object")
    if which == "device_class":
        return _class(event.device_class)
    if which == "resource_slice":
        return _slice(event.resource_slice)
    if which == "resource_claim":
        return _claim(event.resource_claim)
    return None


def claim_write_to_proto(write: model.ClaimWrite, out: types_pb2.ClaimWrite) -> None:
    out.claim_namespace, out.claim_name, out.claim_uid = write.namespace, write.name, write.uid
    if write.allocation is not None:
        allocation_to_proto(write.allocation, out.allocation)


def claim_write_from_proto(msg: types_pb2.ClaimWrite) -> model.ClaimWrite:
    allocation = allocation_from_proto(msg.allocation) if msg.HasField("allocation") else None
    return model.ClaimWrite(msg.claim_namespace, msg.claim_name, msg.claim_uid, allocation)
