"""API JSON of DeviceClasses, ResourceSlices and ResourceClaims (resource.k8s.io/v1) ->
`splitsched.core.devices.model` values.

Called by the watcher once per list item and watch event. A slice or claim it cannot read
still reaches the scheduler with its identity and an `invalid_reason` (a slice also keeps
its driver, pool, generation and node selection when they can be read, so its pool is
judged invalid instead of looking incomplete; a claim keeps its status and owner, so the
devices it holds stay in use); a DeviceClass that cannot be read raises ConversionError (the
watcher skips it and logs why, and pods asking for it wait on a class that does not
exist). Attribute and capacity names are fully qualified here, once. Opaque device
configuration is kept as JSON text, to be copied into allocations untouched.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from fractions import Fraction
from typing import Any, TypeVar

from splitsched.core import models
from splitsched.core.convert.fields import (
    INT64_MAX,
    BadField,
    ConversionError,
    as_bool,
    as_int,
    as_list,
    as_object,
    as_str,
    as_str_tuple,
    at,
    each,
    named,
    required_str,
    show,
    within,
)
from splitsched.core.convert.selectors import node_selector_term
from splitsched.core.devices import model, semver
from splitsched.core.quantity import QuantityError, parse_quantity


def _identity(obj: object) -> tuple[str, str, str, str]:
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    meta = meta if isinstance(meta, dict) else {}
    text = [meta.get(k) for k in ("namespace", "name", "uid", "resourceVersion")]
    namespace, name, uid, version = (t if isinstance(t, str) else "" for t in text)
    return namespace, name, uid, version


def _version(meta: dict[str, Any]) -> str:
    return as_str(meta.get("resourceVersion"), "metadata.resourceVersion")


# ---- DeviceClass ------------------------------------------------------------------------


def _selector(value: object) -> str:
    """A DeviceSelector's CEL expression ("" for a selector of a kind not known here: the
    allocator refuses it in kube's words)."""
    return as_str(
        as_object(as_object(value, "").get("cel"), "cel").get("expression"), "cel.expression"
    )


def _configuration(value: object) -> str:
    """A DeviceConfiguration (its `opaque` driver parameters) as JSON text."""
    config = as_object(value, "")
    return json.dumps({k: v for k, v in config.items() if k != "requests"}, sort_keys=True)


def read_class(obj: object) -> model.DeviceClass:
    obj, meta, name = named(obj)
    spec = as_object(obj.get("spec"), "spec")
    return model.DeviceClass(
        name=name,
        selectors=each(spec.get("selectors"), "spec.selectors", _selector),
        config=each(spec.get("config"), "spec.config", _configuration),
        resource_version=_version(meta),
    )


# ---- ResourceSlice ----------------------------------------------------------------------


def _attribute(value: object) -> model.AttributeValue:
    attr = as_object(value, "")
    kinds = [k for k in ("int", "bool", "string", "version") if attr.get(k) is not None]
    if len(kinds) != 1:
        raise BadField("", f"expected exactly one of int, bool, string, version; got {show(attr)}")
    raw = attr[kinds[0]]
    if kinds[0] == "int":
        return as_int(raw, "int", low=-INT64_MAX - 1, high=INT64_MAX)
    if kinds[0] == "bool":
        return as_bool(raw, "bool")
    if kinds[0] == "string":
        return as_str(raw, "string")
    try:
        return semver.parse(as_str(raw, "version"))
    except ValueError as e:
        raise BadField("version", str(e)) from None


def _quantity(raw: object, path: str) -> Fraction:
    try:
        return parse_quantity(raw, field=path)  # type: ignore[arg-type]
    except QuantityError as e:
        raise BadField(path, e.reason) from None


def _capacity(value: object) -> Fraction:
    """A DeviceCapacity's or a Counter's value (a capacity's requestPolicy is not read:
    only shared devices have one, and the allocator does not use those yet)."""
    return _quantity(as_object(value, "").get("value"), "value")


def _counters(value: object, path: str) -> dict[str, Fraction]:
    return {
        name: at(item, f"{path}[{name}]", _capacity)
        for name, item in as_object(value, path).items()
    }


def _counter_set(value: object, name_key: str) -> model.CounterSet:
    """A sharedCounters entry (its name under "name") or a consumesCounters entry (the set
    it takes from under "counterSet")."""
    raw = as_object(value, "")
    return model.CounterSet(required_str(raw, name_key), _counters(raw.get("counters"), "counters"))


def _taint(value: object) -> model.DeviceTaint:
    raw = as_object(value, "")
    return model.DeviceTaint(
        key=required_str(raw, "key"),
        value=as_str(raw.get("value"), "value"),
        effect=required_str(raw, "effect"),
    )


def _qualified(value: object, path: str, driver: str, convert: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, item in as_object(value, path).items():
        out[model.qualify(key, driver)] = at(item, f"{path}[{key}]", convert)
    return out


def _node_selector(obj: dict[str, Any]) -> tuple[models.NodeSelectorTerm, ...] | None:
    selector = obj.get("nodeSelector")
    if selector is None:
        return None
    raw_terms = as_object(selector, "nodeSelector").get("nodeSelectorTerms")
    return each(raw_terms, "nodeSelector.nodeSelectorTerms", node_selector_term)


def _where(obj: dict[str, Any]) -> dict[str, Any]:
    """nodeName, nodeSelector and allNodes, as the model's fields."""
    return {
        "node_name": as_str(obj.get("nodeName"), "nodeName"),
        "node_selector": _node_selector(obj),
        "all_nodes": as_bool(obj.get("allNodes"), "allNodes"),
    }


def _device(value: object, driver: str) -> model.Device:
    raw = as_object(value, "")
    return model.Device(
        name=required_str(raw, "name"),
        attributes=_qualified(raw.get("attributes"), "attributes", driver, _attribute),
        capacity=_qualified(raw.get("capacity"), "capacity", driver, _capacity),
        taints=each(raw.get("taints"), "taints", _taint),
        consumes_counters=each(
            raw.get("consumesCounters"), "consumesCounters", lambda c: _counter_set(c, "counterSet")
        ),
        allow_multiple_allocations=as_bool(
            raw.get("allowMultipleAllocations"), "allowMultipleAllocations"
        ),
        binding_conditions=as_str_tuple(raw.get("bindingConditions"), "bindingConditions"),
        binding_failure_conditions=as_str_tuple(
            raw.get("bindingFailureConditions"), "bindingFailureConditions"
        ),
        binds_to_node=as_bool(raw.get("bindsToNode"), "bindsToNode"),
        **_where(raw),
    )


def read_slice(obj: object) -> model.ResourceSlice:
    obj, meta, name = named(obj)
    spec = as_object(obj.get("spec"), "spec")
    driver = _required(spec, "spec", "driver")
    pool = as_object(spec.get("pool"), "spec.pool")
    devices = each(spec.get("devices"), "spec.devices", lambda d: _device(d, driver))
    names = [d.name for d in devices]
    if len(set(names)) != len(names):
        duplicate = next(n for n in names if names.count(n) > 1)
        raise BadField("spec.devices", f"duplicate device name {duplicate}")
    return model.ResourceSlice(
        name=name,
        driver=driver,
        pool=_required(pool, "spec.pool", "name"),
        generation=as_int(pool.get("generation", 0), "spec.pool.generation", low=0, high=INT64_MAX),
        slice_count=as_int(
            pool.get("resourceSliceCount", 1), "spec.pool.resourceSliceCount", low=1, high=INT64_MAX
        ),
        per_device_node_selection=as_bool(
            spec.get("perDeviceNodeSelection"), "spec.perDeviceNodeSelection"
        ),
        devices=devices,
        resource_version=_version(meta),
        shared_counters=each(
            spec.get("sharedCounters"), "spec.sharedCounters", lambda c: _counter_set(c, "name")
        ),
        **_where_in(spec, "spec"),
    )


def _required(obj: dict[str, Any], path: str, key: str) -> str:
    try:
        return required_str(obj, key)
    except BadField as e:
        raise within(e, path) from None


def _where_in(obj: dict[str, Any], path: str) -> dict[str, Any]:
    try:
        return _where(obj)
    except BadField as e:
        raise within(e, path) from None


# ---- ResourceClaim ----------------------------------------------------------------------

_MODES = frozenset({model.ALLOCATION_MODE_EXACT_COUNT, model.ALLOCATION_MODE_ALL})


def _request_spec(raw: dict[str, Any], name: str) -> model.RequestSpec:
    mode = as_str(raw.get("allocationMode"), "allocationMode") or model.ALLOCATION_MODE_EXACT_COUNT
    count = raw.get("count")
    default = 1 if mode == model.ALLOCATION_MODE_EXACT_COUNT else 0
    return model.RequestSpec(
        name=name,
        device_class=as_str(raw.get("deviceClassName"), "deviceClassName"),
        selectors=each(raw.get("selectors"), "selectors", _selector),
        mode=mode,
        count=default if count is None else as_int(count, "count", low=0, high=INT64_MAX),
        admin_access=as_bool(raw.get("adminAccess"), "adminAccess"),
        tolerations=each(raw.get("tolerations"), "tolerations", _toleration),
        capacity_requests=_capacity_requests(raw.get("capacity")),
    )


def _toleration(value: object) -> model.DeviceToleration:
    raw = as_object(value, "")
    return model.DeviceToleration(
        key=as_str(raw.get("key"), "key"),
        operator=as_str(raw.get("operator"), "operator") or model.TOLERATION_EQUAL,
        value=as_str(raw.get("value"), "value"),
        effect=as_str(raw.get("effect"), "effect"),
    )


def _capacity_requests(value: object) -> dict[str, Fraction]:
    """capacity.requests: quantities by capacity name, the names as written."""
    requests = as_object(as_object(value, "capacity").get("requests"), "capacity.requests")
    return {
        name: _quantity(amount, f"capacity.requests[{name}]") for name, amount in requests.items()
    }


def _request(value: object) -> model.DeviceRequest:
    raw = as_object(value, "")
    name = required_str(raw, "name")
    exactly = raw.get("exactly")
    if exactly is not None:
        return model.DeviceRequest(
            name, exactly=at(exactly, "exactly", lambda e: _request_spec(as_object(e, ""), name))
        )

    def sub(value: object) -> model.RequestSpec:
        raw_sub = as_object(value, "")
        return _request_spec(raw_sub, f"{name}/{required_str(raw_sub, 'name')}")

    return model.DeviceRequest(
        name, first_available=each(raw.get("firstAvailable"), "firstAvailable", sub)
    )


def _constraint(value: object) -> model.MatchAttribute:
    raw = as_object(value, "")
    return model.MatchAttribute(
        attribute=as_str(raw.get("matchAttribute"), "matchAttribute"),
        requests=as_str_tuple(raw.get("requests"), "requests"),
        distinct_attribute=as_str(raw.get("distinctAttribute"), "distinctAttribute"),
    )


def _claim_config(value: object) -> model.ClaimConfig:
    raw = as_object(value, "")
    return model.ClaimConfig(as_str_tuple(raw.get("requests"), "requests"), _configuration(raw))


def _result(value: object) -> model.DeviceResult:
    raw = as_object(value, "")
    return model.DeviceResult(
        request=required_str(raw, "request"),
        driver=required_str(raw, "driver"),
        pool=required_str(raw, "pool"),
        device=required_str(raw, "device"),
        admin_access=as_bool(raw.get("adminAccess"), "adminAccess"),
    )


def _allocated_config(value: object) -> model.AllocatedConfig:
    raw = as_object(value, "")
    configuration = {k: v for k, v in raw.items() if k not in ("source", "requests")}
    return model.AllocatedConfig(
        as_str(raw.get("source"), "source"),
        as_str_tuple(raw.get("requests"), "requests"),
        json.dumps(configuration, sort_keys=True),
    )


def _allocation(value: object) -> model.Allocation | None:
    if value is None:
        return None
    raw = as_object(value, "")
    devices = as_object(raw.get("devices"), "devices")
    return model.Allocation(
        results=each(devices.get("results"), "devices.results", _result),
        node_selector=_where(raw)["node_selector"],
        config=each(devices.get("config"), "devices.config", _allocated_config),
    )


def _consumer(value: object) -> model.ConsumerRef:
    raw = as_object(value, "")
    return model.ConsumerRef(
        resource=as_str(raw.get("resource"), "resource"),
        name=as_str(raw.get("name"), "name"),
        uid=as_str(raw.get("uid"), "uid"),
        api_group=as_str(raw.get("apiGroup"), "apiGroup"),
    )


def _owner(meta: dict[str, Any]) -> models.OwnerRef | None:
    """The controller among metadata.ownerReferences (kube's GetControllerOf: the first
    with controller true), if any."""
    for i, raw in enumerate(as_list(meta.get("ownerReferences"), "metadata.ownerReferences")):
        path = f"metadata.ownerReferences[{i}]"
        ref = as_object(raw, path)
        if as_bool(ref.get("controller"), f"{path}.controller"):
            return models.OwnerRef(
                kind=as_str(ref.get("kind"), f"{path}.kind"),
                name=as_str(ref.get("name"), f"{path}.name"),
                uid=as_str(ref.get("uid"), f"{path}.uid"),
                controller=True,
            )
    return None


def read_claim(obj: object) -> model.ResourceClaim:
    obj, meta, name = named(obj)
    devices = as_object(as_object(obj.get("spec"), "spec").get("devices"), "spec.devices")
    status = as_object(obj.get("status"), "status")
    return model.ResourceClaim(
        namespace=as_str(meta.get("namespace"), "metadata.namespace") or "default",
        name=name,
        uid=as_str(meta.get("uid"), "metadata.uid"),
        resource_version=_version(meta),
        requests=each(devices.get("requests"), "spec.devices.requests", _request),
        constraints=each(devices.get("constraints"), "spec.devices.constraints", _constraint),
        config=each(devices.get("config"), "spec.devices.config", _claim_config),
        allocation=at(status.get("allocation"), "status.allocation", _allocation),
        reserved_for=each(status.get("reservedFor"), "status.reservedFor", _consumer),
        deleting=meta.get("deletionTimestamp") is not None,
        owner=_owner(meta),
    )


# ---- the watcher's entry points -----------------------------------------------------------


def class_from_k8s(obj: Mapping[str, Any]) -> model.DeviceClass:
    """A DeviceClass from its API JSON; raises ConversionError naming the field."""
    try:
        return read_class(obj)
    except BadField as e:
        raise ConversionError(f"deviceclass {_identity(obj)[1] or '<unnamed>'}", e.detail) from None


def slice_from_k8s(obj: Mapping[str, Any]) -> model.ResourceSlice:
    """A ResourceSlice from its API JSON; one that cannot be read keeps what can be read of
    where it belongs (its pool, generation and node selection) and says why in
    `invalid_reason`, so its pool is not used."""
    try:
        return read_slice(obj)
    except BadField as e:
        _, name, _, version = _identity(obj)
        spec = _loose(obj.get("spec"))
        pool = _loose(spec.get("pool"))
        generation, count = pool.get("generation", 0), pool.get("resourceSliceCount", 1)
        return model.ResourceSlice(
            name=name, driver=_loose_str(spec, "driver"), pool=_loose_str(pool, "name"),
            generation=generation if _is_int(generation, 0) else model.UNKNOWN_GENERATION,
            slice_count=count if _is_int(count, 1) else 1,
            node_name=_loose_str(spec, "nodeName"), all_nodes=spec.get("allNodes") is True,
            node_selector=_or(None, lambda: _node_selector(spec)),
            per_device_node_selection=spec.get("perDeviceNodeSelection") is True,
            resource_version=version, invalid_reason=e.detail,
        )  # fmt: skip


def _is_int(value: object, low: int) -> bool:
    return type(value) is int and low <= value <= INT64_MAX


_T = TypeVar("_T")


def _or(fallback: _T, read: Callable[[], _T]) -> _T:
    """What `read` reads, or `fallback` when that part cannot be read either."""
    try:
        return read()
    except BadField:
        return fallback


def _loose(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _loose_str(obj: dict[str, Any], key: str) -> str:
    value = obj.get(key)
    return value if isinstance(value, str) else ""


def claim_from_k8s(obj: Mapping[str, Any]) -> model.ResourceClaim:
    """A ResourceClaim from its API JSON; one that cannot be read keeps its identity and
    says why in `invalid_reason`, and the pods using it wait with that reason. Its status
    and owner are still read, each on its own, so that the devices its allocation holds
    stay in use when only its spec is unreadable."""
    try:
        return read_claim(obj)
    except BadField as e:
        namespace, name, uid, version = _identity(obj)
        meta = _loose(obj.get("metadata"))
        status = _loose(obj.get("status"))
        return model.ResourceClaim(
            namespace=namespace or "default", name=name, uid=uid, resource_version=version,
            allocation=_or(None, lambda: _allocation(status.get("allocation"))),
            reserved_for=_or((), lambda: each(status.get("reservedFor"), "", _consumer)),
            deleting=meta.get("deletionTimestamp") is not None,
            owner=_or(None, lambda: _owner(meta)),
            invalid_reason=e.detail,
        )  # fmt: skip
