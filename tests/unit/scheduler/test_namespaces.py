"""Namespaces in the scheduler's view (issue 18): the watch brings their labels, a term's
namespaceSelector matches by them, and a label change requeues the pods InterPodAffinity
rejected (only those).

A state on a fake clock, driven the way the ingest drives it (`apply_namespace`,
`apply_node`, `apply_pod`), with scheduling cycles run by hand.
"""

from __future__ import annotations

from services.scheduler.state import SchedulerState
from splitsched.core import models
from splitsched.core.clock import FakeClock
from tests.support import builders
from tests.support.scheduler import decide, parked

TEAM_A = models.Namespace("team-a", {"team": "a"})


def guard_pod() -> models.Pod:
    """Requires a pod labelled app=db in a namespace labelled team=a, on the same node."""
    term = models.PodAffinityTerm(
        label_selector=builders.selector(app="db"),
        topology_key=builders.HOSTNAME,
        namespace_selector=builders.selector(team="a"),
    )
    return builders.pod(
        "guard",
        namespace="shop",
        scheduler_name="splitsched",
        pod_affinity=models.PodAffinity(required=(term,)),
    )


def setup(state: SchedulerState) -> None:
    state.apply_node("ADDED", builders.node("n1", cpu=4000, pods=10, hostname=True))
    state.apply_node("ADDED", builders.node("n2", cpu=4000, pods=10, hostname=True))
    db = builders.pod("db", namespace="team-a", node="n2", labels={"app": "db"})
    state.apply_pod("ADDED", db)
    state.apply_namespace("ADDED", models.Namespace("team-a", {"team": "b"}))


def test_the_view_keeps_namespace_labels_and_forgets_deleted_namespaces(
    state: SchedulerState,
) -> None:
    state.apply_namespace("ADDED", TEAM_A)
    assert state.cache.table.namespace_labels == {"team-a": {"team": "a"}}
    state.apply_namespace("DELETED", TEAM_A)
    assert state.cache.table.namespace_labels == {}


def retry_after_backoff(state: SchedulerState, clock: FakeClock) -> None:
    """Let a requeued pod's backoff run out (a parked pod stays parked)."""
    clock.advance(11)
    state.queue.flush()


def test_a_namespace_label_change_requeues_a_pod_its_selector_could_not_match(
    state: SchedulerState, clock: FakeClock
) -> None:
    setup(state)
    state.apply_pod("ADDED", guard_pod())
    assert "didn't match pod affinity rules" in parked(state).message
    retry_after_backoff(state, clock)
    assert state.schedule_one() is None  # parked until something may help
    state.apply_namespace("MODIFIED", models.Namespace("team-a", {"team": "b", "x": "y"}))
    retry_after_backoff(state, clock)
    assert "didn't match pod affinity rules" in parked(state).message  # any change requeues
    state.apply_namespace("MODIFIED", TEAM_A)
    retry_after_backoff(state, clock)
    assert decide(state).node == "n2"  # and this one lets it in


def test_a_namespace_update_without_label_changes_requeues_nothing(
    state: SchedulerState, clock: FakeClock
) -> None:
    setup(state)
    state.apply_pod("ADDED", guard_pod())
    parked(state)
    state.apply_namespace("MODIFIED", models.Namespace("team-a", {"team": "b"}))
    retry_after_backoff(state, clock)
    assert state.schedule_one() is None


def test_a_namespace_change_does_not_requeue_pods_other_plugins_rejected(
    state: SchedulerState, clock: FakeClock
) -> None:
    setup(state)
    state.apply_pod("ADDED", builders.req_pod(cpu=8000, name="big", scheduler_name="splitsched"))
    assert "Insufficient cpu" in parked(state).message
    state.apply_namespace("MODIFIED", TEAM_A)
    retry_after_backoff(state, clock)
    assert state.schedule_one() is None
