"""The scheduler's Prometheus metrics, on a per-process registry.

Created by `services.scheduler.main` (served on `/metrics`) and handed to the parts that
update them: the scheduling loop (attempts, cycle latency, queue lengths), the watch
ingest (events applied, reconnects), leadership (the leader gauge), the binder probe
(binders reachable), and the state's decision events (outcomes, bound pods, latency from
queue and creation to bound, with the attempt's trace id as an OpenMetrics exemplar when it
was sampled) through `decision_listener`. Names and buckets follow
kube-scheduler's where one exists, so its dashboards work unchanged.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from services.scheduler.state import DecisionEvent, EventKind, Listener, SchedulerState

# kube-scheduler's buckets (ExponentialBuckets(0.001, 2, 15) and (0.01, 2, 20)); the cycle's
# gets three sub-millisecond buckets in front, as ours take a fraction of a millisecond.
CYCLE_BUCKETS = (0.0001, 0.00025, 0.0005, *(0.001 * 2**i for i in range(15)))
SLI_BUCKETS = tuple(0.01 * 2**i for i in range(20))


def attempts_label(attempts: int) -> str:
    """kube-scheduler's `attempts` label, capped so a pod retried forever adds no series."""
    return str(attempts) if attempts < 10 else "10+"


class SchedulerMetrics:
    """Scheduling attempts and cycle latency, rejections by plugin, the pod scheduling SLI,
    binding outcomes, queue lengths, leadership, binders reachable, watch events and
    stream reconnects."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self._scheduling(self.registry)
        self._service(self.registry)

    def _scheduling(self, r: CollectorRegistry) -> None:
        """What the scheduling cycle and its outcomes add to."""
        self.attempts = Counter(
            "scheduler_schedule_attempts_total",
            "Scheduling attempts by result (scheduled, unschedulable, error)",
            ["result", "profile"],
            registry=r,
        )
        self.cycle = Histogram(
            "scheduler_scheduling_attempt_duration_seconds",
            "Scheduling cycle latency (filter, score, assume), by result and profile",
            ["result", "profile"],
            buckets=CYCLE_BUCKETS,
            registry=r,
        )
        self.e2e = Histogram(
            "scheduler_pod_scheduling_sli_duration_seconds",
            "From the pod entering the scheduling queue to its bound confirmation, by the "
            "number of attempts it took",
            ["attempts"],
            buckets=SLI_BUCKETS,
            registry=r,
        )
        self.created_to_bound = Histogram(
            "splitsched_pod_creation_to_bound_seconds",
            "From the pod's creationTimestamp to its bound confirmation",
            buckets=SLI_BUCKETS,
            registry=r,
        )
        self.pod_attempts = Histogram(
            "scheduler_pod_scheduling_attempts",
            "Scheduling attempts a pod took until it was bound",
            buckets=(1, 2, 4, 8, 16),
            registry=r,
        )
        self.rejections = Counter(
            "splitsched_scheduler_plugin_rejections_total",
            "Unschedulable attempts, counted once for each plugin that rejected the pod",
            ["plugin", "profile"],
            registry=r,
        )
        self.pending = Gauge("scheduler_pending_pods", "Pods in each queue", ["queue"], registry=r)
        self.outcomes = Counter(
            "splitsched_scheduler_binding_outcomes_total",
            "Decisions resolved, by result: BOUND (by a binder's report or the watch), "
            "BIND_FAILED, CONFLICT, POD_GONE",
            ["result"],
            registry=r,
        )
        self.bound = Counter(
            "splitsched_scheduler_pods_bound_total", "Pods confirmed bound", registry=r
        )
        self.adopted = Counter(
            "splitsched_scheduler_adopted_decisions_total",
            "Decisions a binder re-reported in flight that this replica did not make "
            "(its predecessor's, after a failover or restart), adopted",
            registry=r,
        )

    def _service(self, r: CollectorRegistry) -> None:
        """What the service's connections and leadership add to."""
        self.binders_reachable = Gauge(
            "splitsched_scheduler_binders_reachable",
            "1 when a binder answered the last gRPC health check SERVING, else 0",
            registry=r,
        )
        self.reconnects = Counter(
            "splitsched_grpc_stream_reconnects_total",
            "Reconnections of a gRPC stream",
            ["stream"],
            registry=r,
        )
        self.leader = Gauge(
            "splitsched_scheduler_leader",
            "1 while this replica may schedule (holds the Lease, or leader election is off)",
            registry=r,
        )
        self.decisions_in_flight = Gauge(
            "splitsched_scheduler_decisions_in_flight",
            "Decisions handed to binders (or held for a preemption) and not resolved yet: "
            "their room is assumed on their node",
            registry=r,
        )
        self.flow_window = Gauge(
            "splitsched_scheduler_flow_window",
            "How many bindings may be in flight to the binders: grows while they bind in "
            "time, halves when they refuse or miss deadlines (--max-decisions-in-flight caps)",
            registry=r,
        )
        self.flow_waits = Counter(
            "splitsched_scheduler_flow_waits_total",
            "Times the scheduling loop stopped taking pods from the active queue because "
            "the flow window was full",
            registry=r,
        )
        self.binder_calls = Gauge(
            "splitsched_scheduler_binder_calls_in_flight",
            "Calls to binders not answered yet (BindBatch, Preempt, ReportUnschedulable): "
            "each holds its decisions or report until answered or timed out",
            registry=r,
        )
        self.watch_events = Counter(
            "splitsched_scheduler_watch_events_total",
            "Cluster events applied",
            ["type"],
            registry=r,
        )

    def attempt(self, result: str, profile: str, *, seconds: float | None = None) -> None:
        """One scheduling attempt; `seconds` is the cycle's latency when it is measured
        (a preemption's is not: its cycle ends when the victims are gone)."""
        self.attempts.labels(result, profile).inc()
        if seconds is not None:
            self.cycle.labels(result, profile).observe(seconds)

    def rejected(self, plugins: frozenset[str], profile: str) -> None:
        """An unschedulable attempt's plugins (kube-scheduler's scheduler_unschedulable_pods
        gauge counts pods per plugin; this counts attempts, which a rate() turns into
        failures per plugin per second)."""
        for plugin in plugins:
            self.rejections.labels(plugin, profile).inc()

    def queue_lengths(self, lengths: Mapping[str, int]) -> None:
        for name, n in lengths.items():
            self.pending.labels(name).set(n)

    def decision_listener(
        self, state: SchedulerState, trace_id_of: Callable[[str, str], str] | None = None
    ) -> Listener:
        """A listener for `state.listeners` that counts outcomes and, when a pod is bound,
        observes its latencies (the state's record still holds when it was queued), with
        the bound attempt's trace id as exemplar: `trace_id_of(uid, decision_id)` is the
        tracing's (empty when not sampled; must still know the trace at BOUND)."""

        def observe(event: DecisionEvent) -> None:
            kind = event.kind
            if kind is EventKind.SCHEDULED and event.adopted:
                self.adopted.inc()
            if kind.is_outcome:
                self.outcomes.labels(kind).inc()
            if kind is EventKind.BOUND:
                trace_id = trace_id_of(event.pod.uid, event.decision_id) if trace_id_of else ""
                self._bound(event, state, {"trace_id": trace_id} if trace_id else None)

        return observe

    def _bound(
        self, event: DecisionEvent, state: SchedulerState, exemplar: dict[str, str] | None
    ) -> None:
        self.bound.inc()
        pod = event.pod
        if pod.creation_timestamp:
            self.created_to_bound.observe(
                max(0.0, time.time() - pod.creation_timestamp), exemplar=exemplar
            )
        rec = state.records.get(pod.uid)
        if rec is not None and rec.queued_at:
            attempts = max(1, rec.scheduling_attempts)
            self.e2e.labels(attempts_label(attempts)).observe(
                max(0.0, state.clock.now() - rec.queued_at), exemplar=exemplar
            )
            self.pod_attempts.observe(attempts)
