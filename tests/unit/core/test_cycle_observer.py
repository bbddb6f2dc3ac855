"""The core tells its observer each step of a cycle, in order, without being patched:
`FrameworkAlgorithm(observer=RecordingObserver())` and read the calls back. Tracing
(services/scheduler/traces.py) builds its spans from exactly these calls."""

from __future__ import annotations

import dataclasses
import random
from typing import ClassVar

from splitsched.core import algorithm, framework, models, profiles
from splitsched.core.cache import SchedulerCache
from splitsched.core.observer import NO_OBSERVER, CycleObserver, Observed, RecordingObserver

GI = 1024**3


def node(name: str, cpu: int = 1000) -> models.Node:
    return models.Node(
        name=name, allocatable={models.CPU: cpu, models.MEMORY: 4 * GI, models.PODS: 10}
    )


def pod(name: str, cpu: int = 600, **kw: object) -> models.Pod:
    return models.Pod(
        uid=f"uid-{name}",
        namespace="ns",
        name=name,
        scheduler_name="splitsched",
        containers=(models.Container("c", {models.CPU: cpu}),),
        **kw,  # type: ignore[arg-type]
    )


def gang_pod(name: str, *, cpu: int, min_member: int) -> models.Pod:
    return dataclasses.replace(pod(name, cpu=cpu), group=models.PodGroupRef("g", min_member))


def observed(
    *nodes: models.Node, profs: dict[str, framework.Profile] | None = None
) -> tuple[algorithm.FrameworkAlgorithm, RecordingObserver]:
    recorder = RecordingObserver()
    cache = SchedulerCache()
    for n in nodes:
        cache.add_node(n)
    algo = algorithm.FrameworkAlgorithm(
        cache=cache,
        profiles=profs if profs is not None else profiles.load_profiles(None),
        rng=random.Random(0),
        observer=recorder,
    )
    return algo, recorder


def test_the_recorder_and_the_no_op_are_cycle_observers() -> None:
    recorder: CycleObserver = RecordingObserver()
    assert recorder is not NO_OBSERVER
    algo = algorithm.FrameworkAlgorithm(cache=SchedulerCache(), profiles={})
    assert algo.observer is NO_OBSERVER  # the default: nobody watches


def test_a_scheduled_pod_is_scored_inside_its_cycle_then_assumed() -> None:
    algo, recorder = observed(node("n1"), node("n2"))
    result = algo.schedule(pod("a"))
    assert result.bind is not None
    chosen = result.bind.node
    assert algo.assume(pod("a"), chosen, result.state).ok
    assert recorder.calls == [
        Observed("schedule_started", "a"),
        Observed("score_started", "a"),
        Observed("score_finished", "a"),
        Observed("schedule_finished", "a", f"bind {chosen}"),
        Observed("assume_started", "a", chosen),
        Observed("assume_finished", "a", f"{chosen} ok"),
    ]
    assert recorder.results == [result]  # the very result the caller got


def test_one_feasible_node_needs_no_scoring() -> None:
    algo, recorder = observed(node("n1"), node("small", cpu=100))
    assert algo.schedule(pod("a")).bind is not None
    assert recorder.names() == ["schedule_started", "schedule_finished"]
    assert recorder.calls[-1] == Observed("schedule_finished", "a", "bind n1")


def test_a_failed_schedule_finishes_with_its_wait_and_nothing_else() -> None:
    algo, recorder = observed(node("n1", cpu=500))
    result = algo.schedule(pod("big"))
    assert result.wait is not None
    assert recorder.calls == [
        Observed("schedule_started", "big"),
        Observed("schedule_finished", "big", "wait"),
    ]


def test_a_preemption_finishes_the_cycle_with_the_nominated_node() -> None:
    algo, recorder = observed(node("n1"))
    algo.cache.add_pod(dataclasses.replace(pod("low", cpu=800), node_name="n1"))
    result = algo.schedule(pod("high", priority=100))
    assert result.preempt is not None
    assert recorder.calls == [
        Observed("schedule_started", "high"),
        Observed("schedule_finished", "high", "preempt n1"),
    ]


class RejectingReserve:
    """A Reserve plugin that refuses every pod (and counts its Unreserve calls)."""

    name: ClassVar[str] = "RejectingReserve"

    def __init__(self) -> None:
        self.unreserved = 0

    def reserve(self, state: framework.CycleState, pod: models.Pod, node: str) -> framework.Status:
        return framework.Status.unschedulable("no room in the ledger", plugin=self.name)

    def unreserve(self, state: framework.CycleState, pod: models.Pod, node: str) -> None:
        self.unreserved += 1


def test_a_rejected_assume_finishes_with_the_rejection() -> None:
    profs = profiles.load_profiles(None)
    profs["splitsched"].reserve.append(RejectingReserve())
    algo, recorder = observed(node("n1"), profs=profs)
    status = algo.assume(pod("a"), "n1")
    assert not status.ok
    assert recorder.calls == [
        Observed("assume_started", "a", "n1"),
        Observed("assume_finished", "a", "n1 Unschedulable"),
    ]


def test_a_gang_wraps_its_members_cycles() -> None:
    algo, recorder = observed(node("n1"), node("n2"))
    members = [gang_pod(name, cpu=600, min_member=2) for name in ("m0", "m1")]
    placed, blocking, _ = algo.place_gang(members)
    assert blocking is None and len(placed) == 2
    (_, first), (_, second) = placed
    assert recorder.calls == [
        Observed("gang_started", "m0,m1"),
        Observed("schedule_started", "m0"),
        Observed("score_started", "m0"),
        Observed("score_finished", "m0"),
        Observed("schedule_finished", "m0", f"bind {first}"),
        Observed("assume_started", "m0", first),
        Observed("assume_finished", "m0", f"{first} ok"),
        Observed("schedule_started", "m1"),  # one node left: no scoring
        Observed("schedule_finished", "m1", f"bind {second}"),
        Observed("assume_started", "m1", second),
        Observed("assume_finished", "m1", f"{second} ok"),
        Observed("gang_finished", "m0,m1", "placed 2/2"),
    ]


def test_a_gang_that_does_not_fit_names_its_blocking_member() -> None:
    algo, recorder = observed(node("n1"), node("n2"))
    members = [gang_pod(name, cpu=600, min_member=3) for name in ("m0", "m1", "m2")]
    placed, blocking, _ = algo.place_gang(members)
    assert placed == [] and blocking is not None and blocking.name == "m2"
    assert recorder.names()[0] == "gang_started"
    assert recorder.calls[-2:] == [
        Observed("schedule_finished", "m2", "wait"),
        Observed("gang_finished", "m0,m1,m2", "placed 0/3, blocked by m2"),
    ]
    assert algo.cache.assumed_pods() == []  # the two placed members were forgotten


def test_scoring_outside_a_cycle_is_not_reported() -> None:
    """Simulate's top nodes score every feasible node again: no cycle step."""
    algo, recorder = observed(node("n1"), node("n2"))
    profile = algo.profile_for(pod("a"))
    assert profile is not None
    assert algo.scored_nodes(profile, pod("a")) is not None
    assert recorder.calls == []
