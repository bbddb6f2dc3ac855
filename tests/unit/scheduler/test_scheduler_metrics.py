"""What the scheduler's metrics count from the state's decision events: adopted decisions,
outcomes by result, and for a bound pod the SLI latency by attempts; and which attempts
observe the cycle's latency."""

from __future__ import annotations

from dataclasses import replace

from services.scheduler.metrics import SchedulerMetrics, attempts_label
from services.scheduler.state import DecisionEvent, EventKind, PodRecord, SchedulerState
from splitsched.core import algorithm, models, profiles
from splitsched.core.cache import SchedulerCache
from splitsched.core.clock import FakeClock
from splitsched.core.queue import SchedulingQueue

POD = models.Pod(uid="u", namespace="ns", name="a", scheduler_name="splitsched")


def new_state(clock: FakeClock) -> SchedulerState:
    algo = algorithm.FrameworkAlgorithm(
        cache=SchedulerCache(clock=clock), profiles=profiles.load_profiles(None)
    )
    return SchedulerState(
        algo=algo, queue=SchedulingQueue(clock=clock), clock=clock, scheduler_id="s"
    )


def event(kind: str, message: str = "", *, adopted: bool = False) -> DecisionEvent:
    return DecisionEvent(
        kind=EventKind(kind),
        pod=POD,
        node="n1",
        message=message,
        decision_id="d-1",
        at=0.0,
        adopted=adopted,
    )


def sample(metrics: SchedulerMetrics, name: str, **labels: str) -> float:
    return metrics.registry.get_sample_value(name, labels) or 0.0


def test_decision_events_count_adoptions_outcomes_and_bound_latency() -> None:
    clock = FakeClock(100.0)
    state = new_state(clock)
    metrics = SchedulerMetrics()
    observe = metrics.decision_listener(state)
    # Seen at 80 but queued at 90 (its scheduling gates were removed then): the SLI runs
    # from the queueing, as kube-scheduler's does.
    state.records["u"] = PodRecord(pod=POD, scheduling_attempts=3, first_seen=80.0, queued_at=90.0)
    observe(event("SCHEDULED", "adopted from binder b-0", adopted=True))
    observe(event("SCHEDULED", "made here"))
    observe(event("UNSCHEDULABLE"))
    observe(event("CONFLICT"))
    observe(event("BOUND"))
    assert sample(metrics, "splitsched_scheduler_adopted_decisions_total") == 1
    outcomes = "splitsched_scheduler_binding_outcomes_total"
    assert sample(metrics, outcomes, result="CONFLICT") == 1
    assert sample(metrics, outcomes, result="BOUND") == 1
    assert sample(metrics, outcomes, result="UNSCHEDULABLE") == 0
    assert sample(metrics, "splitsched_scheduler_pods_bound_total") == 1
    sli = "scheduler_pod_scheduling_sli_duration_seconds"
    assert sample(metrics, f"{sli}_count", attempts="3") == 1
    assert sample(metrics, f"{sli}_sum", attempts="3") == 10.0
    assert sample(metrics, "scheduler_pod_scheduling_attempts_sum") == 3


def test_a_bound_pod_without_a_record_counts_but_observes_no_latency() -> None:
    metrics = SchedulerMetrics()
    metrics.decision_listener(new_state(FakeClock(0.0)))(event("BOUND"))
    assert sample(metrics, "splitsched_scheduler_pods_bound_total") == 1
    assert sample(metrics, "scheduler_pod_scheduling_attempts_count") == 0


def test_attempts_observe_the_cycle_only_when_it_was_measured() -> None:
    metrics = SchedulerMetrics()
    metrics.attempt("scheduled", "p", seconds=0.001)
    metrics.attempt("preempting", "p")
    attempts = "scheduler_schedule_attempts_total"
    cycle = "scheduler_scheduling_attempt_duration_seconds_count"
    assert sample(metrics, attempts, result="scheduled", profile="p") == 1
    assert sample(metrics, attempts, result="preempting", profile="p") == 1
    assert sample(metrics, cycle, result="scheduled", profile="p") == 1
    assert sample(metrics, cycle, result="preempting", profile="p") == 0


def test_the_attempts_label_is_capped() -> None:
    assert [attempts_label(n) for n in (1, 9, 10, 250)] == ["1", "9", "10+", "10+"]


def test_rejections_count_each_plugin_of_an_unschedulable_attempt() -> None:
    metrics = SchedulerMetrics()
    metrics.rejected(frozenset({"NodeResourcesFit", "TaintToleration"}), "p")
    metrics.rejected(frozenset({"NodeResourcesFit"}), "p")
    metrics.rejected(frozenset(), "p")
    name = "splitsched_scheduler_plugin_rejections_total"
    assert sample(metrics, name, plugin="NodeResourcesFit", profile="p") == 2
    assert sample(metrics, name, plugin="TaintToleration", profile="p") == 1


def sli_exemplars(metrics: SchedulerMetrics) -> dict[str, set[str]]:
    """Per latency histogram, the trace ids on its exemplars (in OpenMetrics)."""
    out: dict[str, set[str]] = {}
    for metric in metrics.registry.collect():
        for s in metric.samples:
            if s.exemplar is not None:
                out.setdefault(metric.name, set()).add(s.exemplar.labels["trace_id"])
    return out


def test_a_bound_pods_latencies_carry_its_sampled_attempts_trace_id() -> None:
    trace_id = "4bf92f3577b34da6a3ce929d0e0e4736"
    state = new_state(FakeClock(100.0))
    pod = models.Pod(uid="u", namespace="ns", name="a", creation_timestamp=95.0)
    state.records["u"] = PodRecord(pod=pod, scheduling_attempts=1, first_seen=90.0, queued_at=90.0)
    asked: list[tuple[str, str]] = []

    def trace_id_of(uid: str, decision_id: str) -> str:
        asked.append((uid, decision_id))
        return trace_id if decision_id == "d-1" else ""  # d-2's attempt was not sampled

    metrics = SchedulerMetrics()
    observe = metrics.decision_listener(state, trace_id_of)
    bound = event("BOUND")
    observe(DecisionEvent(EventKind.BOUND, pod, "n1", "", "d-1", 0.0))
    assert asked == [("u", "d-1")]
    assert sli_exemplars(metrics) == {
        "scheduler_pod_scheduling_sli_duration_seconds": {trace_id},
        "splitsched_pod_creation_to_bound_seconds": {trace_id},
    }
    unsampled = SchedulerMetrics()
    unsampled.decision_listener(state, trace_id_of)(replace(bound, decision_id="d-2"))
    assert sli_exemplars(unsampled) == {}
