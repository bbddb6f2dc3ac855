"""The algorithm's one undo path (`forget`: Unreserve, then the cache) and its what-if
sessions, driven directly with no service around them."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
import pytest

from splitsched.core import algorithm, framework, models, profiles
from splitsched.core.cache import SchedulerCache
from splitsched.core.nodetable import NodeTable
from splitsched.core.scorememo import ScoreMemo

GI = 1024**3


@dataclass
class Journal:
    calls: list[str] = field(default_factory=list)


@dataclass
class Recording:
    """A Reserve plugin that writes its calls to a shared journal."""

    journal: Journal
    label: str
    name: ClassVar[str] = "Recording"

    def reserve(self, state: framework.CycleState, pod: models.Pod, node: str) -> framework.Status:
        self.journal.calls.append(f"reserve {self.label} {pod.name}@{node}")
        return framework.Status.success()

    def unreserve(self, state: framework.CycleState, pod: models.Pod, node: str) -> None:
        self.journal.calls.append(f"unreserve {self.label} {pod.name}@{node}")


def node(name: str, cpu: int = 1000) -> models.Node:
    return models.Node(
        name=name, allocatable={models.CPU: cpu, models.MEMORY: 4 * GI, models.PODS: 10}
    )


def pod(name: str, cpu: int = 600) -> models.Pod:
    return models.Pod(
        uid=f"uid-{name}",
        namespace="ns",
        name=name,
        scheduler_name="splitsched",
        containers=(models.Container("c", {models.CPU: cpu}),),
    )


def make(journal: Journal, *nodes: models.Node) -> algorithm.FrameworkAlgorithm:
    profs = profiles.load_profiles(None)
    profs["splitsched"].reserve += [Recording(journal, "first"), Recording(journal, "second")]
    algo = algorithm.FrameworkAlgorithm(
        cache=SchedulerCache(), profiles=profs, rng=random.Random(7)
    )
    for n in nodes:
        algo.cache.add_node(n)
    return algo


def test_forget_unreserves_newest_first_then_frees_the_room() -> None:
    journal = Journal()
    algo = make(journal, node("n1"))
    assert algo.assume(pod("a"), "n1").ok
    assert algo.cache.is_assumed("uid-a")
    assert algo.forget("uid-a") is True
    assert journal.calls == [
        "reserve first a@n1",
        "reserve second a@n1",
        "unreserve second a@n1",
        "unreserve first a@n1",
    ]
    assert "uid-a" not in algo.cache
    assert algo.forget("uid-a") is False  # twice is harmless, and unreserves nothing more
    assert len(journal.calls) == 4


def test_a_confirmed_pod_is_never_unreserved() -> None:
    journal = Journal()
    algo = make(journal, node("n1"))
    assert algo.assume(pod("a"), "n1").ok
    algo.confirm("uid-a")
    algo.forget("uid-a")  # say the pod was deleted before the watch confirmed it
    assert [c for c in journal.calls if c.startswith("unreserve")] == []


def test_what_if_puts_back_the_view_the_reservations_and_the_rng() -> None:
    journal = Journal()
    algo = make(journal, node("n1", cpu=2000), node("n2", cpu=2000))
    requested = algo.table.requested.copy()
    rng = algo.rng.getstate()
    with algo.what_if() as view:
        placed = [view.place(pod(f"p{i}")) for i in range(3)]
        assert all(p.result.bind is not None for p in placed)
        assert len(algo.cache) == 3
        with algo.what_if() as inner:  # sessions nest; the inner one undoes its own
            assert inner.place(pod("q")).result.bind is not None
            assert len(algo.cache) == 4
        assert len(algo.cache) == 3
        assert view.explain(pod("big", cpu=1300)).feasible.size == 1  # sees p0..p2
    assert len(algo.cache) == 0
    assert np.array_equal(algo.table.requested, requested)
    assert algo.rng.getstate() == rng
    reserves = [c for c in journal.calls if c.startswith("reserve")]
    unreserves = [c for c in journal.calls if c.startswith("unreserve")]
    assert len(reserves) == len(unreserves) == 8


def test_what_if_puts_everything_back_when_the_block_raises() -> None:
    journal = Journal()
    algo = make(journal, node("n1", cpu=2000))
    with pytest.raises(RuntimeError), algo.what_if() as view:
        view.place(pod("a"))
        raise RuntimeError("half way")
    assert len(algo.cache) == 0
    assert journal.calls[-1] == "unreserve first a@n1"


def test_the_score_memo_starts_afresh_on_a_fresh_table() -> None:
    """Two tables of the same size and spec version: the second must not be scored
    with the first one's rows."""
    profile = profiles.load_profiles(None)["splitsched"]
    active = [e for e in profile.score if getattr(e.plugin, "row_local", False)]
    memo = ScoreMemo()
    state = framework.CycleState()
    p = pod("a")
    first = NodeTable()
    first.set_node(node("n1", cpu=1000))
    second = NodeTable()
    second.set_node(node("n1", cpu=4000))
    assert first.n == second.n and first.spec_version == second.spec_version
    one = memo.raw_scores(first, profile, state, p, active)
    assert one is not None
    before = {k: v.copy() for k, v in one.raw.items()}
    two = memo.raw_scores(second, profile, state, p, active)
    assert two is not None
    fresh = ScoreMemo().raw_scores(second, profile, state, p, active)
    assert fresh is not None
    assert all(np.array_equal(two.raw[k], fresh.raw[k]) for k in fresh.raw)
    assert any(not np.array_equal(before[k], fresh.raw[k]) for k in fresh.raw)
