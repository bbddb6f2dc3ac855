"""Dynamic Resource Allocation (resource.k8s.io/v1) as scheduling reads it: DeviceClasses,
ResourceSlices, ResourceClaims and the allocation a decision carries to the binder.

Frozen values, like `splitsched.core.storage`'s. Attribute and capacity names are kept
fully qualified ("gpu.example.com/model"): a slice may leave out its driver's domain, and
`qualify` puts it back once, so the allocator and the selectors never guess.

kube-scheduler v1.36 turns on by default device taints (DRADeviceTaints), partitionable
devices' counters (DRAPartitionableDevices), consumable capacity and distinctAttribute
(DRAConsumableCapacity) and binding conditions (DRADeviceBindingConditions): their fields
are read here, and `splitsched.core.devices.usable` says which devices a request may not
use because of them. DeviceTaintRules (beta but off by default) and list-typed
attributes (alpha) are not read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction

from splitsched.core import models

ALLOCATION_MODE_EXACT_COUNT = "ExactCount"
ALLOCATION_MODE_ALL = "All"
#: A device taint's effects that keep a request from a device it does not tolerate; any
#: other ("None", or one added later) is informational (kube: taintPreventsAllocation).
TAINT_NO_SCHEDULE = "NoSchedule"
TAINT_NO_EXECUTE = "NoExecute"
TOLERATION_EXISTS = "Exists"
TOLERATION_EQUAL = "Equal"
#: kube's limits: results per claim (resourceapi.AllocationResultsMaxSize) and pods a
#: claim may be reserved for (ResourceClaimReservedForMaxSize).
MAX_ALLOCATION_RESULTS = 32
MAX_RESERVED_FOR = 256


@dataclass(frozen=True, slots=True, order=True)
class Version:
    """A semantic version attribute ("1.2.3-rc.1"): compared by semver precedence, so it
    is kept as its parsed key (`splitsched.core.devices.semver`) beside its text."""

    key: tuple[int, int, int, int, tuple[tuple[int, int | str], ...]]
    text: str = field(compare=False)


#: A device attribute's value: DeviceAttribute's int, bool, string or version.
AttributeValue = bool | int | str | Version


def same_attribute(a: AttributeValue, b: AttributeValue) -> bool:
    """matchAttribute's equality: same type and same value (True is not 1)."""
    return type(a) is type(b) and a == b


def qualify(name: str, driver: str) -> str:
    """A slice's attribute or capacity name, fully qualified: "model" of driver
    "gpu.example.com" is "gpu.example.com/model"; a name with a domain keeps it."""
    return name if "/" in name else f"{driver}/{name}"


@dataclass(frozen=True, slots=True)
class DeviceTaint:
    """One of a device's taints: requests that do not tolerate it may not use the device
    when its effect is NoSchedule or NoExecute."""

    key: str
    value: str = ""
    effect: str = TAINT_NO_SCHEDULE


@dataclass(frozen=True, slots=True)
class DeviceToleration:
    """One of a request's tolerations, matched against device taints as kube matches them
    (an empty key or effect matches any; operator Exists ignores the value)."""

    key: str = ""
    operator: str = TOLERATION_EQUAL
    value: str = ""
    effect: str = ""


@dataclass(frozen=True, slots=True)
class CounterSet:
    """A named set of counters: a slice's sharedCounters entry (what the pool has), or a
    device's consumesCounters entry (what allocating the device takes from the set of that
    name). Amounts are exact fractions of the quantity's base unit, like capacity."""

    name: str
    counters: Mapping[str, Fraction] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Device:
    """One device of a slice. `node_name`, `node_selector` and `all_nodes` are set only in
    a slice with perDeviceNodeSelection, where each device says where it can be used.

    The fields after those come with features kube v1.36 turns on by default: taints,
    partitions (`consumes_counters`), shared devices (`allow_multiple_allocations`) and
    devices that are bound only once conditions hold (`binding_conditions`,
    `binding_failure_conditions`, `binds_to_node`)."""

    name: str
    attributes: Mapping[str, AttributeValue] = field(default_factory=dict)
    capacity: Mapping[str, Fraction] = field(default_factory=dict)
    node_name: str = ""
    node_selector: tuple[models.NodeSelectorTerm, ...] | None = None
    all_nodes: bool = False
    taints: tuple[DeviceTaint, ...] = ()
    consumes_counters: tuple[CounterSet, ...] = ()
    allow_multiple_allocations: bool = False
    binding_conditions: tuple[str, ...] = ()
    binding_failure_conditions: tuple[str, ...] = ()
    binds_to_node: bool = False


@dataclass(frozen=True, slots=True)
class ResourceSlice:
    """A ResourceSlice: some of a driver's pool of devices. Exactly one of `node_name`,
    `node_selector`, `all_nodes` and `per_device_node_selection` says where the devices can
    be used. A slice has either `devices` or `shared_counters` (the counter sets its pool's
    devices consume from). `invalid_reason` is set when the watcher could not read it; its
    pool is then left alone, as kube leaves a pool it cannot trust; its `generation` is
    UNKNOWN_GENERATION when that could not be read either."""

    name: str
    driver: str
    pool: str
    generation: int = 0
    slice_count: int = 1
    node_name: str = ""
    node_selector: tuple[models.NodeSelectorTerm, ...] | None = None
    all_nodes: bool = False
    per_device_node_selection: bool = False
    devices: tuple[Device, ...] = ()
    resource_version: str = ""
    invalid_reason: str = ""
    shared_counters: tuple[CounterSet, ...] = ()


#: The generation of a slice the watcher could not read, when that was unreadable too:
#: such a slice makes its pool invalid whatever generation the pool is at.
UNKNOWN_GENERATION = -1


@dataclass(frozen=True, slots=True)
class DeviceClass:
    """A DeviceClass: CEL selectors every device of the class must pass, and its
    configuration entries (each a DeviceConfiguration as JSON text, copied into every
    allocation the class serves)."""

    name: str
    selectors: tuple[str, ...] = ()
    config: tuple[str, ...] = ()
    resource_version: str = ""


@dataclass(frozen=True, slots=True)
class ClaimConfig:
    """One of a claim's spec.devices.config: a DeviceConfiguration as JSON text, for the
    requests it names (every request when empty)."""

    requests: tuple[str, ...]
    configuration: str


@dataclass(frozen=True, slots=True)
class AllocatedConfig:
    """One of status.allocation.devices.config: where it came from ("FromClass" or
    "FromClaim"), the requests it serves, and the DeviceConfiguration as JSON text."""

    source: str
    requests: tuple[str, ...]
    configuration: str


@dataclass(frozen=True, slots=True)
class RequestSpec:
    """What an `exactly` request or one `firstAvailable` subrequest asks for. `name` is
    what the allocation records: "gpu" for an exact request, "gpu/big" for a subrequest.
    `capacity_requests` (capacity.requests) is how much of each capacity a device must
    have, keyed by the name as written (a name without a domain is the device driver's)."""

    name: str
    device_class: str
    selectors: tuple[str, ...] = ()
    mode: str = ALLOCATION_MODE_EXACT_COUNT
    count: int = 1
    admin_access: bool = False
    tolerations: tuple[DeviceToleration, ...] = ()
    capacity_requests: Mapping[str, Fraction] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class DeviceRequest:
    """One of a claim's spec.devices.requests: an exact request, or a prioritized list of
    subrequests of which the first that can be met is taken."""

    name: str
    exactly: RequestSpec | None = None
    first_available: tuple[RequestSpec, ...] = ()

    def alternatives(self) -> tuple[RequestSpec, ...]:
        return (self.exactly,) if self.exactly is not None else self.first_available


@dataclass(frozen=True, slots=True)
class MatchAttribute:
    """One of a claim's constraints on the devices allocated for `requests` (all of the
    claim's requests when empty); names are fully qualified.

    - matchAttribute: `attribute` set; every device has the same value of it;
    - distinctAttribute: `distinct_attribute` set and `attribute` empty; every device has
      the attribute, each with a different value. Kept apart from `attribute` so that code
      which knows only matchAttribute sees an empty constraint, never a wrong one;
    - neither: a constraint of a kind not known here (kube: "empty constraint")."""

    attribute: str
    requests: tuple[str, ...] = ()
    distinct_attribute: str = ""


@dataclass(frozen=True, slots=True)
class DeviceResult:
    """One allocated device: status.allocation.devices.results[]."""

    request: str
    driver: str
    pool: str
    device: str
    admin_access: bool = False

    @property
    def device_id(self) -> tuple[str, str, str]:
        return (self.driver, self.pool, self.device)


@dataclass(frozen=True, slots=True)
class Allocation:
    """A claim's status.allocation: its devices, and the nodes they can be used from (None:
    every node, for devices that are all network-attached with allNodes)."""

    results: tuple[DeviceResult, ...]
    node_selector: tuple[models.NodeSelectorTerm, ...] | None = None
    config: tuple[AllocatedConfig, ...] = ()


@dataclass(frozen=True, slots=True)
class ConsumerRef:
    """An entry of status.reservedFor: the pod (or other consumer) using the claim."""

    resource: str
    name: str
    uid: str
    api_group: str = ""


@dataclass(frozen=True, slots=True)
class ResourceClaim:
    """What scheduling reads of a ResourceClaim. `owner` is its controller owner (for a
    claim made from a pod's template, that pod). `invalid_reason` is set when the watcher
    could not read it; the pods using it then wait with that reason, while what could be
    read of its status (allocation, reservedFor) still counts, so its devices stay in use."""

    namespace: str
    name: str
    uid: str = ""
    resource_version: str = ""
    requests: tuple[DeviceRequest, ...] = ()
    constraints: tuple[MatchAttribute, ...] = ()
    config: tuple[ClaimConfig, ...] = ()
    allocation: Allocation | None = None
    reserved_for: tuple[ConsumerRef, ...] = ()
    deleting: bool = False
    invalid_reason: str = ""
    owner: models.OwnerRef | None = None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class ClaimRef:
    """A claim by name and uid: one DynamicResources' PostFilter asks to deallocate (a
    claim of another uid, made again under the name, is not touched)."""

    namespace: str
    name: str
    uid: str


@dataclass(frozen=True, slots=True)
class ClaimWrite:
    """What the binder writes for one of a pod's claims before its Binding (kube's
    DynamicResources PreBind): `allocation`, when the scheduler chose one (None: the claim
    is allocated already), and the pod added to reservedFor."""

    namespace: str
    name: str
    uid: str
    allocation: Allocation | None = None
