"""DefaultPreemption: victims and node chosen by kube-scheduler's criteria; the table is
left exactly as it was."""

from __future__ import annotations

import numpy as np

from splitsched.core import models
from tests.support.builders import algorithm_over, cpu_node, cpu_pod


def test_preempts_lowest_priority_victims_on_the_best_node() -> None:
    algo = algorithm_over(
        [cpu_node("a"), cpu_node("b")],
        [
            cpu_pod("a-low", 3000, priority=1, node="a"),
            cpu_pod("a-mid", 1000, priority=5, node="a"),
            cpu_pod("b-mid", 3000, priority=5, node="b"),
            cpu_pod("b-mid2", 1000, priority=5, node="b"),
        ],
    )
    before = algo.table.requested.copy()
    result = algo.schedule(cpu_pod("vip", 2000, priority=10))
    assert result.preempt is not None
    assert result.preempt.node == "a"  # its highest victim has priority 1, b's has 5
    assert [v.name for v in result.preempt.victims] == ["a-low"]  # a-mid is reprieved
    assert np.array_equal(before, algo.table.requested)
    algo.cache.check_invariants()


def test_minimal_victim_set_reprieves_what_it_can() -> None:
    algo = algorithm_over(
        [cpu_node("a")],
        [cpu_pod(f"p{i}", 1000, priority=i, node="a") for i in range(4)],
    )
    result = algo.schedule(cpu_pod("vip", 2000, priority=10))
    assert result.preempt is not None
    assert sorted(v.name for v in result.preempt.victims) == ["p0", "p1"]


def test_pdb_steers_the_choice() -> None:
    algo = algorithm_over(
        [cpu_node("a"), cpu_node("b")],
        [
            cpu_pod("a-low", 3000, priority=1, node="a", labels={"app": "db"}),
            cpu_pod("b-low", 3000, priority=2, node="b", labels={"app": "web"}),
        ],
    )
    algo.cache.set_pdb(
        models.PodDisruptionBudget(
            "d", "db", models.LabelSelector(match_labels=(("app", "db"),)), disruptions_allowed=0
        )
    )
    result = algo.schedule(cpu_pod("vip", 2000, priority=10))
    assert result.preempt is not None
    assert result.preempt.node == "b"  # evicting a-low would violate its PDB


def test_never_policy_and_equal_priority_do_not_preempt() -> None:
    algo = algorithm_over([cpu_node("a")], [cpu_pod("low", 3000, priority=1, node="a")])
    never = algo.schedule(cpu_pod("vip", 2000, priority=10, policy="Never"))
    assert never.wait is not None and never.preempt is None
    peer = algo.schedule(cpu_pod("peer", 2000, priority=1))
    assert peer.wait is not None and peer.preempt is None


def test_unresolvable_rejections_are_not_candidates() -> None:
    cordoned = models.Node(
        name="c", allocatable={models.CPU: 4000, models.PODS: 110}, unschedulable=True
    )
    algo = algorithm_over([cordoned], [cpu_pod("low", 3000, priority=1, node="c")])
    result = algo.schedule(cpu_pod("vip", 2000, priority=10))
    assert result.wait is not None and result.preempt is None


def test_latest_started_victims_are_preferred_on_ties() -> None:
    algo = algorithm_over(
        [cpu_node("a"), cpu_node("b")],
        [
            cpu_pod("old", 3000, priority=1, node="a", started=100.0),
            cpu_pod("new", 3000, priority=1, node="b", started=200.0),
        ],
    )
    result = algo.schedule(cpu_pod("vip", 2000, priority=10))
    assert result.preempt is not None and result.preempt.node == "b"
