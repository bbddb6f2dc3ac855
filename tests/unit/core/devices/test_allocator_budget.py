"""The allocator's search is bounded: claims that cannot be met for want of devices are
answered without trying every combination (and never time out: a budget of one step is
enough), and a search that would try too many combinations stops after a fixed number
of steps with kube's timeout words (kube bounds it by time)."""

from __future__ import annotations

from collections.abc import Collection, Sequence

import pytest

from splitsched.core.devices import allocator, model
from splitsched.core.devices.allocator import AllocationError, SearchBudgetExceeded
from tests.support.devices import (
    CLASSES,
    NODE_1,
    claim,
    device,
    exact,
    first_available,
    inventory,
    node_slice,
    picks,
)

KIND_A = 'device.attributes["driver-a"].kind == "a"'
KIND_B = 'device.attributes["driver-a"].kind == "b"'
NOTHING = "false"


def allocate(
    claims: Sequence[model.ResourceClaim],
    *slices: model.ResourceSlice,
    budget: int,
    allocated: Collection[allocator.DeviceId] = (),
) -> list[model.Allocation] | None:
    pools = inventory(*slices).pools_for(NODE_1)
    return allocator.allocate(claims, pools, CLASSES, allocated, NODE_1, budget=budget)


def thirty_two() -> model.ResourceSlice:
    return node_slice("s1", "node-1", *(device(f"device-{i}") for i in range(32)))


def test_a_request_no_device_passes_is_answered_without_searching_the_first_one() -> None:
    # Searched, this is C(32, 8) = 10.5 million combinations of req-0, each failing req-1.
    hopeless = claim("claim-0", exact("req-0", "class-a", 8), exact("req-1", "class-a", 1, NOTHING))
    assert allocate([hopeless], thirty_two(), budget=1) is None


def test_devices_in_use_are_not_counted_as_candidates() -> None:
    taken = {("driver-a", "pool-1", f"device-{i}") for i in range(25)}
    eight = claim("claim-0", exact("req-0", "class-a", 8))
    assert allocate([eight], thirty_two(), budget=1, allocated=taken) is None
    # Admin access may take devices in use: no answer without searching.
    admin = claim("claim-0", exact("req-0", "class-a", 8, admin=True))
    with pytest.raises(SearchBudgetExceeded):
        allocate([admin], thirty_two(), budget=1, allocated=taken)


def test_a_claim_needing_more_devices_than_its_requests_can_share_is_answered_at_once() -> None:
    twenty = node_slice("s1", "node-1", *(device(f"device-{i}") for i in range(20)))
    too_many = claim("claim-0", exact("req-0", "class-a", 8), exact("req-1", "class-a", 13))
    assert allocate([too_many], twenty, budget=1) is None
    # Admin access shares devices with other claims: the same counts fit.
    shared = [
        claim("claim-0", exact("req-0", "class-a", 8)),
        claim("claim-1", exact("req-0", "class-a", 13, admin=True)),
    ]
    result = allocate(shared, twenty, budget=100)
    assert result is not None and [len(a.results) for a in result] == [8, 13]


def test_claims_needing_more_devices_together_than_the_node_has_are_answered_at_once() -> None:
    claims = [
        claim("claim-0", exact("req-0", "class-a", 20)),
        claim("claim-1", exact("req-0", "class-a", 20)),
    ]
    assert allocate(claims, thirty_two(), budget=1) is None


def test_an_all_request_with_a_device_in_use_is_answered_at_once() -> None:
    taken = {("driver-a", "pool-1", "device-31")}
    claims = [
        claim("claim-0", exact("req-0", "class-a", 8)),
        claim("claim-1", exact("req-0", "class-a", 0, mode="All")),
    ]
    assert allocate(claims, thirty_two(), budget=1, allocated=taken) is None


def test_answering_at_once_does_not_hide_an_error_the_search_would_raise() -> None:
    # kube tries device-0 for req-0, fails req-1 on all 100 devices, then judges device-1
    # for req-0: a runtime error. Counting would say req-1 has no device at all.
    devices = node_slice(
        "s1",
        "node-1",
        device("device-0", healthy=True),
        *(device(f"device-{i}") for i in range(1, 100)),
    )
    picky = 'device.attributes["driver-a"].healthy'
    two = claim(
        "claim-0", exact("req-0", "class-a", 1, picky), exact("req-1", "class-a", 1, NOTHING)
    )
    assert allocator.COUNT_DEVICES_AFTER < 100  # the count is made before the error
    with pytest.raises(AllocationError, match="no such key: healthy"):
        allocate([two], devices, budget=1000)


def _unmatchable() -> tuple[model.ResourceClaim, model.ResourceSlice]:
    """req-0 takes 8 of 32 "a" devices, req-1 the one "b" device, and the devices must
    agree on x, which no "a" device does with "b": only the search can find that out."""
    devices = node_slice(
        "s1", "node-1",
        *(device(f"device-{i}", kind="a", x=1) for i in range(32)),
        device("device-b", kind="b", x=2),
    )  # fmt: skip
    same_x = (model.MatchAttribute("driver-a/x"),)
    one = claim(
        "claim-0",
        exact("req-0", "class-a", 8, KIND_A),
        exact("req-1", "class-a", 1, KIND_B),
        constraints=same_x,
    )
    return one, devices


def test_a_search_past_its_budget_stops_with_kubes_timeout_words() -> None:
    one, devices = _unmatchable()
    with pytest.raises(SearchBudgetExceeded) as excinfo:
        allocate([one], devices, budget=5_000)
    assert str(excinfo.value) == "timed out trying to allocate devices"
    assert excinfo.value.steps == 5_000
    # The default budget stops it too (C(32, 8) leaves would take minutes).
    pools = inventory(devices).pools_for(NODE_1)
    with pytest.raises(SearchBudgetExceeded) as excinfo:
        allocator.allocate([one], pools, CLASSES, (), NODE_1)
    assert excinfo.value.steps == allocator.SEARCH_STEP_BUDGET
    assert not isinstance(excinfo.value, AllocationError)  # a node's answer, not the claim's


def test_a_search_within_its_budget_is_not_stopped() -> None:
    one, devices = _unmatchable()
    fits = node_slice("s2", "node-1", device("device-c", kind="b", x=1), pool="pool-2")
    result = allocate([one], devices, fits, budget=100)
    assert result is not None
    assert picks(result[0])[-1] == ("req-1", "pool-2", "device-c")


def test_a_subrequest_past_the_limit_gives_way_at_once_as_in_kube() -> None:
    # req-0/big takes 8 devices, and then req-1 cannot take its 25 within the claim's 32,
    # whichever 8 they are: kube gives up on req-0/big after the first try.
    request = first_available(
        "req-0",
        model.RequestSpec("big", "class-a", count=8),
        model.RequestSpec("small", "class-a"),
    )
    one = claim("claim-0", request, exact("req-1", "class-a", 25))
    result = allocate([one], thirty_two(), budget=200)
    assert result is not None
    assert picks(result[0])[0] == ("req-0/small", "pool-1", "device-0")
    assert len(result[0].results) == 26


def test_counting_does_not_hide_a_constraint_an_all_request_breaks() -> None:
    # req-0 finds its device last, then req-1 must take devices whose numa differs: kube
    # raises, although claim-1 has no device and counting alone would answer None.
    devices = node_slice(
        "s1",
        "node-1",
        *(device(f"device-{i}", kind="a" if i < 30 else "c", numa=1) for i in range(99)),
        device("device-99", kind="b", numa=2),
    )
    claims = [
        claim(
            "claim-0",
            exact("req-0", "class-a", 1, KIND_B),
            exact("req-1", "class-a", 0, KIND_A, mode="All"),
            constraints=(model.MatchAttribute("driver-a/numa"),),
        ),
        claim("claim-1", exact("req-0", "class-a", 1, NOTHING)),
    ]
    with pytest.raises(AllocationError, match="because a claim constraint would not be satisfied"):
        allocate(claims, devices, budget=1000)
