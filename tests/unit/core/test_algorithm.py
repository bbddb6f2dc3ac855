"""The algorithm's contract: exactly one of bind/preempt/wait, kube-style failure summaries,
no side effects from schedule/explain/simulate, and profiles honoured."""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from splitsched.core import algorithm, batch, models, nominated_rooms, profiles
from splitsched.core.cache import SchedulerCache
from tests.support.builders import algorithm_over, cpu_node, cpu_pod

GI = 1024**3


def node(name: str, *, cpu: int = 4000, mem: int = 8 * GI, **kw: object) -> models.Node:
    return models.Node(
        name=name,
        labels={"kubernetes.io/hostname": name, **kw.pop("labels", {})},  # type: ignore[dict-item]
        allocatable={models.CPU: cpu, models.MEMORY: mem, models.PODS: 110},
        **kw,  # type: ignore[arg-type]
    )


def pod(name: str, *, cpu: int = 100, mem: int = GI, **kw: object) -> models.Pod:
    return models.Pod(
        uid=f"uid-{name}",
        namespace="default",
        name=name,
        scheduler_name="splitsched",
        containers=(models.Container("c", {models.CPU: cpu, models.MEMORY: mem}),),
        **kw,  # type: ignore[arg-type]
    )


def make(
    nodes: list[models.Node], config: Mapping[str, Any] | None = None
) -> algorithm.FrameworkAlgorithm:
    cache = SchedulerCache()
    for n in nodes:
        cache.add_node(n)
    return algorithm.FrameworkAlgorithm(
        cache=cache, profiles=profiles.load_profiles(config), rng=random.Random(1)
    )


def test_bind_prefers_least_allocated_node() -> None:
    algo = make([node("busy"), node("idle")])
    algo.cache.add_pod(
        models.Pod(
            uid="x",
            namespace="d",
            name="x",
            node_name="busy",
            containers=(models.Container("c", {models.CPU: 3000, models.MEMORY: 6 * GI}),),
        )
    )
    result = algo.schedule(pod("p"))
    assert result.bind is not None and result.wait is None and result.preempt is None
    assert result.bind.node == "idle"
    assert result.bind.feasible_nodes == 2


def test_wait_summary_counts_first_failing_plugin_per_node() -> None:
    taint = models.Taint("dedicated", "gpu", "NoSchedule")
    algo = make(
        [
            node("small", cpu=500),
            node("tainted", taints=(taint,)),
            node("cordoned", unschedulable=True),
        ]
    )
    result = algo.schedule(pod("p", cpu=1000))
    assert result.wait is not None
    assert result.wait.summary == (
        "0/3 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint(s), "
        "1 node(s) were unschedulable. no new claims to deallocate, preemption: "
        "0/3 nodes are available: 3 Preemption is not helpful for scheduling."
    )
    assert result.wait.failed_plugins == frozenset(
        {"NodeResourcesFit", "TaintToleration", "NodeUnschedulable"}
    )
    assert set(result.wait.failed_node_reasons) == {"small", "tainted", "cordoned"}


def test_schedule_and_explain_leave_the_cache_untouched() -> None:
    algo = make([node("a"), node("b")])
    before = algo.table.requested.copy()
    algo.schedule(pod("p"))
    algo.explain(pod("q", cpu=10_000))
    assert np.array_equal(before, algo.table.requested)
    assert len(algo.cache) == 0


def test_explain_lists_every_rejecting_plugin_not_only_the_first() -> None:
    algo = make([node("a", cpu=500, unschedulable=True)])
    exp = algo.explain(pod("p", cpu=1000))
    assert {r.plugin for r in exp.rejections} == {"NodeUnschedulable", "NodeResourcesFit"}
    assert exp.feasible.size == 0
    assert exp.summary.startswith("0/1 nodes are available")


def test_simulate_sees_earlier_pods_and_undoes_everything() -> None:
    algo = make([node("only", cpu=1000)])
    results = algo.simulate([pod("a", cpu=600), pod("b", cpu=600)])
    assert results[0][1].bind is not None and results[0][1].bind.node == "only"
    assert results[1][1].wait is not None  # a took the room
    assert len(algo.cache) == 0
    assert int(algo.table.requested[0, 0]) == 0


def test_gang_simulation_is_all_or_nothing() -> None:
    algo = make([node("only", cpu=1000)])
    results = algo.simulate([pod("a", cpu=600), pod("b", cpu=600)], gang=True)
    assert all(r.bind is None for _, r, _ in results)


def test_unknown_profile_and_invalid_pod_wait_with_a_reason() -> None:
    algo = make([node("a")])
    r1 = algo.schedule(replace(pod("p"), scheduler_name="nope"))
    assert r1.wait is not None and "no scheduler profile named 'nope'" in r1.wait.summary
    r2 = algo.schedule(
        replace(pod("q"), invalid_reason="spec.containers[0]...: invalid quantity 'abc'")
    )
    assert r2.wait is not None and "invalid quantity 'abc'" in r2.wait.summary


def test_no_nodes_means_wait() -> None:
    result = make([]).schedule(pod("p"))
    assert result.wait is not None
    # kube-scheduler's ErrNoNodesAvailable (it was "0/0 nodes are available: ." here)
    assert result.wait.summary == "no nodes available to schedule pods"


def test_suggested_nodes_restrict_the_choice() -> None:
    algo = make([node("a"), node("b"), node("c")])
    result = algo.schedule(pod("p"), suggested_nodes=["b"])
    assert result.bind is not None and result.bind.node == "b"


def test_profile_with_most_allocated_packs_pods() -> None:
    config = {
        "profiles": [
            {
                "schedulerName": "splitsched",
                "pluginConfig": [
                    {
                        "name": "NodeResourcesFit",
                        "args": {"scoringStrategy": {"type": "MostAllocated"}},
                    }
                ],
                "plugins": {"score": {"disabled": [{"name": "NodeResourcesBalancedAllocation"}]}},
            }
        ]
    }
    algo = make([node(f"n{i}") for i in range(4)], config)
    placed = [p.node for p in batch.schedule_all(algo, [pod(f"p{i}") for i in range(6)])]
    assert len(set(placed)) == 1  # bin-packing: every pod on the same node


def test_batch_places_in_queue_order_priority_first() -> None:
    algo = make([node("only", cpu=1000)])
    low = pod("low", cpu=800, creation_timestamp=1.0)
    high = pod("high", cpu=800, priority=100, creation_timestamp=2.0)
    out = {p.pod.name: p.node for p in batch.schedule_all(algo, [low, high])}
    assert out == {"high": "only", "low": None}


@pytest.mark.parametrize(
    "bad",
    [
        {"profiles": [{"plugins": {"filter": {"enabled": [{"name": "Nope"}]}}}]},
        {"profiles": [{"plugins": {"sideways": {}}}]},
        {"profiles": [{}, {}]},
    ],
)
def test_bad_profiles_are_rejected_with_the_field(bad: dict[str, object]) -> None:
    with pytest.raises(profiles.ProfileError, match=r"profiles\[\d\]"):
        profiles.load_profiles(bad)


def test_wait_names_the_plugin_that_rejected_each_node() -> None:
    """PodStatus.last_failures shows these: the first filter that rejected each node, and
    the NominatedPods pseudo-plugin for a room held for a nominee."""
    algo = algorithm_over([cpu_node("a"), cpu_node("small", cpu=1000)], [])
    held = replace(cpu_pod("held", 3000, priority=100), nominated_node_name="a")
    algo.nominator.add(held, "a")
    result = algo.schedule(cpu_pod("web", 2000, priority=10))
    assert result.wait is not None, result
    assert dict(result.wait.failed_node_plugins) == {
        "a": nominated_rooms.NOMINATED_PODS,
        "small": "NodeResourcesFit",
    }
    assert set(result.wait.failed_node_reasons) == {"a", "small"}
