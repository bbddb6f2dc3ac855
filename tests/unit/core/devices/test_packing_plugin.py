"""DevicePacking through the algorithm: off (the default profile) nothing changes, kube's
first allocation is reserved; enabled by a profile, the packed allocation is reserved and
the node whose devices it fills best is chosen."""

from __future__ import annotations

import random
from typing import Any

import pytest

from splitsched.core import algorithm, models, profiles
from splitsched.core.cache import SchedulerCache
from splitsched.core.devices import model
from splitsched.core.plugins.device_packing import DevicePacking
from tests.support.devices import device, name_is, node_slice

GPU_CLASS = model.DeviceClass("gpu", ('device.driver == "driver-a"',))
ROOM = {models.CPU: 4000, models.MEMORY: 8 * 2**30, models.PODS: 110}
PACKING_PROFILE: dict[str, Any] = {
    "plugins": {"multiPoint": {"enabled": [{"name": "DevicePacking", "weight": 5}]}}
}


def gpu_slice(node: str) -> model.ResourceSlice:
    return node_slice(
        f"s-{node}", node,
        *(device(f"gpu-{i}", pcieRoot="a" if i < 4 else "b") for i in range(8)),
        pool=node,
    )  # fmt: skip


def held(node: str, *numbers: int) -> model.ResourceClaim:
    results = tuple(model.DeviceResult("gpu", "driver-a", node, f"gpu-{n}") for n in numbers)
    return model.ResourceClaim(
        "ml",
        f"held-{node}",
        f"uid-held-{node}",
        allocation=model.Allocation(results, name_is(node)),
    )


def setup(
    nodes: tuple[str, ...], spec: dict[str, Any] | None, *claims: model.ResourceClaim
) -> algorithm.FrameworkAlgorithm:
    cache = SchedulerCache()
    for n in nodes:
        cache.add_node(models.Node(n, labels={"kubernetes.io/hostname": n}, allocatable=ROOM))
        cache.table.devices.set(gpu_slice(n))
    cache.table.devices.set(GPU_CLASS)
    for c in claims:
        cache.table.devices.set(c)
    config = profiles.load({"profiles": [spec]} if spec is not None else None)
    return algorithm.FrameworkAlgorithm(cache=cache, profiles=config.profiles, rng=random.Random(1))


def two_gpus() -> model.ResourceClaim:
    request = model.DeviceRequest("gpu", model.RequestSpec("gpu", "gpu", count=2))
    return model.ResourceClaim("ml", "c", "uid-c", requests=(request,))


def pod() -> models.Pod:
    return models.Pod(
        "uid-p", "ml", "p", scheduler_name=profiles.DEFAULT_SCHEDULER_NAME,
        resource_claims=(models.PodResourceClaim("gpu", "c"),),
    )  # fmt: skip


def placed(algo: algorithm.FrameworkAlgorithm) -> tuple[str, tuple[str, ...]]:
    result = algo.schedule(pod())
    assert result.bind is not None
    assert algo.assume(pod(), result.bind.node, result.state).ok
    (write,) = algo.prebind_claims("uid-p")
    assert write.allocation is not None
    return result.bind.node, tuple(r.device for r in write.allocation.results)


@pytest.mark.parametrize(
    ("spec", "devices"), [(None, ("gpu-3", "gpu-4")), (PACKING_PROFILE, ("gpu-4", "gpu-5"))]
)
def test_the_reserved_allocation_is_kube_s_unless_packing_is_enabled(
    spec: dict[str, Any] | None, devices: tuple[str, ...]
) -> None:
    algo = setup(("node-1",), spec, held("node-1", 0, 1, 2), two_gpus())
    assert placed(algo) == ("node-1", devices)


def test_the_default_profile_does_not_run_device_packing() -> None:
    profile = profiles.load(None).profiles[profiles.DEFAULT_SCHEDULER_NAME]
    running = [*profile.pre_filter, *(e.plugin for e in profile.score)]
    assert not any(isinstance(p, DevicePacking) for p in running)


def test_packing_picks_the_node_its_devices_fill_best() -> None:
    """node-2 has 6 GPUs in use (2 left on root b): the claim fills it; whichever node the
    default profile's tie-break picks, packing picks node-2 every time."""
    claims = (held("node-1", 0), held("node-2", 0, 1, 2, 3, 4, 5), two_gpus())
    nodes = ("node-1", "node-2", "node-3")
    for seed in range(5):
        algo = setup(nodes, PACKING_PROFILE, *claims)
        algo.rng = random.Random(seed)
        assert placed(algo) == ("node-2", ("gpu-6", "gpu-7"))


def test_topology_attributes_are_its_args() -> None:
    spec = {
        **PACKING_PROFILE,
        "pluginConfig": [{"name": "DevicePacking", "args": {"topologyAttributes": ["rack"]}}],
    }
    algo = setup(("node-1",), spec, held("node-1", 0, 1, 2), two_gpus())
    assert placed(algo) == ("node-1", ("gpu-3", "gpu-4"))  # no "rack": one unit, kube's order
    with pytest.raises(profiles.ProfileError, match="topologyAttributes"):
        profiles.load(
            {
                "profiles": [
                    {
                        **spec,
                        "pluginConfig": [
                            {"name": "DevicePacking", "args": {"topologyAttributes": []}}
                        ],
                    }
                ]
            }
        )


def gpu_pod(name: str, count: int) -> tuple[models.Pod, model.ResourceClaim]:
    request = model.DeviceRequest("gpu", model.RequestSpec("gpu", "gpu", count=count))
    claim = model.ResourceClaim("ml", f"c-{name}", f"uid-c-{name}", requests=(request,))
    p = models.Pod(
        f"uid-{name}", "ml", name, scheduler_name=profiles.DEFAULT_SCHEDULER_NAME,
        resource_claims=(models.PodResourceClaim("gpu", claim.name),),
    )  # fmt: skip
    return p, claim


def eight_fits_after_small_ones(spec: dict[str, Any] | None, seed: int) -> bool:
    """node-1 half used, node-2 empty; two 2-GPU pods arrive, then an 8-GPU one."""
    algo = setup(("node-1", "node-2"), spec, held("node-1", 0, 1, 2, 3))
    algo.rng = random.Random(seed)
    for name, count in (("a", 2), ("b", 2), ("big", 8)):
        p, claim = gpu_pod(name, count)
        algo.table.devices.set(claim)
        result = algo.schedule(p)
        if result.bind is None:
            return False
        assert algo.assume(p, result.bind.node, result.state).ok
    return True


def test_an_eight_gpu_claim_fits_where_kube_s_choice_fragmented_the_nodes() -> None:
    kube = [eight_fits_after_small_ones(None, seed) for seed in range(6)]
    packed = [eight_fits_after_small_ones(PACKING_PROFILE, seed) for seed in range(6)]
    assert not all(kube)  # a random tie-break puts a small pod on the empty node
    assert all(packed)
