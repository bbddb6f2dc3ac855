"""The DRA allocator against the cases of kube's own allocator tests
(k8s.io/dynamic-resource-allocation/structured/internal/allocatortesting), in words: the
same inputs, the same devices picked, the same errors."""

from __future__ import annotations

import pytest

from splitsched.core import models
from splitsched.core.devices.allocator import AllocationError, InvalidPools
from tests.support.devices import (
    MEM_AT_LEAST,
    NODE_1,
    NODE_2,
    allocate,
    claim,
    device,
    exact,
    name_is,
    network_slice,
    node_slice,
    picks,
)


def test_one_device_on_the_node_is_allocated_and_pins_the_claim_to_it() -> None:
    result = allocate([claim()], node_slice("s1", "node-1", device("device-1")))
    assert result is not None
    assert picks(result[0]) == [("req-0", "pool-1", "device-1")]
    assert result[0].node_selector == name_is("node-1")
    assert result[0].config == ()


def test_only_the_devices_of_the_node_being_judged_count() -> None:
    slices = (
        node_slice("s1", "node-1", device("device-1", "driver-b"), driver="driver-b"),
        node_slice("s2", "node-2", device("device-1"), pool="pool-2"),
    )
    assert allocate([claim()], *slices, node=NODE_1) is None
    result = allocate([claim()], *slices, node=NODE_2)
    assert result is not None and picks(result[0]) == [("req-0", "pool-2", "device-1")]


def test_a_request_gives_way_when_a_later_one_needs_its_device() -> None:
    small, large = MEM_AT_LEAST.format(1), MEM_AT_LEAST.format(2)
    devices = node_slice("s1", "node-1", device("device-2", memory=2), device("device-1", memory=1))
    one = claim("claim-0", exact("req-0", "class-a", 1, small), exact("req-1", "class-a", 1, large))
    result = allocate([one], devices)
    assert result is not None
    assert picks(result[0]) == [("req-0", "pool-1", "device-1"), ("req-1", "pool-1", "device-2")]
    two = [
        claim("claim-0", exact("req-0", "class-a", 1, small)),
        claim("claim-1", exact("req-0", "class-a", 1, large)),
    ]
    result = allocate(two, devices)
    assert result is not None
    assert [picks(a) for a in result] == [
        [("req-0", "pool-1", "device-1")],
        [("req-0", "pool-1", "device-2")],
    ]


def test_a_count_is_met_from_several_pools() -> None:
    slices = (
        node_slice("s1", "node-1", device("device-1")),
        node_slice("s2", "node-1", device("device-2"), pool="pool-2"),
    )
    result = allocate([claim("claim-0", exact("req-0", "class-a", 2))], *slices)
    assert result is not None
    assert picks(result[0]) == [("req-0", "pool-1", "device-1"), ("req-0", "pool-2", "device-2")]


def test_a_pool_with_a_newer_generation_being_published_is_not_used() -> None:
    slices = (
        node_slice("s1", "node-1", device("device-1"), generation=1, count=2),
        node_slice("s2", "node-1", device("device-2"), generation=2, count=2),
    )
    assert allocate([claim()], *slices) is None


def test_a_pool_whose_slices_repeat_a_device_is_invalid() -> None:
    slices = (
        node_slice("s1", "node-1", device("device-1"), count=2),
        node_slice("s2", "node-1", device("device-1"), count=2),
    )
    with pytest.raises(InvalidPools, match="invalid resource pools were encountered"):
        allocate([claim()], *slices)
    # Another pool that fits is used all the same.
    more = (*slices, node_slice("s3", "node-1", device("device-2"), pool="pool-2"))
    result = allocate([claim()], *more)
    assert result is not None and picks(result[0]) == [("req-0", "pool-2", "device-2")]


def test_unknown_and_missing_classes_are_errors() -> None:
    with pytest.raises(
        AllocationError, match="request req-0: could not retrieve device class unknown"
    ):
        allocate(
            [claim("claim-0", exact("req-0", "unknown"))],
            node_slice("s1", "node-1", device("device-1")),
        )
    with pytest.raises(AllocationError) as excinfo:
        allocate(
            [claim("claim-0", exact("req-0", ""))], node_slice("s1", "node-1", device("device-1"))
        )
    assert str(excinfo.value) == (
        "claim default/claim-0, request req-0: missing device class name"
        " (unsupported request type?)"
    )


def test_two_claims_cannot_share_one_device_and_taken_devices_are_not_free() -> None:
    one = node_slice("s1", "node-1", device("device-1"))
    assert allocate([claim("claim-0"), claim("claim-1")], one) is None
    assert allocate([claim()], one, allocated={("driver-a", "pool-1", "device-1")}) is None


def test_all_on_a_pool_still_being_published_is_an_error() -> None:
    all_of = claim("claim-0", exact("req-0", "class-a", 0, mode="All"))
    with pytest.raises(AllocationError) as excinfo:
        allocate([all_of], node_slice("s1", "node-1", device("device-1"), count=2))
    assert str(excinfo.value) == (
        "claim default/claim-0, request req-0: asks for all devices, but resource pool"
        " driver-a/pool-1 is currently being updated"
    )


def test_all_fails_when_one_device_is_in_use_unless_admin_access() -> None:
    two = node_slice("s1", "node-1", device("device-1"), device("device-2"))
    taken = {("driver-a", "pool-1", "device-1")}
    assert (
        allocate([claim("claim-0", exact("req-0", "class-a", 0, mode="All"))], two, allocated=taken)
        is None
    )
    admin = claim("claim-0", exact("req-0", "class-a", 0, mode="All", admin=True))
    result = allocate([admin], two, allocated=taken)
    assert result is not None
    assert picks(result[0]) == [("req-0", "pool-1", "device-1"), ("req-0", "pool-1", "device-2")]
    assert all(r.admin_access for r in result[0].results)
    empty = node_slice("s1", "node-1")
    assert allocate([claim("claim-0", exact("req-0", "class-a", 0, mode="All"))], empty) is None


def test_all_then_another_claim_from_another_driver() -> None:
    slices = (
        node_slice("s1", "node-1", device("device-1"), device("device-2")),
        node_slice("s2", "node-1", device("device-1", "driver-b"), driver="driver-b"),
    )
    claims = [
        claim("claim-0", exact("req-0", "class-a", 0, mode="All")),
        claim("claim-1", exact("req-0", "class-b")),
    ]
    result = allocate(claims, *slices)
    assert result is not None
    assert [picks(a) for a in result] == [
        [("req-0", "pool-1", "device-1"), ("req-0", "pool-1", "device-2")],
        [("req-0", "pool-1", "device-1")],
    ]
    assert result[1].results[0].driver == "driver-b"


def test_admin_access_shares_a_device_with_other_claims() -> None:
    one = node_slice("s1", "node-1", device("device-1"))
    admins = [claim("claim-0", exact(admin=True)), claim("claim-1", exact(admin=True))]
    result = allocate(admins, one)
    assert (
        result is not None and [picks(a) for a in result] == [[("req-0", "pool-1", "device-1")]] * 2
    )
    mixed = [claim("claim-0"), claim("claim-1", exact(admin=True))]
    result = allocate(mixed, one)
    assert result is not None
    assert [a.results[0].admin_access for a in result] == [False, True]


def _term(*exprs: tuple[str, str], name: str = "") -> models.NodeSelectorTerm:
    fields = (models.NodeSelectorRequirement("metadata.name", "In", (name,)),) if name else ()
    return models.NodeSelectorTerm(
        tuple(models.NodeSelectorRequirement(k, "In", (v,)) for k, v in exprs), fields
    )


def test_network_attached_devices_merge_their_slices_selectors() -> None:
    slices = (
        network_slice(
            "s1", "pool-1", device("device-1"), selector=(_term(("region", "region-1")),)
        ),
        network_slice("s2", "pool-2", device("device-2")),
        network_slice("s3", "pool-3", device("device-3"), selector=(_term(("planet", "earth")),)),
        network_slice("s4", "pool-4", device("device-4"), selector=(_term(name="node-1"),)),
    )
    result = allocate([claim("claim-0", exact("req-0", "class-a", 4))], *slices)
    assert result is not None
    assert result[0].node_selector == (
        _term(("region", "region-1"), ("planet", "earth"), name="node-1"),
    )
    # One node-local device among them pins the claim to the node.
    mixed = (slices[1], node_slice("s5", "node-1", device("device-5"), pool="pool-5"))
    result = allocate([claim("claim-0", exact("req-0", "class-a", 2))], *mixed)
    assert result is not None and result[0].node_selector == name_is("node-1")
    # All devices usable anywhere: no selector at all.
    result = allocate([claim()], slices[1])
    assert result is not None and result[0].node_selector is None
    # A network slice for another region is not seen from node-1.
    elsewhere = network_slice(
        "s6", "pool-6", device("device-6"), selector=(_term(("region", "region-2")),)
    )
    assert allocate([claim()], elsewhere) is None


def test_node_selector_terms_of_slices_match_as_node_affinity_does() -> None:
    from splitsched.core.devices import nodes

    node = models.Node("n", labels={"gpus": "8", "zone": "a"})
    req = models.NodeSelectorRequirement
    cases = [
        (models.NodeSelectorTerm((req("gpus", "Gt", ("4",)),)), True),
        (models.NodeSelectorTerm((req("gpus", "Lt", ("4",)),)), False),
        (
            models.NodeSelectorTerm((req("zone", "NotIn", ("b",)), req("rack", "DoesNotExist"))),
            True,
        ),
        (models.NodeSelectorTerm(match_fields=(req("metadata.name", "NotIn", ("n",)),)), False),
        (models.NodeSelectorTerm(), False),
    ]
    for term, expected in cases:
        assert nodes.usable_on(node, "", False, (term,)) is expected, term
    assert not nodes.usable_on(node, "", False, None)
    assert nodes.usable_on(node, "", True, None)
    assert not nodes.usable_on(node, "other", True, None)
