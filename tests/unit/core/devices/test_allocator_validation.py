"""The checks kube's allocator makes before it searches (validateDeviceRequest, the claim
limit, the constraints), in kube's order: every request and subrequest is checked, an
`All` request's devices are listed and counted, whether or not the search reaches it."""

from __future__ import annotations

import pytest

from splitsched.core import models
from splitsched.core.devices import allocator, model
from splitsched.core.devices.allocator import AllocationError
from splitsched.core.devices.pools import Candidate, Pool
from tests.support.devices import (
    CLASSES,
    NODE_1,
    allocate,
    claim,
    device,
    exact,
    first_available,
    network_slice,
    node_slice,
    picks,
)
from tests.support.devices import inventory as make_inventory

ALL = "All"
NO_HEALTHY_KEY = 'device.attributes["driver-a"].healthy'


def sub(name: str, count: int = 1, *selectors: str, mode: str = "ExactCount") -> model.RequestSpec:
    return model.RequestSpec(name, "class-a", selectors, mode, count)


def test_all_over_40_devices_is_past_the_claim_limit_before_any_search() -> None:
    many = node_slice("s1", "node-1", *(device(f"device-{i}") for i in range(40)))
    with pytest.raises(AllocationError) as excinfo:
        allocate([claim("claim-0", exact("req-0", "class-a", 0, mode=ALL))], many)
    assert str(excinfo.value) == (
        "claim default/claim-0: number of requested devices 40 exceeds the claim limit of 32"
    )


def test_all_counts_towards_the_limit_with_the_other_requests() -> None:
    twenty = node_slice("s1", "node-1", *(device(f"device-{i}") for i in range(20)))
    all_then_count = claim(
        "claim-0", exact("req-0", "class-a", 0, mode=ALL), exact("req-1", "class-a", 13)
    )
    with pytest.raises(AllocationError, match="number of requested devices 33 exceeds"):
        allocate([all_then_count], twenty)


def test_a_subrequest_asking_for_all_is_checked_even_when_an_earlier_one_fits() -> None:
    slices = (
        node_slice("s1", "node-1", device("device-1")),
        node_slice("s2", "node-1", device("device-2"), pool="pool-2", count=2),
    )
    request = first_available("req-0", sub("a"), sub("b", 0, mode=ALL))
    with pytest.raises(AllocationError) as excinfo:
        allocate([claim("claim-0", request)], *slices)
    # kube names a subrequest by its own name in these words (deviceSubRequestAccessor).
    assert str(excinfo.value) == (
        "claim default/claim-0, request b: asks for all devices, but resource pool"
        " driver-a/pool-2 is currently being updated"
    )


def test_a_selector_error_of_an_all_subrequest_the_search_never_reaches_is_raised() -> None:
    one = node_slice("s1", "node-1", device("device-1"))
    request = first_available("req-0", sub("a"), sub("b", 0, NO_HEALTHY_KEY, mode=ALL))
    with pytest.raises(AllocationError, match=r"^claim default/claim-0: selector #0: .*healthy"):
        allocate([claim("claim-0", request)], one)


def test_a_later_claims_all_is_checked_before_an_earlier_claim_is_searched() -> None:
    slices = (
        node_slice("s1", "node-1", device("device-1")),
        node_slice("s2", "node-1", device("device-2"), pool="pool-2", count=2),
    )
    # claim-0 cannot be met here; kube raises claim-1's error all the same.
    claims = [
        claim("claim-0", exact("req-0", "class-a", 5)),
        claim("claim-1", exact("req-0", "class-a", 0, mode=ALL)),
    ]
    with pytest.raises(AllocationError, match="claim default/claim-1, request req-0: asks for all"):
        allocate(claims, *slices)


def test_an_empty_selector_is_reported_before_a_missing_class() -> None:
    one = node_slice("s1", "node-1", device("device-1"))
    both_wrong = claim("claim-0", exact("req-0", "", 1, ""))
    with pytest.raises(AllocationError) as excinfo:
        allocate([both_wrong], one)
    assert str(excinfo.value) == (
        "claim default/claim-0, request req-0, selector #0: CEL expression empty"
        " (unsupported selector type?)"
    )


def test_the_claim_limit_is_reported_before_an_unknown_constraint() -> None:
    many = node_slice("s1", "node-1", *(device(f"device-{i}") for i in range(40)))
    too_many = claim(
        "claim-0", exact("req-0", "class-a", 33), constraints=(model.MatchAttribute(""),)
    )
    with pytest.raises(AllocationError, match="number of requested devices 33 exceeds"):
        allocate([too_many], many)
    unknown = claim("claim-0", constraints=(model.MatchAttribute(""),))
    with pytest.raises(AllocationError) as excinfo:
        allocate([unknown], many)
    assert str(excinfo.value) == (
        "claim default/claim-0, constraint #0: empty constraint (unsupported constraint type?)"
    )


def test_a_whole_claim_is_checked_before_the_next_claims_requests() -> None:
    one = node_slice("s1", "node-1", device("device-1"))
    claims = [
        claim("claim-0", constraints=(model.MatchAttribute(""),)),
        claim("claim-1", exact("req-0", "unknown")),
    ]
    with pytest.raises(AllocationError, match="claim default/claim-0, constraint #0"):
        allocate(claims, one)


def test_an_all_subrequest_with_no_device_gives_way_to_the_next() -> None:
    one = node_slice("s1", "node-1", device("device-1"))
    none_pass = 'device.driver == "nobody"'
    request = first_available("req-0", sub("a", 0, none_pass, mode=ALL), sub("b"))
    result = allocate([claim("claim-0", request)], one)
    assert result is not None and picks(result[0]) == [("req-0/b", "pool-1", "device-1")]


def _two_terms() -> tuple[models.NodeSelectorTerm, ...]:
    req = models.NodeSelectorRequirement
    return (
        models.NodeSelectorTerm((req("region", "In", ("region-1",)),)),
        models.NodeSelectorTerm((req("planet", "In", ("mars",)),)),
    )


def test_a_slice_selector_of_two_terms_names_the_claim_as_kube_does() -> None:
    two_terms = network_slice("s1", "pool-1", device("device-1"), selector=_two_terms())
    with pytest.raises(AllocationError) as excinfo:
        allocate([claim()], two_terms)
    assert str(excinfo.value) == (
        "create NodeSelector for claim claim-0: unsupported ResourceSlice.NodeSelector with 2 terms"
    )
    # The devices are looked at in the order picked: the error comes before a later
    # node-local device would have pinned the claim to the node.
    local = node_slice("s2", "node-1", device("device-2"), pool="pool-2")
    with pytest.raises(AllocationError, match="with 2 terms"):
        allocate([claim("claim-0", exact("req-0", "class-a", 2))], two_terms, local)


def test_a_slice_selector_without_terms_adds_nothing() -> None:
    # A slice with no terms is never offered to a node; a device list built by hand is.
    pools = make_inventory(network_slice("s1", "pool-1", device("device-1"))).pools_for(NODE_1)
    seen = pools[0].candidates[0]
    no_terms = Candidate("driver-a", "pool-1", seen.device, seen.cel, node_selector=())
    result = allocator.allocate(
        [claim()], [Pool("driver-a", "pool-1", (no_terms,))], CLASSES, (), NODE_1
    )
    assert result is not None and result[0].node_selector is None
