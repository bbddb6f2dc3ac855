"""Dynamic Resource Allocation (resource.k8s.io/v1) as scheduling reads it: DeviceClasses,
ResourceSlices, ResourceClaims and the allocation a decision carries to the binder.

Frozen values, like `splitsched.core.storage`'s. Attribute and capacity names are kept
fully qualified ("gpu.example.com/model"): a slice may leave out its driver's domain, and
`qualify` puts it back once, so the allocator and the selectors never guess. Features
kube-scheduler v1.36 leaves off by default (partitionable devices' counters, consumable
capacity, device taints, binding conditions, list-typed attributes) are not read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction

from splitsched.core import models

ALLOCATION_MODE_EXACT_COUNT = "ExactCount"
ALLOCATION_MODE_ALL = "All"
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
class Device:
    """One device of a slice. `node_name`, `node_selector` and `all_nodes` are set only in
    a slice with perDeviceNodeSelection, where each device says where it can be used."""

    name: str
    attributes: Mapping[str, AttributeValue] = field(default_factory=dict)
    capacity: Mapping[str, Fraction] = field(default_factory=dict)
    node_name: str = ""
    node_selector: tuple[models.NodeSelectorTerm, ...] | None = None
    all_nodes: bool = False


@dataclass(frozen=True, slots=True)
class ResourceSlice:
    """A ResourceSlice: some of a driver's pool of devices. Exactly one of `node_name`,
    `node_selector`, `all_nodes` and `per_device_node_selection` says where the devices can
    be used. `invalid_reason` is set when the watcher could not read it; its pool is then
    left alone, as kube leaves a pool it cannot trust."""

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
    what the allocation records: "gpu" for an exact request, "gpu/big" for a subrequest."""

    name: str
    device_class: str
    selectors: tuple[str, ...] = ()
    mode: str = ALLOCATION_MODE_EXACT_COUNT
    count: int = 1
    admin_access: bool = False


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
    """A matchAttribute constraint: every device allocated for `requests` (all of the
    claim's requests when empty) has the same value of `attribute`, fully qualified."""

    attribute: str
    requests: tuple[str, ...] = ()


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
    """What scheduling reads of a ResourceClaim. `invalid_reason` is set when the watcher
    could not read it; the pods using it then wait with that reason."""

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

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"
