"""Whether a request may use a device, as far as the features kube-scheduler v1.36 turns on
by default decide it: device taints, consumable capacity, partitionable devices and
binding conditions.

One conservative predicate for the allocator: where kube's answer depends on something
splitsched does not implement yet (counters shared by a device's partitions, devices
shared by several allocations, devices bound only once their conditions hold), the device
is not used. So splitsched may find no room where kube finds some, but never allocates a
device kube would refuse.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction

from splitsched.core.devices import model

_BLOCKING_EFFECTS = frozenset({model.TAINT_NO_SCHEDULE, model.TAINT_NO_EXECUTE})


def unusable_reason(device: model.Device, spec: model.RequestSpec) -> str:
    """ "" when `spec` may use `device`; otherwise why not, for logs and explanations."""
    for taint in device.taints:
        if taint.effect in _BLOCKING_EFFECTS and not any(
            tolerates(t, taint) for t in spec.tolerations
        ):
            return f"device {device.name} has taint {_show(taint)}, not tolerated"
    unsupported = _unsupported_feature(device)
    if unsupported:
        return f"device {device.name} {unsupported}, which splitsched does not support yet"
    return _capacity_problem(device, spec.capacity_requests)


def tolerates(toleration: model.DeviceToleration, taint: model.DeviceTaint) -> bool:
    """kube's resourceclaim.ToleratesTaint: an empty effect or key matches any; Exists
    matches any value, Equal (or no operator) only the same value, anything else none."""
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    if toleration.operator in ("", model.TOLERATION_EQUAL):
        return toleration.value == taint.value
    return toleration.operator == model.TOLERATION_EXISTS


def _unsupported_feature(device: model.Device) -> str:
    if device.consumes_counters:
        return "consumes shared counters (a partition of a device)"
    if device.allow_multiple_allocations:
        return "allows multiple allocations (a shared device)"
    if device.binding_conditions or device.binding_failure_conditions:
        return "has binding conditions"
    if device.binds_to_node:
        return "binds to the node it is allocated on"
    return ""


def _capacity_problem(device: model.Device, requests: Mapping[str, Fraction]) -> str:
    """kube's capacity check for a device that is not shared: each requested capacity must
    exist on the device and fit in its value (the request takes it whole)."""
    for name, amount in requests.items():
        key = _capacity_key(device, name)
        if key is None:
            return f"device {device.name} has no capacity {name}"
        if amount > device.capacity[key]:
            return f"device {device.name} has less {name} than requested"
    return ""


def _capacity_key(device: model.Device, name: str) -> str | None:
    """The device's (fully qualified) capacity a request's name means. A name with a
    domain is exact. One without means the driver's domain, which the device does not
    record; the only capacity of that identifier is taken, and when several domains have
    it, none is (the device is skipped rather than guessed)."""
    if "/" in name:
        return name if name in device.capacity else None
    found = [key for key in device.capacity if key.split("/", 1)[-1] == name]
    return found[0] if len(found) == 1 else None


def _show(taint: model.DeviceTaint) -> str:
    value = f"={taint.value}" if taint.value else ""
    return f"{taint.key}{value}:{taint.effect}"
