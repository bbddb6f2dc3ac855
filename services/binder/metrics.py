"""The binder's Prometheus metrics, on a per-process registry.

Created by ``services.binder.main`` (served on ``/metrics``) and passed to the worker pool
and the outcome reporter, which update them; tests create their own instance.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram


class BinderMetrics:
    """Binding attempts by HTTP code, outcomes by result, bind latency, in-flight, backlog;
    evictions by HTTP code, preemptions by result, refusals by reason, volume steps by
    result and duration."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self.binding_attempts = Counter(
            "splitsched_binder_binding_attempts_total",
            "Binding API calls by HTTP status code ('error' for network errors).",
            ["code"],
            registry=self.registry,
        )
        self.outcomes = Counter(
            "splitsched_binder_outcomes_total",
            "Binding outcomes by result.",
            ["result"],
            registry=self.registry,
        )
        self.bind_duration = Histogram(
            "splitsched_binder_bind_duration_seconds",
            "From accepting a decision to its outcome, retries included.",
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
            registry=self.registry,
        )
        self.inflight = Gauge(
            "splitsched_binder_inflight",
            "Decisions accepted and not finished (queued or binding).",
            registry=self.registry,
        )
        self.evictions = Counter(
            "splitsched_binder_evictions_total",
            "Eviction API calls for preemption victims by HTTP status code ('error' for "
            "network errors).",
            ["code"],
            registry=self.registry,
        )
        self.preemptions = Counter(
            "splitsched_binder_preemptions_total",
            "Preemption outcomes by result (BOUND: nomination set and every victim evicted).",
            ["result"],
            registry=self.registry,
        )
        self.refused = Counter(
            "splitsched_binder_refused_total",
            "Decisions refused although the caller was trusted, by reason: scheduler_name "
            "(the pod is not for a profile this binder serves), victim_priority (a victim "
            "not lower than its preemptor), node_missing, claim_not_used (a volume step for a "
            "claim the pod does not mount).",
            ["reason"],
            registry=self.registry,
        )
        self.reconnects = Counter(
            "splitsched_grpc_stream_reconnects",
            "Times a lost gRPC connection to a peer was re-established (stream=scheduler: "
            "outcome reports reach the scheduler again after failed deliveries).",
            ["stream"],
            registry=self.registry,
        )
        self.report_backlog = Gauge(
            "splitsched_binder_report_backlog",
            "Outcomes not yet acknowledged by the scheduler.",
            registry=self.registry,
        )
        self._volume_metrics()

    def _volume_metrics(self) -> None:
        self.volume_steps = Counter(
            "splitsched_binder_volume_steps_total",
            "Volume steps before a Binding (claims bound to their PVs or marked for "
            "provisioning, then bound by the PV controller), by result: bound, or why "
            "it failed (claim_missing, pv_claimed_elsewhere, timeout, ...).",
            ["result"],
            registry=self.registry,
        )
        self.volume_step_duration = Histogram(
            "splitsched_binder_volume_step_duration_seconds",
            "A volume step before a Binding, from its first read to every claim bound (or "
            "its failure).",
            buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
            registry=self.registry,
        )
