"""A plugin error (not a verdict on the nodes) as kube-scheduler handles it: the pod waits
with the error as its message, the FailedScheduling report carries reason SchedulerError
(the PodScheduled condition's), and it is retried after a backoff, not parked until an
event. The error here: a preferred node affinity term the label-selector parser refuses."""

from __future__ import annotations

from services.scheduler.state import SchedulerState
from splitsched.core import models
from splitsched.core.clock import FakeClock
from tests.support import builders
from tests.support.scheduler import parked

GT_FOUR = models.NodeSelectorTerm(
    match_expressions=(models.NodeSelectorRequirement("gen", "Gt", ("four",)),)
)


def test_a_pre_score_error_reports_scheduler_error_and_retries_after_backoff(
    state: SchedulerState, clock: FakeClock
) -> None:
    for name in ("n1", "n2"):
        state.apply_node("ADDED", builders.node(name, cpu=4000, pods=10))
    affinity = models.NodeAffinity(preferred=(models.PreferredSchedulingTerm(1, GT_FOUR),))
    state.apply_pod("ADDED", builders.pod("p", scheduler_name="splitsched", node_affinity=affinity))
    report = parked(state)
    assert report.reason == "SchedulerError" and report.report
    assert report.message.startswith('running PreScore plugin "NodeAffinity": ')
    assert state.records["uid-default-p"].message == report.message
    assert state.schedule_one() is None  # backing off
    clock.advance(2)
    state.queue.flush()
    assert parked(state).reason == "SchedulerError"  # retried without any cluster event


def test_a_verdict_on_the_nodes_still_reports_unschedulable(state: SchedulerState) -> None:
    state.apply_node("ADDED", builders.node("n1", cpu=1000, pods=10))
    state.apply_pod("ADDED", builders.req_pod(cpu=2000, name="big", scheduler_name="splitsched"))
    assert parked(state).reason == "Unschedulable"
