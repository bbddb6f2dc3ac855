"""Explain's detail for a node where the pod's claims cannot be allocated: which request
was not met and why. Every case first checks that the allocator does say no there, so the
detail always explains a real refusal."""

from __future__ import annotations

from collections.abc import Collection, Sequence

import pytest

from splitsched.core.devices import diagnose, model
from tests.support.devices import (
    CLASSES,
    MEM_AT_LEAST,
    NODE_1,
    allocate,
    claim,
    device,
    exact,
    first_available,
    inventory,
    node_slice,
)

GPUS = node_slice(
    "s1", "node-1", device("gpu-0", memory=40), device("gpu-1", memory=80),
    device("gpu-2", memory=80),
)  # fmt: skip
ALL_IN_USE = frozenset({("driver-a", "pool-1", "gpu-0"), ("driver-a", "pool-1", "gpu-1")})


def why(
    claims: Sequence[model.ResourceClaim],
    *slices: model.ResourceSlice,
    in_use: Collection[tuple[str, str, str]] = (),
) -> str:
    assert allocate(claims, *slices, allocated=in_use) is None, "the allocator must refuse"
    pools = inventory(*slices).pools_for(NODE_1)
    return diagnose.why_not(claims, pools, CLASSES, frozenset(in_use), NODE_1)


def test_a_node_without_devices_says_so() -> None:
    other = node_slice("s2", "node-2", device("gpu-0"))
    assert why([claim()], other) == "no ResourceSlice offers devices to this node"


def test_the_request_is_named_with_its_class_selector_and_counts() -> None:
    big = exact("gpu", "class-a", 2, MEM_AT_LEAST.format(80))
    assert why([claim("train", big)], GPUS, in_use=ALL_IN_USE) == (
        "claim default/train, request gpu: wants 2 devices of class class-a"
        f" (selector {MEM_AT_LEAST.format(80)}); 2 of the node's devices pass, 1 of them free"
    )


def test_a_request_no_device_passes_says_so_and_names_the_class_selector() -> None:
    text = why([claim("c", exact("gpu", "class-b"))], GPUS)
    assert text == (
        "claim default/c, request gpu: wants 1 device of class class-b"
        ' (class selector device.driver == "driver-b"); no device of the node passes'
    )


def test_the_first_unmet_request_is_named_not_the_ones_that_fit() -> None:
    fits, unmet = exact("small", "class-a", 1), exact("huge", "class-a", 4)
    text = why([claim("ok", fits), claim("big", unmet)], GPUS)
    assert text.startswith("claim default/big, request huge: wants 4 devices"), text
    assert "3 of the node's devices pass, 3 of them free" in text


def test_an_all_request_with_a_device_in_use_says_how_many_are_free() -> None:
    every = exact("all", "class-a", 1, mode="All")
    text = why([claim("c", every)], GPUS, in_use={("driver-a", "pool-1", "gpu-0")})
    assert text.endswith("wants all devices of class class-a"
                         ' (class selector device.driver == "driver-a");'
                         " 3 of the node's devices pass, 2 of them free"), text  # fmt: skip


def test_a_prioritized_list_tells_each_subrequest() -> None:
    subs = (
        model.RequestSpec("big", "class-a", (MEM_AT_LEAST.format(80),), count=3),
        model.RequestSpec("small", "class-a", count=4),
    )
    text = why([claim("c", first_available("gpu", *subs))], GPUS)
    assert text.startswith("claim default/c, request gpu: no subrequest can be met: big wants 3")
    assert "2 of the node's devices pass, 2 of them free; small wants 4 devices" in text


def test_requests_that_fit_alone_but_not_together_blame_the_claim() -> None:
    two = claim("c", exact("a", "class-a", 2), exact("b", "class-a", 2))
    assert why([two], GPUS) == (
        "claim default/c: each request could be met, but together they want more free devices"
    )


def test_a_match_attribute_that_cannot_hold_is_named() -> None:
    spread = node_slice(
        "s1", "node-1", device("gpu-0", root="a"), device("gpu-1", root="b"),
    )  # fmt: skip
    constraint = model.MatchAttribute("driver-a/root")
    pair = claim("c", exact("gpu", "class-a", 2), constraints=(constraint,))
    assert why([pair], spread) == (
        "claim default/c: each request could be met, but no set of free devices for all of"
        " them has the same driver-a/root (matchAttribute)"
    )


def test_claims_that_fit_alone_but_not_together_say_so() -> None:
    claims = [claim("a", exact("gpu", "class-a", 2)), claim("b", exact("gpu", "class-a", 2))]
    assert why(claims, GPUS) == (
        "the pod's claims together want more devices than the node has free"
    )


@pytest.mark.parametrize("length", [10, diagnose.SELECTOR_CHARS + 50])
def test_a_long_selector_is_cut_to_one_line(length: int) -> None:
    selector = "true && " * (length // 8) + MEM_AT_LEAST.format(1000)
    text = why([claim("c", exact("gpu", "class-a", 1, selector))], GPUS)
    shown = text.split("(selector ", 1)[1].split(");", 1)[0]
    assert len(shown) <= diagnose.SELECTOR_CHARS
    assert shown.endswith("…") == (len(selector) > diagnose.SELECTOR_CHARS)
