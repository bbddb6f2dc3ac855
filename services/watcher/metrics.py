"""The watcher's Prometheus metrics, on one registry served at /metrics.

Created by `services.watcher.main`; the list/watch loops count deltas, absorbed updates and
relists (`services.watcher.listwatch`), the ring gauge reads the hub. The subscribers gauge
lives with the gRPC stream (`services.watcher.server`).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge

from services.watcher import ring
from splitsched.runtime import tasksgauge


class Metrics:
    """The watcher's counters and gauges; with `registry` None they are registered
    nowhere (tests that only read the counters)."""

    def __init__(self, registry: CollectorRegistry | None) -> None:
        self.registry = registry
        if registry is not None:
            tasksgauge.register(registry)
        self.events = Counter(
            "splitsched_watcher_events",
            "Deltas emitted to subscribers, by resource and type",
            ["resource", "type"],
            registry=registry,
        )
        self.absorbed = Counter(
            "splitsched_watcher_absorbed_updates",
            "Updates taken into the view without a delta: only status a scheduler ignores changed",
            ["resource"],
            registry=registry,
        )
        self.relists = Counter(
            "splitsched_watcher_relists",
            "LISTs of a resource, by reason (initial, gone, error, not-served)",
            ["resource", "reason"],
            registry=registry,
        )

    def watch_ring(self, hub: ring.ClusterHub) -> None:
        """A gauge of the deltas the hub's ring holds, read at every scrape."""
        Gauge(
            "splitsched_watcher_ring_events",
            "Deltas held in the ring buffer",
            registry=self.registry,
        ).set_function(lambda: hub.ring_events)
