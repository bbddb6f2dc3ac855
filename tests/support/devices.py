"""Small builders for DRA objects in the devices tests (the names kube's allocator
tests use: node-1, driver-a, pool-1, class-a, claim-0, req-0)."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from fractions import Fraction

from splitsched.core import models
from splitsched.core.devices import allocator, model, pools, semver

NODE_1 = models.Node("node-1", labels={"region": "region-1", "planet": "earth"})
NODE_2 = models.Node("node-2", labels={"region": "region-2", "planet": "earth"})
GI = 2**30


def device(name: str, driver: str = "driver-a", **attributes: object) -> model.Device:
    """A device; `memory` (in GiB) goes to capacity, `version` to a semver attribute, the
    rest to attributes of the driver's domain."""
    attrs: dict[str, model.AttributeValue] = {}
    capacity: dict[str, Fraction] = {}
    for key, value in attributes.items():
        if key == "memory":
            capacity[f"{driver}/memory"] = Fraction(str(value)) * GI
        elif key == "version":
            attrs[f"{driver}/driverVersion"] = semver.parse(str(value))
        else:
            attrs[f"{driver}/{key}"] = value  # type: ignore[assignment]
    return model.Device(name, attrs, capacity)


def node_slice(
    name: str,
    node: str,
    *devices: model.Device,
    driver: str = "driver-a",
    pool: str = "pool-1",
    generation: int = 1,
    count: int = 1,
) -> model.ResourceSlice:
    return model.ResourceSlice(
        name, driver, pool, generation, count, node_name=node, devices=tuple(devices)
    )


def network_slice(
    name: str,
    pool: str,
    *devices: model.Device,
    selector: tuple[models.NodeSelectorTerm, ...] | None = None,
    driver: str = "driver-a",
) -> model.ResourceSlice:
    return model.ResourceSlice(
        name, driver, pool, 1, 1, node_selector=selector, all_nodes=selector is None,
        devices=tuple(devices),
    )  # fmt: skip


def device_class(
    name: str = "class-a", driver: str = "driver-a", *config: str
) -> model.DeviceClass:
    return model.DeviceClass(name, (f'device.driver == "{driver}"',), tuple(config))


CLASSES = {
    c.name: c for c in (device_class("class-a", "driver-a"), device_class("class-b", "driver-b"))
}


def exact(
    name: str = "req-0",
    device_class: str = "class-a",
    count: int = 1,
    *selectors: str,
    mode: str = "ExactCount",
    admin: bool = False,
) -> model.DeviceRequest:
    return model.DeviceRequest(
        name, exactly=model.RequestSpec(name, device_class, selectors, mode, count, admin)
    )


def first_available(name: str, *subs: model.RequestSpec) -> model.DeviceRequest:
    return model.DeviceRequest(
        name,
        first_available=tuple(
            model.RequestSpec(f"{name}/{s.name}", s.device_class, s.selectors, s.mode, s.count)
            for s in subs
        ),
    )


def claim(
    name: str = "claim-0",
    *requests: model.DeviceRequest,
    constraints: tuple[model.MatchAttribute, ...] = (),
    config: tuple[model.ClaimConfig, ...] = (),
) -> model.ResourceClaim:
    return model.ResourceClaim(
        "default", name, f"uid-{name}", requests=requests or (exact(),),
        constraints=constraints, config=config,
    )  # fmt: skip


def picks(allocation: model.Allocation) -> list[tuple[str, str, str]]:
    """(request, pool, device) of each result."""
    return [(r.request, r.pool, r.device) for r in allocation.results]


def name_is(node: str) -> tuple[models.NodeSelectorTerm, ...]:
    return (
        models.NodeSelectorTerm(
            match_fields=(models.NodeSelectorRequirement("metadata.name", "In", (node,)),)
        ),
    )


def inventory(*slices: model.ResourceSlice) -> pools.Inventory:
    return pools.Inventory(slices)


MEM_AT_LEAST = 'device.capacity["driver-a"].memory.compareTo(quantity("{}Gi")) >= 0'


def allocate(
    claims: Sequence[model.ResourceClaim],
    *slices: model.ResourceSlice,
    node: models.Node = NODE_1,
    allocated: Collection[allocator.DeviceId] = (),
    classes: Mapping[str, model.DeviceClass] = CLASSES,
) -> list[model.Allocation] | None:
    """The allocator on `node`, with these slices as the whole cluster's."""
    return allocator.allocate(claims, inventory(*slices).pools_for(node), classes, allocated, node)
