"""Topology-aware packing (the opt-in DevicePacking): topology units read from device
attributes, the best-fit choice among the allocations kube's allocator finds, and that
every kube rule still holds for the one chosen."""

from __future__ import annotations

from collections.abc import Collection

from splitsched.core.devices import allocator, model, packing, topology
from splitsched.core.devices.pools import Inventory, Pool
from tests.support.devices import CLASSES, NODE_1, device, exact, node_slice

DRIVER = "driver-a"


def gpu_node(*, roots: bool = True) -> list[Pool]:
    """node-1's 8 GPUs, gpu-0..3 on PCIe root a, gpu-4..7 on root b (no roots: no
    topology attributes at all)."""
    gpus = [
        device(f"gpu-{i}", pcieRoot="a" if i < 4 else "b") if roots else device(f"gpu-{i}")
        for i in range(8)
    ]
    return Inventory([node_slice("s1", "node-1", *gpus)]).pools_for(NODE_1)


def gpus(*numbers: int) -> frozenset[tuple[str, str, str]]:
    return frozenset((DRIVER, "pool-1", f"gpu-{n}") for n in numbers)


def claim(count: int, *selectors: str) -> model.ResourceClaim:
    return model.ResourceClaim(
        "ns", "c", "uid-c", requests=(exact("gpu", "class-a", count, *selectors),)
    )


def taken_by_kube(
    pools: list[Pool], c: model.ResourceClaim, in_use: Collection[tuple[str, str, str]]
) -> frozenset[tuple[str, str, str]]:
    found = allocator.allocate([c], pools, CLASSES, in_use, NODE_1)
    assert found is not None
    return packing.taken_devices(found)


def taken_packed(
    pools: list[Pool], c: model.ResourceClaim, in_use: Collection[tuple[str, str, str]]
) -> frozenset[tuple[str, str, str]]:
    found = packing.Packing().allocate([c], pools, CLASSES, in_use, NODE_1)
    assert found is not None
    return packing.taken_devices(found)


def test_a_device_path_reads_the_driver_attribute_then_the_shared_one() -> None:
    pools = gpu_node()
    shared = model.Device("gpu-9", {f"{topology.SHARED_DOMAIN}/pcieRoot": "z"})
    (own, *_) = pools[0].candidates
    other = Inventory([node_slice("s2", "node-1", shared, pool="pool-2")]).pools_for(NODE_1)
    levels = ("island", "pcieRoot")
    assert topology.device_path(own, levels) == ("?", "str:a")
    assert topology.device_path(other[0].candidates[0], levels) == ("?", "str:z")


def test_units_come_best_fit_first() -> None:
    layout = topology.Layout.of(gpu_node(), gpus(0, 1, 2), ("pcieRoot",))
    assert layout.units() == [(("str:a",), 1), (("str:b",), 4)]
    assert layout.free_in(()) == 5


def test_two_gpus_go_to_the_root_that_holds_them_whole() -> None:
    """Root a has 1 free, root b 4: kube's order splits the claim across the roots."""
    pools, in_use = gpu_node(), gpus(0, 1, 2)
    assert taken_by_kube(pools, claim(2), in_use) == gpus(3, 4)
    assert taken_packed(pools, claim(2), in_use) == gpus(4, 5)


def test_one_gpu_fills_the_fuller_root_and_keeps_the_free_one_whole() -> None:
    pools, in_use = gpu_node(), gpus(4, 5, 6)
    assert taken_by_kube(pools, claim(1), in_use) == gpus(0)
    assert taken_packed(pools, claim(1), in_use) == gpus(7)


def test_the_chosen_allocation_still_obeys_the_selectors() -> None:
    not_b = f'device.attributes["{DRIVER}"].pcieRoot != "b"'
    pools, in_use = gpu_node(), gpus(4, 5, 6)
    assert taken_packed(pools, claim(1, not_b), in_use) == gpus(0)


def test_the_chosen_allocation_still_obeys_a_match_attribute_constraint() -> None:
    """gpu-3 (root a) and gpu-7 (root b) differ in model; the claim wants one model."""
    devices = [device(f"gpu-{i}", pcieRoot="a" if i < 4 else "b", model="x") for i in range(8)]
    devices[7] = device("gpu-7", pcieRoot="b", model="y")
    pools = Inventory([node_slice("s1", "node-1", *devices)]).pools_for(NODE_1)
    c = model.ResourceClaim(
        "ns", "c", "uid-c", requests=(exact("gpu", "class-a", 2),),
        constraints=(model.MatchAttribute(f"{DRIVER}/model"),),
    )  # fmt: skip
    found = packing.Packing().allocate([c], pools, CLASSES, gpus(0, 1, 2, 4, 5), NODE_1)
    assert found is not None
    assert packing.taken_devices(found) == gpus(3, 6)  # root b's 2 free differ in model


def test_devices_without_topology_keep_kube_s_answer() -> None:
    pools, in_use = gpu_node(roots=False), gpus(4, 5, 6)
    assert taken_packed(pools, claim(1), in_use) == taken_by_kube(pools, claim(1), in_use)


def test_nothing_fits_for_packing_where_nothing_fits_for_kube() -> None:
    pools = gpu_node()
    c = claim(4)
    assert packing.Packing().allocate([c], pools, CLASSES, gpus(0, 1, 2, 4, 5), NODE_1) is None


def test_the_score_prefers_the_tightest_unit_on_the_fullest_node() -> None:
    pools = gpu_node()
    pack = packing.Packing()
    tight = pack.score(pools, gpus(0, 1, 2), gpus(3))  # root a's last GPU: node full-ish
    loose = pack.score(pools, frozenset(), gpus(0))  # a GPU of an empty node
    assert tight > loose
    assert pack.score(pools, frozenset(), gpus(*range(8))) == packing.MAX_NODE_SCORE
