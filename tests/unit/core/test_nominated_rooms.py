"""Rooms held for nominated pods (kube-scheduler's RunFilterPluginsWithNominatedPods): a pod
nominated to a node counts there when pods of lower or equal priority are filtered, not for
higher-priority ones, not for itself, not twice; preemption's dry runs count it too; the
table is left exactly as it was."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import replace

import numpy as np
import pytest

from splitsched.core import algorithm, framework, models, nominated_rooms
from splitsched.core.nominator import Nominator
from tests.support.builders import algorithm_over, cpu_node, cpu_pod


def pod(name: str, cpu: int, *, nominated: str = "", **kw: object) -> models.Pod:
    return replace(cpu_pod(name, cpu, **kw), nominated_node_name=nominated)  # type: ignore[arg-type]


def make(
    nodes: list[models.Node], bound: list[models.Pod], nominated: list[models.Pod]
) -> algorithm.FrameworkAlgorithm:
    algo = algorithm_over(nodes, bound)
    for p in nominated:
        algo.nominator.add(p, p.nominated_node_name)
    return algo


@pytest.mark.parametrize("priority", [10, 100])
def test_lower_or_equal_priority_pod_does_not_take_the_room(priority: int) -> None:
    held = pod("held", 3000, priority=100, nominated="a")
    algo = make([cpu_node("a")], [], [held])
    before = algo.table.requested.copy()
    result = algo.schedule(pod("small", 2000, priority=priority))
    assert result.wait is not None, result
    assert result.wait.reason_counts == {"Insufficient cpu": 1}
    assert result.wait.summary == (
        "0/1 nodes are available: 1 Insufficient cpu. no new claims to deallocate, preemption: "
        "0/1 nodes are available: 1 No preemption victims found for incoming pod."
    )
    assert "NodeResourcesFit" in result.wait.failed_plugins
    assert np.array_equal(before, algo.table.requested)
    assert "held" not in algo.table.pods[0]
    algo.cache.check_invariants()


def test_lower_priority_pod_goes_elsewhere_and_fits_beside_the_nominee() -> None:
    held = pod("held", 3000, priority=100, nominated="a")
    algo = make([cpu_node("a"), cpu_node("b", cpu=2500)], [], [held])
    placed = algo.schedule(pod("small", 2000, priority=1))
    assert placed.bind is not None and placed.bind.node == "b"
    beside = algo.schedule(pod("tiny", 1000, priority=1, node=""), suggested_nodes=["a"])
    assert beside.bind is not None and beside.bind.node == "a"  # 3000 + 1000 fit in 4000


def test_higher_priority_pod_may_take_the_room() -> None:
    held = pod("held", 3000, priority=100, nominated="a")
    algo = make([cpu_node("a")], [], [held])
    result = algo.schedule(pod("vip", 2000, priority=101))
    assert result.bind is not None and result.bind.node == "a"


def test_the_nominee_itself_is_not_kept_out_of_its_room() -> None:
    held = pod("held", 3000, priority=100, nominated="a")
    algo = make([cpu_node("a")], [], [held])
    result = algo.schedule(held)
    assert result.bind is not None and result.bind.node == "a"


def test_a_nominee_the_cache_already_counts_is_not_counted_twice() -> None:
    held = pod("held", 3000, priority=100, nominated="a")
    algo = make([cpu_node("a")], [], [held])
    algo.cache.assume(held, "a")  # our own preemption holds it assumed
    result = algo.schedule(pod("tiny", 1000, priority=1))
    assert result.bind is not None and result.bind.node == "a"
    assert algo.schedule(pod("more", 1001, priority=1)).wait is not None


def test_room_comes_back_when_the_nomination_goes() -> None:
    held = pod("held", 3000, priority=100, nominated="a")
    algo = make([cpu_node("a")], [], [held])
    assert algo.schedule(pod("small", 2000)).wait is not None
    assert algo.nominator.remove("held") == "a"
    result = algo.schedule(pod("small", 2000))
    assert result.bind is not None and result.bind.node == "a"


def test_preemption_keeps_the_room_for_the_nominee() -> None:
    # Evicting the filler frees 4000; the nominee (priority 100 >= 50) keeps 2000 of it, so
    # a 3000 preemptor cannot use node a; b is the only place its preemption works.
    held = pod("held", 2000, priority=100, nominated="a")
    bound = [
        pod("filler-a", 3000, priority=0, node="a"),
        pod("filler-b", 3500, priority=1, node="b"),
    ]
    algo = make([cpu_node("a"), cpu_node("b")], bound, [held])
    before = algo.table.requested.copy()
    result = algo.schedule(pod("mid", 3000, priority=50))
    assert result.preempt is not None
    assert result.preempt.node == "b"
    assert [v.name for v in result.preempt.victims] == ["filler-b"]
    assert np.array_equal(before, algo.table.requested)
    algo.cache.check_invariants()
    # Without the nomination it would evict the lower-priority filler on a.
    algo.nominator.clear()
    result = algo.schedule(pod("mid", 3000, priority=50))
    assert result.preempt is not None and result.preempt.node == "a"


def test_several_nominees_on_one_node_count_together() -> None:
    nominees = [
        pod("h1", 1500, priority=100, nominated="a"),
        pod("h2", 1500, priority=50, nominated="a"),
        pod("low", 1000, priority=1, nominated="a"),  # lower than the pod: not counted
    ]
    algo = make([cpu_node("a")], [], nominees)
    assert algo.schedule(pod("p", 1000, priority=50)).bind is not None  # 3000 + 1000
    assert algo.schedule(pod("p", 1001, priority=50)).wait is not None
    only_h1 = algo.schedule(pod("p", 2500, priority=51))  # h2 is below 51: 1500 + 2500
    assert only_h1.bind is not None


def test_nominator_bookkeeping() -> None:
    n = Nominator()
    p = pod("x", 100)
    n.add(p, "a")
    assert "x" in n and n.node_of("x") == "a" and len(n) == 1
    n.add(p, "b")  # re-nominated elsewhere
    assert [(node, list(pods)) for node, pods in n.by_node()] == [("b", ["x"])]
    assert next(iter(dict(n.by_node())["b"].values())).node_name == "b"
    n.add(p, "")  # cleared
    assert len(n) == 0 and list(n.by_node()) == [] and n.remove("x") == ""


def test_explain_names_the_rooms_held_for_nominees() -> None:
    held = pod("held", 3000, priority=100, nominated="a")
    algo = make([cpu_node("a"), cpu_node("b", cpu=1000)], [], [held])
    before = algo.table.requested.copy()
    why = algo.explain(pod("small", 2000, priority=5))
    assert why.feasible.size == 0
    by_plugin = {r.plugin: (r.rows.tolist(), r.reasons) for r in why.rejections}
    assert by_plugin[nominated_rooms.NOMINATED_PODS] == ([0], [("Insufficient cpu",)])
    assert by_plugin["NodeResourcesFit"][0] == [1]
    assert why.summary == (  # b is too small for the pod: preemption cannot help there
        "0/2 nodes are available: 2 Insufficient cpu. no new claims to deallocate, preemption: "
        "0/2 nodes are available: 1 No preemption victims found for incoming pod, "
        "1 Preemption is not helpful for scheduling."
    )
    assert np.array_equal(before, algo.table.requested)
    assert algo.explain(pod("vip", 2000, priority=500)).feasible.tolist() == [0]


def test_resource_shortcut_agrees_with_the_full_what_if(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows the shortcut drops (the pod surely fits beside plain nominees) must be rows the
    full what-if (nominees counted, every filter run) keeps feasible: compare the two on
    random tables, pods and nominees, extended resources and host ports among them."""
    rng = random.Random(11)
    gpu = "example.com/gpu"
    seen = {"dropped": 0, "lost": 0}
    for case in range(60):
        nodes = [
            models.Node(
                name=f"n{i}",
                allocatable={models.CPU: 4000, models.PODS: rng.choice((3, 110)), gpu: 2},
            )
            for i in range(6)
        ]
        bound = [
            cpu_pod(f"b{case}-{i}", rng.randrange(0, 3000), node=f"n{i % 6}") for i in range(4)
        ]
        nominees = []
        for i in range(rng.randrange(1, 8)):
            nominee = pod(f"h{case}-{i}", rng.randrange(0, 2500), priority=rng.choice((5, 50)),
                          nominated=f"n{rng.randrange(6)}")  # fmt: skip
            if rng.random() < 0.3:
                container = models.Container("c", {models.CPU: 100, gpu: 1})
                nominee = replace(nominee, containers=(container,))
            if rng.random() < 0.1:
                port = models.Container("p", {}, host_ports=(models.HostPort(port=80),))
                nominee = replace(nominee, containers=(*nominee.containers, port))
            nominees.append(nominee)
        incoming = pod(f"x{case}", rng.randrange(100, 2500), priority=rng.choice((1, 5, 50)))
        if rng.random() < 0.3:
            incoming = replace(incoming, containers=(models.Container("c", {gpu: 1}),))
        algo = make(nodes, bound, nominees)
        with monkeypatch.context() as m:
            m.setattr(algo, "_surely_fitting_dropped", counting(algo, seen))
            fast = feasible(algo, incoming)
        with monkeypatch.context() as m:
            m.setattr(algo, "_surely_fitting_dropped", lambda _pod, held: held)
            full = feasible(algo, incoming)
        assert fast.tolist() == full.tolist(), case
        algo.nominator.clear()
        alone = feasible(algo, incoming)
        assert (alone >= fast).all()  # nominees only ever take rows away
        seen["lost"] += int((alone & ~fast).sum())
        algo.cache.check_invariants()
    # Both sides were exercised: rows the shortcut settled, rows the nominees took.
    assert seen["dropped"] > 0 and seen["lost"] > 0, seen


Held = dict[int, list[models.Pod]]


def counting(algo: algorithm.FrameworkAlgorithm, seen: dict[str, int]) -> Callable[..., Held]:
    """The algorithm's shortcut, counting the rows it settles in seen["dropped"]."""
    shortcut = algo._surely_fitting_dropped

    def spy(p: models.Pod, held: Held) -> Held:
        kept = shortcut(p, held)
        seen["dropped"] += len(held) - len(kept)
        return kept

    return spy


def feasible(algo: algorithm.FrameworkAlgorithm, incoming: models.Pod) -> np.ndarray:
    profile = algo.profile_for(incoming)
    assert profile is not None
    state = framework.CycleState()
    assert algo._pre_filter(profile, state, incoming) is None
    return algo._filter(profile, state, incoming, None)[0]
