"""Incremental scoring (rescoring only the rows touched since the last pod of the same
shape) must choose exactly what full scoring chooses, whatever happens in between."""

from __future__ import annotations

import random

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from splitsched.core import algorithm, framework, models, profiles
from splitsched.core.cache import SchedulerCache

GI = 1024**3
SHAPES = (
    {models.CPU: 100, models.MEMORY: GI // 2},
    {models.CPU: 500, models.MEMORY: GI},
    {models.CPU: 1000},
)
TAINT = models.Taint("spot", "true", "PreferNoSchedule")
# ImageLocality is row-local too: nodes hold none, one or both images, and lose them on
# a resize, so its memoised scores must follow.
IMAGES = ("gcr.io/a:1", "gcr.io/b")
HELD = (
    (),
    (models.ContainerImage(("gcr.io/a:1",), 600 * 1024**2),),
    (
        models.ContainerImage(("gcr.io/a:1",), 600 * 1024**2),
        models.ContainerImage(("gcr.io/b:latest",), 300 * 1024**2),
    ),
)


def build(nodes: list[models.Node], *, incremental: bool) -> algorithm.FrameworkAlgorithm:
    cache = SchedulerCache()
    for n in nodes:
        cache.add_node(n)
    algo = algorithm.FrameworkAlgorithm(
        cache=cache, profiles=profiles.load_profiles(None), rng=random.Random(3)
    )
    if not incremental:
        algo._score_memo = lambda *args: None  # type: ignore[method-assign]
    return algo


ops = st.lists(
    st.one_of(
        st.tuples(st.just("pod"), st.integers(0, len(SHAPES) - 1), st.booleans()),
        st.tuples(st.just("remove"), st.integers(0, 50), st.booleans()),
        st.tuples(st.just("resize"), st.integers(0, 7), st.booleans()),
        st.tuples(st.just("drop_node"), st.integers(0, 7), st.booleans()),
    ),
    min_size=1,
    max_size=60,
)


@settings(max_examples=60, deadline=None)
@given(ops=ops, cpus=st.lists(st.integers(1, 8), min_size=2, max_size=8))
def test_incremental_scores_equal_full_scores(
    ops: list[tuple[str, int, bool]], cpus: list[int]
) -> None:
    nodes = [
        models.Node(
            name=f"n{i}",
            allocatable={models.CPU: c * 1000, models.MEMORY: c * 2 * GI, models.PODS: 20},
            taints=(TAINT,) if i % 3 == 0 else (),
            images=HELD[i % len(HELD)],
        )
        for i, c in enumerate(cpus)
    ]
    fast, slow = build(nodes, incremental=True), build(nodes, incremental=False)
    placed: list[str] = []
    for step, (op, arg, flag) in enumerate(ops):
        for algo in (fast, slow):
            if op == "pod":
                tol = (models.Toleration("spot", "Exists"),) if flag else ()
                pod = models.Pod(
                    uid=f"p{step}",
                    namespace="d",
                    name=f"p{step}",
                    scheduler_name="splitsched",
                    containers=(models.Container("c", dict(SHAPES[arg]), image=IMAGES[step % 2]),),
                    tolerations=tol,
                )
                result = algo.schedule(pod)
                if algo is fast:
                    fast_result = result
                else:
                    assert (result.bind is None) == (fast_result.bind is None)
                    if result.bind is not None and fast_result.bind is not None:
                        assert result.bind.node == fast_result.bind.node
                        assert result.bind.score == fast_result.bind.score
                if result.bind is not None:
                    algo.assume(pod, result.bind.node, result.state)
                    if algo is slow:
                        placed.append(pod.uid)
            elif op == "remove" and placed:
                uid = placed[arg % len(placed)]
                if uid in algo.cache:
                    algo.cache.forget(uid)
            elif op == "resize" and arg < len(nodes):
                n = nodes[arg]
                scale = 2 if flag else 1
                algo.cache.update_node(
                    models.Node(
                        name=n.name,
                        taints=n.taints,
                        allocatable={k: v * scale for k, v in n.allocatable.items()},
                        images=() if flag else n.images,
                    )
                )
            elif (
                op == "drop_node"
                and arg < len(nodes)
                and flag
                and nodes[arg].name in algo.table.row_of
                and algo.table.n > 1
            ):
                algo.cache.remove_node(nodes[arg].name)
    for algo in (fast, slow):
        algo.cache.check_invariants()
    assert np.array_equal(fast.table.requested, slow.table.requested)


def test_a_constraint_plugin_turns_incremental_scoring_off() -> None:
    algo = build(
        [models.Node(name="a", allocatable={models.CPU: 1000, models.PODS: 10})],
        incremental=True,
    )
    spread = models.TopologySpreadConstraint(
        max_skew=1,
        topology_key="kubernetes.io/hostname",
        when_unsatisfiable="ScheduleAnyway",
        label_selector=models.LabelSelector(),
    )
    pod = models.Pod(
        uid="u", namespace="d", name="p", scheduler_name="splitsched",
        topology_spread_constraints=(spread,),
    )  # fmt: skip
    profile = algo.profiles["splitsched"]
    state = framework.CycleState()
    active = [e for e in profile.score]
    assert algo._score_memo(profile, state, pod, active) is None


def test_interleaved_shapes_each_rescore_only_the_rows_touched_since() -> None:
    """A mixed stream (A, B, A, ...) keeps each shape's scores: A's second pod rescores
    the rows touched since A's first, not every row."""
    nodes = [
        models.Node(name=f"n{i}", allocatable={models.CPU: 8000, models.PODS: 50})
        for i in range(40)
    ]
    algo = build(nodes, incremental=True)
    profile = algo.profiles["splitsched"]
    active = [e for e in profile.score if getattr(e.plugin, "row_local", False)]
    fit = next(e.plugin for e in active if e.plugin.name == "NodeResourcesFit")
    scored: list[int] = []
    real = fit.score

    def counting(
        state: framework.CycleState, pod: models.Pod, table: object, rows: np.ndarray
    ) -> np.ndarray:
        scored.append(rows.size)
        return real(state, pod, table, rows)  # type: ignore[arg-type]

    fit.score = counting  # type: ignore[method-assign]
    for i, cpu in enumerate((100, 500, 100, 500, 100)):
        pod = models.Pod(
            uid=f"p{i}", namespace="d", name=f"p{i}", scheduler_name="splitsched",
            containers=(models.Container("c", {models.CPU: cpu}),),
        )  # fmt: skip
        result = algo.schedule(pod)
        assert result.bind is not None
        algo.assume(pod, result.bind.node, result.state)
    assert scored == [40, 40, 2, 2, 2]  # A's second pod: the rows A's and B's pods took
