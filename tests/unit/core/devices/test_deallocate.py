"""DynamicResources' PostFilter deallocates, as kube-scheduler v1.36's does: an allocated
claim of the pod that Filter found "not available" on a node, reserved for no other pod,
is given back ("deallocation of ResourceClaim completed"), so that the next attempt may
allocate it where the pod fits. The deallocation is left for the binder in the cycle
state (`framework.DEALLOCATE_CLAIMS`)."""

from __future__ import annotations

import dataclasses
import random

from splitsched.core import algorithm, framework, models, profiles
from splitsched.core.cache import SchedulerCache
from splitsched.core.devices import model
from splitsched.core.plugins import dynamic_resources
from tests.support.devices import device, name_is, node_slice

GI = 2**30
GPU_CLASS = model.DeviceClass("gpu", ('device.driver == "driver-a"',))
ON_NODE_1 = model.Allocation(
    (model.DeviceResult("gpu", "driver-a", "pool-1", "gpu-0"),), name_is("node-1")
)
POD_UID = "uid-p"


def node(name: str, **fields: object) -> models.Node:
    allocatable = {models.CPU: 4000, models.MEMORY: 8 * GI, models.PODS: 110}
    labels = {"kubernetes.io/hostname": name}
    return models.Node(name, labels=labels, allocatable=allocatable, **fields)  # type: ignore[arg-type]


def claim(name: str, **fields: object) -> model.ResourceClaim:
    request = model.DeviceRequest("gpu", model.RequestSpec("gpu", "gpu"))
    return model.ResourceClaim("ml", name, f"uid-{name}", requests=(request,), **fields)  # type: ignore[arg-type]


def setup(*claims: model.ResourceClaim, node_1_full: bool = True) -> algorithm.FrameworkAlgorithm:
    """node-1 holds the GPU the claim was allocated; it is cordoned (a failed binding's
    node that no longer takes the pod). node-2 has a free GPU."""
    cache = SchedulerCache()
    cache.add_node(node("node-1", unschedulable=node_1_full))
    cache.add_node(node("node-2"))
    view = cache.table.devices
    view.set(GPU_CLASS)
    view.set(node_slice("s1", "node-1", device("gpu-0")))
    view.set(node_slice("s2", "node-2", device("gpu-0"), pool="pool-2"))
    for c in claims:
        view.set(c)
    return algorithm.FrameworkAlgorithm(
        cache=cache, profiles=profiles.load_profiles(None), rng=random.Random(1)
    )


def pod(*claims: str) -> models.Pod:
    return models.Pod(
        POD_UID, "ml", "p", scheduler_name=profiles.DEFAULT_SCHEDULER_NAME,
        resource_claims=tuple(models.PodResourceClaim(c, c) for c in claims),
    )  # fmt: skip


def consumer(uid: str) -> model.ConsumerRef:
    return model.ConsumerRef("pods", uid.removeprefix("uid-"), uid)


def deallocated(algo: algorithm.FrameworkAlgorithm, p: models.Pod) -> tuple[str, object]:
    result = algo.schedule(p)
    assert result.wait is not None and result.state is not None, result
    return result.wait.summary, result.state.read(framework.DEALLOCATE_CLAIMS)


def test_an_allocated_claim_unusable_where_the_pod_fits_is_deallocated() -> None:
    algo = setup(claim("gpu", allocation=ON_NODE_1))
    summary, refs = deallocated(algo, pod("gpu"))
    assert summary == (
        "0/2 nodes are available: 1 node(s) were unschedulable, 1 resourceclaim not"
        " available on the node. deallocation of ResourceClaim completed, preemption: 0/2"
        " nodes are available: 2 Preemption is not helpful for scheduling."
    )
    assert refs == (model.ClaimRef("ml", "gpu", "uid-gpu"),)


def test_a_claim_reserved_only_for_this_pod_is_deallocated_too() -> None:
    """A binder's undo that could not remove the pod from reservedFor, say."""
    algo = setup(claim("gpu", allocation=ON_NODE_1, reserved_for=(consumer(POD_UID),)))
    assert deallocated(algo, pod("gpu"))[1] == (model.ClaimRef("ml", "gpu", "uid-gpu"),)


def test_a_claim_another_pod_uses_is_left_alone() -> None:
    shared = claim("gpu", allocation=ON_NODE_1, reserved_for=(consumer("uid-other"),))
    summary, refs = deallocated(setup(shared), pod("gpu"))
    assert refs is None
    assert f"{dynamic_resources.STILL_NOT}, preemption" in summary


def test_nothing_is_deallocated_where_the_pods_new_claims_do_not_fit_either() -> None:
    """kube records an unavailable claim only on nodes where the claims to allocate fit:
    node-2's only GPU is taken, so no node is "not available" for the allocated claim."""
    taken = model.Allocation(
        (model.DeviceResult("gpu", "driver-a", "pool-2", "gpu-0"),), name_is("node-2")
    )
    algo = setup(
        claim("gpu", allocation=ON_NODE_1), claim("new"), claim("holder", allocation=taken)
    )
    summary, refs = deallocated(algo, pod("gpu", "new"))
    assert refs is None and "1 cannot allocate all claims" in summary, summary


def test_a_pod_that_fits_deallocates_nothing() -> None:
    algo = setup(claim("gpu", allocation=ON_NODE_1), node_1_full=False)
    result = algo.schedule(pod("gpu"))
    assert result.bind is not None and result.bind.node == "node-1"
    assert result.state is not None and result.state.read(framework.DEALLOCATE_CLAIMS) is None


def test_after_the_deallocation_the_claim_is_allocated_where_the_pod_fits() -> None:
    algo = setup(claim("gpu", allocation=ON_NODE_1))
    assert deallocated(algo, pod("gpu"))[1]
    algo.table.devices.set(claim("gpu"))  # the binder's write, as the watch shows it
    result = algo.schedule(dataclasses.replace(pod("gpu")))
    assert result.bind is not None and result.bind.node == "node-2"
