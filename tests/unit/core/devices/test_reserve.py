"""DynamicResources' Reserve and Unreserve: a decision's allocations are assumed in the
view until the watch shows them written, so no device is given twice, a claim shared by
two pods is allocated once, and Unreserve gives everything back."""

from __future__ import annotations

import dataclasses
import random

from splitsched.core import algorithm, framework, models, profiles
from splitsched.core.cache import SchedulerCache
from splitsched.core.devices import judge, model
from splitsched.core.devices.view import DeviceView
from tests.support.devices import device, node_slice

GI = 2**30
GPU_CLASS = model.DeviceClass("gpu", ('device.driver == "driver-a"',))
GPU_0 = ("driver-a", "pool-1", "gpu-0")


def setup(*claims: model.ResourceClaim) -> algorithm.FrameworkAlgorithm:
    cache = SchedulerCache()
    allocatable = {models.CPU: 4000, models.MEMORY: 8 * GI, models.PODS: 110}
    cache.add_node(models.Node("node-1", allocatable=allocatable))
    view = cache.table.devices
    view.set(GPU_CLASS)
    view.set(node_slice("s1", "node-1", device("gpu-0")))
    for c in claims:
        view.set(c)
    return algorithm.FrameworkAlgorithm(
        cache=cache, profiles=profiles.load_profiles(None), rng=random.Random(1)
    )


def claim(name: str) -> model.ResourceClaim:
    request = model.DeviceRequest("gpu", model.RequestSpec("gpu", "gpu"))
    return model.ResourceClaim("ml", name, f"uid-{name}", requests=(request,))


def pod(name: str, claim_name: str) -> models.Pod:
    return models.Pod(
        f"uid-{name}", "ml", name, scheduler_name=profiles.DEFAULT_SCHEDULER_NAME,
        resource_claims=(models.PodResourceClaim("gpu", claim_name),),
    )  # fmt: skip


def place(algo: algorithm.FrameworkAlgorithm, p: models.Pod) -> str:
    """Schedule and assume the pod as the scheduler's loop does; the node, or the wait."""
    result = algo.schedule(p)
    if result.bind is None:
        assert result.wait is not None
        return result.wait.summary
    assert algo.assume(p, result.bind.node, result.state).ok
    return result.bind.node


def test_a_device_a_decision_in_flight_holds_is_given_to_no_one_else() -> None:
    algo = setup(claim("c1"), claim("c2"))
    assert place(algo, pod("a", "c1")) == "node-1"
    (write,) = algo.prebind_claims("uid-a")
    assert (write.namespace, write.name, write.uid) == ("ml", "c1", "uid-c1")
    assert write.allocation is not None
    assert [r.device_id for r in write.allocation.results] == [GPU_0]
    assert judge.CANNOT_ALLOCATE in place(algo, pod("b", "c2"))
    algo.forget("uid-a")  # the decision failed: Unreserve gives the device back
    assert place(algo, pod("b", "c2")) == "node-1"


def test_a_shared_claim_being_allocated_waits_for_the_write_then_is_only_reserved() -> None:
    """kube: another pod's claim "is in the process of being allocated" until the write is
    seen; then the second pod only reserves it, with the same devices."""
    algo = setup(claim("shared"))
    assert place(algo, pod("a", "shared")) == "node-1"
    waiting = place(algo, pod("b", "shared"))
    assert "resource claim ml/shared is in the process of being allocated" in waiting
    (for_a,) = algo.prebind_claims("uid-a")
    written = dataclasses.replace(
        claim("shared"),
        allocation=for_a.allocation,
        reserved_for=(model.ConsumerRef("pods", "a", "uid-a"),),
        resource_version="2",
    )
    algo.table.devices.set(written)  # the watch shows a's write
    assert place(algo, pod("b", "shared")) == "node-1"
    (for_b,) = algo.prebind_claims("uid-b")
    assert for_b.allocation is None  # allocated by a's decision: b only reserves it
    seen = algo.table.devices.claim("ml", "shared")
    assert seen is not None and [r.uid for r in seen.reserved_for] == ["uid-a", "uid-b"]
    assert algo.table.devices.in_use() == {GPU_0}
    algo.forget("uid-b")
    assert algo.table.devices.claim("ml", "shared") == written


def test_a_claim_freed_by_a_failed_decision_goes_to_the_next_pod() -> None:
    algo = setup(claim("shared"))
    assert place(algo, pod("a", "shared")) == "node-1"
    algo.forget("uid-a")
    assert algo.table.devices.claim("ml", "shared") == claim("shared")
    assert algo.table.devices.in_use() == frozenset()
    assert place(algo, pod("b", "shared")) == "node-1"
    (for_b,) = algo.prebind_claims("uid-b")
    assert for_b.allocation is not None  # b allocates it now


def test_the_watch_showing_the_write_replaces_the_assumption() -> None:
    view = DeviceView()
    view.set(claim("c1"))
    allocation = model.Allocation((model.DeviceResult("gpu", *GPU_0),))
    consumer = model.ConsumerRef("pods", "a", "uid-a")
    view.assume(("ml", "c1"), consumer, allocation)
    # The binder's first write adds the finalizer only: still assumed.
    view.set(dataclasses.replace(claim("c1"), resource_version="2"))
    assert view.in_use() == {GPU_0}
    written = dataclasses.replace(
        claim("c1"), allocation=allocation, reserved_for=(consumer,), resource_version="3"
    )
    view.set(written)
    assert view.claim("ml", "c1") == written and view.in_use() == {GPU_0}
    view.unassume(("ml", "c1"), "uid-a")  # the pod bound: nothing assumed is left to drop
    assert view.claim("ml", "c1") == written and view.in_use() == {GPU_0}
    view.remove(written)
    assert view.in_use() == frozenset()


def test_reserve_without_the_cycles_answers_skips() -> None:
    """An adopted decision (another scheduler's) comes with no answers: nothing assumed."""
    algo = setup(claim("c1"))
    plugin = next(p for p in algo.profiles[profiles.DEFAULT_SCHEDULER_NAME].reserve
                  if p.name == "DynamicResources")  # fmt: skip
    status = plugin.reserve(framework.CycleState(), pod("a", "c1"), "node-1")
    assert status.code is framework.Code.SKIP
    assert algo.table.devices.in_use() == frozenset()


def gang_cluster(gpus_per_node: tuple[int, ...]) -> algorithm.FrameworkAlgorithm:
    cache = SchedulerCache()
    allocatable = {models.CPU: 4000, models.MEMORY: 8 * GI, models.PODS: 110}
    view = cache.table.devices
    view.set(GPU_CLASS)
    for i, count in enumerate(gpus_per_node):
        cache.add_node(models.Node(f"node-{i}", allocatable=allocatable))
        gpus = [device(f"gpu-{k}") for k in range(count)]
        view.set(node_slice(f"s{i}", f"node-{i}", *gpus, pool=f"pool-{i}"))
    for m in range(4):
        spec = model.RequestSpec("gpu", "gpu", count=2)
        request = model.DeviceRequest("gpu", spec)
        view.set(model.ResourceClaim("ml", f"m{m}", f"uid-m{m}", requests=(request,)))
    return algorithm.FrameworkAlgorithm(
        cache=cache, profiles=profiles.load_profiles(None), rng=random.Random(1)
    )


def test_a_gang_of_four_pods_with_two_gpus_each_is_placed_all_or_nothing() -> None:
    members = [pod(f"member-{m}", f"m{m}") for m in range(4)]
    enough = gang_cluster((4, 4))
    placed, blocking, _ = enough.place_gang(members)
    assert blocking is None and len(placed) == 4
    given = [r.device_id for m in members for w in enough.prebind_claims(m.uid)
             for r in (w.allocation.results if w.allocation else ())]  # fmt: skip
    assert len(given) == 8 and len(set(given)) == 8  # no GPU twice
    short = gang_cluster((4, 2))  # 6 GPUs for 8: nobody is placed, nothing stays assumed
    placed, blocking, wait = short.place_gang(members)
    assert placed == [] and blocking is not None and wait is not None
    assert short.table.devices.in_use() == frozenset()
    assert all(short.table.devices.claim("ml", f"m{m}").allocation is None for m in range(4))  # type: ignore[union-attr]
