"""DynamicResources' Filter through the algorithm: each node's answer for a pod with
ResourceClaims, in kube-scheduler's words, as Explain shows it and as the pod's wait says;
the nodes where the claims can be allocated pass."""

from __future__ import annotations

import dataclasses
import random
from typing import Any

import pytest

from splitsched.core import algorithm, framework, models, profiles
from splitsched.core.cache import SchedulerCache
from splitsched.core.devices import allocator, judge, model, requests
from splitsched.core.plugins import dynamic_resources
from tests.support.devices import device, name_is, node_slice

GI = 2**30
GPU_CLASS = model.DeviceClass("gpu", ('device.driver == "driver-a"',))


def node(name: str) -> models.Node:
    allocatable = {models.CPU: 4000, models.MEMORY: 8 * GI, models.PODS: 110}
    return models.Node(name, labels={"kubernetes.io/hostname": name}, allocatable=allocatable)


def gpu_claim(name: str, *selectors: str, **fields: object) -> model.ResourceClaim:
    request = model.DeviceRequest("gpu", model.RequestSpec("gpu", "gpu", selectors))
    return model.ResourceClaim("ml", name, f"uid-{name}", requests=(request,), **fields)  # type: ignore[arg-type]


def setup(*claims: model.ResourceClaim) -> algorithm.FrameworkAlgorithm:
    cache = SchedulerCache()
    for n in ("node-1", "node-2", "node-3"):
        cache.add_node(node(n))
    view = cache.table.devices
    view.set(GPU_CLASS)
    view.set(node_slice("s1", "node-1", device("gpu-0", model="A100")))
    view.set(node_slice("s2", "node-2", device("gpu-0", model="T4"), pool="pool-2"))
    for c in claims:
        view.set(c)
    return algorithm.FrameworkAlgorithm(
        cache=cache, profiles=profiles.load_profiles(None), rng=random.Random(1)
    )


def pod(*claims: str) -> models.Pod:
    return models.Pod(
        "uid-p", "ml", "p", scheduler_name=profiles.DEFAULT_SCHEDULER_NAME,
        resource_claims=tuple(models.PodResourceClaim(c, c) for c in claims),
    )  # fmt: skip


def explained_by_node(algo: algorithm.FrameworkAlgorithm, p: models.Pod) -> dict[str, str]:
    """DynamicResources' answer per node, as Explain shows it (with its detail)."""
    explanation = algo.explain(p)
    out = {}
    for rejection in explanation.rejections:
        if rejection.plugin == "DynamicResources":
            for row, reasons in zip(rejection.rows, rejection.reasons, strict=True):
                (out[algo.table.names[row]],) = reasons
    return out


def reasons_by_node(algo: algorithm.FrameworkAlgorithm, p: models.Pod) -> dict[str, str]:
    """kube's words per node: Explain's answers without the detail it adds after
    "cannot allocate all claims: "."""
    detailed = f"{judge.CANNOT_ALLOCATE}: "
    return {
        node: judge.CANNOT_ALLOCATE if reason.startswith(detailed) else reason
        for node, reason in explained_by_node(algo, p).items()
    }


def test_explain_names_the_request_each_node_could_not_meet_and_the_wait_keeps_kubes_words() -> (
    None
):
    a100 = 'device.attributes["driver-a"].model == "A100"'
    algo = setup(gpu_claim("c1", a100), gpu_claim("c2", a100))
    first = algo.schedule(pod("c1"))
    assert first.bind is not None and first.bind.node == "node-1"
    assert algo.assume(pod("c1"), "node-1", first.state).ok  # node-1's one A100 is taken
    second = dataclasses.replace(pod("c2"), uid="uid-q", name="q")
    wanted = f"claim ml/c2, request gpu: wants 1 device of class gpu (selector {a100})"
    assert explained_by_node(algo, second) == {
        "node-1": f"{judge.CANNOT_ALLOCATE}: {wanted}; 1 of the node's devices pass, 0 of"
        " them free",
        "node-2": f"{judge.CANNOT_ALLOCATE}: {wanted}; no device of the node passes",
        "node-3": f"{judge.CANNOT_ALLOCATE}: no ResourceSlice offers devices to this node",
    }
    wait = algo.schedule(second).wait
    assert wait is not None
    assert wait.summary.startswith("0/3 nodes are available: 3 cannot allocate all claims.")


def test_each_node_says_whether_the_claims_could_be_allocated_there() -> None:
    a100 = 'device.attributes["driver-a"].model == "A100"'
    algo = setup(gpu_claim("c1", a100))
    assert reasons_by_node(algo, pod("c1")) == {
        "node-2": judge.CANNOT_ALLOCATE,
        "node-3": judge.CANNOT_ALLOCATE,
    }
    result = algo.schedule(pod("c1"))
    assert result.bind is not None and result.bind.node == "node-1"


def test_a_device_another_claim_holds_is_not_free() -> None:
    held = model.Allocation(
        (model.DeviceResult("gpu", "driver-a", "pool-1", "gpu-0"),), name_is("node-1")
    )
    algo = setup(gpu_claim("other", allocation=held), gpu_claim("c1"))
    reasons = reasons_by_node(algo, pod("c1"))
    assert reasons["node-1"] == judge.CANNOT_ALLOCATE
    assert "node-2" not in reasons


def test_an_allocated_claim_is_usable_only_where_its_devices_are() -> None:
    held = model.Allocation(
        (model.DeviceResult("gpu", "driver-a", "pool-1", "gpu-0"),), name_is("node-1")
    )
    algo = setup(gpu_claim("c1", allocation=held))
    reasons = reasons_by_node(algo, pod("c1"))
    assert "node-1" not in reasons
    assert reasons["node-2"] == reasons["node-3"] == judge.NOT_AVAILABLE


def test_a_selector_error_fails_the_cycle_as_kubes_filter_error_does() -> None:
    """kube's Filter returns an Error: no node verdict, no PostFilter, a backoff."""
    algo = setup(gpu_claim("c1", 'device.attributes["driver-a"].healthy'))
    expected = (
        'running "DynamicResources" filter plugin: claim ml/c1: selector #0:'
        " CEL runtime error: no such key: healthy"
    )
    assert set(reasons_by_node(algo, pod("c1")).values()) == {expected}
    wait = algo.schedule(pod("c1")).wait
    assert wait is not None and wait.scheduler_error and wait.summary == expected


def test_a_selector_that_errs_on_one_nodes_device_only_fails_the_cycle() -> None:
    """node-1's device has the attribute and would fit; node-2's raises. kube's Filter
    errs on node-2 and the whole cycle fails, whatever node-1 said."""
    algo = setup(gpu_claim("c1", 'device.attributes["driver-a"].healthy'))
    algo.table.devices.set(node_slice("s1", "node-1", device("gpu-0", healthy=True)))
    wait = algo.schedule(pod("c1")).wait
    assert wait is not None and wait.scheduler_error
    assert "no such key: healthy" in wait.summary


def test_the_allocator_speaks_before_an_allocated_claim_that_is_elsewhere() -> None:
    """kube: "resourceclaim not available on the node" only where the new claims fit."""
    held = model.Allocation(
        (model.DeviceResult("gpu", "driver-a", "pool-2", "gpu-0"),), name_is("node-2")
    )
    a100 = 'device.attributes["driver-a"].model == "A100"'
    algo = setup(gpu_claim("placed", allocation=held), gpu_claim("new", a100))
    assert reasons_by_node(algo, pod("placed", "new")) == {
        "node-1": judge.NOT_AVAILABLE,  # "new" fits here, "placed" is on node-2
        "node-2": judge.CANNOT_ALLOCATE,  # "placed" is here, "new" does not fit
        "node-3": judge.CANNOT_ALLOCATE,
    }


def test_only_the_nodes_every_other_filter_passed_are_judged(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """kube runs DynamicResources' Filter last, on the nodes left: a cordoned node is
    not searched for devices (at 10,000 nodes, each search counts)."""
    judged: list[str] = []
    real = judge.judge_node

    def counting(node: models.Node, *rest: Any) -> tuple[str, tuple[model.Allocation, ...]]:
        judged.append(node.name)
        return real(node, *rest)

    monkeypatch.setattr(f"{dynamic_resources.__name__}.judge_node", counting)
    algo = setup(gpu_claim("c1"))
    for name in ("node-2", "node-3"):
        algo.cache.update_node(dataclasses.replace(node(name), unschedulable=True))
    result = algo.schedule(pod("c1"))
    assert judged == ["node-1"]
    assert result.bind is not None and result.bind.node == "node-1"


def test_a_node_added_or_relabelled_requeues_pods_waiting_for_devices() -> None:
    """An allocated claim's node selector and network slices' selectors read labels."""
    events = dynamic_resources.DynamicResources.events
    E = framework.ClusterEvent
    assert {E.NODE_ADD, E.NODE_LABEL, E.NODE_ALLOCATABLE} <= events


def test_pods_without_claims_are_not_judged() -> None:
    algo = setup()
    plain = models.Pod("uid-w", "ml", "web", scheduler_name=profiles.DEFAULT_SCHEDULER_NAME)
    assert algo.schedule(plain).bind is not None
    assert "DynamicResources" not in {r.plugin for r in algo.explain(plain).rejections}


def test_a_search_past_its_budget_fails_the_cycle_with_kubes_timeout() -> None:
    """8 of 32 devices that must agree with a 33rd no one of them agrees with: only the
    search finds out, and it stops at its budget as kube's Filter stops at 10 s."""
    devices = [device(f"a-{i}", kind="a", x=1) for i in range(32)] + [device("b", kind="b", x=2)]
    kind = 'device.attributes["driver-a"].kind == "{}"'
    requests = (
        model.DeviceRequest("a", model.RequestSpec("a", "gpu", (kind.format("a"),), count=8)),
        model.DeviceRequest("b", model.RequestSpec("b", "gpu", (kind.format("b"),))),
    )
    same_x = (model.MatchAttribute("driver-a/x"),)
    algo = setup(model.ResourceClaim("ml", "c1", "uid-c1", requests=requests, constraints=same_x))
    algo.table.devices.set(node_slice("s1", "node-1", *devices))
    wait = algo.schedule(pod("c1")).wait
    assert wait is not None and wait.scheduler_error
    assert wait.summary.endswith("node node-1: timed out trying to allocate devices")


def test_a_tainted_device_is_not_offered_unless_tolerated() -> None:
    taint = model.DeviceTaint("gpu.example.com/broken", "", "NoSchedule")
    algo = setup(gpu_claim("c1"))
    algo.table.devices.set(
        node_slice("s1", "node-1", dataclasses.replace(device("gpu-0"), taints=(taint,)))
    )
    assert explained_by_node(algo, pod("c1"))["node-1"].endswith(
        "no device of the node passes; 1 more cannot be used (device gpu-0 has taint"
        " gpu.example.com/broken:NoSchedule, not tolerated)"
    )
    tolerant = model.DeviceToleration(key="gpu.example.com/broken", operator="Exists")
    spec = model.RequestSpec("gpu", "gpu", tolerations=(tolerant,))
    algo.table.devices.set(
        model.ResourceClaim("ml", "c2", "uid-c2", requests=(model.DeviceRequest("gpu", spec),))
    )
    assert "node-1" not in reasons_by_node(algo, pod("c2"))


def test_a_distinct_attribute_constraint_is_a_clear_error_not_a_wrong_match() -> None:
    distinct = (model.MatchAttribute("", distinct_attribute="driver-a/model"),)
    algo = setup(gpu_claim("c1", constraints=distinct))
    wait = algo.schedule(pod("c1")).wait
    assert wait is not None and wait.scheduler_error
    assert "distinctAttribute is not supported by splitsched yet" in wait.summary


def test_nodes_without_devices_are_answered_without_a_search(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """kube's allocator checks the claims on every node and finds nothing to search on a
    node without devices; the check's answer is the same on each, so it runs once."""
    searched: list[str] = []
    real = allocator.allocate

    def counting(*args: Any, **kwargs: Any) -> Any:
        searched.append(args[4].name)
        return real(*args, **kwargs)

    monkeypatch.setattr(allocator, "allocate", counting)
    checks: list[object] = []
    real_plan = requests.plan_claims

    def checking(*args: Any) -> Any:
        checks.append(args)
        return real_plan(*args)

    monkeypatch.setattr(judge, "plan_claims", checking)
    algo = setup(gpu_claim("c1"))
    for n in range(4, 10):
        algo.cache.add_node(node(f"node-{n}"))
    assert reasons_by_node(algo, pod("c1"))["node-9"] == judge.CANNOT_ALLOCATE
    assert sorted(searched) == ["node-1", "node-2"] and len(checks) == 1


def test_a_claims_error_on_nodes_without_devices_still_fails_the_cycle() -> None:
    """No node has devices: kube's allocator still raises on the first node it judges."""
    distinct = (model.MatchAttribute("", distinct_attribute="driver-a/model"),)
    algo = setup(gpu_claim("c1", constraints=distinct))
    for name in ("s1", "s2"):
        algo.table.devices.remove(node_slice(name, "node-1"))
    assert not algo.table.devices.inventory.pools_for(algo.table.nodes[0])
    wait = algo.schedule(pod("c1")).wait
    assert wait is not None and wait.scheduler_error
    assert "distinctAttribute is not supported by splitsched yet" in wait.summary
