"""The binder's Prometheus metrics, on a per-process registry.

Created by ``services.binder.main`` (served on ``/metrics``) and passed to the worker pool
and the outcome reporter, which update them; tests create their own instance.
"""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram


class BinderMetrics:
    """Binding attempts by HTTP code, outcomes by result, bind latency, in-flight, backlog;
    evictions by HTTP code, preemptions by result, refusals by reason, volume and device
    steps by result and duration."""

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
        self.pods_shown = Counter(
            "splitsched_binder_pods_shown_total",
            "Pods checked from the pending pods' watch, without a read of each.",
            registry=self.registry,
        )
        self._volume_metrics()
        self._device_metrics()
        self._link_metrics()

    def _link_metrics(self) -> None:
        """The binder's two links: outcome reports to the scheduler, requests to the API
        server."""
        self.reconnects = Counter(
            "splitsched_grpc_stream_reconnects",
            "Times a lost gRPC connection to a peer was re-established (stream=scheduler: "
            "outcome reports reach the scheduler again after failed deliveries).",
            ["stream"],
            registry=self.registry,
        )
        self._depth_metrics()

    def _depth_metrics(self) -> None:
        """What a burst fills: the intake queue, the writes beside the bindings, the
        outcomes not yet delivered, and the API requests the client-side rate limit lets
        through (docs/backpressure.md)."""
        self.report_backlog = Gauge(
            "splitsched_binder_report_backlog",
            "Outcomes not yet acknowledged by the scheduler.",
            registry=self.registry,
        )
        self.queued = Gauge(
            "splitsched_binder_queued",
            "Decisions accepted and waiting for a worker (at most --max-pending).",
            registry=self.registry,
        )
        self.side_writes = Gauge(
            "splitsched_binder_side_writes",
            "Writes running beside the bindings: Scheduled Events, unschedulable reports, "
            "outcomes re-sent for decisions already finished.",
            registry=self.registry,
        )
        self.api_requests = Counter(
            "splitsched_binder_api_requests_total",
            "API requests answered or failed, by HTTP method: every one passed the "
            "--qps/--burst limiter first.",
            ["method"],
            registry=self.registry,
        )
        self.api_throttled = Counter(
            "splitsched_binder_api_throttled_total",
            "Answers of the API server's own throttling (429 with Retry-After: API Priority "
            "and Fairness or max-in-flight), each of which held every new request of this "
            "binder until its Retry-After passed.",
            registry=self.registry,
        )

    def watch_pool(self, *, queued: Callable[[], int], side_writes: Callable[[], int]) -> None:
        """The pool's depth gauges, read at every scrape."""
        self.queued.set_function(queued)
        self.side_writes.set_function(side_writes)

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

    def _device_metrics(self) -> None:
        self.device_steps = Counter(
            "splitsched_binder_device_steps_total",
            "Device steps before a Binding (ResourceClaims allocated and reserved for the "
            "pod), by result: reserved, or why it failed (claim_missing, allocated_elsewhere, "
            "conflict, ...).",
            ["result"],
            registry=self.registry,
        )
        self.device_step_duration = Histogram(
            "splitsched_binder_device_step_duration_seconds",
            "A device step before a Binding, from its first read to every claim reserved (or "
            "its failure).",
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
            registry=self.registry,
        )
        self.claim_deallocations = Counter(
            "splitsched_binder_claim_deallocations_total",
            "ResourceClaims the scheduler's DynamicResources PostFilter gave back, by result: "
            "deallocated, or why left alone (gone, not_allocated, in_use, not_ours, failed).",
            ["result"],
            registry=self.registry,
        )
        self.device_unreserves = Counter(
            "splitsched_binder_device_unreserves_total",
            "Reservations of a ResourceClaim for a pod removed after its device step or its "
            "Binding failed, by result: done, or failed (left for the pod's next attempt).",
            ["result"],
            registry=self.registry,
        )
