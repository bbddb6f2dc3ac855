"""The DRA allocator's constraints, selector errors, limits, prioritized lists and
configuration copying, against the cases of kube's allocator tests, in words."""

from __future__ import annotations

import pytest

from splitsched.core import models
from splitsched.core.devices import model
from splitsched.core.devices.allocator import AllocationError
from tests.support.devices import (
    MEM_AT_LEAST,
    NODE_1,
    NODE_2,
    allocate,
    claim,
    device,
    device_class,
    exact,
    first_available,
    name_is,
    node_slice,
    picks,
)


def spec(
    name: str,
    device_class: str = "class-a",
    count: int = 1,
    *selectors: str,
    mode: str = "ExactCount",
) -> model.RequestSpec:
    return model.RequestSpec(name, device_class, selectors, mode, count)


def same(attribute: str, *requests: str) -> model.MatchAttribute:
    return model.MatchAttribute(f"driver-a/{attribute}", requests)


def test_match_attribute_of_each_type_holds_across_devices() -> None:
    devices = node_slice(
        "s1", "node-1",
        device("device-1", numa=1, version="1.0.0", s="a", b=True),
        device("device-2", numa=1, version="1.0.0", s="a", b=True),
    )  # fmt: skip
    constraints = tuple(same(a) for a in ("numa", "driverVersion", "s", "b"))
    result = allocate(
        [claim("claim-0", exact("req-0", "class-a", 2), constraints=constraints)], devices
    )
    assert result is not None and len(result[0].results) == 2
    # A device without the attribute fails it, even alone.
    lacking = claim("claim-0", constraints=(same("nothing"),))
    assert allocate([lacking], devices) is None
    # Values that differ: no pair fits.
    apart = node_slice("s1", "node-1", device("device-1", numa=1), device("device-2", numa=2))
    assert (
        allocate(
            [claim("claim-0", exact("req-0", "class-a", 2), constraints=(same("numa"),))], apart
        )
        is None
    )


def test_true_is_not_1_for_match_attribute() -> None:
    apart = node_slice("s1", "node-1", device("device-1", x=1), device("device-2", x=True))
    assert (
        allocate([claim("claim-0", exact("req-0", "class-a", 2), constraints=(same("x"),))], apart)
        is None
    )


def test_a_constraint_broken_by_all_is_an_error() -> None:
    apart = node_slice("s1", "node-1", device("device-1", numa=1), device("device-2", numa=2))
    all_of = claim("claim-0", exact("req-0", "class-a", 0, mode="All"), constraints=(same("numa"),))
    with pytest.raises(AllocationError) as excinfo:
        allocate([all_of], apart)
    assert str(excinfo.value) == (
        "claim default/claim-0, request req-0: cannot add device driver-a/pool-1/device-2"
        " because a claim constraint would not be satisfied"
    )


def test_a_constraint_on_some_requests_backtracks_the_earlier_one() -> None:
    devices = node_slice(
        "s1", "node-1",
        device("device-1", version="1.0.0", s="a"),
        device("device-2", version="2.0.0", s="b"),
        device("device-3", version="3.0.0", s="b"),
    )  # fmt: skip
    two = claim(
        "claim-0", exact("req-0"), exact("req-1"),
        constraints=(same("driverVersion", "req-0"), same("s")),
    )  # fmt: skip
    result = allocate([two], devices)
    assert result is not None
    assert picks(result[0]) == [("req-0", "pool-1", "device-2"), ("req-1", "pool-1", "device-3")]


def test_selector_errors_name_the_claim_or_class_and_the_selector() -> None:
    one = node_slice("s1", "node-1", device("device-1"))
    bad_key = claim(
        "claim-0", exact("req-0", "class-a", 1, 'device.attributes["driver-a"].healthy')
    )
    with pytest.raises(AllocationError) as excinfo:
        allocate([bad_key], one)
    assert (
        str(excinfo.value)
        == "claim default/claim-0: selector #0: CEL runtime error: no such key: healthy"
    )
    broken = {"class-a": model.DeviceClass("class-a", ('device.driver == "driver-a"', "device.("))}
    with pytest.raises(
        AllocationError, match=r"^class class-a: selector #1: CEL compile error: compilation failed"
    ):
        allocate([claim()], one, classes=broken)
    not_bool = claim("claim-0", exact("req-0", "class-a", 1, "device.driver"))
    with pytest.raises(AllocationError, match="could not be converted to bool"):
        allocate([not_bool], one)
    with pytest.raises(
        AllocationError, match=r"selector #0: CEL expression empty \(unsupported selector type\?\)"
    ):
        allocate([claim("claim-0", exact("req-0", "class-a", 1, ""))], one)


def test_a_claim_may_take_32_devices_and_no_more() -> None:
    many = node_slice("s1", "node-1", *(device(f"device-{i}") for i in range(40)))
    result = allocate([claim("claim-0", exact("req-0", "class-a", 32))], many)
    assert result is not None and len(result[0].results) == 32
    with pytest.raises(
        AllocationError, match="number of requested devices 33 exceeds the claim limit of 32"
    ):
        allocate([claim("claim-0", exact("req-0", "class-a", 32), exact("req-1"))], many)
    # A subrequest past the limit gives way to the next one.
    fallback = first_available("req-0", spec("big", count=500), spec("small"))
    result = allocate([claim("claim-0", fallback)], many)
    assert result is not None and picks(result[0]) == [("req-0/small", "pool-1", "device-0")]


def test_first_available_takes_the_first_subrequest_that_can_be_met() -> None:
    one = node_slice("s1", "node-1", device("device-1"))
    request = first_available("req-0", spec("subReq-0", "class-b"), spec("subReq-1", "class-a"))
    result = allocate([claim("claim-0", request)], one)
    assert result is not None and picks(result[0]) == [("req-0/subReq-1", "pool-1", "device-1")]
    none_fit = first_available("req-0", spec("subReq-0", "class-b"))
    assert allocate([claim("claim-0", none_fit)], one) is None


def test_first_available_is_chosen_so_that_later_requests_fit_too() -> None:
    devices = node_slice(
        "s1",
        "node-1",
        device("device-1", memory=2),
        device("device-2", memory=2),
        device("device-3", memory=1),
    )
    later = first_available(
        "req-1",
        spec("subReq-0", "class-a", 1, MEM_AT_LEAST.format(4)),
        spec("subReq-1", "class-a", 2, MEM_AT_LEAST.format(2)),
    )
    result = allocate(
        [claim("claim-0", exact("req-0", "class-a", 1, MEM_AT_LEAST.format(1)), later)], devices
    )
    assert result is not None
    assert picks(result[0]) == [
        ("req-0", "pool-1", "device-3"),
        ("req-1/subReq-1", "pool-1", "device-1"),
        ("req-1/subReq-1", "pool-1", "device-2"),
    ]


def test_a_constraint_naming_a_parent_request_binds_every_subrequest() -> None:
    devices = node_slice(
        "s1", "node-1",
        device("device-1", version="1.0.0"),
        device("device-2", version="2.0.0"),
        device("device-3", version="1.0.0"),
    )  # fmt: skip
    sub = first_available(
        "req-1",
        spec(
            "subReq-0",
            "class-a",
            1,
            'device.attributes["driver-a"].driverVersion == semver("2.0.0")',
        ),
        spec("subReq-1"),
    )
    by_sub = claim(
        "claim-0",
        exact("req-0"),
        sub,
        constraints=(same("driverVersion", "req-0", "req-1/subReq-0"),),
    )
    result = allocate([by_sub], devices)
    assert result is not None
    assert picks(result[0]) == [
        ("req-0", "pool-1", "device-1"),
        ("req-1/subReq-1", "pool-1", "device-2"),
    ]
    by_parent = claim(
        "claim-0", exact("req-0"), sub, constraints=(same("driverVersion", "req-0", "req-1"),)
    )
    result = allocate([by_parent], devices)
    assert result is not None
    assert picks(result[0]) == [
        ("req-0", "pool-1", "device-1"),
        ("req-1/subReq-1", "pool-1", "device-3"),
    ]


def test_devices_are_tried_as_combinations_with_backtracking() -> None:
    devices = node_slice(
        "s1",
        "node-1",
        device("device-1", type="X"),
        device("device-2", type="Y"),
        device("device-3", type="Y"),
    )
    x_only = 'device.attributes["driver-a"].type == "X"'
    result = allocate(
        [claim("claim-0", exact("req-1", "class-a", 2), exact("req-2", "class-a", 1, x_only))],
        devices,
    )
    assert result is not None
    assert picks(result[0]) == [
        ("req-1", "pool-1", "device-2"),
        ("req-1", "pool-1", "device-3"),
        ("req-2", "pool-1", "device-1"),
    ]


def test_class_and_claim_configurations_are_copied_for_the_requests_they_serve() -> None:
    classes = {
        "class-a": device_class("class-a", "driver-a", '{"opaque":"A"}'),
        "class-b": device_class("class-b", "driver-b", '{"opaque":"B"}'),
    }
    slices = (
        node_slice("s1", "node-1", device("device-1"), device("device-2")),
        node_slice("s2", "node-1", device("device-1", "driver-b"), driver="driver-b"),
    )
    configs = (
        model.ClaimConfig((), '{"opaque":"all"}'),
        model.ClaimConfig(("req-2",), '{"opaque":"two"}'),
    )
    three = claim(
        "claim-0", exact("req-0"), exact("req-1"), exact("req-2", "class-b"), config=configs
    )
    result = allocate([three], *slices, classes=classes)
    assert result is not None
    assert result[0].config == (
        model.AllocatedConfig("FromClass", ("req-0", "req-1"), '{"opaque":"A"}'),
        model.AllocatedConfig("FromClass", ("req-2",), '{"opaque":"B"}'),
        model.AllocatedConfig("FromClaim", (), '{"opaque":"all"}'),
        model.AllocatedConfig("FromClaim", ("req-2",), '{"opaque":"two"}'),
    )
    # Of a prioritized list, only the chosen subrequest's configurations are kept.
    sub = first_available("req-0", spec("subReq-0", "class-b"), spec("subReq-1", "class-a"))
    per_sub = (
        model.ClaimConfig(("req-0/subReq-0",), "{}"),
        model.ClaimConfig(("req-0/subReq-1",), "{}"),
    )
    result = allocate([claim("claim-0", sub, config=per_sub)], slices[0], classes=classes)
    assert result is not None
    assert result[0].config == (
        model.AllocatedConfig("FromClass", ("req-0/subReq-1",), '{"opaque":"A"}'),
        model.AllocatedConfig("FromClaim", ("req-0/subReq-1",), "{}"),
    )


def test_a_pool_spanning_nodes_is_complete_by_its_slices_everywhere() -> None:
    spanning = (
        node_slice("s1", "node-1", device("device-1"), count=2),
        node_slice("s2", "node-2", device("device-2"), count=2),
    )
    all_of = claim("claim-0", exact("req-0", "class-a", 0, mode="All"))
    result = allocate([all_of], *spanning)
    assert result is not None and picks(result[0]) == [("req-0", "pool-1", "device-1")]
    # node-1's slice is of the old generation: node-2's says the pool is being replaced.
    stale = (spanning[0], node_slice("s2", "node-2", device("device-2"), generation=2, count=2))
    assert allocate([claim()], *stale) is None
    # One of two slices not published yet: incomplete, never searched for a count.
    assert allocate([claim()], spanning[0]) is None


def test_per_device_node_selection_offers_each_device_where_it_says() -> None:
    devices = (
        model.Device("device-1", node_name="node-2"),
        model.Device(
            "device-2",
            node_selector=(
                models.NodeSelectorTerm(
                    (models.NodeSelectorRequirement("planet", "In", ("earth",)),)
                ),
            ),
        ),
    )
    per_device = model.ResourceSlice(
        "s1", "driver-a", "pool-1", per_device_node_selection=True, devices=devices
    )
    result = allocate([claim()], per_device, node=NODE_1)
    assert result is not None and picks(result[0]) == [("req-0", "pool-1", "device-2")]
    assert result[0].node_selector is not None and result[0].node_selector != name_is("node-1")
    result = allocate([claim()], per_device, node=NODE_2)
    assert result is not None and picks(result[0]) == [("req-0", "pool-1", "device-1")]
    assert result[0].node_selector == name_is("node-2")
